package email

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/auth"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/bolt"
)

// flakyStore fails the first CreateEmails after writing half of the batch, as a batch that
// spans several DynamoDB transactions can.
type flakyStore struct {
	*bolt.Store
	failed bool
}

func (f *flakyStore) CreateEmails(ctx context.Context, emails []store.Email, events []store.Event) error {
	if !f.failed {
		f.failed = true
		half := len(emails) / 2
		if err := f.Store.CreateEmails(ctx, emails[:half], events[:half]); err != nil {
			return err
		}
		return errors.New("transaction failed")
	}
	return f.Store.CreateEmails(ctx, emails, events)
}

type oneDomain struct{}

func (oneDomain) Lookup(context.Context, int64, string) (store.Domain, error) {
	return store.Domain{ID: 1, TeamID: 1, Name: "example.com", Status: store.DomainSuccess}, nil
}

func TestFailedWriteKeepsTheClaimAndRetryCompletesTheSameBatch(t *testing.T) {
	b, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now().UTC()
	svc := &Service{Store: &flakyStore{Store: b}, Domains: oneDomain{}, Now: func() time.Time { return now }}
	reqs, err := DecodeBatch([]byte(`[{"to":"a@example.org","from":"x@example.com","subject":"1","text":"t"},
		{"to":"b@example.org","from":"x@example.com","subject":"2","text":"t"}]`))
	if err != nil {
		t.Fatal(err)
	}
	p := auth.Principal{TeamID: 1}
	if _, err := svc.Send(context.Background(), p, "k", reqs, true); err == nil {
		t.Fatal("the failing write reported success")
	}
	// Right away the claim is still in flight: no second batch can start.
	_, err = svc.Send(context.Background(), p, "k", reqs, true)
	if fe, ok := fault.As(err); !ok || fe.Kind != fault.Conflict {
		t.Fatalf("immediate retry: %v, want 409 in progress", err)
	}
	// After the stale window the retry takes the claim over and finishes the same batch.
	now = now.Add(IdempotencyStale + time.Second)
	res, err := svc.Send(context.Background(), p, "k", reqs, true)
	if err != nil {
		t.Fatal(err)
	}
	if res.IDs[0] != emailID(mustNonce(t, b), 0) {
		t.Error("the retry did not reuse the first attempt's ids")
	}
	_, count, err := b.ListEmails(context.Background(), store.EmailFilter{TeamID: 1, Limit: 10})
	if err != nil || count != 2 {
		t.Fatalf("count = %d (%v), want exactly the one batch of 2", count, err)
	}
}

// TestARetryOfAWrittenRequestIsAReplay: the idempotency record is not marked complete (a write
// saved per request); a retry finds every email of the record's nonce and replays them, before
// and after the stale window, without writing anything. A retry while only some exist is told
// the request is in progress.
func TestARetryOfAWrittenRequestIsAReplay(t *testing.T) {
	b, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now().UTC()
	svc := &Service{Store: b, Domains: oneDomain{}, Now: func() time.Time { return now }}
	reqs, err := DecodeBatch([]byte(`[{"to":"a@example.org","from":"x@example.com","subject":"1","text":"t"},
		{"to":"b@example.org","from":"x@example.com","subject":"2","text":"t"}]`))
	if err != nil {
		t.Fatal(err)
	}
	p := auth.Principal{TeamID: 1}
	first, err := svc.Send(context.Background(), p, "k", reqs, true)
	if err != nil || first.Replayed {
		t.Fatalf("first send: %+v, %v", first, err)
	}
	for _, later := range []time.Duration{time.Second, IdempotencyStale + time.Second, 23 * time.Hour} {
		now = now.Add(later)
		again, err := svc.Send(context.Background(), p, "k", reqs, true)
		if err != nil || !again.Replayed || string(again.Body) != string(first.Body) {
			t.Fatalf("retry %v later: %+v, %v; want a replay of %s", later, again, err, first.Body)
		}
	}
	_, count, err := b.ListEmails(context.Background(), store.EmailFilter{TeamID: 1, Limit: 10})
	if err != nil || count != 2 {
		t.Fatalf("count = %d (%v), want the one batch of 2", count, err)
	}

	// Half of another request written, its owner still at work: in progress.
	flaky := &flakyStore{Store: b}
	svc.Store = flaky
	if _, err := svc.Send(context.Background(), p, "k2", reqs, true); err == nil {
		t.Fatal("the failing write reported success")
	}
	_, err = svc.Send(context.Background(), p, "k2", reqs, true)
	if fe, ok := fault.As(err); !ok || fe.Kind != fault.Conflict {
		t.Fatalf("retry of a half-written request: %v, want 409 in progress", err)
	}
}

func mustNonce(t *testing.T, b *bolt.Store) string {
	rec, _, err := b.ClaimIdempotency(context.Background(), store.IdemClaim{TeamID: 1, Key: "k", Now: time.Now(), TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return rec.Nonce
}

// recordingDispatcher counts what is handed to delivery.
type recordingDispatcher struct {
	mu  sync.Mutex
	ids []string
}

func (d *recordingDispatcher) Dispatch(_ context.Context, ids ...string) {
	d.mu.Lock()
	d.ids = append(d.ids, ids...)
	d.mu.Unlock()
}

// TestPromoteOverdueQueuesAStrandedEmailOnce: a SCHEDULED email whose schedule never fired is
// queued by the reconciler's backstop once its time is more than the grace period past, with
// an event saying why, exactly once however many reconcilers run at once; one not yet past the
// grace period, or cancelled, is left alone.
func TestPromoteOverdueQueuesAStrandedEmailOnce(t *testing.T) {
	b, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	mk := func(id string, due *time.Time, status string) store.Email {
		return store.Email{ID: id, TeamID: 1, DomainID: 1, Status: status, LatestStatus: status, ScheduledAt: due,
			CreatedAt: now.Add(-time.Hour), UpdatedAt: now.Add(-time.Hour)}
	}
	stranded := mk("em-stranded", at(-10*time.Minute), store.StatusScheduled)
	recent := mk("em-recent", at(-2*time.Minute), store.StatusScheduled) // its schedule may still fire
	cancelled := mk("em-cancelled", at(-time.Hour), store.StatusCancelled)
	if err := b.CreateEmails(ctx, []store.Email{stranded, recent, cancelled}, nil); err != nil {
		t.Fatal(err)
	}
	d := &recordingDispatcher{}
	svc := &Service{Store: b, Dispatcher: d, Now: func() time.Time { return now }, Log: slog.New(slog.DiscardHandler)}

	var wg sync.WaitGroup
	var total atomic.Int64
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := svc.PromoteOverdue(ctx, OverdueGrace)
			if err != nil {
				t.Error(err)
			}
			total.Add(int64(n))
		}()
	}
	wg.Wait()
	if total.Load() != 1 || len(d.ids) != 1 || d.ids[0] != stranded.ID {
		t.Fatalf("queued %d, dispatched %v; want the stranded email once", total.Load(), d.ids)
	}
	e, events, err := b.GetEmailDetail(ctx, stranded.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != store.StatusQueued {
		t.Errorf("stranded email is %s, want QUEUED", e.Status)
	}
	if len(events) != 1 || events[0].Status != store.StatusQueued || !strings.Contains(string(events[0].Data), "did not fire") {
		t.Errorf("events %+v, want one QUEUED event saying the schedule did not fire", events)
	}
	for _, id := range []string{recent.ID, cancelled.ID} {
		if e, _ := b.GetEmail(ctx, id); e.Status == store.StatusQueued {
			t.Errorf("%s was queued", id)
		}
	}
	// A schedule that fires late afterwards finds the email queued: nothing more.
	if err := svc.Fire(ctx, []byte(`{"emailId":"em-stranded","scheduledAt":"2026-03-02T09:50:00Z"}`)); err != nil {
		t.Fatal(err)
	}
	if _, events, _ := b.GetEmailDetail(ctx, stranded.ID); len(events) != 1 || len(d.ids) != 1 {
		t.Errorf("after a late fire: %d events, %d dispatches; want 1 and 1", len(events), len(d.ids))
	}
}

// TestFireForAnEmailNotWritten: a schedule fires before its email is written (the schedule is
// made first) and is retried by its error; once NotWrittenGrace past its time it is dropped
// (nil, a warning) rather than retried into the dead-letter queue.
func TestFireForAnEmailNotWritten(t *testing.T) {
	b, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	svc := &Service{Store: b, Dispatcher: &recordingDispatcher{}, Now: func() time.Time { return now },
		Log: slog.New(slog.DiscardHandler)}
	payload := func(at time.Time) []byte {
		return []byte(`{"emailId":"em-unwritten","scheduledAt":"` + at.Format(time.RFC3339) + `"}`)
	}
	if err := svc.Fire(context.Background(), payload(now.Add(-time.Minute))); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a minute past its time: %v, want store.ErrNotFound (retried)", err)
	}
	if err := svc.Fire(context.Background(), payload(now.Add(-NotWrittenGrace-time.Second))); err != nil {
		t.Errorf("past the grace: %v, want nil (dropped)", err)
	}
}
