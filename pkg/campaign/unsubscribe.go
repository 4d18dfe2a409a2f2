package campaign

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/mailroom/mailroom/pkg/store"
)

// Link is what a one-click unsubscribe URL names: the recipient and the email it came in.
type Link struct {
	TeamID     int64  `json:"t"`
	BookID     string `json:"b"`
	ContactID  string `json:"c"`
	EmailID    string `json:"e"`
	CampaignID string `json:"p"`
	Email      string `json:"m"` // finds the contact if it was deleted and imported again
}

// Signer makes and checks unsubscribe URLs. The token is the link's JSON and an HMAC-SHA256 of
// it under a secret, so no one can forge a link for another contact.
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

// Token returns the signed token of a link.
func (s Signer) Token(l Link) string {
	raw, _ := json.Marshal(l)
	payload := b64.EncodeToString(raw)
	return payload + "." + s.mac(payload)
}

// URL returns the one-click unsubscribe URL of a link.
func (s Signer) URL(l Link) string {
	return strings.TrimSuffix(s.BaseURL, "/") + "/unsubscribe/" + s.Token(l)
}

// Verify checks a token and returns its link.
func (s Signer) Verify(token string) (Link, error) {
	if len(s.Secret) == 0 {
		return Link{}, ErrBadToken
	}
	payload, sig, ok := strings.Cut(token, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(s.mac(payload))) {
		return Link{}, ErrBadToken
	}
	raw, err := b64.DecodeString(payload)
	if err != nil {
		return Link{}, ErrBadToken
	}
	var l Link
	if err := json.Unmarshal(raw, &l); err != nil || l.ContactID == "" || l.BookID == "" {
		return Link{}, ErrBadToken
	}
	return l, nil
}

// Unsubscriber marks a contact unsubscribed (contact.Service).
type Unsubscriber interface {
	Unsubscribe(ctx context.Context, teamID int64, bookID, id, email string) (bool, error)
}

// Unsubscribe acts on a one-click link: the contact is unsubscribed and the campaign's
// unsubscribed counter counts the recipient once (through the email's Counted kinds, so a
// second click or a scanner's retry does not count again).
func (s *Service) Unsubscribe(ctx context.Context, token string) (Link, error) {
	l, err := s.Signer.Verify(token)
	if err != nil {
		return Link{}, err
	}
	if _, err := s.Contacts.Unsubscribe(ctx, l.TeamID, l.BookID, l.ContactID, l.Email); err != nil {
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
