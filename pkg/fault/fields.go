package fault

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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

// DuplicateFields is the error for a JSON object (body, already known to be valid and an
// object, decoded into fields distinct keys) that names a field twice, nil when none is: a
// decoder keeps the last silently, so {"to":"a","to":"b"} would send to b alone, something
// else than was meant. at prefixes the name ("[2].").
func DuplicateFields(at string, body []byte, fields int) error {
	if topLevelKeys(body) == fields {
		return nil // the usual case, without decoding the body again
	}
	return DuplicateKeys(at, body)
}

// DuplicateKeys is DuplicateFields at every depth of body (valid JSON): the first key given
// twice in any object of it, named by its path ("properties.plan", "contacts[2].email"), nil
// when none is. Used for the bodies that are not on the send path, whose nested objects
// (a contact's properties) would lose a value as silently as the top level.
func DuplicateKeys(at string, body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	path, err := duplicateIn(dec, strings.TrimSuffix(at, "."))
	if err != nil || path == "" {
		return nil // not valid JSON: its decoder has said so
	}
	return &Error{Kind: Invalid, Message: path + ": given more than once"}
}

// duplicateIn reads one value from dec and returns the path of the first key given twice in
// it (under at), or "".
func duplicateIn(dec *json.Decoder, at string) (string, error) {
	t, err := dec.Token()
	if err != nil {
		return "", err
	}
	switch t {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return "", err
			}
			k, _ := kt.(string)
			name := k
			if at != "" {
				name = at + "." + k
			}
			if seen[k] {
				return name, nil
			}
			seen[k] = true
			if p, err := duplicateIn(dec, name); p != "" || err != nil {
				return p, err
			}
		}
		_, err = dec.Token() // }
		return "", err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if p, err := duplicateIn(dec, fmt.Sprintf("%s[%d]", at, i)); p != "" || err != nil {
				return p, err
			}
		}
		_, err = dec.Token() // ]
		return "", err
	}
	return "", nil
}

// topLevelKeys counts the keys of the JSON object b (valid JSON), without allocating: the
// colons outside strings at depth 1.
func topLevelKeys(b []byte) int {
	n, depth, inString, escaped := 0, 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case c == ':' && depth == 1:
			n++
		}
	}
	return n
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
