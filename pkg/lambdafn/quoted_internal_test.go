package lambdafn

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestQuotedLen: the length compact counts is the one encoding/json writes, HTML escaping and
// invalid bytes included.
func TestQuotedLen(t *testing.T) {
	pieces := []string{"a", "<", ">", "&", `"`, `\`, "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f",
		"é", "€", "😀", "\u2028", "\u2029", "\xff", "\xe2\x82"}
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		var b strings.Builder
		for range r.IntN(40) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		s := b.String()
		enc, _ := json.Marshal(s)
		if got := quotedLen(s); got != len(enc) {
			t.Fatalf("case %d: quotedLen(%q) = %d, json.Marshal writes %d (%s)", i, s, got, len(enc), enc)
		}
	}
}
