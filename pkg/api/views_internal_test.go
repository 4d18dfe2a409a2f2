package api

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestJSONLen: the size the response bounds count is the size encodeJSON writes, for strings of
// every kind of character it escapes or not (an invalid byte included, written as \ufffd).
func TestJSONLen(t *testing.T) {
	pieces := []string{"a", "<", ">", "&", `"`, `\`, "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f",
		"é", "€", "😀", "\u2028", "\u2029", "\xff", "\xe2\x82"}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		var b strings.Builder
		for range r.IntN(40) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		s := b.String()
		enc, err := encodeJSON(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonLen(s); got != len(enc) {
			t.Fatalf("case %d: jsonLen(%q) = %d, encodeJSON writes %d bytes (%s)", i, s, got, len(enc), enc)
		}
	}
}
