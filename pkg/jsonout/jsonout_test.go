package jsonout

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestQuotedLen: the length counted is the one written, by Marshal and by json.Marshal (HTML
// escaping), for strings of every kind of character they escape or not, invalid bytes included.
func TestQuotedLen(t *testing.T) {
	pieces := []string{"a", "<", ">", "&", `"`, `\`, "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f",
		"é", "€", "😀", "\u2028", "\u2029", "\xff", "\xe2\x82"}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		var b strings.Builder
		for range r.IntN(40) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		s := b.String()
		plain, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		escaped, _ := json.Marshal(s)
		if got := QuotedLen(s, false); got != len(plain) {
			t.Fatalf("case %d: QuotedLen(%q, false) = %d, Marshal writes %d (%s)", i, s, got, len(plain), plain)
		}
		if got := QuotedLen(s, true); got != len(escaped) {
			t.Fatalf("case %d: QuotedLen(%q, true) = %d, json.Marshal writes %d (%s)", i, s, got, len(escaped), escaped)
		}
	}
}

// TestMarshal: no HTML escaping and no trailing newline.
func TestMarshal(t *testing.T) {
	got, err := Marshal(map[string]string{"html": "<p>a & b</p>"})
	if err != nil || string(got) != `{"html":"<p>a & b</p>"}` {
		t.Fatalf("Marshal = %s, %v", got, err)
	}
}
