package storetest

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

func testEmails(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	created := now()
	e1 := newEmail(team, 1, created, store.StatusQueued)
	e1.CC = []string{"cc@example.net"}
	e1.BCC = []string{"bcc@example.net"}
	e1.ReplyTo = []string{"reply@example.com"}
	e1.InReplyToID = "em-parent"
	e1.Content.Headers = []store.Header{{Name: "X-A", Value: "1"}, {Name: "X-B", Value: "2"}}
	e1.Content.Attachments = []store.Attachment{{Filename: "a.txt", Content: base64.StdEncoding.EncodeToString([]byte("abc"))}}
	e2 := newEmail(team, 1, created.Add(time.Second), store.StatusScheduled)
	e2.ScheduledAt = ptr(created.Add(time.Hour))
	e2.Content = store.Content{Text: ptr("text only")}

	// Events of e2 given out of order: same instant ordered by ID, earlier instant first.
	t0 := created.Add(time.Second)
	evs := []store.Event{
		{ID: "ev-b", EmailID: e2.ID, Status: "SCHEDULED", CreatedAt: t0, Data: []byte(`{"b":1}`)},
		{ID: "ev-a", EmailID: e2.ID, Status: "SCHEDULED", CreatedAt: t0},
		{ID: "ev-z", EmailID: e2.ID, Status: "SCHEDULED", CreatedAt: t0.Add(-time.Millisecond)},
		{ID: "ev-1", EmailID: e1.ID, Status: "QUEUED", CreatedAt: created},
	}
	noErr(t, "CreateEmails", s.CreateEmails(ctx, []store.Email{e1, e2}, evs))

	checkEmail(t, "GetEmail(e1)", getEmail(t, s, e1.ID), e1)
	checkEmail(t, "GetEmail(e2)", getEmail(t, s, e2.ID), e2)

	got, events, err := s.GetEmailDetail(ctx, e2.ID)
	noErr(t, "GetEmailDetail", err)
	checkEmail(t, "GetEmailDetail", got, e2)
	if ids := eventIDs(events); !equalStrings(ids, []string{"ev-z", "ev-a", "ev-b"}) {
		t.Fatalf("GetEmailDetail events = %v, want [ev-z ev-a ev-b] (by CreatedAt then ID)", ids)
	}
	checkEvent(t, "event ev-b", events[2], evs[0])
	_, events, err = s.GetEmailDetail(ctx, e1.ID)
	noErr(t, "GetEmailDetail", err)
	if len(events) != 1 {
		t.Fatalf("e1 has %d events, want 1", len(events))
	}
	checkEvent(t, "event ev-1", events[0], evs[3])

	_, err = s.GetEmail(ctx, randID("em-"))
	wantErr(t, "GetEmail(unknown)", err, store.ErrNotFound)
	_, _, err = s.GetEmailDetail(ctx, randID("em-"))
	wantErr(t, "GetEmailDetail(unknown)", err, store.ErrNotFound)
	_, err = s.UpdateEmail(ctx, randID("em-"), func(*store.Email) ([]store.Event, error) { return nil, nil })
	wantErr(t, "UpdateEmail(unknown)", err, store.ErrNotFound)
}

func listAll(t *testing.T, s store.Store, f store.EmailFilter) ([]store.Email, int) {
	t.Helper()
	settle(t, s)
	list, count, err := s.ListEmails(t.Context(), f)
	noErr(t, "ListEmails", err)
	return list, count
}

func testCreateEmailsTwice(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	e := newEmail(team, 1, now(), store.StatusQueued)
	createEmails(t, s, e)

	retry := e
	retry.Subject = "second version"
	retryEvent := store.Event{ID: "retry", EmailID: e.ID, Status: "QUEUED", CreatedAt: e.CreatedAt}
	noErr(t, "CreateEmails(retry)", s.CreateEmails(ctx, []store.Email{retry}, []store.Event{retryEvent}))
	got, events, err := s.GetEmailDetail(ctx, e.ID)
	noErr(t, "GetEmailDetail", err)
	checkEmail(t, "email after a second CreateEmails", got, e)
	if ids := eventIDs(events); !equalStrings(ids, []string{"created"}) {
		t.Fatalf("events after a second CreateEmails = %v, want [created]", ids)
	}
	if _, count := listAll(t, s, store.EmailFilter{TeamID: team, Limit: 10}); count != 1 {
		t.Fatalf("count after a repeated CreateEmails = %d, want 1", count)
	}

	// A retry builds its email anew, with its own time (a campaign step or an idempotent send
	// taken over after a crash, a day later): the email stays listed when it was created.
	later := retry
	later.CreatedAt, later.UpdatedAt = e.CreatedAt.Add(26*time.Hour), e.CreatedAt.Add(26*time.Hour)
	noErr(t, "CreateEmails(a later retry)", s.CreateEmails(ctx, []store.Email{later}, nil))
	checkEmail(t, "email after a later retry", getEmail(t, s, e.ID), e)
	around := func(at time.Time) store.EmailFilter {
		lo, hi := at.Add(-time.Hour), at.Add(time.Hour)
		return store.EmailFilter{TeamID: team, Start: &lo, End: &hi, Limit: 10}
	}
	if list, count := listAll(t, s, around(e.CreatedAt)); count != 1 || !equalStrings(emailIDs(list), []string{e.ID}) {
		t.Fatalf("list around its creation after a later retry = %v (count %d), want [%s]", emailIDs(list), count, e.ID)
	}
	if list, count := listAll(t, s, around(later.CreatedAt)); count != 0 || len(list) != 0 {
		t.Fatalf("list around the retry's time = %v (count %d), want none", emailIDs(list), count)
	}

	// A batch mixing an existing and a new email creates the new one only.
	fresh := newEmail(team, 1, e.CreatedAt.Add(time.Second), store.StatusQueued)
	createEmails(t, s, retry, fresh)
	checkEmail(t, "existing email in a mixed batch", getEmail(t, s, e.ID), e)
	checkEmail(t, "new email in a mixed batch", getEmail(t, s, fresh.ID), fresh)
	list, count := listAll(t, s, store.EmailFilter{TeamID: team, Limit: 10})
	if count != 2 || !equalStrings(emailIDs(list), []string{fresh.ID, e.ID}) {
		t.Fatalf("list after a mixed batch = %v (count %d), want [%s %s] (count 2)", emailIDs(list), count, fresh.ID, e.ID)
	}
}

func testCreateEmailsConcurrentSameID(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	base := newEmail(team, 1, now(), store.StatusQueued)
	errs := concurrently(workers, func(i int) error {
		e := base
		e.Subject = fmt.Sprintf("g%d", i)
		ev := store.Event{ID: fmt.Sprintf("ev-%d", i), EmailID: e.ID, Status: "QUEUED", CreatedAt: e.CreatedAt}
		return s.CreateEmails(ctx, []store.Email{e}, []store.Event{ev})
	})
	for _, err := range errs {
		noErr(t, "concurrent CreateEmails", err)
	}
	got, events, err := s.GetEmailDetail(ctx, base.ID)
	noErr(t, "GetEmailDetail", err)
	if len(events) != 1 {
		t.Fatalf("email created by %d goroutines has %d events, want 1", workers, len(events))
	}
	if want := "ev-" + strings.TrimPrefix(got.Subject, "g"); events[0].ID != want {
		t.Fatalf("email (subject %s) and its event (%s) come from different writers", got.Subject, events[0].ID)
	}
	if _, count := listAll(t, s, store.EmailFilter{TeamID: team, Limit: 10}); count != 1 {
		t.Fatalf("count after %d concurrent creates of one email = %d, want 1", workers, count)
	}
}

func testCreateEmailsConcurrentCount(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	base := now()
	emails := make([]store.Email, workers)
	for i := range emails {
		emails[i] = newEmail(team, 1, base.Add(time.Duration(i)*time.Millisecond), store.StatusSent)
	}
	errs := concurrently(workers, func(i int) error {
		return s.CreateEmails(ctx, emails[i:i+1], []store.Event{firstEvent(emails[i])})
	})
	for _, err := range errs {
		noErr(t, "CreateEmails", err)
	}
	list, count := listAll(t, s, store.EmailFilter{TeamID: team, Limit: 2 * workers})
	if count != workers || len(list) != workers {
		t.Fatalf("after %d concurrent creates: count %d, %d listed", workers, count, len(list))
	}
	list, count = listAll(t, s, store.EmailFilter{TeamID: team, DomainIDs: []int64{1}, Limit: 2 * workers})
	if count != workers || len(list) != workers {
		t.Fatalf("after %d concurrent creates, by domain: count %d, %d listed", workers, count, len(list))
	}
}

func testUpdateEmailConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	e := newEmail(team, 1, now(), store.StatusSent)
	createEmails(t, s, e)
	before := getEmail(t, s, e.ID)
	errs := concurrently(workers, func(i int) error {
		_, err := s.UpdateEmail(ctx, e.ID, func(e *store.Email) ([]store.Event, error) {
			e.Attempts++
			return []store.Event{{ID: fmt.Sprintf("attempt-%d", i), Status: "DELIVERED", CreatedAt: e.CreatedAt}}, nil
		})
		return err
	})
	for _, err := range errs {
		noErr(t, "UpdateEmail", err)
	}
	got, events, err := s.GetEmailDetail(ctx, e.ID)
	noErr(t, "GetEmailDetail", err)
	if got.Attempts != workers {
		t.Fatalf("Attempts after %d concurrent increments = %d: updates were lost", workers, got.Attempts)
	}
	if got.Version <= before.Version {
		t.Fatalf("Version did not advance: %d then %d", before.Version, got.Version)
	}
	if len(events) != workers+1 {
		t.Fatalf("%d events after %d updates each adding one, want %d", len(events), workers, workers+1)
	}
	for _, ev := range events {
		if ev.EmailID != e.ID {
			t.Fatalf("event %s has EmailID %q, want %q", ev.ID, ev.EmailID, e.ID)
		}
	}
}

func testUpdateEmailAbort(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	e := newEmail(team, 1, now(), store.StatusQueued)
	createEmails(t, s, e)
	before := getEmail(t, s, e.ID)

	errBoom := errors.New("boom")
	_, err := s.UpdateEmail(ctx, e.ID, func(e *store.Email) ([]store.Event, error) {
		e.Status = store.StatusFailed
		e.Attempts = 9
		return []store.Event{{ID: "failed", Status: "FAILED", CreatedAt: e.CreatedAt}}, errBoom
	})
	wantErr(t, "UpdateEmail(fn fails)", err, errBoom)
	got, events, err := s.GetEmailDetail(ctx, e.ID)
	noErr(t, "GetEmailDetail", err)
	checkEmail(t, "email after an aborted update", got, e)
	if got.Version != before.Version {
		t.Fatalf("Version changed by an aborted update: %d then %d", before.Version, got.Version)
	}
	if ids := eventIDs(events); !equalStrings(ids, []string{"created"}) {
		t.Fatalf("events after an aborted update = %v, want [created]", ids)
	}

	// A successful update returns what it wrote.
	sentAt := e.CreatedAt.Add(time.Second)
	updated, err := s.UpdateEmail(ctx, e.ID, func(e *store.Email) ([]store.Event, error) {
		e.Status, e.LatestStatus, e.UpdatedAt = store.StatusSent, "SENT", sentAt
		return []store.Event{{ID: "sent", Status: "SENT", CreatedAt: sentAt}}, nil
	})
	noErr(t, "UpdateEmail", err)
	want := e
	want.Status, want.LatestStatus, want.UpdatedAt = store.StatusSent, "SENT", sentAt
	checkEmail(t, "UpdateEmail result", updated, want)
	checkEmail(t, "GetEmail after UpdateEmail", getEmail(t, s, e.ID), want)
}

func testUpdateEmailDuplicateEvent(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	e := newEmail(team, 1, now(), store.StatusSent)
	createEmails(t, s, e)
	delivered := store.Event{ID: "delivery-1", Status: "DELIVERED", CreatedAt: e.CreatedAt.Add(time.Second)}
	_, err := s.UpdateEmail(ctx, e.ID, func(e *store.Email) ([]store.Event, error) {
		e.LatestStatus = "DELIVERED"
		return []store.Event{delivered}, nil
	})
	noErr(t, "UpdateEmail", err)
	before := getEmail(t, s, e.ID)

	cases := []struct {
		name   string
		events []store.Event
	}{
		{"first event again", []store.Event{{ID: "created", Status: "BOUNCED", CreatedAt: e.CreatedAt}}},
		{"later event again", []store.Event{{ID: "delivery-1", Status: "BOUNCED", CreatedAt: e.CreatedAt}}},
		{"new and repeated", []store.Event{
			{ID: "bounce-1", Status: "BOUNCED", CreatedAt: e.CreatedAt.Add(2 * time.Second)},
			{ID: "delivery-1", Status: "BOUNCED", CreatedAt: e.CreatedAt},
		}},
	}
	for _, tc := range cases {
		_, err := s.UpdateEmail(ctx, e.ID, func(e *store.Email) ([]store.Event, error) {
			e.LatestStatus = "BOUNCED"
			e.Status = store.StatusFailed
			return tc.events, nil
		})
		wantErr(t, "UpdateEmail("+tc.name+")", err, store.ErrDuplicateEvent)
		got, events, err := s.GetEmailDetail(ctx, e.ID)
		noErr(t, "GetEmailDetail", err)
		checkEmail(t, "email after "+tc.name, got, before)
		if ids := eventIDs(events); !equalStrings(ids, []string{"created", "delivery-1"}) {
			t.Fatalf("events after %s = %v, want [created delivery-1]", tc.name, ids)
		}
		if events[1].Status != "DELIVERED" {
			t.Fatalf("event delivery-1 overwritten: status %s", events[1].Status)
		}
	}
}

// testFindEmailByMessageID: an unknown message id is not found. Finding an email by its message
// id is needed only for emails sent before their id went out as a tag, which each adapter
// tests with its own former layout.
func testFindEmailByMessageID(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	e := newEmail(team, 1, now(), store.StatusSending)
	createEmails(t, s, e)
	_, err := s.FindEmailByMessageID(ctx, randID("ses-"))
	wantErr(t, "FindEmailByMessageID(unknown)", err, store.ErrNotFound)
}

// testOverdueScheduled: SCHEDULED emails due before a time, earliest first; an email leaves
// the list when it leaves SCHEDULED and moves in it when rescheduled. Its times are in 1991 so
// that, in a shared store, they are the earliest.
func testOverdueScheduled(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	at := func(d int) *time.Time { x := time.Date(1991, 1, d, 9, 0, 0, 0, time.UTC); return &x }
	mk := func(created int, due *time.Time, status string) store.Email {
		e := newEmail(team, 1, *at(created), status)
		e.ScheduledAt = due
		return e
	}
	late := mk(1, at(10), store.StatusScheduled)   // due on the 10th, created first
	early := mk(2, at(5), store.StatusScheduled)   // due on the 5th
	future := mk(3, at(20), store.StatusScheduled) // not yet due on the 15th
	queued := mk(1, at(4), store.StatusQueued)     // was scheduled, already queued
	cancelled := mk(1, at(4), store.StatusCancelled)
	createEmails(t, s, late, early, future, queued, cancelled)
	mine := map[string]bool{late.ID: true, early.ID: true, future.ID: true, queued.ID: true, cancelled.ID: true}
	overdue := func(before time.Time) []string {
		t.Helper()
		ids, err := s.OverdueScheduled(ctx, before, 10000)
		noErr(t, "OverdueScheduled", err)
		var out []string
		for _, id := range ids {
			if mine[id] {
				out = append(out, id)
			}
		}
		return out
	}
	if got, want := overdue(*at(15)), []string{early.ID, late.ID}; !equalStrings(got, want) {
		t.Fatalf("OverdueScheduled(15th) = %v, want %v (SCHEDULED, due first)", got, want)
	}
	if got := overdue(*at(5)); len(got) != 0 {
		t.Fatalf("OverdueScheduled(5th 09:00) = %v, want none (due at that instant is not before it)", got)
	}
	ids, err := s.OverdueScheduled(ctx, *at(15), 1)
	noErr(t, "OverdueScheduled(limit 1)", err)
	if len(ids) != 1 || ids[0] != early.ID {
		t.Fatalf("OverdueScheduled(limit 1) = %v, want [%s]", ids, early.ID)
	}
	// Rescheduled later, queued: out of the list; rescheduled earlier: in it.
	_, err = s.UpdateEmail(ctx, early.ID, func(e *store.Email) ([]store.Event, error) {
		e.ScheduledAt = at(25)
		return nil, nil
	})
	noErr(t, "UpdateEmail(reschedule)", err)
	_, err = s.UpdateEmail(ctx, late.ID, func(e *store.Email) ([]store.Event, error) {
		e.Status = store.StatusQueued
		return nil, nil
	})
	noErr(t, "UpdateEmail(queue)", err)
	_, err = s.UpdateEmail(ctx, future.ID, func(e *store.Email) ([]store.Event, error) {
		e.ScheduledAt = at(6)
		return nil, nil
	})
	noErr(t, "UpdateEmail(reschedule earlier)", err)
	if got, want := overdue(*at(15)), []string{future.ID}; !equalStrings(got, want) {
		t.Fatalf("after the changes OverdueScheduled(15th) = %v, want %v", got, want)
	}
}

// testPendingEmails dates its emails in 1990 so that, in a shared store, they are still the
// oldest pending ones.
func testPendingEmails(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	day := func(d int) time.Time { return time.Date(1990, 1, d, 0, 0, 0, 0, time.UTC) }
	queued1 := newEmail(team, 1, day(1), store.StatusQueued)
	sending := newEmail(team, 1, day(2), store.StatusSending)
	queued3 := newEmail(team, 1, day(3), store.StatusQueued)
	scheduled := newEmail(team, 1, day(4), store.StatusScheduled)
	var others []store.Email
	for _, st := range []string{store.StatusSent, store.StatusFailed, store.StatusCancelled, store.StatusSuppressed} {
		others = append(others, newEmail(team, 1, day(1).Add(time.Hour), st))
	}
	// Created in an order unrelated to their age.
	createEmails(t, s, append([]store.Email{queued3, scheduled, sending, queued1}, others...)...)

	mine := map[string]bool{queued1.ID: true, sending.ID: true, queued3.ID: true, scheduled.ID: true}
	for _, o := range others {
		mine[o.ID] = true
	}
	pendingMine := func() []string {
		t.Helper()
		ids, err := s.PendingEmails(ctx, 10000)
		noErr(t, "PendingEmails", err)
		var out []string
		for _, id := range ids {
			if mine[id] {
				out = append(out, id)
			}
		}
		return out
	}
	if got, want := pendingMine(), []string{queued1.ID, sending.ID, queued3.ID}; !equalStrings(got, want) {
		t.Fatalf("PendingEmails = %v, want %v (QUEUED and SENDING, oldest first)", got, want)
	}
	ids, err := s.PendingEmails(ctx, 2)
	noErr(t, "PendingEmails(2)", err)
	if want := []string{queued1.ID, sending.ID}; !equalStrings(ids, want) {
		t.Fatalf("PendingEmails(2) = %v, want %v", ids, want)
	}

	// Leaving and entering the pending states through UpdateEmail.
	_, err = s.UpdateEmail(ctx, queued1.ID, func(e *store.Email) ([]store.Event, error) {
		e.Status, e.UpdatedAt = store.StatusSent, day(5)
		return nil, nil
	})
	noErr(t, "UpdateEmail(QUEUED→SENT)", err)
	_, err = s.UpdateEmail(ctx, scheduled.ID, func(e *store.Email) ([]store.Event, error) {
		e.Status, e.UpdatedAt = store.StatusQueued, day(5)
		return nil, nil
	})
	noErr(t, "UpdateEmail(SCHEDULED→QUEUED)", err)
	if got, want := pendingMine(), []string{sending.ID, queued3.ID, scheduled.ID}; !equalStrings(got, want) {
		t.Fatalf("PendingEmails after updates = %v, want %v", got, want)
	}
}

func testLargeContent(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	raw := make([]byte, 3_900_000) // 5.2 MB once in base64
	_, _ = rand.Read(raw)
	var html strings.Builder
	for i := 0; html.Len() < 1<<20; i++ {
		fmt.Fprintf(&html, "<p>paragraph %d: %x</p>\n", i, raw[i%len(raw):i%len(raw)+16])
	}
	e := newEmail(team, 1, now(), store.StatusQueued)
	e.Content = store.Content{
		HTML:    ptr(html.String()),
		Text:    ptr(strings.Repeat("plain text ", 20_000)),
		Headers: []store.Header{{Name: "X-Campaign", Value: "large"}},
		Attachments: []store.Attachment{
			{Filename: "big.bin", Content: base64.StdEncoding.EncodeToString(raw)},
			{Filename: "small.txt", Content: base64.StdEncoding.EncodeToString([]byte("small"))},
		},
	}
	createEmails(t, s, e)
	checkEmail(t, "GetEmail(large)", getEmail(t, s, e.ID), e)
	got, events, err := s.GetEmailDetail(ctx, e.ID)
	noErr(t, "GetEmailDetail(large)", err)
	checkEmail(t, "GetEmailDetail(large)", got, e)
	if len(events) != 1 {
		t.Fatalf("large email has %d events, want 1", len(events))
	}

	// Updating the metadata keeps the content whole.
	_, err = s.UpdateEmail(ctx, e.ID, func(e *store.Email) ([]store.Event, error) {
		e.Status = store.StatusSent
		return []store.Event{{ID: "sent", Status: "SENT", CreatedAt: e.CreatedAt}}, nil
	})
	noErr(t, "UpdateEmail(large)", err)
	got = getEmail(t, s, e.ID)
	if got.Status != store.StatusSent {
		t.Fatalf("status after update = %s", got.Status)
	}
	checkContent(t, "content after UpdateEmail", got.Content, e.Content)
}

// testListEmails spreads emails over ten days (one every 8 hours) and three domains, so that
// day-sharded indexes are walked across shards and pages straddle days.
func testListEmails(t *testing.T, s store.Store) {
	const n = 30
	team, other := newTeam(t, s), newTeam(t, s)
	d := []int64{newDomainID(t, s), newDomainID(t, s), newDomainID(t, s)}
	base := now().Add(-time.Hour)
	emails := make([]store.Email, n) // emails[i] is the i-th newest
	for i := range emails {
		emails[i] = newEmail(team, d[i%3], base.Add(-time.Duration(i)*8*time.Hour), store.StatusSent)
	}
	// Written in several batches, in an order unrelated to their age.
	for _, batch := range [][]int{{7, 3, 29, 0}, {12, 11, 10, 1, 2, 28}, {4, 5, 6, 8, 9, 13, 14, 15}, {27, 26, 25, 16, 17, 18, 19, 20, 21, 22, 23, 24}} {
		var es []store.Email
		for _, i := range batch {
			es = append(es, emails[i])
		}
		createEmails(t, s, es...)
	}
	var decoys []store.Email
	for i := range 5 {
		decoys = append(decoys, newEmail(other, d[0], base.Add(-time.Duration(i)*30*time.Hour), store.StatusSent))
	}
	createEmails(t, s, decoys...)

	ids := func(pick func(i int) bool) []string {
		var out []string
		for i, e := range emails {
			if pick(i) {
				out = append(out, e.ID)
			}
		}
		return out
	}
	all := func(int) bool { return true }
	between := func(lo, hi int) func(int) bool { return func(i int) bool { return i >= lo && i <= hi } }
	inDomains := func(mods ...int) func(int) bool {
		return func(i int) bool { return slices.Contains(mods, i%3) }
	}
	and := func(a, b func(int) bool) func(int) bool { return func(i int) bool { return a(i) && b(i) } }

	start, end := emails[20].CreatedAt, emails[5].CreatedAt
	cases := []struct {
		name string
		f    store.EmailFilter
		want []string // the whole matching list, newest first
	}{
		{"all", store.EmailFilter{}, ids(all)},
		{"start and end inclusive", store.EmailFilter{Start: &start, End: &end}, ids(between(5, 20))},
		{"start only", store.EmailFilter{Start: &start}, ids(between(0, 20))},
		{"end only", store.EmailFilter{End: &end}, ids(between(5, n-1))},
		{"one domain", store.EmailFilter{DomainIDs: []int64{d[0]}}, ids(inDomains(0))},
		{"two domains", store.EmailFilter{DomainIDs: []int64{d[2], d[0]}}, ids(inDomains(0, 2))},
		{"domain and bounds", store.EmailFilter{DomainIDs: []int64{d[1]}, Start: &start, End: &end}, ids(and(inDomains(1), between(5, 20)))},
		{"two domains and bounds", store.EmailFilter{DomainIDs: []int64{d[1], d[2]}, Start: &start, End: &end}, ids(and(inDomains(1, 2), between(5, 20)))},
		{"unknown domain", store.EmailFilter{DomainIDs: []int64{1 << 60}}, nil},
	}
	for _, tc := range cases {
		f := tc.f
		f.TeamID = team
		f.Limit = 100
		list, count := listAll(t, s, f)
		if got := emailIDs(list); count != len(tc.want) || !equalStrings(got, tc.want) {
			t.Fatalf("%s: got %d emails (count %d), want %d (count %d), newest first\n got: %v\nwant: %v",
				tc.name, len(got), count, len(tc.want), len(tc.want), got, tc.want)
		}
		// Pages of 7 (56 hours: every page straddles days) put together give the whole list.
		var paged []string
		for off := 0; off < len(tc.want)+7; off += 7 {
			f.Offset, f.Limit = off, 7
			page, count := listAll(t, s, f)
			if count != len(tc.want) {
				t.Fatalf("%s: page at offset %d has count %d, want %d", tc.name, off, count, len(tc.want))
			}
			if len(page) > 7 {
				t.Fatalf("%s: page at offset %d has %d emails, limit 7", tc.name, off, len(page))
			}
			paged = append(paged, emailIDs(page)...)
		}
		if !equalStrings(paged, tc.want) {
			t.Fatalf("%s: pages of 7 give\n %v\nwant %v", tc.name, paged, tc.want)
		}
	}

	list, count := listAll(t, s, store.EmailFilter{TeamID: team, Limit: 1})
	if count != n || len(list) != 1 {
		t.Fatalf("limit 1: %d emails, count %d", len(list), count)
	}
	checkEmail(t, "listed email", list[0], emails[0])

	list, count = listAll(t, s, store.EmailFilter{TeamID: other, Limit: 100})
	if count != len(decoys) || !equalStrings(emailIDs(list), emailIDs(decoys)) {
		t.Fatalf("other team lists %v (count %d), want its own %v", emailIDs(list), count, emailIDs(decoys))
	}
	list, count = listAll(t, s, store.EmailFilter{TeamID: newTeam(t, s), Limit: 100})
	if count != 0 || len(list) != 0 {
		t.Fatalf("a new team lists %d emails (count %d)", len(list), count)
	}
}

// testHeldEmails: a held campaign email leaves the pending index for its campaign's held list
// and comes back when released.
func testHeldEmails(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	noErr(t, "CreateCampaign", s.CreateCampaign(ctx, store.Campaign{ID: "cp-held", TeamID: team, Name: "h",
		Status: store.CampaignRunning, CreatedAt: now(), UpdatedAt: now()}))
	var list []store.Email
	for i := range 3 {
		e := newEmail(team, 1, now().Add(time.Duration(i)*time.Second), store.StatusQueued)
		e.CampaignID = "cp-held"
		list = append(list, e)
	}
	createEmails(t, s, list...)
	hold := func(id string, held bool) {
		t.Helper()
		_, err := s.UpdateEmail(ctx, id, func(e *store.Email) ([]store.Event, error) {
			e.Held = held
			return nil, nil
		})
		noErr(t, "UpdateEmail", err)
	}
	pending := func(id string) bool {
		t.Helper()
		ids, err := s.PendingEmails(ctx, 0)
		noErr(t, "PendingEmails", err)
		return slices.Contains(ids, id)
	}
	hold(list[2].ID, true)
	hold(list[0].ID, true)
	held, err := s.HeldEmails(ctx, team, "cp-held", 0)
	noErr(t, "HeldEmails", err)
	if want := []string{list[0].ID, list[2].ID}; !equalStrings(held, want) {
		t.Fatalf("HeldEmails = %v, want %v (oldest first)", held, want)
	}
	if pending(list[0].ID) || pending(list[2].ID) || !pending(list[1].ID) {
		t.Errorf("held emails are still pending, or the other one is not")
	}
	if other, err := s.HeldEmails(ctx, team, "cp-other", 0); err != nil || len(other) != 0 {
		t.Errorf("another campaign's held emails = %v, %v", other, err)
	}
	hold(list[0].ID, false)
	if !pending(list[0].ID) {
		t.Error("a released email is not pending")
	}
	if held, _ := s.HeldEmails(ctx, team, "cp-held", 0); !equalStrings(held, []string{list[2].ID}) {
		t.Errorf("after the release HeldEmails = %v", held)
	}
}

// testScheduledCount: a team's count of SCHEDULED emails follows its emails as they are written
// scheduled (once, however often the write is retried), rescheduled (no change), queued or
// cancelled (one less each, once), and is the team's alone.
func testScheduledCount(t *testing.T, s store.Store) {
	ctx := t.Context()
	team, other := newTeam(t, s), newTeam(t, s)
	count := func(team int64) int64 {
		t.Helper()
		settle(t, s)
		n, err := s.ScheduledCount(ctx, team)
		noErr(t, "ScheduledCount", err)
		return n
	}
	if n := count(team); n != 0 {
		t.Fatalf("a new team's scheduled count is %d", n)
	}
	base := now()
	var scheduled []store.Email
	for i := range 3 {
		e := newEmail(team, 1, base.Add(time.Duration(i)*time.Millisecond), store.StatusScheduled)
		e.ScheduledAt = ptr(base.Add(time.Hour))
		scheduled = append(scheduled, e)
	}
	queued := newEmail(team, 1, base, store.StatusQueued)
	all := append(slices.Clone(scheduled), queued)
	noErr(t, "CreateEmails", s.CreateEmails(ctx, all, nil))
	noErr(t, "CreateEmails again", s.CreateEmails(ctx, all, nil))
	if n := count(team); n != 3 {
		t.Fatalf("after 3 scheduled and 1 queued email (written twice): count %d, want 3", n)
	}
	if !getEmail(t, s, scheduled[0].ID).ScheduleCounted || getEmail(t, s, queued.ID).ScheduleCounted {
		t.Fatal("ScheduleCounted is not set on exactly the scheduled emails")
	}
	update := func(id string, fn func(*store.Email)) {
		t.Helper()
		_, err := s.UpdateEmail(ctx, id, func(e *store.Email) ([]store.Event, error) { fn(e); return nil, nil })
		noErr(t, "UpdateEmail", err)
	}
	update(scheduled[0].ID, func(e *store.Email) { e.ScheduledAt = ptr(base.Add(2 * time.Hour)) })
	if n := count(team); n != 3 {
		t.Fatalf("after a reschedule: count %d, want 3", n)
	}
	update(scheduled[0].ID, func(e *store.Email) { e.Status = store.StatusQueued })
	update(scheduled[1].ID, func(e *store.Email) { e.Status = store.StatusCancelled })
	if n := count(team); n != 1 {
		t.Fatalf("after one queued and one cancelled: count %d, want 1", n)
	}
	update(scheduled[0].ID, func(e *store.Email) { e.Status = store.StatusSent })
	update(queued.ID, func(e *store.Email) { e.Status = store.StatusSent })
	if n := count(team); n != 1 {
		t.Fatalf("after later changes of emails no longer scheduled: count %d, want 1", n)
	}
	if getEmail(t, s, scheduled[0].ID).ScheduleCounted || !getEmail(t, s, scheduled[2].ID).ScheduleCounted {
		t.Fatal("ScheduleCounted does not follow the status")
	}
	if n := count(other); n != 0 {
		t.Fatalf("another team's count is %d", n)
	}
}

// testScheduledCountConcurrent: many goroutines scheduling and queueing at once count exactly.
func testScheduledCountConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	base := now()
	emails := make([]store.Email, workers)
	for i := range emails {
		emails[i] = newEmail(team, 1, base.Add(time.Duration(i)*time.Millisecond), store.StatusScheduled)
		emails[i].ScheduledAt = ptr(base.Add(time.Hour))
	}
	for _, err := range concurrently(workers, func(i int) error { return s.CreateEmails(ctx, emails[i:i+1], nil) }) {
		noErr(t, "CreateEmails", err)
	}
	// Half are queued, each by two racing updates: one of them changes it.
	for _, err := range concurrently(workers, func(i int) error {
		_, err := s.UpdateEmail(ctx, emails[i/2].ID, func(e *store.Email) ([]store.Event, error) {
			e.Status = store.StatusQueued
			return nil, nil
		})
		return err
	}) {
		noErr(t, "UpdateEmail", err)
	}
	settle(t, s)
	n, err := s.ScheduledCount(ctx, team)
	noErr(t, "ScheduledCount", err)
	if want := int64(workers - (workers+1)/2); n != want {
		t.Fatalf("after %d scheduled and %d queued concurrently: count %d, want %d", workers, (workers+1)/2, n, want)
	}
}

// testDailyStats: each analytics kind an email newly counts adds 1 to its team's and its
// domain's counts of the write's day, once however often it is listed again; campaign emails
// count too; other kinds do not; another team's counts are its own.
func testDailyStats(t *testing.T, s store.Store) {
	ctx := t.Context()
	team, other := newTeam(t, s), newTeam(t, s)
	d1 := time.Date(2031, 3, 9, 23, 59, 0, 0, time.UTC)
	d2 := d1.Add(2 * time.Minute) // the next day
	a := newEmail(team, 1, d1, store.StatusQueued)
	b := newEmail(team, 2, d1, store.StatusQueued)
	c := newEmail(team, 1, d1, store.StatusQueued)
	c.CampaignID, c.Counted = "cp-stats", []string{store.CountTotal}
	x := newEmail(other, 1, d1, store.StatusQueued)
	createEmails(t, s, a, b, c, x)
	count := func(e store.Email, at time.Time, kinds ...string) {
		t.Helper()
		_, err := s.UpdateEmail(ctx, e.ID, func(m *store.Email) ([]store.Event, error) {
			m.UpdatedAt = at
			for _, k := range kinds {
				if !slices.Contains(m.Counted, k) {
					m.Counted = append(m.Counted, k)
				}
			}
			return nil, nil
		})
		noErr(t, "UpdateEmail", err)
	}
	count(a, d1, store.CountSent)
	count(a, d1, store.CountSent) // listed again: not counted again
	count(b, d1, store.CountSent)
	count(c, d1, store.CountSent)
	count(a, d2, store.CountDelivered, store.CountUnsubscribed)
	count(b, d2, store.CountBounced, store.CountHardBounced)
	count(c, d2, store.CountOpened)
	count(x, d1, store.CountSent)
	stats := func(team, domain int64, from, to string) map[string]map[string]int64 {
		t.Helper()
		settle(t, s)
		days, err := s.DailyStats(ctx, team, domain, from, to)
		noErr(t, "DailyStats", err)
		out := map[string]map[string]int64{}
		for i, d := range days {
			if i > 0 && days[i-1].Day >= d.Day {
				t.Fatalf("DailyStats days out of order: %v", days)
			}
			out[d.Day] = d.Counts
		}
		return out
	}
	want := map[string]map[string]int64{
		"2031-03-09": {store.CountSent: 3},
		"2031-03-10": {store.CountDelivered: 1, store.CountBounced: 1, store.CountHardBounced: 1, store.CountOpened: 1},
	}
	if got := stats(team, 0, "2031-03-01", "2031-03-31"); !reflect.DeepEqual(got, want) {
		t.Fatalf("team stats %v, want %v", got, want)
	}
	wantDom1 := map[string]map[string]int64{
		"2031-03-09": {store.CountSent: 2},
		"2031-03-10": {store.CountDelivered: 1, store.CountOpened: 1},
	}
	if got := stats(team, 1, "2031-03-01", "2031-03-31"); !reflect.DeepEqual(got, wantDom1) {
		t.Fatalf("domain 1 stats %v, want %v", got, wantDom1)
	}
	if got := stats(team, 0, "2031-03-10", "2031-03-10"); !reflect.DeepEqual(got, map[string]map[string]int64{"2031-03-10": want["2031-03-10"]}) {
		t.Fatalf("one day's stats %v", got)
	}
	if got := stats(team, 0, "2031-03-11", "2031-04-30"); len(got) != 0 {
		t.Fatalf("stats of days without counts: %v", got)
	}
	if got := stats(other, 0, "2031-03-01", "2031-03-31"); !reflect.DeepEqual(got, map[string]map[string]int64{"2031-03-09": {store.CountSent: 1}}) {
		t.Fatalf("other team's stats %v", got)
	}
}
