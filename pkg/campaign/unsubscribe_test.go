package campaign

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestTokensAreOpaqueAndSealed: a token shows nothing of its link (the recipient's address
// least of all), renders the same for the same link, and any change to it, or a token sealed
// under another secret, is refused. Tokens of the first format, already in mailboxes, still
// verify.
func TestTokensAreOpaqueAndSealed(t *testing.T) {
	s := Signer{Secret: []byte("0123456789abcdef0123456789abcdef"), BaseURL: "https://mail.example.com"}
	l := Link{TeamID: 7, BookID: "cb1", ContactID: "ct1", EmailID: "em1", CampaignID: "cp1", Email: "reader@example.org", MadeAt: 1795500000000}
	tok := s.Token(l)
	if !strings.HasPrefix(tok, "2.") || tok != s.Token(l) {
		t.Fatalf("token %q: want the sealed format, the same each time", tok)
	}
	body, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, "2."))
	for _, leak := range []string{"reader", "example.org", `"m"`, "cb1", "ct1"} {
		if strings.Contains(tok, leak) || strings.Contains(string(body), leak) {
			t.Errorf("token shows %q", leak)
		}
	}
	got, err := s.Verify(tok)
	if err != nil || got != l {
		t.Fatalf("Verify = %+v, %v; want %+v", got, err, l)
	}
	other := Signer{Secret: []byte("another secret of thirty-two by.")}
	for name, bad := range map[string]string{
		"a byte changed":       flip(tok, len(tok)/2),
		"another secret":       other.Token(l),
		"truncated":            tok[:len(tok)/2],
		"not base64":           "2.!!!!",
		"empty":                "",
		"long":                 "2." + strings.Repeat("A", 5000),
		"first format, forged": base64.RawURLEncoding.EncodeToString([]byte(`{"t":7,"b":"cb1","c":"ct2"}`)) + ".sig",
	} {
		if _, err := s.Verify(bad); !errors.Is(err, ErrBadToken) {
			t.Errorf("%s: %v, want ErrBadToken", name, err)
		}
	}
	// A token of the first format (JSON and its HMAC) still verifies.
	raw, _ := json.Marshal(Link{TeamID: 7, BookID: "cb1", ContactID: "ct1", Email: "reader@example.org"})
	payload := base64.RawURLEncoding.EncodeToString(raw)
	if got, err := s.Verify(payload + "." + s.mac(payload)); err != nil || got.ContactID != "ct1" || got.MadeAt != 0 {
		t.Errorf("first-format token: %+v, %v", got, err)
	}
}

// flip changes the base64 character at i to another one.
func flip(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}
