package bolt_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/bolt"
	"github.com/mailroom/mailroom/pkg/store/storetest"
)

func openTemp(tb testing.TB) *bolt.Store {
	tb.Helper()
	s, err := bolt.Open(filepath.Join(tb.TempDir(), "mailroom.db"))
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) }, storetest.Options{
		WithAttempts: func(s store.Store, n int) store.Store { return bolt.WithAttempts(s.(*bolt.Store), n) },
	})
}

// TestReopen checks that what was written is still there, indexes included, after the file is
// closed and opened again: the embedded store is the local default and must survive restarts.
func TestReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "mailroom.db")
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	created := time.Now().UTC().Truncate(time.Millisecond)
	team := store.Team{ID: 1, Name: "acme", CreatedAt: created}
	html := "<p>hi</p>"
	e := store.Email{ID: "em-1", TeamID: 1, DomainID: 3, Subject: "hello", Status: store.StatusQueued,
		Content: store.Content{HTML: &html}, CreatedAt: created, UpdatedAt: created}
	steps := []error{
		s.CreateTeam(ctx, team),
		s.CreateDomain(ctx, store.Domain{ID: 3, TeamID: 1, Name: "example.com", CreatedAt: created}),
		s.CreateEmails(ctx, []store.Email{e}, []store.Event{{ID: "created", EmailID: "em-1", Status: "QUEUED", CreatedAt: created}}),
		s.PutSuppression(ctx, store.Suppression{TeamID: 1, Email: "x@example.com", Reason: store.ReasonManual, CreatedAt: created}),
	}
	for i, err := range steps {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if _, err := s.NextID(ctx, "team"); err != nil {
		t.Fatalf("NextID: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s, err = bolt.Open(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if got, err := s.GetTeam(ctx, 1); err != nil || got.Name != "acme" {
		t.Fatalf("GetTeam after reopen = %+v, %v", got, err)
	}
	if err := s.CreateDomain(ctx, store.Domain{ID: 4, TeamID: 1, Name: "example.com"}); err == nil {
		t.Fatal("domain name uniqueness lost across reopen")
	}
	got, events, err := s.GetEmailDetail(ctx, "em-1")
	if err != nil || got.Subject != "hello" || got.Content.HTML == nil || *got.Content.HTML != html || len(events) != 1 {
		t.Fatalf("GetEmailDetail after reopen = %+v, %d events, %v", got, len(events), err)
	}
	list, count, err := s.ListEmails(ctx, store.EmailFilter{TeamID: 1, DomainIDs: []int64{3}, Limit: 10})
	if err != nil || count != 1 || len(list) != 1 || list[0].ID != "em-1" {
		t.Fatalf("ListEmails after reopen = %d emails, count %d, %v", len(list), count, err)
	}
	if ids, err := s.PendingEmails(ctx, 10); err != nil || len(ids) != 1 || ids[0] != "em-1" {
		t.Fatalf("PendingEmails after reopen = %v, %v", ids, err)
	}
	if _, total, err := s.ListSuppressions(ctx, 1, "", 0, 10); err != nil || total != 1 {
		t.Fatalf("ListSuppressions after reopen: total %d, %v", total, err)
	}
	if id, err := s.NextID(ctx, "team"); err != nil || id != 2 {
		t.Fatalf("NextID after reopen = %d, %v; want 2", id, err)
	}
}

func benchEmail(i int, created time.Time) store.Email {
	text := "hello"
	return store.Email{
		ID: fmt.Sprintf("em-%08d", i), TeamID: 1, DomainID: int64(i%3 + 1), From: "a@example.com",
		To: []string{"b@example.net"}, Subject: "bench", Content: store.Content{Text: &text},
		Status: store.StatusQueued, CreatedAt: created, UpdatedAt: created,
	}
}

func BenchmarkCreateEmail(b *testing.B) {
	s := openTemp(b)
	ctx := b.Context()
	base := time.Now().UTC()
	i := 0
	for b.Loop() {
		e := benchEmail(i, base.Add(time.Duration(i)*time.Second))
		if err := s.CreateEmails(ctx, []store.Email{e}, []store.Event{{ID: "created", EmailID: e.ID, Status: "QUEUED", CreatedAt: e.CreatedAt}}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkCreateEmailParallel is the send path's store call from 16 writers at once (as the
// bench-local clients): each waits for the log's sync, which the writers of that moment share.
func BenchmarkCreateEmailParallel(b *testing.B) {
	s := openTemp(b)
	ctx := b.Context()
	base := time.Now().UTC()
	var next atomic.Int64
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(next.Add(1))
			e := benchEmail(i, base.Add(time.Duration(i)*time.Millisecond))
			if err := s.CreateEmails(ctx, []store.Email{e}, []store.Event{{ID: "created", EmailID: e.ID, Status: "QUEUED", CreatedAt: e.CreatedAt}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "emails/s")
}

// BenchmarkListEmails lists one page of 50 out of 10,000 emails over 10 days, by domain and
// within bounds: the cost is the index walk plus decoding the page.
func BenchmarkListEmails(b *testing.B) {
	s := openTemp(b)
	ctx := b.Context()
	const n = 10_000
	base := time.Now().UTC().Add(-10 * 24 * time.Hour)
	batch := make([]store.Email, 0, 500)
	for i := range n {
		batch = append(batch, benchEmail(i, base.Add(time.Duration(i)*86*time.Second)))
		if len(batch) == cap(batch) {
			if err := s.CreateEmails(ctx, batch, nil); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	start := base.Add(24 * time.Hour)
	for b.Loop() {
		list, count, err := s.ListEmails(ctx, store.EmailFilter{TeamID: 1, DomainIDs: []int64{1, 2}, Start: &start, Offset: 100, Limit: 50})
		if err != nil || len(list) != 50 || count == 0 {
			b.Fatalf("ListEmails: %d emails, count %d, %v", len(list), count, err)
		}
	}
}

// BenchmarkContactsAfter walks a book of 100,000 contacts in pages of 1,000, as a campaign
// does; one op is one page, the walk starting over at the end of the book, so the figure is the
// cost of a page wherever it starts.
func BenchmarkContactsAfter(b *testing.B) {
	s := openTemp(b)
	ctx := b.Context()
	const (
		n       = 100_000
		pageLen = 1000
		writers = 200
	)
	created := time.Now().UTC()
	if err := s.CreateTeam(ctx, store.Team{ID: 1, Name: "bench", CreatedAt: created}); err != nil {
		b.Fatal(err)
	}
	book := store.ContactBook{ID: "book-1", TeamID: 1, Name: "bench", CreatedAt: created}
	if err := s.CreateContactBook(ctx, book); err != nil {
		b.Fatal(err)
	}
	// Loaded from many goroutines so that bbolt's Batch commits hundreds of puts at a time.
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := w; i < n; i += writers {
				_, err := s.PutContact(ctx, 1, book.ID, fmt.Sprintf("user%06d@example.com", i), fmt.Sprintf("ct-%06d", i),
					func(c *store.Contact, existed bool) error {
						c.FirstName, c.LastName, c.Subscribed = "First", "Last", true
						c.Properties = map[string]string{"company": "Acme"}
						c.CreatedAt, c.UpdatedAt = created, created
						return nil
					})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	if got, err := s.GetContactBook(ctx, 1, book.ID); err != nil || got.ContactCount != n {
		b.Fatalf("book after load: count %d, %v", got.ContactCount, err)
	}

	cursor := ""
	for b.Loop() {
		page, err := s.ContactsAfter(ctx, 1, book.ID, cursor, pageLen)
		if err != nil {
			b.Fatal(err)
		}
		if len(page) == 0 {
			cursor = ""
			continue
		}
		if len(page) != pageLen {
			b.Fatalf("page of %d contacts, want %d", len(page), pageLen)
		}
		cursor = page[len(page)-1].Email
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*pageLen), "ns/contact")
}

func TestOpenLockedFileFailsClearly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := bolt.Open(path); err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("second Open = %v", err)
	}
}

// TestScheduledIndexBackfill: a database written before the scheduled index existed gets its
// SCHEDULED emails indexed when it is opened, so the reconciler's backstop covers them.
func TestScheduledIndexBackfill(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "mailroom.db")
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	due := created.Add(time.Hour)
	e := store.Email{ID: "em-sched", TeamID: 1, DomainID: 1, Status: store.StatusScheduled, ScheduledAt: &due,
		CreatedAt: created, UpdatedAt: created}
	if err := s.CreateEmails(ctx, []store.Email{e}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The database as an older version left it: no scheduled index.
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error { return tx.DeleteBucket([]byte("emails_scheduled")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids, err := s.OverdueScheduled(ctx, due.Add(time.Minute), 10)
	if err != nil || len(ids) != 1 || ids[0] != e.ID {
		t.Fatalf("OverdueScheduled after reopen = %v, %v; want [%s]", ids, err, e.ID)
	}
}

// TestFindEmailByMessageID: the embedded store indexes the message id of every sent email.
func TestFindEmailByMessageID(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	now := time.Now().UTC()
	for _, id := range []string{"em-1", "em-2"} {
		e := store.Email{ID: id, TeamID: 1, DomainID: 1, Status: store.StatusSending, CreatedAt: now, UpdatedAt: now}
		if err := s.CreateEmails(ctx, []store.Email{e}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateEmail(ctx, id, func(e *store.Email) ([]store.Event, error) {
			e.Status, e.MessageID = store.StatusSent, "ses-"+id
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.FindEmailByMessageID(ctx, "ses-em-2")
	if err != nil || got.ID != "em-2" || got.Status != store.StatusSent {
		t.Fatalf("FindEmailByMessageID = %s %s, %v; want em-2 SENT", got.ID, got.Status, err)
	}
}

// TestFeed: every history entry the store writes is in the feed, in order, once (a repeated
// create writes none), until its consumer is done with it.
func TestFeed(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	now := time.Now().UTC()
	e := store.Email{ID: "em-feed", TeamID: 1, DomainID: 1, From: "a@example.com", To: []string{"b@example.org"},
		Status: store.StatusQueued, CreatedAt: now, UpdatedAt: now}
	first := []store.Event{{ID: "0-QUEUED", EmailID: e.ID, Status: store.StatusQueued, CreatedAt: now}}
	for range 2 {
		if err := s.CreateEmails(ctx, []store.Email{e}, first); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.UpdateEmail(ctx, e.ID, func(m *store.Email) ([]store.Event, error) {
		m.Status = store.StatusSent
		return []store.Event{{ID: "1-SENT", Status: store.StatusSent, CreatedAt: now}, {ID: "d", Status: "DELIVERED", CreatedAt: now}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	feed, err := s.FeedAfter(ctx, 0, 10)
	if err != nil || len(feed) != 3 || feed[0].EventID != "0-QUEUED" || feed[1].EventID != "1-SENT" || feed[2].EventID != "d" ||
		feed[2].EmailID != e.ID || feed[2].TeamID != 1 || feed[1].Seq >= feed[2].Seq {
		t.Fatalf("feed %+v, %v", feed, err)
	}
	if rest, _ := s.FeedAfter(ctx, feed[0].Seq, 10); len(rest) != 2 {
		t.Fatalf("after the first: %+v", rest)
	}
	if err := s.FeedDone(ctx, feed[1].Seq); err != nil {
		t.Fatal(err)
	}
	if rest, _ := s.FeedAfter(ctx, 0, 10); len(rest) != 1 || rest[0].EventID != "d" {
		t.Fatalf("after FeedDone: %+v", rest)
	}
}

// TestFeedChanges: writes to contacts, domains and campaigns are in the feed with the record
// before and after (a campaign's only when its status moves), in the order written.
func TestFeedChanges(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	now := time.Now().UTC()
	if err := s.CreateContactBook(ctx, store.ContactBook{ID: "cb", TeamID: 1, Name: "b", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	put := func(first string) store.Contact {
		c, err := s.PutContact(ctx, 1, "cb", "ada@example.com", "ct", func(c *store.Contact, _ bool) error {
			c.FirstName, c.Subscribed = first, true
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	put("Ada")
	put("Augusta")
	if _, err := s.UpdateContact(ctx, 1, "cb", "ct", func(c *store.Contact) error { c.Subscribed = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteContacts(ctx, 1, "cb", []string{"ct", "ct"}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if err := s.CreateDomain(ctx, store.Domain{ID: 5, TeamID: 1, Name: "example.com", Status: "PENDING"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateDomain(ctx, 1, 5, func(d *store.Domain) error { d.Status = store.DomainSuccess; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDomain(ctx, 1, 5); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateCampaign(ctx, store.Campaign{ID: "cp", TeamID: 1, Status: store.CampaignDraft, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	for _, status := range []string{store.CampaignRunning, store.CampaignRunning, store.CampaignSent} {
		if _, err := s.UpdateCampaign(ctx, 1, "cp", func(c *store.Campaign) error { c.Status = status; c.BatchesDone++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	feed, err := s.FeedAfter(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range feed {
		c := en.Change
		if c == nil || en.TeamID != 1 || c.At.IsZero() {
			t.Fatalf("feed entry %+v", en)
		}
		line := ""
		for _, r := range []store.Record{c.Before, c.After} {
			switch {
			case r.Contact != nil:
				line += fmt.Sprintf("[%s %v]", r.Contact.FirstName, r.Contact.Subscribed)
			case r.Domain != nil:
				line += "[" + r.Domain.Status + "]"
			case r.Campaign != nil:
				line += "[" + r.Campaign.Status + "]"
			default:
				line += "[]"
			}
		}
		got = append(got, line)
	}
	want := []string{"[][Ada true]", "[Ada true][Augusta true]", "[Augusta true][Augusta false]", "[Augusta false][]",
		"[][PENDING]", "[PENDING][SUCCESS]", "[SUCCESS][]", "[DRAFT][RUNNING]", "[RUNNING][SENT]"}
	if !slices.Equal(got, want) {
		t.Fatalf("feed\n%v\nwant\n%v", got, want)
	}
}

// TestUpdateEmailContent: an update writes the content only when it changed, and a change
// made through the content's pointers counts as one.
func TestUpdateEmailContent(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	html, now := "<p>first</p>", time.Now().UTC()
	e := store.Email{ID: "em-content", TeamID: 1, DomainID: 1, From: "a@example.com", To: []string{"b@example.org"},
		Subject: "s", Content: store.Content{HTML: &html}, Status: store.StatusQueued, LatestStatus: "QUEUED",
		CreatedAt: now, UpdatedAt: now}
	if err := s.CreateEmails(ctx, []store.Email{e}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateEmail(ctx, e.ID, func(e *store.Email) ([]store.Event, error) {
		*e.Content.HTML = "<p>second</p>"
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateEmail(ctx, e.ID, func(e *store.Email) ([]store.Event, error) {
		e.Status = store.StatusSending // the content unchanged
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetEmail(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Content.HTML == nil || *got.Content.HTML != "<p>second</p>" || got.Status != store.StatusSending {
		t.Errorf("after the updates: html %v, status %s; want the second html, SENDING", got.Content.HTML, got.Status)
	}
}

// TestExpireRemovesWhatIsPastItsTime: the embedded store removes what DynamoDB's TTL removes
// on AWS: an idempotency record past its ExpiresAt, and a webhook call past the retention or
// of a deleted webhook, with its entry in the due bucket; what is live stays.
func TestExpireRemovesWhatIsPastItsTime(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t)
	now := time.Now().UTC()
	for i, at := range []time.Time{now.Add(-48 * time.Hour), now} {
		if _, _, err := s.ClaimIdempotency(ctx, store.IdemClaim{TeamID: 1, Key: fmt.Sprint("k", i), Fingerprint: "fp",
			Nonce: "n", Now: at, TTL: 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.ExpireIdempotency(ctx, 0); err != nil || n != 1 {
		t.Errorf("ExpireIdempotency = %d, %v; want the expired record", n, err)
	}
	if n, err := s.ExpireIdempotency(ctx, 0); err != nil || n != 0 {
		t.Errorf("ExpireIdempotency again = %d, %v; want nothing left to remove", n, err)
	}
	for _, id := range []string{"wh_kept", "wh_gone"} {
		if err := s.CreateWebhook(ctx, store.Webhook{ID: id, TeamID: 1, URL: "https://h.example", Status: store.WebhookActive, CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	call := func(wh string, made time.Time) store.WebhookCall {
		next := made.Add(time.Minute)
		return store.WebhookCall{ID: fmt.Sprintf("whc_%012x", made.UnixMilli()), WebhookID: wh, TeamID: 1, Type: "email.sent",
			Status: store.CallPending, NextAttemptAt: &next, CreatedAt: made, UpdatedAt: made}
	}
	calls := []store.WebhookCall{call("wh_kept", now.Add(-40*24*time.Hour)), call("wh_kept", now.Add(-39*24*time.Hour)),
		call("wh_kept", now.Add(-time.Hour)), call("wh_gone", now.Add(-2*time.Hour)), call("wh_gone", now.Add(-time.Hour))}
	if _, err := s.CreateWebhookCalls(ctx, calls); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteWebhook(ctx, 1, "wh_gone"); err != nil {
		t.Fatal(err)
	}
	s.SetRetention(30 * 24 * time.Hour)
	if n, err := s.ExpireWebhookCalls(ctx, 0); err != nil || n != 4 {
		t.Errorf("ExpireWebhookCalls = %d, %v; want the 2 old calls and the deleted webhook's 2", n, err)
	}
	due, err := s.DueWebhookCalls(ctx, now.Add(time.Hour), 0)
	if err != nil || len(due) != 1 || due[0][1] != calls[2].ID {
		t.Errorf("due after the sweep: %v (%v), want the recent call only", due, err)
	}
	s.SetRetention(0) // read the bucket itself: nothing but the recent call is left
	for i, c := range calls {
		_, err := s.GetWebhookCall(ctx, c.WebhookID, c.ID)
		if found := err == nil; found != (i == 2) {
			t.Errorf("call %d found %v after the sweep (%v)", i, found, err)
		}
	}
}

// TestOpenRefusesANewerFormat: a data folder a later Mailroom wrote (its format above Format)
// is refused at Open with a message saying so, not read as if it were this version's; one of
// this format opens again.
func TestOpenRefusesANewerFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mailroom.db")
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = bolt.Open(path); err != nil { // its own format: opens
		t.Fatalf("reopen: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("seq")).Put([]byte("\x00format"), binary.BigEndian.AppendUint64(nil, bolt.Format+1))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = bolt.Open(path)
	if !errors.Is(err, bolt.ErrNewerFormat) || !strings.Contains(err.Error(), "newer Mailroom") {
		t.Fatalf("Open of a newer format = %v, want ErrNewerFormat", err)
	}
}
