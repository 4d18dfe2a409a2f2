// Package suppression is a team's list of addresses Mailroom will not send to: added by hard
// bounces and complaints (pkg/ingest) or by hand through the API, checked by the deliver worker.
package suppression

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
)

// Store is what the suppression list needs from persistence.
type Store interface {
	store.Suppressions
}

// Reasons a caller may give or filter by.
var reasons = map[string]bool{store.ReasonHardBounce: true, store.ReasonComplaint: true, store.ReasonManual: true}

// Service is the suppression use cases.
type Service struct {
	Store Store
	Now   func() time.Time
}

// Normalize validates an address and returns its lower-cased bare form, the list's key.
func Normalize(field, addr string) (string, error) {
	norm, err := email.ParseAddress(addr)
	if err != nil {
		return "", email.AddressError(field, addr, err)
	}
	return strings.ToLower(email.AddressOnly(norm)), nil
}

// CheckReason validates a reason ("" is allowed where optional is true).
func CheckReason(reason string, optional bool) error {
	if (reason == "" && optional) || reasons[reason] {
		return nil
	}
	return fault.Field("reason", "must be one of HARD_BOUNCE, COMPLAINT, MANUAL")
}

// Add puts an address on the list (MANUAL unless another reason is given).
func (s *Service) Add(ctx context.Context, teamID int64, addr, reason string) (store.Suppression, error) {
	if reason == "" {
		reason = store.ReasonManual
	}
	if err := CheckReason(reason, false); err != nil {
		return store.Suppression{}, err
	}
	norm, err := Normalize("email", addr)
	if err != nil {
		return store.Suppression{}, err
	}
	sup := store.Suppression{TeamID: teamID, Email: norm, Reason: reason, CreatedAt: s.Now().UTC()}
	return sup, s.Store.PutSuppression(ctx, sup)
}

// List pages the team's list, newest first.
func (s *Service) List(ctx context.Context, teamID int64, reason string, page, limit int) ([]store.Suppression, int, error) {
	if err := CheckReason(reason, true); err != nil {
		return nil, 0, err
	}
	return s.Store.ListSuppressions(ctx, teamID, reason, (page-1)*limit, limit)
}

// Remove takes an address off the list; it returns the address as the list holds it
// (normalised: lower-cased, without a display name).
func (s *Service) Remove(ctx context.Context, teamID int64, addr string) (string, error) {
	norm, err := Normalize("email", addr)
	if err != nil {
		// An address stored before a stricter check, or from SES's events (which are not
		// checked), can still be removed: looked up as it is written, lower-cased.
		if bare := strings.ToLower(strings.TrimSpace(addr)); bare != "" && len(bare) <= 320 && strings.Contains(bare, "@") {
			norm = bare
		} else {
			return "", err
		}
	}
	found, err := s.Store.GetSuppressions(ctx, teamID, []string{norm})
	if err != nil {
		return "", err
	}
	if _, ok := found[norm]; !ok {
		return "", fault.NotFoundf("%s is not suppressed", norm)
	}
	if err := s.Store.DeleteSuppression(ctx, teamID, norm); err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	return norm, nil
}
