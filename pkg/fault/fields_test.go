package fault

import (
	"strconv"
	"strings"
	"testing"
)

// TestDuplicateKeys: a key given twice is found at any depth, in objects inside objects and
// arrays, and named by its path under at; the same key in two different objects is not one.
func TestDuplicateKeys(t *testing.T) {
	for _, c := range []struct{ at, body, want string }{
		{"", `{"a":{"b":1,"c":{"b":2}},"d":[{"b":3},{"b":4}]}`, ""},
		{"", `{"a":{"b":1,"b":2}}`, "a.b: given more than once"},
		{"", `[{"x":1},{"x":1,"y":{"z":[{"w":1,"w":2}]}}]`, "[1].y.z[0].w: given more than once"},
		{"[2].", `{"properties":{"plan":"a","plan":"b"}}`, "[2].properties.plan: given more than once"},
		{"", `{"a":"{\"b\":1,\"b\":2}"}`, ""}, // inside a string: not a key
		{"", `"just a string"`, ""},
		{"", `{"to":"a","x":{"to":1},"to":"b"}`, "to: given more than once"},
		{"", `{"a":"x\"}{,:[\\","a":1}`, "a: given more than once"}, // an escaped quote and backslash in a value
		{"", `{"k\u0041":1,"kA":2}`, "kA: given more than once"},    // an escaped key is compared decoded
		{"", `{"k\"":1,"k\"":2}`, `k": given more than once`},
		{"", `[[{"a":1}],[{"a":1},{"b":[{"c":1,"c":2}]}]]`, "[1][1].b[0].c: given more than once"},
		{"", ` { "a" : 1 , "b" : { "a" : 2 } } `, ""},
	} {
		got := ""
		if err := DuplicateKeys(c.at, []byte(c.body)); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%q %s: %q, want %q", c.at, c.body, got, c.want)
		}
	}
}

// TestDuplicateFieldsFold: the top-level keys of a struct's body are compared as encoding/json
// matches them, without regard to case; nested maps' keys exactly.
func TestDuplicateFieldsFold(t *testing.T) {
	for body, want := range map[string]string{
		`{"email":"a@x.io","Email":"b@x.io"}`:                     "Email: given more than once",
		`{"email":"a@x.io","properties":{"plan":"a","Plan":"b"}}`: "",
		`{"email":"a@x.io","properties":{"plan":"a","plan":"b"}}`: "properties.plan: given more than once",
	} {
		got := ""
		if err := DuplicateFieldsFold("", []byte(body)); err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
}

// TestDuplicateKeysOfWideObjects: in an object of many keys (past the ones compared one by one)
// a key given twice is still found, exactly, or without regard to case where the body's own
// fields are compared so (as bytes.EqualFold: "K" and the Kelvin sign, "s" and "ſ"), and keys
// that only look alike are not one.
func TestDuplicateKeysOfWideObjects(t *testing.T) {
	wide := func(extra ...string) string {
		var b strings.Builder
		b.WriteString(`{"h":{`)
		for i := range 100 {
			b.WriteString(`"k` + strconv.Itoa(i) + `":0,`)
		}
		b.WriteString(strings.Join(extra, ","))
		b.WriteString(`}}`)
		return b.String()
	}
	top := func(extra ...string) string { // the same keys as the body's own fields
		w := wide(extra...)
		return w[len(`{"h":`) : len(w)-1]
	}
	for _, c := range []struct {
		body string
		fold bool
		want string
	}{
		{wide(`"k7":1`), false, "h.k7: given more than once"},
		{wide(`"k99":1`), false, "h.k99: given more than once"},
		{wide(`"K7":1`, `"k100":1`), false, ""},
		{wide(`"x":1`, `"y":{"k1":1}`, `"x":2`), false, "h.x: given more than once"},
		{top(`"k7":1`), false, "k7: given more than once"},
		{top(`"K7":1`), true, "K7: given more than once"},
		{top(`"K7":1`), true, "K7: given more than once"}, // the Kelvin sign folds to k
		{top(`"ſ":1`, `"S":2`), true, "S: given more than once"},
		{top(`"k7x":1`, `"k1_":1`), true, ""},
	} {
		check := DuplicateKeys
		if c.fold {
			check = DuplicateFieldsFold
		}
		got := ""
		if err := check("", []byte(c.body)); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%.60s…%s (fold %v): %q, want %q", c.body, c.body[len(c.body)-30:], c.fold, got, c.want)
		}
	}
}

// BenchmarkDuplicateKeysWide reads one object of 200,000 keys (2.7 MB, what a send's
// headers or variables may hold): linear, where comparing each key with every one before it
// took a minute of CPU.
func BenchmarkDuplicateKeysWide(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"to":{`)
	for i := range 200000 {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`"k` + strconv.Itoa(i) + `":0`)
	}
	sb.WriteString("}}")
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := DuplicateFieldsFold("", body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDuplicateKeys reads a bulk import's 8 MB (2,000 contacts of 50 properties): the
// check runs on every body that is not a send's, and on every send.
func BenchmarkDuplicateKeys(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("[")
	for i := range 2000 {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`{"email":"c@example.org","firstName":"Ann","properties":{`)
		for p := range 50 {
			if p > 0 {
				sb.WriteString(",")
			}
			sb.WriteString(`"prop` + strings.Repeat("x", p%7) + string(rune('a'+p%26)) + string(rune('a'+p/26)) + `":"` + strings.Repeat("value ", 12) + `"`)
		}
		sb.WriteString("}}")
	}
	sb.WriteString("]")
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := DuplicateKeys("", body); err != nil {
			b.Fatal(err)
		}
	}
}
