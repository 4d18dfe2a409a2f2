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
	// Confirm makes the link a double opt-in confirmation (ConfirmURL), which subscribes: only
	// the confirmation route takes it, and the unsubscribe route only the links without it.
	Confirm bool `json:"o,omitempty"`
	// ExpiresAt (Unix milliseconds) is when a confirmation link stops working.
	ExpiresAt int64 `json:"x,omitempty"`
}

// Signer makes and checks unsubscribe URLs. A token is the link's JSON sealed with
// AES-256-GCM under a key derived from one of the keyring's keys: opaque (the recipient's
// address is not in the URL) and unforgeable. "3.<key id>." prefixes the tokens of a key with
// an id, so a rotated keyring still opens the links its older keys made; "2." those of a single
// key without an id (the tokens before key ids). The nonce is derived from the link (an HMAC
// of it), so a link renders the same each time. Tokens of the first format (the JSON in clear
// and its HMAC-SHA256) are still accepted: they are in mailboxes already.
type Signer struct {
	// Keys are the keyring, unless Source is set: then it is read from there (Ready reads it
	// before a batch is signed; Verify reads it as needed).
	Keys    Keyring
	Source  *KeySource
	BaseURL string // public base URL of the API, e.g. https://api.example.com
}

// keys is the keyring as far as it is known (Source's, once read).
func (s Signer) keys() Keyring {
	if s.Source != nil {
		return s.Source.cached()
	}
	return s.Keys
}

// Ring returns the keyring: Source's (read if need be), else Keys.
func (s Signer) Ring(ctx context.Context) (Keyring, error) {
	if s.Source != nil {
		return s.Source.Ring(ctx)
	}
	return s.Keys, nil
}

// Ready makes sure links can be signed: it reads the keyring from Source if need be, and fails
// when there is no key to sign with.
func (s Signer) Ready(ctx context.Context) error {
	ring := s.Keys
	if s.Source != nil {
		var err error
		if ring, err = s.Source.Ring(ctx); err != nil {
			return err
		}
	}
	if _, ok := ring.Keys[ring.Current]; !ok {
		return errors.New("no unsubscribe key is configured: campaign emails need signed unsubscribe links")
	}
	return nil
}

var b64 = base64.RawURLEncoding

// ErrBadToken is any token that is malformed or not signed by us.
var ErrBadToken = errors.New("invalid unsubscribe link")

// Token prefixes.
const (
	tokenV2 = "2."
	tokenV3 = "3."
)

// tokenPurpose keys the tokens' cipher (KeyAEAD).
const tokenPurpose = "mailroom unsubscribe token v2"

// aead is the AES-256-GCM of a key's tokens.
func aead(secret []byte) (cipher.AEAD, error) {
	return KeyAEAD(tokenPurpose, secret)
}

// KeyAEAD is the AES-256-GCM keyed with SHA-256("<purpose>\x00<key>"): one keyring key gives
// each purpose (unsubscribe tokens, webhook secrets) its own cipher key.
func KeyAEAD(purpose string, key []byte) (cipher.AEAD, error) {
	k := sha256.Sum256(append([]byte(purpose+"\x00"), key...))
	block, err := aes.NewCipher(k[:])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Token returns the sealed token of a link ("" when the keyring cannot sign: see Ready).
func (s Signer) Token(l Link) string {
	ring := s.keys()
	secret, ok := ring.Keys[ring.Current]
	if !ok {
		return ""
	}
	raw, _ := json.Marshal(l)
	g, err := aead(secret)
	if err != nil {
		return ""
	}
	prefix := tokenV2
	if ring.Current != "" {
		prefix = tokenV3 + ring.Current + "."
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("nonce\x00"))
	m.Write(raw)
	nonce := m.Sum(nil)[:g.NonceSize()]
	return prefix + b64.EncodeToString(g.Seal(nonce, nonce, raw, []byte(prefix)))
}

// URL returns the one-click unsubscribe URL of a link.
func (s Signer) URL(l Link) string {
	return strings.TrimSuffix(s.BaseURL, "/") + "/unsubscribe/" + s.Token(l)
}

// ConfirmURL returns the double opt-in confirmation URL of a link (Confirm is set on it).
func (s Signer) ConfirmURL(l Link) string {
	l.Confirm = true
	return strings.TrimSuffix(s.BaseURL, "/") + "/subscribe/" + s.Token(l)
}

// open unseals a token's body with a key.
func open(secret []byte, sealed, prefix string) ([]byte, bool) {
	raw, err := Open(tokenPurpose, secret, prefix, sealed)
	return raw, err == nil
}

// legacyKeys are the keys that may have made tokens without a key id (the first format and
// "2."): the single key of a ring without ids, which a rotation keeps as key "0".
func legacyKeys(ring Keyring) [][]byte {
	var out [][]byte
	for _, id := range []string{"", "0"} {
		if k, ok := ring.Keys[id]; ok {
			out = append(out, k)
		}
	}
	return out
}

// Key returns the key of the ring named id, reading the ring again for an id it lacks (a key
// rotated in since), as Verify does for a link's. An error is a failed read.
func (s Signer) Key(ctx context.Context, id string) ([]byte, bool, error) {
	if s.Source == nil {
		k, ok := s.Keys.Keys[id]
		return k, ok, nil
	}
	ring, err := s.Source.Ring(ctx)
	if err != nil {
		return nil, false, err
	}
	if k, ok := ring.Keys[id]; ok {
		return k, true, nil
	}
	if !keyID().MatchString(id) {
		return nil, false, nil
	}
	return s.Source.key(ctx, id)
}

// Verify checks a token and returns its link. A "3." token names its key; the older formats
// name none and were made by the single key a ring keeps as "" or "0" (legacyKeys). An error
// other than ErrBadToken is a failure to read the keys.
func (s Signer) Verify(ctx context.Context, token string) (Link, error) {
	if len(token) > 2048 {
		return Link{}, ErrBadToken
	}
	ring := s.Keys
	if s.Source != nil {
		var err error
		if ring, err = s.Source.Ring(ctx); err != nil {
			return Link{}, err
		}
	}
	if ring.Empty() {
		return Link{}, ErrBadToken
	}
	var raw []byte
	ok := false
	switch {
	case strings.HasPrefix(token, tokenV3):
		id, sealed, found := strings.Cut(strings.TrimPrefix(token, tokenV3), ".")
		secret, known := ring.Keys[id]
		if !known && found && s.Source != nil && keyID().MatchString(id) {
			var err error
			if secret, known, err = s.Source.key(ctx, id); err != nil {
				return Link{}, err
			}
		}
		if found && known && id != "" {
			raw, ok = open(secret, sealed, tokenV3+id+".")
		}
	case strings.HasPrefix(token, tokenV2):
		for _, secret := range legacyKeys(ring) {
			if raw, ok = open(secret, strings.TrimPrefix(token, tokenV2), tokenV2); ok {
				break
			}
		}
	default:
		payload, sig, found := strings.Cut(token, ".")
		if !found {
			break
		}
		for _, secret := range legacyKeys(ring) {
			m := hmac.New(sha256.New, secret)
			m.Write([]byte(payload))
			if hmac.Equal([]byte(sig), []byte(b64.EncodeToString(m.Sum(nil)))) {
				var err error
				raw, err = b64.DecodeString(payload)
				ok = err == nil
				break
			}
		}
	}
	if !ok {
		return Link{}, ErrBadToken
	}
	var l Link
	if err := json.Unmarshal(raw, &l); err != nil || l.ContactID == "" || l.BookID == "" {
		return Link{}, ErrBadToken
	}
	return l, nil
}

// Subscriptions are what links change of a contact (contact.Service).
type Subscriptions interface {
	Unsubscriber
	Confirmer
}

// Unsubscriber marks a contact unsubscribed (contact.Service).
type Unsubscriber interface {
	Unsubscribe(ctx context.Context, teamID int64, bookID, id, email string, linkMadeAt time.Time) (bool, error)
}

// Unsubscribe acts on a one-click link: the contact is unsubscribed and the campaign's
// unsubscribed counter counts the recipient once (through the email's Counted kinds, so a
// second click or a scanner's retry does not count again).
func (s *Service) Unsubscribe(ctx context.Context, token string) (Link, error) {
	l, err := s.UnsubscribeLink(ctx, token)
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

// UnsubscribeLink checks an unsubscribe token: a confirmation link is not one (ErrBadToken).
func (s *Service) UnsubscribeLink(ctx context.Context, token string) (Link, error) {
	l, err := s.Signer.Verify(ctx, token)
	if err == nil && l.Confirm {
		return Link{}, ErrBadToken
	}
	return l, err
}

// ConfirmLink checks a double opt-in confirmation token: an unsubscribe link is not one, and
// an expired one is ErrLinkExpired.
func (s *Service) ConfirmLink(ctx context.Context, token string) (Link, error) {
	l, err := s.Signer.Verify(ctx, token)
	switch {
	case err != nil:
		return Link{}, err
	case !l.Confirm:
		return Link{}, ErrBadToken
	case l.ExpiresAt > 0 && s.Now().UnixMilli() > l.ExpiresAt:
		return Link{}, ErrLinkExpired
	}
	return l, nil
}

// ErrLinkExpired is a confirmation link past its time.
var ErrLinkExpired = errors.New("the confirmation link has expired")

// Confirmer subscribes a contact waiting for its double opt-in (contact.Service).
type Confirmer interface {
	Confirm(ctx context.Context, teamID int64, bookID, id, email string) (bool, error)
}

// Confirm acts on a double opt-in link: the pending contact is subscribed. It reports whether
// the contact is subscribed now (false: it unsubscribed, or was removed, meanwhile).
func (s *Service) Confirm(ctx context.Context, token string) (bool, error) {
	l, err := s.ConfirmLink(ctx, token)
	if err != nil {
		return false, err
	}
	return s.Contacts.Confirm(ctx, l.TeamID, l.BookID, l.ContactID, l.Email)
}
