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
