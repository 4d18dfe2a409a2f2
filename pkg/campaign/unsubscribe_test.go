package campaign

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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
		"empty":             "",
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
	// A single key is taken as it is: short (set by hand before keyrings) or with spaces.
	for _, single := range []string{"abc", " spaced key "} {
		if k, err := ParseKeyring(single); err != nil || string(k.Keys[""]) != single {
			t.Errorf("single key %q: %v, %v", single, k.Keys, err)
		}
	}
	k, err := ParseKeyring(`{"current":"b","keys":{"a":"` + long + `","b":"` + strings.Repeat("j", 32) + `"}}`)
	if err != nil || k.Current != "b" || len(k.Keys) != 2 || string(k.Keys["a"]) != long {
		t.Errorf("ring: %+v, %v", k, err)
	}
	if back, err := ParseKeyring(k.Text()); err != nil || back.Current != "b" || len(back.Keys) != 2 {
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
// opens a link of the new key by reading the ring again (not within ReloadEvery of its last
// read, so made-up ids cannot flood the store), signs with the new key once the ring is
// RefreshEvery old, and stops accepting a key taken out of the secret then. A failed read is
// an error, not an invalid link, and a later failure keeps the ring read before.
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
	var failure error
	src := &KeySource{Now: func() time.Time { return now }, Load: func(context.Context) (Keyring, error) {
		loads++
		return current, failure
	}}
	s := Signer{Source: src}
	if s.Token(link) != "" || loads != 0 {
		t.Fatal("the source was read before its first use")
	}
	if err := s.Ready(ctx); err != nil || s.Token(link) != oldTok || loads != 1 {
		t.Fatalf("Ready: %v, %d loads; then a token of another key", err, loads)
	}
	current = ring // rotated after this process read the ring
	if _, err := s.Verify(ctx, tok); !errors.Is(err, ErrBadToken) || loads != 1 {
		t.Fatalf("a new key's link within ReloadEvery of the read: %v, %d loads", err, loads)
	}
	now = now.Add(ReloadEvery)
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
		t.Errorf("%d loads for made-up ids within ReloadEvery, want 2", loads)
	}
	// The ring is re-read when RefreshEvery old: the warm signer moves to the new key, and a
	// key removed from the secret stops working.
	if got := s.Token(link); !strings.HasPrefix(got, "3.1.") {
		t.Errorf("signing with %q after the reload", got)
	}
	onlyNew, _ := ParseKeyring(rotated)
	delete(onlyNew.Keys, "0")
	current = onlyNew
	now = now.Add(RefreshEvery)
	if _, err := s.Verify(ctx, oldTok); !errors.Is(err, ErrBadToken) {
		t.Errorf("a removed key's link after the refresh: %v", err)
	}
	failure = errors.New("secrets manager unavailable")
	now = now.Add(RefreshEvery)
	if l, err := s.Verify(ctx, tok); err != nil || l.ContactID != "c" {
		t.Errorf("a failed refresh must keep the ring: %+v, %v", l, err)
	}
	cold := Signer{Source: &KeySource{Load: func(context.Context) (Keyring, error) { return Keyring{}, failure }}}
	if _, err := cold.Verify(ctx, tok); err == nil || errors.Is(err, ErrBadToken) {
		t.Errorf("a failed first read: %v, want the read's error", err)
	}
}

// TestKeyringStaysOutOfLogs: printing or logging a keyring, or a signer holding one, shows no
// key; an error about a malformed secret shows none either.
func TestKeyringStaysOutOfLogs(t *testing.T) {
	key := strings.Repeat("k", 64)
	s := Signer{Keys: SingleKey(key), BaseURL: "https://x"}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("signer", "signer", s, "keys", s.Keys)
	fmt.Fprintf(&b, "%v %+v %s", s, s, s.Keys)
	if strings.Contains(b.String(), key) {
		t.Errorf("a key in %q", b.String())
	}
	_, err := ParseKeyring(`{"current":"1","keys":{"` + key + `":"1"}}`)
	if err == nil || strings.Contains(err.Error(), key) {
		t.Errorf("swapped id and key: %v", err)
	}
}

// TestPreviewGoesInTheBody: the hidden preview text is the first thing in a whole document's
// body (nothing may come before its doctype), and before a fragment.
func TestPreviewGoesInTheBody(t *testing.T) {
	for body, want := range map[string]string{
		`<!DOCTYPE html><html><head><title>x</title></head><BODY style="margin:0"><p>Hi</p></body></html>`: `<!DOCTYPE html><html><head><title>x</title></head><BODY style="margin:0"><div style="display:none;max-height:0;overflow:hidden;mso-hide:all">Soon &amp; now</div><p>Hi</p></body></html>`,
		`<p>Hi</p>`: `<div style="display:none;max-height:0;overflow:hidden;mso-hide:all">Soon &amp; now</div><p>Hi</p>`,
	} {
		if got := withPreview(body, "Soon & now"); got != want {
			t.Errorf("withPreview(%q) =\n%s\nwant\n%s", body, got, want)
		}
	}
	if got := withPreview("<p>Hi</p>", ""); got != "<p>Hi</p>" {
		t.Errorf("no preview: %s", got)
	}
}
