package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/mailroom/mailroom/pkg/store"
)

// contentionAttempts is how many attempts the contention case allows an update.
const contentionAttempts = 3

// testContentionExhausted: an update whose record another writer changes during each of its
// attempts gives up after the adapter's attempts with store.ErrContention (errors.Is), having
// written nothing of its own. Checked on two record types; every update goes through the
// adapter's one optimistic helper.
func testContentionExhausted(t *testing.T, s store.Store, limit func(store.Store, int) store.Store) {
	ctx := t.Context()
	ls := limit(s, contentionAttempts)
	team := newTeam(t, s)

	tpl := store.Template{ID: randID("tpl_"), TeamID: team, Name: "t", Subject: "s", CreatedAt: now(), UpdatedAt: now()}
	if err := s.CreateTemplate(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	calls := 0
	_, err := ls.UpdateTemplate(ctx, team, tpl.ID, func(x *store.Template) error {
		calls++
		other := fmt.Sprintf("other %d", calls)
		// Another writer changes the template while this change runs.
		if _, err := s.UpdateTemplate(ctx, team, tpl.ID, func(o *store.Template) error { o.Subject = other; return nil }); err != nil {
			return err
		}
		x.Subject = "mine"
		return nil
	})
	if !errors.Is(err, store.ErrContention) || calls != contentionAttempts {
		t.Fatalf("UpdateTemplate under constant contention: %v after %d calls; want ErrContention after %d", err, calls, contentionAttempts)
	}
	got, err := s.GetTemplate(ctx, team, tpl.ID)
	if err != nil || got.Subject != fmt.Sprintf("other %d", contentionAttempts) {
		t.Fatalf("template subject %q (%v), want the other writer's last", got.Subject, err)
	}

	e := newEmail(team, 1, now(), store.StatusQueued)
	createEmails(t, s, e)
	calls = 0
	_, err = ls.UpdateEmail(ctx, e.ID, func(x *store.Email) ([]store.Event, error) {
		calls++
		if _, err := s.UpdateEmail(ctx, e.ID, func(o *store.Email) ([]store.Event, error) {
			o.Subject = fmt.Sprintf("other %d", calls)
			return nil, nil
		}); err != nil {
			return nil, err
		}
		x.Subject = "mine"
		return []store.Event{{ID: "mine", EmailID: e.ID, Status: store.StatusSent, CreatedAt: now()}}, nil
	})
	if !errors.Is(err, store.ErrContention) || calls != contentionAttempts {
		t.Fatalf("UpdateEmail under constant contention: %v after %d calls; want ErrContention after %d", err, calls, contentionAttempts)
	}
	got2, events, err := s.GetEmailDetail(ctx, e.ID)
	if err != nil || got2.Subject != fmt.Sprintf("other %d", contentionAttempts) {
		t.Fatalf("email subject %q (%v), want the other writer's last", got2.Subject, err)
	}
	for _, ev := range events {
		if ev.ID == "mine" {
			t.Fatal("a lost attempt wrote its event")
		}
	}
}
