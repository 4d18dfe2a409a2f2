package webhook

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSignature: the signature is the HMAC-SHA256 of "<ms>.<body>" keyed with the whole
// secret string (a value computed independently with openssl), and the headers carry it with
// the millisecond timestamp, the type, the call id and whether it is a retry.
func TestSignature(t *testing.T) {
	// printf '1795514400000.{"a":1}' | openssl dgst -sha256 -hmac whsec_0123…cdef
	secret := "whsec_" + strings.Repeat("0123456789abcdef", 4)
	want := "v1=d6928e017dd4ec265ae2e6deaefdbbc0f4bc471fc416f66ebc6b8bfd85af5add"
	got := Sign(secret, 1795514400000, []byte(`{"a":1}`))
	if got != want {
		t.Fatalf("Sign = %q, want %q", got, want)
	}
	h := http.Header{}
	at := time.UnixMilli(1795514400000)
	Headers(h, secret, "", at, []byte(`{"a":1}`), "email.sent", "whc_1", 2)
	if h.Get(HeaderSignature) != got || h.Get(HeaderTimestamp) != "1795514400000" || h.Get(HeaderEvent) != "email.sent" ||
		h.Get(HeaderCall) != "whc_1" || h.Get(HeaderRetry) != "true" || h.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", h)
	}
	if h.Get(HeaderPrevious) != "" {
		t.Error("a previous signature without a previous secret")
	}
	old := "whsec_" + strings.Repeat("fedcba9876543210", 4)
	Headers(h, secret, old, at, []byte(`{"a":1}`), "email.sent", "whc_1", 1)
	if h.Get(HeaderSignature) != want || h.Get(HeaderPrevious) != Sign(old, 1795514400000, []byte(`{"a":1}`)) || h.Get(HeaderRetry) != "false" {
		t.Errorf("headers during a rotation %v", h)
	}
}

func TestEnvelopeAndSecrets(t *testing.T) {
	b, err := Body("whc_1", "email.sent", time.Date(2026, 11, 24, 10, 0, 0, 226669606, time.UTC), 7, json.RawMessage(`{"id":"em_1"}`), 1)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"whc_1","type":"email.sent","version":"2026-01-18","createdAt":"2026-11-24T10:00:00.226Z","teamId":7,"data":{"id":"em_1"},"attempt":1}`
	if string(b) != want {
		t.Errorf("body %s\nwant %s", b, want)
	}
	s, err := NewSecret()
	if err != nil || !ValidSecret(s) {
		t.Fatalf("NewSecret = %q, %v", s, err)
	}
	if other, _ := NewSecret(); other == s {
		t.Error("two secrets alike")
	}
	if got := UnknownTypes([]string{"email.sent", "email.sending", "contact.created", "webhook.test"}); strings.Join(got, ",") != "email.sending,webhook.test" {
		t.Errorf("UnknownTypes = %v", got)
	}
}
