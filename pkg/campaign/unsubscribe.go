package campaign

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

// Link is what a one-click unsubscribe URL names: the recipient, the email it came in, and
// when it was made (a contact who subscribes again after that is not unsubscribed by it).
type Link struct {
	TeamID     int64  `json:"t"`
	BookID     string `json:"b"`
	ContactID  string `json:"c"`
	EmailID    string `json:"e"`
	CampaignID string `json:"p"`
	Email      string `json:"m"`           // finds the contact if it was deleted and imported again
	MadeAt     int64  `json:"a,omitempty"` // Unix milliseconds
}

// Signer makes and checks unsubscribe URLs. A token is "2." and the link's JSON sealed with
// AES-256-GCM under a key derived from the secret: opaque (the recipient's address is not in
// the URL) and unforgeable. The nonce is derived from the link (an HMAC of it), so a link
// renders the same each time. Tokens of the first format (the JSON in clear and its
// HMAC-SHA256) are still accepted: they are in mailboxes already.
type Signer struct {
	Secret  []byte
	BaseURL string // public base URL of the API, e.g. https://api.example.com
}

var b64 = base64.RawURLEncoding

// ErrBadToken is any token that is malformed or not signed by us.
var ErrBadToken = errors.New("invalid unsubscribe link")

func (s Signer) mac(payload string) string {
	m := hmac.New(sha256.New, s.Secret)
	m.Write([]byte(payload))
	return b64.EncodeToString(m.Sum(nil))
}

// tokenV2 prefixes the sealed tokens.
const tokenV2 = "2."

// aead is the AES-256-GCM of the secret's token key.
func (s Signer) aead() (cipher.AEAD, error) {
	key := sha256.Sum256(append([]byte("mailroom unsubscribe token v2\x00"), s.Secret...))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Token returns the sealed token of a link.
func (s Signer) Token(l Link) string {
	raw, _ := json.Marshal(l)
	g, err := s.aead()
	if err != nil {
		return ""
	}
	m := hmac.New(sha256.New, s.Secret)
	m.Write([]byte("nonce\x00"))
	m.Write(raw)
	nonce := m.Sum(nil)[:g.NonceSize()]
	return tokenV2 + b64.EncodeToString(g.Seal(nonce, nonce, raw, []byte(tokenV2)))
}

// URL returns the one-click unsubscribe URL of a link.
func (s Signer) URL(l Link) string {
	return strings.TrimSuffix(s.BaseURL, "/") + "/unsubscribe/" + s.Token(l)
}

// Verify checks a token and returns its link.
func (s Signer) Verify(token string) (Link, error) {
	if len(s.Secret) == 0 || len(token) > 2048 {
		return Link{}, ErrBadToken
	}
	var raw []byte
	if sealed, ok := strings.CutPrefix(token, tokenV2); ok {
		g, err := s.aead()
		if err != nil {
			return Link{}, ErrBadToken
		}
		b, err := b64.DecodeString(sealed)
		if err != nil || len(b) < g.NonceSize() {
			return Link{}, ErrBadToken
		}
		if raw, err = g.Open(nil, b[:g.NonceSize()], b[g.NonceSize():], []byte(tokenV2)); err != nil {
			return Link{}, ErrBadToken
		}
	} else {
		payload, sig, ok := strings.Cut(token, ".")
		if !ok || !hmac.Equal([]byte(sig), []byte(s.mac(payload))) {
			return Link{}, ErrBadToken
		}
		var err error
		if raw, err = b64.DecodeString(payload); err != nil {
			return Link{}, ErrBadToken
		}
	}
	var l Link
	if err := json.Unmarshal(raw, &l); err != nil || l.ContactID == "" || l.BookID == "" {
		return Link{}, ErrBadToken
	}
	return l, nil
}

// Unsubscriber marks a contact unsubscribed (contact.Service).
type Unsubscriber interface {
	Unsubscribe(ctx context.Context, teamID int64, bookID, id, email string, linkMadeAt time.Time) (bool, error)
}

// Unsubscribe acts on a one-click link: the contact is unsubscribed and the campaign's
// unsubscribed counter counts the recipient once (through the email's Counted kinds, so a
// second click or a scanner's retry does not count again).
func (s *Service) Unsubscribe(ctx context.Context, token string) (Link, error) {
	l, err := s.Signer.Verify(token)
	if err != nil {
		return Link{}, err
	}
	var madeAt time.Time
	if l.MadeAt > 0 {
		madeAt = time.UnixMilli(l.MadeAt)
	}
	if _, err := s.Contacts.Unsubscribe(ctx, l.TeamID, l.BookID, l.ContactID, l.Email, madeAt); err != nil {
		return Link{}, err
	}
	if l.EmailID != "" {
		_, err := s.Store.UpdateEmail(ctx, l.EmailID, func(e *store.Email) ([]store.Event, error) {
			if e.TeamID != l.TeamID || slices.Contains(e.Counted, store.CountUnsubscribed) {
				return nil, errAlreadyCounted
			}
			e.Counted = append(e.Counted, store.CountUnsubscribed)
			return nil, nil
		})
		if err != nil && !errors.Is(err, errAlreadyCounted) && !errors.Is(err, store.ErrNotFound) {
			return Link{}, err
		}
	}
	return l, nil
}

var errAlreadyCounted = errors.New("already counted")
