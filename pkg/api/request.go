package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/fault"
)

// Request helpers every handler uses: bounded bodies, JSON objects, paging.

// Body limits, each fitting what its routes take: a send may carry 40 MB of message (base64 and
// JSON escaping add a little); a campaign its 512 KB of html and as much content (JSON escaping
// may double them); a template or a contact book's settings some HTML; the rest a few fields.
const (
	maxSendBody     = 56 << 20
	maxCampaignBody = 3 << 20
	maxOtherBody    = 2 << 20
	maxSmallBody    = 64 << 10
)

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if ce := strings.TrimSpace(r.Header.Get("Content-Encoding")); ce != "" && !strings.EqualFold(ce, "identity") {
		return nil, fault.Field("Content-Encoding", "%s is not supported: send the body uncompressed", ce)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		if limit < 1<<20 {
			return nil, fault.New(fault.TooLarge, "Request body too large: at most %d KB", limit>>10)
		}
		return nil, fault.New(fault.TooLarge, "Request body too large: at most %d MB", limit>>20)
	}
	if err != nil {
		return nil, fault.Field("", "Could not read the request body")
	}
	if len(b) > 0 {
		if err := jsonContentType(r.Header.Get("Content-Type")); err != nil {
			return nil, err
		}
	}
	if !utf8.Valid(b) {
		// encoding/json would replace the bytes with U+FFFD and carry on: refuse instead.
		return nil, fault.Field("body", "is not valid UTF-8")
	}
	if loneSurrogate(b) {
		// The same for an escape of half a UTF-16 pair ("\ud800" alone).
		return nil, fault.Field("body", "is not valid UTF-8: an escaped UTF-16 surrogate without its pair")
	}
	return b, nil
}

// jsonContentType refuses a body declared as anything but JSON (a form, text/plain: curl's -d
// and fetch's string body without a header), which upstream refuses too. A body without a
// Content-Type is read as JSON.
func jsonContentType(ct string) error {
	if strings.TrimSpace(ct) == "" {
		return nil
	}
	// API Gateway joins a header sent twice with a comma: the first value is the client's.
	first, _, _ := strings.Cut(ct, ",")
	mt, _, err := mime.ParseMediaType(first)
	if errors.Is(err, mime.ErrInvalidMediaParameter) {
		err = nil // the type is JSON whatever its parameters say ("application/json; charset")
	}
	if err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return nil
	}
	if err != nil || len(mt) > 100 {
		return fault.Field("Content-Type", "must be application/json")
	}
	return fault.Field("Content-Type", "must be application/json, not %s", mt)
}

// loneSurrogate reports a \uD800-\uDFFF escape in JSON text that is not a high surrogate
// followed by a low one. A backslash only occurs inside JSON strings, so no string state is
// needed; text that is not JSON is left to the decoder.
func loneSurrogate(b []byte) bool {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // another escape: skip its character (it may be a backslash)
			continue
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			low, ok := hex4(i + 6)
			if !ok || low < 0xDC00 || low > 0xDFFF {
				return true
			}
			i += 11
		default:
			i += 5
		}
	}
	return false
}

// paging reads page (≥ 1, default 1) and limit (1..100, default 50).
func paging(r *http.Request) (page, limit int, err error) {
	return pagingUpTo(r, 50, 100)
}

// ContactsLimit is the default and the largest limit of a contact list: useSend answers up to
// 5000 contacts when no limit is given, and its Python SDK's contacts.list relies on it.
const ContactsLimit = 5000

// pagingUpTo reads page and limit, limit defaulting to def and at most max.
func pagingUpTo(r *http.Request, def, max int) (page, limit int, err error) {
	if page, err = pageOf(r); err != nil {
		return 0, 0, err
	}
	limit, err = intQuery(r, "limit", def, 1, max)
	return page, limit, err
}

// MaxPage caps page, so that (page-1)*limit cannot overflow.
const MaxPage = 1_000_000

// pageOf reads page: 1..MaxPage, default 1.
func pageOf(r *http.Request) (int, error) {
	return intQuery(r, "page", 1, 1, MaxPage)
}

// intQuery reads the integer query parameter name, min..max, def when absent.
func intQuery(r *http.Request, name string, def, min, max int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < min || n > max {
		return 0, fault.Field(name, "must be an integer from %d to %d", min, max)
	}
	return n, nil
}

// decodeObject decodes a JSON object body into v, mapping type errors to the field.
func decodeObject(body []byte, v any) error {
	if !json.Valid(body) {
		return email.ErrMalformedJSON
	}
	// null decodes into nothing and would read as {}: a campaign's schedule would start it now.
	if string(bytes.TrimSpace(body)) == "null" {
		return fault.Field("body", "must be a JSON object")
	}
	// A field given twice, at any depth, is refused, before its values' types are looked at:
	// a decoder keeps the last silently (and matches a struct's fields without regard to case:
	// "Email" fills email too), and integralNumbers below would keep one of the two.
	if err := fault.DuplicateFieldsFold("", body); err != nil {
		return err
	}
	err := json.Unmarshal(body, v)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && strings.HasPrefix(te.Value, "number ") && strings.ContainsAny(te.Value, ".eE") {
		// A number with a fraction or an exponent where an integer goes: decoded again with
		// the whole ones written as integers (only then, so that a body is decoded once).
		body = integralNumbers(body) // the offsets of an error below are in this body
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		if errors.As(err, &te) && te.Field != "" {
			field := te.Field
			if isList(v, te.Field) {
				if i, ok := elementAt(body, te.Field, te.Offset); ok {
					field = fmt.Sprintf("%s[%d]", te.Field, i) // the element, not the whole list
				}
			}
			return fault.Field(field, "must be %s", jsonType(te.Type))
		}
		return fault.Field("body", "must be a JSON object")
	}
	return nil
}

// isList reports whether the top-level field of the struct v points to is a list: only then
// does a type error inside it name an element ("to[1]"); a list given for a single value is
// the field's own error ("name: must be a string", not "name[0]").
func isList(v any, field string) bool {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name == field {
			ft := t.Field(i).Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			return ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array
		}
	}
	return false
}

// decodeKnown is decodeObject for the bodies that decide what is sent and when (campaign create
// and schedule, template create and update, reschedule): a field v does not have is a 400
// naming it (with the field it misspells), not silently dropped.
func decodeKnown(body []byte, v any) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err == nil {
		if err := fault.UnknownFields("", fault.SetKeys(fields), jsonFields(v)); err != nil {
			return err
		}
	}
	return decodeObject(body, v) // and a field given twice
}

// jsonFields lists the JSON names of the fields of the struct v points to.
func jsonFields(v any) []string {
	t := reflect.TypeOf(v).Elem()
	out := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// jsonType names the JSON value a Go field takes, with its article.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// integralNumbers writes the whole numbers of body that carry a fraction or an exponent (500.0,
// 5e2) as integers: JSON has one number type, and a client that sends an integer field as a
// float (Python's 500.0) means 500. Anything else is left as it is, and so is a body that does
// not decode.
func integralNumbers(body []byte) []byte {
	if !bytes.ContainsAny(body, ".eE") {
		return body
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return body
	}
	changed := false
	var walk func(any) any
	walk = func(x any) any {
		switch t := x.(type) {
		case json.Number:
			if strings.ContainsAny(string(t), ".eE") {
				if f, err := t.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
					changed = true
					return json.Number(strconv.FormatInt(int64(f), 10))
				}
			}
		case map[string]any:
			for k, e := range t {
				t[k] = walk(e)
			}
		case []any:
			for i, e := range t {
				t[i] = walk(e)
			}
		}
		return x
	}
	v = walk(v)
	if !changed {
		return body
	}
	out, err := json.Marshal(v)
	if err != nil {
		return body
	}
	return out
}

// elementAt is the index of the element of the top-level array field that holds the byte at
// offset (where a decoding error stopped); ok is false when field is no such array.
func elementAt(body []byte, field string, offset int64) (int, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return 0, false
		}
		if key != field {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return 0, false
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return 0, false
		}
		for i := 0; dec.More(); i++ {
			var el json.RawMessage
			if err := dec.Decode(&el); err != nil {
				return 0, false
			}
			if dec.InputOffset() >= offset {
				return i, true
			}
		}
		return 0, false
	}
	return 0, false
}
