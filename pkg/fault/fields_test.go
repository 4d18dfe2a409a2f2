package fault

import (
	"encoding/json"
	"testing"
)

// TestTopLevelKeys: the keys of an object are counted at its top level only, whatever its
// strings and nested values hold; a count that differs from the decoded keys' is a duplicate.
func TestTopLevelKeys(t *testing.T) {
	for body, want := range map[string]int{
		`{}`:      0,
		`{"a":1}`: 1,
		`{"a":"x:y","b":{"c":1,"d":[{"e":2}]},"f":"\"g\":h\\"}`: 3,
		`{"to":"a","to":"b"}`:                              2,
		` { "a" : [ ":" , { "b" : "}" } ] , "c" : null } `: 2,
	} {
		if got := topLevelKeys([]byte(body)); got != want {
			t.Errorf("%s: %d keys, want %d", body, got, want)
		}
	}
	for body, want := range map[string]string{
		`{"to":"a","cc":"b"}`:              "",
		`{"to":"a","x":{"to":1},"to":"b"}`: "to: given more than once",
	} {
		var fields map[string]json.RawMessage
		_ = json.Unmarshal([]byte(body), &fields)
		got := ""
		if err := DuplicateFields("", []byte(body), len(fields)); err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
}

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
