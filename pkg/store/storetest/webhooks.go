package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

// testWebhooks: a webhook is created once, read back whole, listed newest first within its
// team only, changed (keeping its id, team and creation time), and deleted.
func testWebhooks(t *testing.T, s store.Store) {
	ctx := t.Context()
	team, other := newTeam(t, s), newTeam(t, s)
	at := now()
	until := at.Add(24 * time.Hour)
	first := store.Webhook{ID: randID("wh_"), TeamID: team, URL: "https://hooks.example.com/a", EventTypes: []string{"email.sent"},
		DomainIDs: []int64{3}, Description: "first", Status: store.WebhookActive, SecretSealed: "sealed-1",
		PreviousSealed: "sealed-0", PreviousUntil: &until, CreatedAt: at, UpdatedAt: at}
	second := store.Webhook{ID: randID("wh_"), TeamID: team, URL: "https://hooks.example.com/b", Status: store.WebhookPaused,
		SecretSealed: "sealed-2", CreatedAt: at.Add(time.Second), UpdatedAt: at.Add(time.Second)}
	noErr(t, "CreateWebhook", s.CreateWebhook(ctx, first))
	noErr(t, "CreateWebhook", s.CreateWebhook(ctx, second))
	wantErr(t, "CreateWebhook(again)", s.CreateWebhook(ctx, first), store.ErrConflict)
	noErr(t, "CreateWebhook(other team)", s.CreateWebhook(ctx, store.Webhook{ID: randID("wh_"), TeamID: other, URL: "https://x.example",
		Status: store.WebhookActive, SecretSealed: "s", CreatedAt: at, UpdatedAt: at}))
	got, err := s.GetWebhook(ctx, team, first.ID)
	noErr(t, "GetWebhook", err)
	got.Version, first.Version = 0, 0
	got.PreviousUntil, first.PreviousUntil = utcPtr(got.PreviousUntil), utcPtr(first.PreviousUntil)
	got.CreatedAt, got.UpdatedAt = got.CreatedAt.UTC(), got.UpdatedAt.UTC()
	if !reflect.DeepEqual(got, first) {
		t.Fatalf("GetWebhook = %+v\nwant %+v", got, first)
	}
	_, err = s.GetWebhook(ctx, other, first.ID)
	wantErr(t, "GetWebhook(another team's)", err, store.ErrNotFound)
	list, err := s.ListWebhooks(ctx, team)
	noErr(t, "ListWebhooks", err)
	if len(list) != 2 || list[0].ID != second.ID || list[1].ID != first.ID {
		t.Fatalf("ListWebhooks = %v, want the second then the first", ids(list))
	}
	up, err := s.UpdateWebhook(ctx, team, first.ID, func(w *store.Webhook) error {
		w.URL, w.Status, w.Failures, w.EventTypes = "https://hooks.example.com/new", store.WebhookAutoDisabled, 50, nil
		w.ID, w.TeamID, w.CreatedAt = "other", other, time.Time{}
		return nil
	})
	noErr(t, "UpdateWebhook", err)
	if up.ID != first.ID || up.TeamID != team || !up.CreatedAt.Equal(at) {
		t.Fatalf("UpdateWebhook changed the id, team or creation time: %+v", up)
	}
	got, _ = s.GetWebhook(ctx, team, first.ID)
	if got.URL != "https://hooks.example.com/new" || got.Status != store.WebhookAutoDisabled || got.Failures != 50 || len(got.EventTypes) != 0 {
		t.Fatalf("after UpdateWebhook: %+v", got)
	}
	_, err = s.UpdateWebhook(ctx, other, first.ID, func(*store.Webhook) error { return nil })
	wantErr(t, "UpdateWebhook(another team's)", err, store.ErrNotFound)
	noErr(t, "DeleteWebhook", s.DeleteWebhook(ctx, team, first.ID))
	wantErr(t, "DeleteWebhook(again)", s.DeleteWebhook(ctx, team, first.ID), store.ErrNotFound)
	if list, _ := s.ListWebhooks(ctx, team); len(list) != 1 {
		t.Fatalf("%d webhooks after a delete, want 1", len(list))
	}
}

func ids(ws []store.Webhook) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return out
}

// testWebhookCalls: a call is created once however often its event is seen, listed newest
// first in pages, due while PENDING by its next attempt (earliest first), and no longer due
// once delivered or given up.
func testWebhookCalls(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	wh := randID("wh_")
	base := time.Date(1989, 6, 1, 0, 0, 0, 0, time.UTC) // before any other test's due calls
	var calls []store.WebhookCall
	for i := range 5 {
		next := base.Add(time.Duration(5-i) * time.Minute)
		calls = append(calls, store.WebhookCall{ID: fmt.Sprintf("whc_%012x%s", base.Add(time.Duration(i)*time.Second).UnixMilli(), randID("")),
			WebhookID: wh, TeamID: team, Type: "email.sent", Data: []byte(`{"id":"em_1"}`), EventAt: base.Add(time.Duration(i) * time.Second),
			Status: store.CallPending, NextAttemptAt: &next, CreatedAt: now(), UpdatedAt: now()})
	}
	created, err := s.CreateWebhookCalls(ctx, calls[:3])
	noErr(t, "CreateWebhookCalls", err)
	if len(created) != 3 {
		t.Fatalf("created %d of 3", len(created))
	}
	created, err = s.CreateWebhookCalls(ctx, calls) // the first three again, and two new
	noErr(t, "CreateWebhookCalls(again)", err)
	if len(created) != 2 || created[0].ID != calls[3].ID || created[1].ID != calls[4].ID {
		t.Fatalf("a repeat created %d calls, want the 2 new ones", len(created))
	}
	got, err := s.GetWebhookCall(ctx, wh, calls[1].ID)
	noErr(t, "GetWebhookCall", err)
	if got.Type != "email.sent" || string(got.Data) != `{"id":"em_1"}` || got.Status != store.CallPending || got.TeamID != team {
		t.Fatalf("GetWebhookCall = %+v", got)
	}
	page, err := s.ListWebhookCalls(ctx, wh, 2, "")
	noErr(t, "ListWebhookCalls", err)
	if len(page) != 2 || page[0].ID != calls[4].ID || page[1].ID != calls[3].ID {
		t.Fatalf("first page %v", callIDs(page))
	}
	page, err = s.ListWebhookCalls(ctx, wh, 10, page[1].ID)
	noErr(t, "ListWebhookCalls(before)", err)
	if len(page) != 3 || page[0].ID != calls[2].ID || page[2].ID != calls[0].ID {
		t.Fatalf("next page %v", callIDs(page))
	}
	due := func(at time.Time) [][2]string {
		t.Helper()
		refs, err := s.DueWebhookCalls(ctx, at, 100)
		noErr(t, "DueWebhookCalls", err)
		var mine [][2]string
		for _, r := range refs {
			if r[0] == wh {
				mine = append(mine, r)
			}
		}
		return mine
	}
	// Next attempts: call 4 at +1 min, 3 at +2 … 0 at +5.
	if got := due(base.Add(2 * time.Minute)); len(got) != 2 || got[0][1] != calls[4].ID || got[1][1] != calls[3].ID {
		t.Fatalf("due at +2 min: %v", got)
	}
	// A hold moves the calls due before its time to it (1 at +4, 2 at +3 → +4:30), leaves one
	// due later (0 at +5), and passes over an id that names no call.
	hold := base.Add(4*time.Minute + 30*time.Second)
	noErr(t, "HoldWebhookCalls", s.HoldWebhookCalls(ctx, wh, []string{calls[2].ID, calls[1].ID, calls[0].ID, randID("whc_")}, hold))
	for i, want := range map[int]time.Time{2: hold, 1: hold, 0: base.Add(5 * time.Minute)} {
		if got, err := s.GetWebhookCall(ctx, wh, calls[i].ID); err != nil || got.NextAttemptAt == nil || !got.NextAttemptAt.Equal(want) {
			t.Fatalf("call %d after the hold: %v, %v; want due at %v", i, got.NextAttemptAt, err, want)
		}
	}
	if got := due(base.Add(4 * time.Minute)); len(got) != 2 || got[0][1] != calls[4].ID || got[1][1] != calls[3].ID {
		t.Fatalf("due at +4 min after the hold: %v", got)
	}
	// Back to their times for what follows (call 2 at +3 min, 1 at +4).
	for i, at := range map[int]time.Time{2: base.Add(3 * time.Minute), 1: base.Add(4 * time.Minute)} {
		_, err := s.UpdateWebhookCall(ctx, wh, calls[i].ID, func(c *store.WebhookCall) error { c.NextAttemptAt = &at; return nil })
		noErr(t, "UpdateWebhookCall(back)", err)
	}
	_, err = s.UpdateWebhookCall(ctx, wh, calls[4].ID, func(c *store.WebhookCall) error {
		c.Status, c.Attempts, c.LastStatus, c.NextAttemptAt = store.CallDelivered, 1, 200, nil
		return nil
	})
	noErr(t, "UpdateWebhookCall(delivered)", err)
	later := base.Add(10 * time.Minute)
	_, err = s.UpdateWebhookCall(ctx, wh, calls[3].ID, func(c *store.WebhookCall) error {
		c.Attempts, c.LastStatus, c.LastError, c.NextAttemptAt = 1, 500, "the receiver answered 500", &later
		return nil
	})
	noErr(t, "UpdateWebhookCall(retry)", err)
	if got := due(base.Add(5 * time.Minute)); len(got) != 3 || got[0][1] != calls[2].ID {
		t.Fatalf("due at +5 min after a delivery and a retry: %v", got)
	}
	if got := due(later); len(got) != 4 || got[3][1] != calls[3].ID {
		t.Fatalf("due at +10 min: %v", got)
	}
	_, err = s.UpdateWebhookCall(ctx, wh, calls[3].ID, func(c *store.WebhookCall) error {
		c.Status, c.NextAttemptAt = store.CallFailed, nil
		return nil
	})
	noErr(t, "UpdateWebhookCall(failed)", err)
	if got := due(later); len(got) != 3 {
		t.Fatalf("a call given up is still due: %v", got)
	}
	got, _ = s.GetWebhookCall(ctx, wh, calls[3].ID)
	if got.Status != store.CallFailed || got.LastStatus != 500 || got.Attempts != 1 {
		t.Fatalf("after the updates: %+v", got)
	}
	_, err = s.GetWebhookCall(ctx, wh, randID("whc_"))
	wantErr(t, "GetWebhookCall(unknown)", err, store.ErrNotFound)
}

func callIDs(cs []store.WebhookCall) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

// testWebhookCallRetention: with a 30-day retention a call made 40 days ago is not found or
// listed, before ExpireWebhookCalls and after it, and a recent one is; an adapter that removes
// calls itself also removes the calls of a deleted webhook (one whose database expires items,
// DynamoDB's TTL, removes none).
func testWebhookCallRetention(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	at := now()
	hook := func() string {
		id := randID("wh_")
		noErr(t, "CreateWebhook", s.CreateWebhook(ctx, store.Webhook{ID: id, TeamID: team, URL: "https://hooks.example.com/r",
			Status: store.WebhookActive, SecretSealed: "s", CreatedAt: at, UpdatedAt: at}))
		return id
	}
	call := func(wh string, made time.Time) store.WebhookCall {
		next := made.Add(time.Minute)
		return store.WebhookCall{ID: fmt.Sprintf("whc_%012x%s", made.UnixMilli(), randID("")), WebhookID: wh, TeamID: team,
			Type: "email.sent", Data: []byte(`{"to":["ann@example.org"]}`), EventAt: made, Status: store.CallPending,
			NextAttemptAt: &next, CreatedAt: made, UpdatedAt: made}
	}
	kept, gone := hook(), hook()
	old, recent, orphan := call(kept, at.Add(-40*24*time.Hour)), call(kept, at.Add(-time.Hour)), call(gone, at.Add(-time.Hour))
	_, err := s.CreateWebhookCalls(ctx, []store.WebhookCall{old, recent, orphan})
	noErr(t, "CreateWebhookCalls", err)
	noErr(t, "DeleteWebhook", s.DeleteWebhook(ctx, team, gone))
	withRetention(t, s, 30*24*time.Hour)
	check := func(when string) {
		t.Helper()
		if _, err := s.GetWebhookCall(ctx, kept, old.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: GetWebhookCall of the 40-day-old call = %v, want not found", when, err)
		}
		if _, err := s.GetWebhookCall(ctx, kept, recent.ID); err != nil {
			t.Errorf("%s: the recent call: %v", when, err)
		}
		list, err := s.ListWebhookCalls(ctx, kept, 10, "")
		noErr(t, "ListWebhookCalls", err)
		if len(list) != 1 || list[0].ID != recent.ID {
			t.Errorf("%s: ListWebhookCalls = %v, want the recent call only", when, callIDs(list))
		}
	}
	check("before the sweep")
	n, err := s.ExpireWebhookCalls(ctx, 0)
	noErr(t, "ExpireWebhookCalls", err)
	switch n {
	case 0: // the database's TTL does it
	case 2:
		if _, err := s.GetWebhookCall(ctx, gone, orphan.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the deleted webhook's call after the sweep: %v, want not found", err)
		}
		refs, err := s.DueWebhookCalls(ctx, at.Add(time.Hour), 0)
		noErr(t, "DueWebhookCalls", err)
		for _, ref := range refs {
			if ref[1] == old.ID || ref[1] == orphan.ID {
				t.Errorf("a removed call %s is still due", ref[1])
			}
		}
	default:
		t.Errorf("ExpireWebhookCalls = %d, want the old call and the deleted webhook's (or none)", n)
	}
	check("after the sweep")
}
