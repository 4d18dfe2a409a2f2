// Package webhook is the wire side of Mailroom's outbound webhooks, as the useSend SDK's
// verifier (usesend.webhooks(secret).constructEvent) expects them: the event types, the
// envelope, the signature headers, the secrets, and which URLs a call may go to.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mailroom/mailroom/pkg/jsonout"
)

// Version is the envelope's version (COMPAT.md).
const Version = "2026-01-18"

// EventTypes are the types a webhook may subscribe to, in the order the README lists them.
var EventTypes = []string{
	"email.queued", "email.scheduled", "email.sent", "email.delivery_delayed", "email.delivered",
	"email.bounced", "email.rejected", "email.rendering_failure", "email.complained", "email.failed",
	"email.cancelled", "email.suppressed", "email.opened", "email.clicked",
	"contact.created", "contact.updated", "contact.deleted",
	"domain.created", "domain.verified", "domain.updated", "domain.deleted",
	"campaign.started", "campaign.paused", "campaign.sent",
}

// TestEvent is the type of the call POST /webhooks/{id}/test sends (no subscription needed).
const TestEvent = "webhook.test"

// UnknownTypes returns the types that are not EventTypes, in the order given.
func UnknownTypes(types []string) []string {
	var out []string
	for _, t := range types {
		if !slices.Contains(EventTypes, t) {
			out = append(out, t)
		}
	}
	return out
}

// Envelope is the body of a call. ID is the call's id, the same in every attempt of it.
type Envelope struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Version   string          `json:"version"`
	CreatedAt string          `json:"createdAt"`
	TeamID    int64           `json:"teamId"`
	Data      json.RawMessage `json:"data"`
	Attempt   int             `json:"attempt"`
}

// Body is the JSON of the envelope of an attempt (attempts count from 1).
func Body(callID, eventType string, createdAt time.Time, teamID int64, data json.RawMessage, attempt int) ([]byte, error) {
	return json.Marshal(Envelope{ID: callID, Type: eventType, Version: Version,
		CreatedAt: jsonout.Time(createdAt), TeamID: teamID, Data: data, Attempt: attempt})
}

// Header names of a call.
const (
	HeaderSignature = "X-UseSend-Signature"
	HeaderTimestamp = "X-UseSend-Timestamp"
	HeaderEvent     = "X-UseSend-Event"
	HeaderCall      = "X-UseSend-Call"
	HeaderRetry     = "X-UseSend-Retry"
	// HeaderPrevious carries, for a day after a secret's rotation, the signature made with the
	// secret it replaced (the SDK's verifier reads HeaderSignature only, made with the new one).
	HeaderPrevious = "X-Mailroom-Signature-Previous"
)

// Sign is the v1 signature of a body sent at ts (Unix milliseconds): the hex HMAC-SHA256,
// keyed with the whole secret string, of "<ts>.<body>".
func Sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Headers sets a call's headers on h; previous, when not empty, is a rotated-out secret that
// still signs (HeaderPrevious).
func Headers(h http.Header, secret, previous string, sentAt time.Time, body []byte, eventType, callID string, attempt int) {
	ts := sentAt.UnixMilli()
	h.Set("Content-Type", "application/json")
	h.Set(HeaderSignature, Sign(secret, ts, body))
	if previous != "" {
		h.Set(HeaderPrevious, Sign(previous, ts, body))
	}
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderEvent, eventType)
	h.Set(HeaderCall, callID)
	h.Set(HeaderRetry, strconv.FormatBool(attempt > 1))
}

// secretFormat is a webhook secret's, compiled at its first use.
var secretFormat = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^whsec_[0-9a-f]{64}$`) })

// NewSecret makes a secret: whsec_ and 64 hex digits.
func NewSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	return "whsec_" + hex.EncodeToString(b[:]), nil
}

// ValidSecret reports whether s has the secret format.
func ValidSecret(s string) bool { return secretFormat().MatchString(s) }
