package fault

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// SetKeys are the keys of a JSON object's fields whose value is not null: what UnknownFields
// checks, since a null field sets nothing whatever its name.
func SetKeys(fields map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(fields))
	for k, v := range fields {
		if string(bytes.TrimSpace(v)) != "null" {
			keys = append(keys, k)
		}
	}
	return keys
}

// DuplicateKeys is the first key given twice in any object of body (valid JSON), named by its
// path ("properties.plan", "[2].email") under at, nil when there is none: a decoder keeps
// the last value silently. It reads body once, byte by byte, and allocates for containers and
// keys only, never for values (a send's 40 MB of attachments, a bulk import's 8 MB).
func DuplicateKeys(at string, body []byte) error {
	return duplicateKeys(at, body, false)
}

// DuplicateFieldsFold is DuplicateKeys where the keys of the top-level object are compared
// without regard to case, as encoding/json matches them to a struct's fields ({"email":…,
// "Email":…} fills one field); nested objects (maps such as a contact's properties) are
// compared exactly.
func DuplicateFieldsFold(at string, body []byte) error {
	return duplicateKeys(at, body, true)
}

// keyFrame is an object or an array being read by duplicateKeys.
type keyFrame struct {
	object  bool
	path    string   // its own path (at for the body itself)
	keys    [][]byte // an object's keys so far, the last one's value being read
	wantKey bool     // an object's next string is a key
	index   int      // an array's element being read
	// seen holds an object's keys (folded where they are compared so) once it has more than
	// scanKeys: comparing each key with every one before it took minutes of CPU for a body
	// of 200,000 keys.
	seen map[string]struct{}
}

// scanKeys is how many keys of an object are compared one by one before they go in a map.
const scanKeys = 16

// given reports whether key is one the object f has already (fold: without regard to case, as
// bytes.EqualFold), and adds it.
func (f *keyFrame) given(key []byte, fold bool) bool {
	if f.seen == nil && len(f.keys) < scanKeys {
		for _, k := range f.keys {
			if bytes.Equal(k, key) || fold && bytes.EqualFold(k, key) {
				return true
			}
		}
		f.keys = append(f.keys, key)
		return false
	}
	canon := func(k []byte) string {
		if fold {
			return foldKey(k)
		}
		return string(k)
	}
	if f.seen == nil {
		f.seen = make(map[string]struct{}, 2*scanKeys)
		for _, k := range f.keys {
			f.seen[canon(k)] = struct{}{}
		}
	}
	c := canon(key)
	if _, ok := f.seen[c]; ok {
		return true
	}
	f.seen[c] = struct{}{}
	f.keys = append(f.keys[:0], key) // only the last key's path is needed from here on
	return false
}

// foldKey is k with each character replaced by the least of those it equals without regard
// to case (unicode.SimpleFold's orbit): two keys bytes.EqualFold calls equal fold alike.
func foldKey(k []byte) string {
	var b strings.Builder
	b.Grow(len(k))
	for _, r := range string(k) {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

func duplicateKeys(at string, body []byte, foldTop bool) error {
	at = strings.TrimSuffix(at, ".")
	var stack []*keyFrame
	child := func() string { // the path of a value starting now
		if len(stack) == 0 {
			return at
		}
		top := stack[len(stack)-1]
		if top.object {
			return joinPath(top.path, string(top.keys[len(top.keys)-1]))
		}
		return top.path + "[" + strconv.Itoa(top.index) + "]"
	}
	for i := 0; i < len(body); i++ {
		switch c := body[i]; c {
		case '{', '[':
			stack = append(stack, &keyFrame{object: c == '{', path: child(), wantKey: c == '{'})
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case ',':
			if n := len(stack); n > 0 {
				if top := stack[n-1]; top.object {
					top.wantKey = true
				} else {
					top.index++
				}
			}
		case '"':
			end := stringEnd(body, i)
			if end < 0 {
				return nil // not valid JSON: its decoder says so
			}
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
				top := stack[n-1]
				key := body[i+1 : end]
				if bytes.IndexByte(key, '\\') >= 0 {
					var k string
					if json.Unmarshal(body[i:end+1], &k) != nil {
						return nil
					}
					key = []byte(k)
				}
				if top.given(key, foldTop && n == 1) { // the body's own fields fold
					return &Error{Kind: Invalid, Message: joinPath(top.path, string(key)) + ": given more than once"}
				}
				top.wantKey = false
			}
			i = end
		}
	}
	return nil
}

// stringEnd is the index of the quote that ends the JSON string starting at b[start], -1 when
// there is none.
func stringEnd(b []byte, start int) int {
	for j := start + 1; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		escapes := 0
		for p := q - 1; p > start && b[p] == '\\'; p-- {
			escapes++
		}
		if escapes%2 == 0 {
			return q
		}
		j = q + 1
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// UnknownFields is the error for the keys of a JSON object that are none of known (nil when
// all are known): each is named, with the known field it spells in snake_case or in another
// case ("reply_to": did you mean "replyTo"?). at prefixes the names ("[2].").
func UnknownFields(at string, keys []string, known []string) error {
	var bad []string
	for _, k := range keys {
		if !slices.Contains(known, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	msgs := make([]string, len(bad))
	for i, k := range bad {
		msgs[i] = at + k + ": unknown field"
		if hint := spelled(k, known); hint != "" {
			msgs[i] += `; did you mean "` + hint + `"?`
		}
	}
	return &Error{Kind: Invalid, Message: strings.Join(msgs, "; ")}
}

// spelled returns the known field k is a spelling of, ignoring case and underscores.
func spelled(k string, known []string) string {
	norm := func(s string) string {
		return strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(s, "_", ""), "-", ""))
	}
	for _, f := range known {
		if norm(f) == norm(k) {
			return f
		}
	}
	return ""
}

// MaxJoined is how many errors Join names; the rest are counted ("and 980 more"), so that a
// bulk request of 1,000 bad elements is not answered with each of them.
const MaxJoined = 20

// Join makes one Invalid error of several (a batch whose elements are each wrong), in order,
// the first MaxJoined named; nil when errs is empty, the error itself when there is one. An
// error of another kind than Invalid wins as it is.
func Join(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	msgs := make([]string, 0, min(len(errs), MaxJoined+1))
	for i, err := range errs {
		fe, ok := As(err)
		if !ok || fe.Kind != Invalid {
			return err
		}
		if i < MaxJoined {
			msgs = append(msgs, fe.Message)
		}
	}
	if len(errs) > MaxJoined {
		msgs = append(msgs, fmt.Sprintf("and %d more", len(errs)-MaxJoined))
	}
	return &Error{Kind: Invalid, Message: strings.Join(msgs, "; ")}
}
