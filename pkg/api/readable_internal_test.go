package api

import (
	"encoding/json"
	"testing"
)

// TestReadableJSON: an event's data on an email's page reads as written: the escapes
// encoding/json makes of <, > and & are the characters again; every other escape, and an
// escaped backslash before a u, is kept.
func TestReadableJSON(t *testing.T) {
	data, _ := json.Marshal(map[string]string{"link": "https://example.org/x?utm=1&a=<b>", "raw": `\u0026 stays`, "tab": "a\tb"})
	got := readableJSON(string(data))
	want := `{"link":"https://example.org/x?utm=1&a=<b>","raw":"\\u0026 stays","tab":"a\tb"}`
	if got != want {
		t.Errorf("readableJSON = %s\nwant            %s", got, want)
	}
	var back map[string]string // still JSON, with the same values
	if err := json.Unmarshal([]byte(got), &back); err != nil || back["link"] != "https://example.org/x?utm=1&a=<b>" || back["raw"] != `\u0026 stays` {
		t.Errorf("not the same JSON: %v %v", back, err)
	}
}
