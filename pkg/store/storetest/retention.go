package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

// testRetention: with a 90-day retention an email created 100 days ago is not found, updated,
// listed or counted, before ExpireEmails and after it; a recent one is untouched, and so is one
// created as long ago but scheduled 10 days ago (kept, but not listed: lists show the emails
// created in the retained days); and the campaign counters keep counting the expired email.
func testRetention(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	camp := createCampaign(t, s, newCampaign(team, "c", "s", store.CampaignRunning, now()))
	old := campaignEmail(team, camp.ID, now().Add(-100*24*time.Hour))
	recent := campaignEmail(team, camp.ID, now().Add(-time.Hour))
	// Created 100 days ago for 10 days ago: kept 90 days from its scheduled time.
	scheduled := newEmail(team, 1, now().Add(-100*24*time.Hour), store.StatusSent)
	at := now().Add(-10 * 24 * time.Hour)
	scheduled.ScheduledAt = &at
	createEmails(t, s, old, recent, scheduled)
	withRetention(t, s, 90*24*time.Hour)

	check := func(when string) {
		t.Helper()
		if _, err := s.GetEmail(ctx, old.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: GetEmail of the expired email = %v, want not found", when, err)
		}
		if _, _, err := s.GetEmailDetail(ctx, old.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: GetEmailDetail of the expired email = %v, want not found", when, err)
		}
		if _, err := s.UpdateEmail(ctx, old.ID, func(*store.Email) ([]store.Event, error) { return nil, nil }); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: UpdateEmail of the expired email = %v, want not found", when, err)
		}
		if _, err := s.GetEmail(ctx, recent.ID); err != nil {
			t.Errorf("%s: the recent email: %v", when, err)
		}
		if _, err := s.GetEmail(ctx, scheduled.ID); err != nil {
			t.Errorf("%s: the email scheduled 10 days ago: %v", when, err)
		}
		settle(t, s)
		list, n, err := s.ListEmails(ctx, store.EmailFilter{TeamID: team, Limit: 10})
		noErr(t, "ListEmails", err)
		if n != 1 || len(list) != 1 || list[0].ID != recent.ID {
			t.Errorf("%s: ListEmails = %d emails, count %d; want the recent one, count 1", when, len(list), n)
		}
		wantCounters(t, s, when, team, camp.ID, map[string]int64{store.CountTotal: 2})
	}
	check("before the sweep")
	// It reports what it deleted: the expired email (none where the database's TTL does it),
	// not the scheduled one it keeps.
	if n, err := s.ExpireEmails(ctx, 0); err != nil || n > 1 {
		t.Fatalf("ExpireEmails = %d, %v; want at most the one expired", n, err)
	}
	check("after the sweep")
}

// withRetention sets the store's retention (SetRetention, which every adapter has) until the
// test ends.
func withRetention(t *testing.T, s store.Store, d time.Duration) {
	t.Helper()
	r, ok := s.(interface{ SetRetention(time.Duration) })
	if !ok {
		t.Fatal("the store has no SetRetention")
	}
	r.SetRetention(d)
	t.Cleanup(func() { r.SetRetention(0) })
}
