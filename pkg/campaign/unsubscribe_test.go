package campaign

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTokensAreOpaqueAndSealed: a token shows nothing of its link (the recipient's address
// least of all), renders the same for the same link, and any change to it, or a token sealed
// under another secret, is refused. Tokens of the first format, already in mailboxes, still
// verify.
func TestTokensAreOpaqueAndSealed(t *testing.T) {
	ctx := context.Background()
	s := Signer{Keys: SingleKey("0123456789abcdef0123456789abcdef"), BaseURL: "https://mail.example.com"}
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
	got, err := s.Verify(ctx, tok)
	if err != nil || got != l {
		t.Fatalf("Verify = %+v, %v; want %+v", got, err, l)
	}
	other := Signer{Keys: SingleKey("another secret of thirty-two by.")}
	for name, bad := range map[string]string{
		"a byte changed":       flip(tok, len(tok)/2),
		"another secret":       other.Token(l),
		"truncated":            tok[:len(tok)/2],
		"not base64":           "2.!!!!",
		"empty":                "",
		"long":                 "2." + strings.Repeat("A", 5000),
		"first format, forged": base64.RawURLEncoding.EncodeToString([]byte(`{"t":7,"b":"cb1","c":"ct2"}`)) + ".sig",
	} {
		if _, err := s.Verify(ctx, bad); !errors.Is(err, ErrBadToken) {
			t.Errorf("%s: %v, want ErrBadToken", name, err)
		}
	}
	// A token of the first format (JSON and its HMAC) still verifies.
	raw, _ := json.Marshal(Link{TeamID: 7, BookID: "cb1", ContactID: "ct1", Email: "reader@example.org"})
	payload := base64.RawURLEncoding.EncodeToString(raw)
	m := hmac.New(sha256.New, []byte("0123456789abcdef0123456789abcdef"))
	m.Write([]byte(payload))
	if got, err := s.Verify(ctx, payload+"."+base64.RawURLEncoding.EncodeToString(m.Sum(nil))); err != nil || got.ContactID != "ct1" || got.MadeAt != 0 {
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

// TestKeyRotation: a rotation makes a new current key that signs "3.<id>." tokens; links the
// older keys signed (the single key's "2." tokens included) keep verifying while their key is
// in the ring, and stop when it is dropped. A token naming a key the ring lacks, or sealed
// under another key than the one it names, is refused.
func TestKeyRotation(t *testing.T) {
	ctx := context.Background()
	l := Link{TeamID: 7, BookID: "cb1", ContactID: "ct1", EmailID: "em1", MadeAt: 1795500000000}
	text := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	ring, err := ParseKeyring(text)
	if err != nil {
		t.Fatal(err)
	}
	first := Signer{Keys: ring}.Token(l)
	if !strings.HasPrefix(first, "2.") {
		t.Fatalf("single key's token %q, want 2.", first)
	}
	tokens := []string{first}
	for i := 1; i <= MaxKeys+1; i++ {
		var id string
		if text, id, err = RotateKeyring(text); err != nil {
			t.Fatal(err)
		}
		if id != fmt.Sprint(i) {
			t.Fatalf("rotation %d made key %q", i, id)
		}
		if ring, err = ParseKeyring(text); err != nil {
			t.Fatalf("rotation %d wrote %v", i, err)
		}
		if len(ring.Keys) != min(i+1, MaxKeys) || ring.Current != id {
			t.Fatalf("rotation %d: %d keys, current %q", i, len(ring.Keys), ring.Current)
		}
		s := Signer{Keys: ring}
		tok := s.Token(l)
		if want := "3." + id + "."; !strings.HasPrefix(tok, want) {
			t.Fatalf("token %q after rotation %d, want prefix %s", tok, i, want)
		}
		tokens = append(tokens, tok)
		// Every token whose key is still in the ring verifies; the dropped keys' do not.
		for j, old := range tokens {
			_, err := s.Verify(ctx, old)
			kept := j > i-MaxKeys // the ring keeps keys i-MaxKeys+1 to i (key 0 is the single key)
			if kept && err != nil {
				t.Errorf("after rotation %d, token of key %d: %v", i, j, err)
			}
			if !kept && !errors.Is(err, ErrBadToken) {
				t.Errorf("after rotation %d, token of dropped key %d verified", i, j)
			}
		}
	}
	s := Signer{Keys: ring}
	tok := s.Token(l)
	_, sealed, _ := strings.Cut(strings.TrimPrefix(tok, "3."), ".")
	for name, bad := range map[string]string{
		"unknown key id":   "3.99." + sealed,
		"another key's id": "3." + fmt.Sprint(MaxKeys) + "." + sealed,
		"empty key id":     "3.." + sealed,
		"no key id":        "3." + sealed,
	} {
		if _, err := s.Verify(ctx, bad); !errors.Is(err, ErrBadToken) {
			t.Errorf("%s: %v, want ErrBadToken", name, err)
		}
	}
}

// TestParseKeyring: what a secret may hold, and errors that name the fault without the key.
func TestParseKeyring(t *testing.T) {
	long := strings.Repeat("k", 40)
	for name, text := range map[string]string{
		"short key":         "abc",
		"not JSON":          "{current",
		"no keys":           `{"current":"1","keys":{}}`,
		"current missing":   `{"current":"2","keys":{"1":"` + long + `"}}`,
		"short key in ring": `{"current":"1","keys":{"1":"short"}}`,
		"bad id":            `{"current":"a.b","keys":{"a.b":"` + long + `"}}`,
		"too many keys":     `{"current":"0","keys":{` + manyKeys(MaxKeys+1, long) + `}}`,
	} {
		_, err := ParseKeyring(text)
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), long) {
			t.Errorf("%s: error shows the key: %v", name, err)
		}
	}
	k, err := ParseKeyring(`{"current":"b","keys":{"a":"` + long + `","b":"` + strings.Repeat("j", 32) + `"}}`)
	if err != nil || k.Current != "b" || len(k.Keys) != 2 || string(k.Keys["a"]) != long {
		t.Errorf("ring: %+v, %v", k, err)
	}
	if back, err := ParseKeyring(k.String()); err != nil || back.Current != "b" || len(back.Keys) != 2 {
		t.Errorf("String does not read back: %+v, %v", back, err)
	}
}

func manyKeys(n int, key string) string {
	var parts []string
	for i := range n {
		parts = append(parts, fmt.Sprintf("%q:%q", fmt.Sprint(i), key))
	}
	return strings.Join(parts, ",")
}

// TestKeySourceFindsRotatedKeys: a process reads the ring at first use; after a rotation it
// opens a link of the new key by reading the ring again, and reads it at most once a minute for
// ids it does not know.
func TestKeySourceFindsRotatedKeys(t *testing.T) {
	ctx := context.Background()
	text := strings.Repeat("s", 64)
	old, _ := ParseKeyring(text)
	rotated, _, err := RotateKeyring(text)
	if err != nil {
		t.Fatal(err)
	}
	ring, _ := ParseKeyring(rotated)
	link := Link{TeamID: 1, BookID: "b", ContactID: "c"}
	oldTok, tok := Signer{Keys: old}.Token(link), Signer{Keys: ring}.Token(link)
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	current, loads := old, 0
	src := &KeySource{Now: func() time.Time { return now }, Load: func(context.Context) (Keyring, error) {
		loads++
		return current, nil
	}}
	s := Signer{Source: src}
	if s.Token(link) != "" || loads != 0 {
		t.Fatal("the source was read before its first use")
	}
	if err := s.Ready(ctx); err != nil || s.Token(link) != oldTok || loads != 1 {
		t.Fatalf("Ready: %v, %d loads; then a token of another key", err, loads)
	}
	if _, err := (Signer{Keys: old}).Verify(ctx, tok); !errors.Is(err, ErrBadToken) {
		t.Fatalf("without a source, a rotated key's link: %v, want ErrBadToken", err)
	}
	current = ring // rotated after this process read the ring
	if l, err := s.Verify(ctx, tok); err != nil || l.ContactID != "c" || loads != 2 {
		t.Fatalf("a new key's link: %+v, %v, %d loads", l, err, loads)
	}
	if _, err := s.Verify(ctx, oldTok); err != nil {
		t.Errorf("the old key's link after the reload: %v", err)
	}
	unknown := "3.77." + strings.SplitN(tok, ".", 3)[2]
	for range 5 {
		_, _ = s.Verify(ctx, unknown)
	}
	if loads != 2 {
		t.Errorf("%d loads within a minute of the last, want 2", loads)
	}
	now = now.Add(ReloadEvery)
	_, _ = s.Verify(ctx, unknown)
	if loads != 3 {
		t.Errorf("%d loads a minute later, want 3", loads)
	}
}
