package deliver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	netmail "net/mail"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/hooks"
	"github.com/mailroom/mailroom/pkg/housekeeping"
	"github.com/mailroom/mailroom/pkg/ingest"
	"github.com/mailroom/mailroom/pkg/mail"
	"github.com/mailroom/mailroom/pkg/mail/outbox"
	"github.com/mailroom/mailroom/pkg/sesevent"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/bolt"
)

// countingMailer records sends and can fail the first n with a given error.
type countingMailer struct {
	mu       sync.Mutex
	sent     map[string]int
	failures int
	failWith error
}

// emails is how many emails the mailer sent.
func (m *countingMailer) emails() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sent)
}

// awaitSent waits until the mailer sent n emails, or for at most d.
func (m *countingMailer) awaitSent(n int, d time.Duration) {
	for deadline := time.Now().Add(d); m.emails() < n && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

func (m *countingMailer) Send(_ context.Context, o mail.Outgoing) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failures > 0 {
		m.failures--
		return "", m.failWith
	}
	m.sent[o.EmailID]++
	return fmt.Sprintf("msg-%s-%d", o.EmailID, m.sent[o.EmailID]), nil
}

func setup(t *testing.T, m mail.Mailer, emails int) (*Worker, store.Store, []string) {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	now := time.Now().UTC()
	if err := st.CreateDomain(ctx, store.Domain{ID: 1, TeamID: 1, Name: "example.com", Status: store.DomainSuccess}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	var list []store.Email
	var evs []store.Event
	for i := range emails {
		id := fmt.Sprintf("em%03d", i)
		text := "hello"
		list = append(list, store.Email{ID: id, TeamID: 1, DomainID: 1, From: "a@example.com",
			To: []string{"b@example.org"}, Subject: "s", Content: store.Content{Text: &text},
			Status: store.StatusQueued, LatestStatus: "QUEUED", CreatedAt: now, UpdatedAt: now})
		evs = append(evs, store.Event{ID: "0", EmailID: id, Status: "QUEUED", CreatedAt: now})
		ids = append(ids, id)
	}
	if err := st.CreateEmails(ctx, list, evs); err != nil {
		t.Fatal(err)
	}
	w := &Worker{Store: st, Mailer: m, Now: time.Now, Backoff: func(int) time.Duration { return time.Millisecond }}
	return w, st, ids
}

func TestConcurrentDeliverSendsOnce(t *testing.T) {
	m := &countingMailer{sent: map[string]int{}}
	w, st, ids := setup(t, m, 5)
	var wg sync.WaitGroup
	var errs atomic.Int32
	for range 20 {
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := w.Deliver(context.Background(), id); err != nil {
					errs.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	if errs.Load() != 0 {
		t.Errorf("%d deliveries failed", errs.Load())
	}
	for _, id := range ids {
		if m.sent[id] != 1 {
			t.Errorf("%s sent %d times", id, m.sent[id])
		}
		e, evs, err := st.GetEmailDetail(context.Background(), id)
		if err != nil || e.Status != store.StatusSent || e.LatestStatus != "SENT" || e.MessageID == "" || len(evs) != 2 {
			t.Errorf("%s: %+v %d events %v", id, e.Status, len(evs), err)
		}
	}
}

// TestThrottlingNeverFails: a throttled send is retried; one that stays throttled goes back to
// QUEUED, held until a later time, with no event, and is sent once the reconciler hands it
// back after that time. A paused account holds the email the same way.
func TestThrottlingNeverFails(t *testing.T) {
	m := &countingMailer{sent: map[string]int{}, failures: 2, failWith: fmt.Errorf("slow down: %w", mail.ErrThrottled)}
	w, st, ids := setup(t, m, 1)
	if err := w.Deliver(context.Background(), ids[0]); err != nil {
		t.Fatal(err)
	}
	if e, _ := st.GetEmail(context.Background(), ids[0]); e.Status != store.StatusSent || m.sent[ids[0]] != 1 {
		t.Fatalf("after 2 throttles: %s, sent %d", e.Status, m.sent[ids[0]])
	}

	for _, tc := range []struct {
		failWith error
		failures int // what one delivery uses up: every attempt, or the first answer when paused
	}{{fmt.Errorf("slow down: %w", mail.ErrThrottled), 3}, {fmt.Errorf("sending paused: %w", mail.ErrPaused), 1}} {
		failWith := tc.failWith
		m = &countingMailer{sent: map[string]int{}, failures: tc.failures, failWith: failWith}
		w, st, ids = setup(t, m, 1)
		w.Attempts = 3
		clock := time.Now().UTC()
		w.Now = func() time.Time { return clock }
		if err := w.Deliver(context.Background(), ids[0]); err != nil {
			t.Fatal(err)
		}
		e, evs, _ := st.GetEmailDetail(context.Background(), ids[0])
		if e.Status != store.StatusQueued || e.NotBefore == nil || !e.NotBefore.After(clock) || len(evs) != 1 || m.sent[ids[0]] != 0 {
			t.Fatalf("%v: %s held until %v with %d events, sent %d; want QUEUED, held, no new event, not sent",
				failWith, e.Status, e.NotBefore, len(evs), m.sent[ids[0]])
		}
		rq := &housekeeping.Requeue{Store: st, Now: func() time.Time { return clock }, Log: slog.New(slog.DiscardHandler), Dispatcher: dispatchTo{w}}
		if n, _ := rq.Run(context.Background()); n != 0 {
			t.Fatalf("%v: handed back %d before its time", failWith, n)
		}
		if err := w.Deliver(context.Background(), ids[0]); err != nil || m.sent[ids[0]] != 0 {
			t.Fatalf("%v: a worker sent it before its time: %v, sent %d", failWith, err, m.sent[ids[0]])
		}
		clock = e.NotBefore.Add(time.Second)
		if n, err := rq.Run(context.Background()); err != nil || n != 1 {
			t.Fatalf("%v: after its time the reconciler handed back %d, %v", failWith, n, err)
		}
		if e, _ := st.GetEmail(context.Background(), ids[0]); e.Status != store.StatusSent || m.sent[ids[0]] != 1 {
			t.Fatalf("%v: after its wait: %s, sent %d", failWith, e.Status, m.sent[ids[0]])
		}
	}
}

func TestRejectedIsNotRetried(t *testing.T) {
	m := &countingMailer{sent: map[string]int{}, failures: 100, failWith: fmt.Errorf("bad: %w", mail.ErrRejected)}
	w, st, ids := setup(t, m, 1)
	if err := w.Deliver(context.Background(), ids[0]); err != nil {
		t.Fatal(err)
	}
	if e, _ := st.GetEmail(context.Background(), ids[0]); e.Status != store.StatusFailed || m.failures != 99 {
		t.Fatalf("status %s, tries %d", e.Status, 100-m.failures)
	}
}

// TestWorkerNeverTakesOverAClaim: a worker handed an email that another worker claimed, an
// hour ago or a second ago (a replayed stream record), sends nothing: only the reconciler
// hands a claim back, once its lease and the grace for SES's evidence have passed
// (TestRequeueFinishesEmailsOfAKilledWorker).
func TestWorkerNeverTakesOverAClaim(t *testing.T) {
	for _, age := range []time.Duration{time.Hour, time.Second} {
		m := &countingMailer{sent: map[string]int{}}
		w, st, ids := setup(t, m, 1)
		claimed := time.Now().Add(-age)
		if _, err := st.UpdateEmail(context.Background(), ids[0], func(e *store.Email) ([]store.Event, error) {
			e.Status, e.ClaimedAt = store.StatusSending, &claimed
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := w.Deliver(context.Background(), ids[0]); err != nil {
			t.Fatal(err)
		}
		e, _ := st.GetEmail(context.Background(), ids[0])
		if m.sent[ids[0]] != 0 || e.Status != store.StatusSending || !e.ClaimedAt.Equal(claimed) {
			t.Errorf("claim %v old: sent %d, email %s claimed %v; want untouched", age, m.sent[ids[0]], e.Status, e.ClaimedAt)
		}
	}
}

func TestUnverifiedDomainFails(t *testing.T) {
	m := &countingMailer{sent: map[string]int{}}
	w, st, ids := setup(t, m, 1)
	if _, err := st.UpdateDomain(context.Background(), 1, 1, func(d *store.Domain) error {
		d.Status = store.DomainFailed
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Deliver(context.Background(), ids[0]); err != nil {
		t.Fatal(err)
	}
	if e, _ := st.GetEmail(context.Background(), ids[0]); e.Status != store.StatusFailed || len(m.sent) != 0 {
		t.Fatalf("status %s, sent %v", e.Status, m.sent)
	}
}

// killedMailer stands for a worker process that dies between claim and send: the goroutine
// running Deliver ends inside Send and records nothing more, leaving the claim in SENDING.
type killedMailer struct{}

func (killedMailer) Send(context.Context, mail.Outgoing) (string, error) {
	runtime.Goexit()
	return "", nil
}

func TestRequeueFinishesEmailsOfAKilledWorker(t *testing.T) {
	m := &countingMailer{sent: map[string]int{}}
	w, st, ids := setup(t, m, 3)
	dead := &Worker{Store: st, Mailer: killedMailer{}, Now: time.Now}
	for _, id := range ids {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = dead.Deliver(context.Background(), id)
		}()
		<-done
	}
	for _, id := range ids {
		if e, _ := st.GetEmail(context.Background(), id); e.Status != store.StatusSending {
			t.Fatalf("%s is %s, want stuck in SENDING", id, e.Status)
		}
	}
	// Right away the reconciler leaves them alone: the claims are within their lease.
	clock := time.Now()
	w.Now = func() time.Time { return clock }
	rq := &housekeeping.Requeue{Store: st, Now: func() time.Time { return clock }, Log: slog.New(slog.DiscardHandler),
		Dispatcher: dispatchTo{w}}
	if n, err := rq.Run(context.Background()); err != nil || n != 0 {
		t.Fatalf("fresh claims: requeued %d, %v", n, err)
	}
	// After the lease and the grace for SES's evidence every email goes back to the worker,
	// which sends each once: the reconciler itself sends nothing.
	clock = clock.Add(10 * time.Minute)
	n, err := rq.Run(context.Background())
	if err != nil || n != 3 {
		t.Fatalf("requeued %d, %v", n, err)
	}
	for _, id := range ids {
		e, _ := st.GetEmail(context.Background(), id)
		if e.Status != store.StatusSent || m.sent[id] != 1 {
			t.Errorf("%s: %s, sent %d", id, e.Status, m.sent[id])
		}
	}
	if n, _ := rq.Run(context.Background()); n != 0 {
		t.Errorf("second pass requeued %d emails", n)
	}
}

// dispatchTo delivers what it is handed at once, as the local pool would.
type dispatchTo struct{ w *Worker }

func (d dispatchTo) Dispatch(ctx context.Context, ids ...string) {
	for _, id := range ids {
		_ = d.w.Deliver(ctx, id)
	}
}

// blockingMailer blocks until its context ends, as a send cut off by shutdown does.
type blockingMailer struct{}

func (blockingMailer) Send(ctx context.Context, _ mail.Outgoing) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

func TestInterruptedSendIsReleased(t *testing.T) {
	w, st, ids := setup(t, blockingMailer{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if err := w.Deliver(ctx, ids[0]); err == nil {
		t.Error("an interrupted delivery reported success")
	}
	if e, _ := st.GetEmail(context.Background(), ids[0]); e.Status != store.StatusQueued {
		t.Errorf("status %s, want QUEUED for the next worker", e.Status)
	}
}

func TestOutcomeOfALostClaimIsNotRecorded(t *testing.T) {
	m := &countingMailer{sent: map[string]int{}}
	w, st, ids := setup(t, m, 1)
	// While this worker sends, its lease expires and another worker takes the email over.
	w.Mailer = mailerFunc(func(ctx context.Context, o mail.Outgoing) (string, error) {
		later := time.Now().Add(time.Second)
		_, err := st.UpdateEmail(ctx, o.EmailID, func(e *store.Email) ([]store.Event, error) {
			e.ClaimedAt = &later
			return nil, nil
		})
		return "first-worker-id", err
	})
	if err := w.Deliver(context.Background(), ids[0]); err != nil {
		t.Fatal(err)
	}
	if e, _ := st.GetEmail(context.Background(), ids[0]); e.Status != store.StatusSending || e.MessageID != "" {
		t.Errorf("the first worker overwrote the new claim: %s %q", e.Status, e.MessageID)
	}
}

// lostAnswerStore commits the first UpdateEmail and then runs it again, as a store adapter does
// when the answer of a conditional write that committed is lost and its retry finds the item
// changed (the SDK retries a timed-out PutItem; DynamoDB refuses it on the version; the
// optimistic loop re-reads and calls fn again).
type lostAnswerStore struct {
	Store
	lost atomic.Bool
}

func (s *lostAnswerStore) UpdateEmail(ctx context.Context, id string, fn func(*store.Email) ([]store.Event, error)) (store.Email, error) {
	if s.lost.CompareAndSwap(false, true) {
		if _, err := s.Store.UpdateEmail(ctx, id, fn); err != nil {
			return store.Email{}, err
		}
	}
	return s.Store.UpdateEmail(ctx, id, fn)
}

// TestClaimWhoseAnswerWasLost: a claim that committed but whose answer was lost is recognised
// as the worker's own on the retry, and the email is sent at once, once.
func TestClaimWhoseAnswerWasLost(t *testing.T) {
	m := &countingMailer{sent: map[string]int{}}
	w, st, ids := setup(t, m, 1)
	w.Store = &lostAnswerStore{Store: st}
	if err := w.Deliver(context.Background(), ids[0]); err != nil {
		t.Fatal(err)
	}
	e, err := st.GetEmail(context.Background(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != store.StatusSent || m.sent[ids[0]] != 1 {
		t.Errorf("email %s after %d sends, want SENT after 1 (the claim was ours)", e.Status, m.sent[ids[0]])
	}
}

// TestCampaignStateAtSendTime: a campaign email is checked against its campaign and contact
// as they are when it is sent: a paused campaign holds it (QUEUED, not sent, sent after the
// resume), a deleted campaign cancels it, and a contact who unsubscribed or was removed since
// the email was written is not mailed.
func TestCampaignStateAtSendTime(t *testing.T) {
	for _, c := range []struct {
		name       string
		change     func(t *testing.T, st store.Store)
		wantStatus string
		wantSent   int
		deleteHeld bool // a held email's campaign is deleted instead of resumed
	}{
		{"running, subscribed: sent", nil, store.StatusSent, 1, false},
		{"paused: held, sent after the resume", func(t *testing.T, st store.Store) { setCampaign(t, st, store.CampaignPaused) }, store.StatusQueued, 0, false},
		{"paused: held, cancelled after a delete", func(t *testing.T, st store.Store) { setCampaign(t, st, store.CampaignPaused) }, store.StatusQueued, 0, true},
		{"deleted: cancelled", func(t *testing.T, st store.Store) {
			if err := st.DeleteCampaign(context.Background(), 1, "cp1"); err != nil {
				t.Fatal(err)
			}
		}, store.StatusCancelled, 0, false},
		{"unsubscribed since: not mailed", func(t *testing.T, st store.Store) {
			if _, err := st.UpdateContact(context.Background(), 1, "cb1", "ct1", func(x *store.Contact) error {
				x.Subscribed = false
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}, store.StatusSuppressed, 0, false},
		{"removed from the book: not mailed", func(t *testing.T, st store.Store) {
			if _, err := st.DeleteContacts(context.Background(), 1, "cb1", []string{"ct1"}); err != nil {
				t.Fatal(err)
			}
		}, store.StatusSuppressed, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &countingMailer{sent: map[string]int{}}
			w, st, ids := setup(t, m, 1)
			ctx := context.Background()
			campaignOf(t, st, ids[0])
			if c.change != nil {
				c.change(t, st)
			}
			before, _ := st.GetEmail(ctx, ids[0])
			if err := w.Deliver(ctx, ids[0]); err != nil {
				t.Fatal(err)
			}
			e, err := st.GetEmail(ctx, ids[0])
			if err != nil || e.Status != c.wantStatus || m.sent[ids[0]] != c.wantSent {
				t.Fatalf("status %s, sent %d (%v); want %s, %d", e.Status, m.sent[ids[0]], err, c.wantStatus, c.wantSent)
			}
			if c.wantStatus == store.StatusQueued {
				// Held: one write takes it out of the pending index into the campaign's held
				// list; a replayed record finds it held and writes nothing (no loop).
				pending, _ := st.PendingEmails(ctx, 0)
				held, _ := st.HeldEmails(ctx, 1, "cp1", 0)
				if !e.Held || e.Version != before.Version+1 || slices.Contains(pending, ids[0]) || !slices.Equal(held, ids[:1]) {
					t.Errorf("held email: held %v, version %d → %d, pending %v, held list %v", e.Held, before.Version, e.Version, pending, held)
				}
				if err := w.Deliver(ctx, ids[0]); err != nil {
					t.Fatal(err)
				}
				if again, _ := st.GetEmail(ctx, ids[0]); again.Version != e.Version || m.sent[ids[0]] != 0 {
					t.Errorf("a held email was delivered again: version %d → %d, sent %d", e.Version, again.Version, m.sent[ids[0]])
				}
				// The campaign resumes (or is deleted): its next step releases the held email,
				// which is sent once (or cancelled).
				want, wantSent := store.StatusSent, 1
				if c.deleteHeld {
					if err := st.DeleteCampaign(ctx, 1, "cp1"); err != nil {
						t.Fatal(err)
					}
					want, wantSent = store.StatusCancelled, 0
				} else {
					setCampaign(t, st, store.CampaignRunning)
				}
				svc := &campaign.Service{Store: st, Now: time.Now, Log: slog.New(slog.DiscardHandler), Dispatcher: dispatchTo{w}}
				if _, _, err := svc.Step(ctx, 1, "cp1", 99); err != nil {
					t.Fatal(err)
				}
				if e, _ := st.GetEmail(ctx, ids[0]); e.Status != want || m.sent[ids[0]] != wantSent || e.Held {
					t.Errorf("after the release: %s (held %v), sent %d; want %s, sent %d", e.Status, e.Held, m.sent[ids[0]], want, wantSent)
				}
			}
		})
	}
}

// TestCampaignChangedWhileWaitingForASendSlot: a campaign email that waits for its send slot
// (a low rate, a busy second) is checked again before it goes: a pause that came meanwhile
// holds it, a delete cancels it, an unsubscribe leaves the contact unmailed.
func TestCampaignChangedWhileWaitingForASendSlot(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, st store.Store)
		want   string
	}{
		{"unchanged: sent", nil, store.StatusSent},
		{"paused: held", func(t *testing.T, st store.Store) { setCampaign(t, st, store.CampaignPaused) }, store.StatusQueued},
		{"deleted: cancelled", func(t *testing.T, st store.Store) {
			if err := st.DeleteCampaign(context.Background(), 1, "cp1"); err != nil {
				t.Fatal(err)
			}
		}, store.StatusCancelled},
		{"unsubscribed: not mailed", func(t *testing.T, st store.Store) {
			if _, err := st.UpdateContact(context.Background(), 1, "cb1", "ct1", func(x *store.Contact) error {
				x.Subscribed = false
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}, store.StatusSuppressed},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &countingMailer{sent: map[string]int{}}
			w, st, ids := setup(t, m, 2)
			ctx := context.Background()
			campaignOf(t, st, ids[0])
			// One send a second, just after a second began: another email takes its slot, the
			// campaign's waits most of a second for the next one.
			w.Pacer = &Pacer{Slots: st, Rate: 1, Now: time.Now}
			time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 20*time.Millisecond)))
			if err := w.Deliver(ctx, ids[1]); err != nil || m.emails() != 1 {
				t.Fatalf("the first email: %v, %d sent", err, m.emails())
			}
			done := make(chan error, 1)
			go func() { done <- w.Deliver(ctx, ids[0]) }()
			time.Sleep(300 * time.Millisecond)
			if m.emails() != 1 {
				t.Fatal("the campaign email did not wait for its slot")
			}
			if c.change != nil {
				c.change(t, st)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			e, err := st.GetEmail(ctx, ids[0])
			wantSent := 0
			if c.want == store.StatusSent {
				wantSent = 1
			}
			m.mu.Lock()
			sent := m.sent[ids[0]]
			m.mu.Unlock()
			if err != nil || e.Status != c.want || sent != wantSent || e.Held != (c.want == store.StatusQueued) {
				t.Errorf("status %s (held %v), sent %d (%v); want %s, sent %d", e.Status, e.Held, sent, err, c.want, wantSent)
			}
		})
	}
}

// campaignOf makes the running campaign cp1 to the book cb1 of one subscribed contact, ct1,
// and the email id its email to ct1, as a batch step writes it.
func campaignOf(t *testing.T, st store.Store, id string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	if err := st.CreateContactBook(ctx, store.ContactBook{ID: "cb1", TeamID: 1, Name: "b", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutContact(ctx, 1, "cb1", "b@example.org", "ct1", func(x *store.Contact, _ bool) error {
		x.Subscribed = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateCampaign(ctx, store.Campaign{ID: "cp1", TeamID: 1, DomainID: 1, ContactBookID: "cb1",
		Status: store.CampaignRunning, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateEmail(ctx, id, func(e *store.Email) ([]store.Event, error) {
		e.CampaignID, e.ContactID = "cp1", "ct1"
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
}

func setCampaign(t *testing.T, st store.Store, status string) {
	t.Helper()
	if _, err := st.UpdateCampaign(context.Background(), 1, "cp1", func(c *store.Campaign) error {
		c.Status = status
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestAmbiguousSendWaitsForEvidence: after an answer that leaves the outcome unknown (a timeout,
// a 5xx), the worker neither sends again nor fails the email: it stays claimed, SENDING, for
// SES's events to settle (pkg/ingest) or, without them, the reconciler after the lease.
func TestAmbiguousSendWaitsForEvidence(t *testing.T) {
	m := &countingMailer{sent: map[string]int{}, failures: 1, failWith: fmt.Errorf("timeout: %w", mail.ErrAmbiguous)}
	w, st, ids := setup(t, m, 1)
	var calls atomic.Int64
	w.Mailer = mailerFunc(func(ctx context.Context, o mail.Outgoing) (string, error) {
		calls.Add(1)
		return m.Send(ctx, o)
	})
	if err := w.Deliver(context.Background(), ids[0]); err != nil {
		t.Fatal(err)
	}
	e, evs, err := st.GetEmailDetail(context.Background(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 || e.Status != store.StatusSending || e.ClaimedAt == nil || len(evs) != 1 {
		t.Errorf("%d send calls; email %s (claim %v) with %d events; want 1 call, SENDING, claimed, no new event",
			calls.Load(), e.Status, e.ClaimedAt, len(evs))
	}
}

type mailerFunc func(context.Context, mail.Outgoing) (string, error)

func (f mailerFunc) Send(ctx context.Context, o mail.Outgoing) (string, error) { return f(ctx, o) }

// TestNoSendWithoutTimeToRecordIt: a send does not start when the invocation's deadline leaves
// no room to record its outcome; the email goes back to QUEUED, unsent, for the next run.
func TestNoSendWithoutTimeToRecordIt(t *testing.T) {
	m := &countingMailer{sent: map[string]int{}}
	w, st, ids := setup(t, m, 1)
	ctx, cancel := context.WithTimeout(context.Background(), SendRoom/2)
	defer cancel()
	if err := w.Deliver(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	e, _ := st.GetEmail(context.Background(), ids[0])
	if m.sent[ids[0]] != 0 || e.Status != store.StatusQueued || e.ClaimedAt != nil {
		t.Errorf("sent %d, email %s (claim %v); want unsent, QUEUED", m.sent[ids[0]], e.Status, e.ClaimedAt)
	}
	// With room, it goes.
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	if err := w.Deliver(ctx2, ids[0]); err != nil || m.sent[ids[0]] != 1 {
		t.Errorf("with time left: sent %d, %v", m.sent[ids[0]], err)
	}
}

// resumedMeanwhile answers the first GetCampaign as it was (PAUSED), and resumes the campaign
// right after: the worker's hold then lands after the resume's release looked for held emails.
type resumedMeanwhile struct {
	Store
	once atomic.Bool
}

func (s *resumedMeanwhile) GetCampaignState(ctx context.Context, teamID int64, id string) (store.Campaign, error) {
	c, err := s.Store.GetCampaignState(ctx, teamID, id)
	if err == nil && s.once.CompareAndSwap(false, true) {
		if _, err := s.Store.UpdateCampaign(ctx, teamID, id, func(x *store.Campaign) error {
			x.Status = store.CampaignRunning
			return nil
		}); err != nil {
			return c, err
		}
	}
	return c, err
}

// TestHoldAfterTheResumeIsReleasedByTheWorker: a worker that read the campaign as PAUSED holds
// the email; if the campaign was resumed in between (its release has already run), the worker
// sees it on its second look, releases the email itself and sends it, once.
func TestHoldAfterTheResumeIsReleasedByTheWorker(t *testing.T) {
	m := &countingMailer{sent: map[string]int{}}
	w, st, ids := setup(t, m, 1)
	ctx := context.Background()
	if err := st.CreateCampaign(ctx, store.Campaign{ID: "cp1", TeamID: 1, DomainID: 1, Status: store.CampaignPaused, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateEmail(ctx, ids[0], func(e *store.Email) ([]store.Event, error) {
		e.CampaignID = "cp1"
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	w.Store = &resumedMeanwhile{Store: st}
	if err := w.Deliver(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	e, _ := st.GetEmail(ctx, ids[0])
	if e.Status != store.StatusSent || e.Held || m.sent[ids[0]] != 1 {
		t.Errorf("email %s (held %v), sent %d; want SENT once", e.Status, e.Held, m.sent[ids[0]])
	}
}

// failingSlots is a pacing counter that cannot be reached.
type failingSlots struct{}

func (failingSlots) TakeSendSlots(context.Context, time.Time, int, int) (int, int, error) {
	return 0, 0, fmt.Errorf("throttled")
}

// TestPacingFailureHoldsTheEmailBriefly: when no send slot can be taken (the counter throttled,
// the account unreadable), the email goes back to QUEUED held for PacingRetry, so the stream
// does not hand it straight back; nothing is sent and nothing fails.
func TestPacingFailureHoldsTheEmailBriefly(t *testing.T) {
	m := &countingMailer{sent: map[string]int{}}
	w, st, ids := setup(t, m, 1)
	clock := time.Now().UTC()
	w.Now = func() time.Time { return clock }
	w.Pacer = &Pacer{Slots: failingSlots{}, Rate: 10, Now: w.Now}
	if err := w.Deliver(context.Background(), ids[0]); err == nil {
		t.Error("a delivery that could not pace reported success")
	}
	e, _ := st.GetEmail(context.Background(), ids[0])
	if e.Status != store.StatusQueued || e.NotBefore == nil || !e.NotBefore.Equal(clock.Add(PacingRetry)) || m.sent[ids[0]] != 0 {
		t.Errorf("email %s held until %v, sent %d; want QUEUED until %v", e.Status, e.NotBefore, m.sent[ids[0]], clock.Add(PacingRetry))
	}
}

// TestEventsBeforeTheOutcome: the provider's Delivery event for a message can reach the store
// before the worker records SENT (the local outbox publishes after a short delay, and a busy
// store takes longer). The ingester then records SENT and DELIVERED itself; the worker's own
// outcome finds the send recorded with its message id, adds nothing and warns about nothing.
func TestEventsBeforeTheOutcome(t *testing.T) {
	var logs strings.Builder
	w, st, ids := setup(t, nil, 1)
	w.Log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	in := &ingest.Ingester{Store: st, Log: slog.New(slog.DiscardHandler), Now: time.Now}
	const messageID = "0100019a-events-first"
	w.Mailer = mailerFunc(func(ctx context.Context, o mail.Outgoing) (string, error) {
		now := time.Now().UTC()
		ev := sesevent.Event{EventType: sesevent.TypeDelivery,
			Mail:     sesevent.Mail{Timestamp: now, MessageID: messageID, Source: o.From, Destination: o.Recipients, Tags: map[string][]string{}},
			Delivery: &sesevent.Delivery{Timestamp: now, Recipients: o.Recipients, SMTPResponse: "250 ok"}}
		ev.Mail.Headers = []sesevent.Header{{Name: sesevent.EmailIDHeader, Value: o.EmailID}}
		return messageID, in.Publish(ctx, ev)
	})
	if err := w.Deliver(context.Background(), ids[0]); err != nil {
		t.Fatal(err)
	}
	if e, _ := delivered(t, st, ids[0]); e.MessageID != messageID {
		t.Errorf("message id %q; want %q", e.MessageID, messageID)
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("a warning for a send the events had recorded:\n%s", logs.String())
	}
}

// recordingMailer is a mail.Recorder whose events are published only when the test says so
// (recorded).
type recordingMailer struct {
	send    mailerFunc
	mu      sync.Mutex
	pending map[string]bool
}

func recorderOf(send mailerFunc) *recordingMailer {
	return &recordingMailer{send: send, pending: map[string]bool{}}
}

func (m *recordingMailer) Send(ctx context.Context, o mail.Outgoing) (string, error) {
	id, err := m.send(ctx, o)
	if err == nil {
		m.mu.Lock()
		m.pending[o.EmailID] = true
		m.mu.Unlock()
	}
	return id, err
}

func (m *recordingMailer) Pending(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pending[id]
}

// recorded says the events of id's message are all recorded.
func (m *recordingMailer) recorded(id string) {
	m.mu.Lock()
	delete(m.pending, id)
	m.mu.Unlock()
}

// A mailer whose events record the send (the local outbox) gets no SENT from the worker: the
// email stays SENDING, claimed, until the events come, and then has one SENT and one
// DELIVERED entry, SENT at the time the message was accepted. One store write less per email.
func TestARecordingMailerLeavesSentToItsEvents(t *testing.T) {
	w, st, ids := setup(t, nil, 1)
	ctx := context.Background()
	in := &ingest.Ingester{Store: st, Log: slog.New(slog.DiscardHandler), Now: time.Now}
	const messageID = "0100019a-recorded"
	var sentAt time.Time
	var pending []sesevent.Event
	rm := recorderOf(func(_ context.Context, o mail.Outgoing) (string, error) {
		sentAt = time.Now().UTC().Truncate(time.Millisecond)
		ev := sesevent.Event{EventType: sesevent.TypeDelivery,
			Mail:     sesevent.Mail{Timestamp: sentAt, MessageID: messageID, Source: o.From, Destination: o.Recipients, Tags: map[string][]string{}},
			Delivery: &sesevent.Delivery{Timestamp: sentAt.Add(time.Second), Recipients: o.Recipients, SMTPResponse: "250 ok"}}
		ev.Mail.Headers = []sesevent.Header{{Name: sesevent.EmailIDHeader, Value: o.EmailID}}
		pending = append(pending, ev)
		return messageID, nil
	})
	w.Mailer = rm
	if err := w.Deliver(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	e, evs, err := st.GetEmailDetail(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != store.StatusSending || len(evs) != 1 || len(pending) != 1 {
		t.Fatalf("before the events: %s with %d history entries, %d sends; want SENDING, only QUEUED, one send", e.Status, len(evs), len(pending))
	}
	for range 2 { // a redelivered event is recorded once
		if err := in.Publish(ctx, pending[0]); err != nil {
			t.Fatal(err)
		}
	}
	rm.recorded(ids[0])
	e, evs = delivered(t, st, ids[0])
	for _, ev := range evs {
		if ev.Status == store.StatusSent && (!ev.CreatedAt.Equal(sentAt) || !strings.Contains(string(ev.Data), messageID)) {
			t.Errorf("SENT entry at %s with %s; want %s and the message id", ev.CreatedAt, ev.Data, sentAt)
		}
	}
	if e.MessageID != messageID {
		t.Errorf("message id %q; want %q", e.MessageID, messageID)
	}
	// Delivered again (the reconciler, a duplicate dispatch): nothing is sent twice.
	if err := w.Deliver(ctx, ids[0]); err != nil || len(pending) != 1 {
		t.Errorf("second Deliver: %v, %d sends", err, len(pending))
	}
}

// An Exclusive worker (the local server) sends a plain email without a store claim: the email
// is not written until the mailer's events make it SENT, and it is sent once however often
// it is delivered.
func TestExclusiveSendWritesNothingBeforeItsEvents(t *testing.T) {
	w, st, ids := setup(t, nil, 1)
	ctx := context.Background()
	w.Exclusive = NewClaims()
	in := &ingest.Ingester{Store: st, Log: slog.New(slog.DiscardHandler), Now: time.Now}
	var pending []sesevent.Event
	rm := recorderOf(func(_ context.Context, o mail.Outgoing) (string, error) {
		now := time.Now().UTC()
		ev := sesevent.Event{EventType: sesevent.TypeDelivery,
			Mail:     sesevent.Mail{Timestamp: now, MessageID: "0100019a-exclusive", Source: o.From, Destination: o.Recipients, Tags: map[string][]string{}},
			Delivery: &sesevent.Delivery{Timestamp: now, Recipients: o.Recipients, SMTPResponse: "250 ok"}}
		ev.Mail.Headers = []sesevent.Header{{Name: sesevent.EmailIDHeader, Value: o.EmailID}}
		pending = append(pending, ev)
		return "0100019a-exclusive", nil
	})
	w.Mailer = rm
	before, err := st.GetEmail(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Deliver(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	after, err := st.GetEmail(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if after.Status != store.StatusQueued || after.Version != before.Version || len(pending) != 1 {
		t.Fatalf("after the send: %s version %d (was %d), %d sends; want QUEUED, unwritten, one send",
			after.Status, after.Version, before.Version, len(pending))
	}
	// Dispatched again before its events came, after its recipient was suppressed (another
	// email's bounce): it was sent, so its events settle it, not the new check.
	if err := st.PutSuppression(ctx, store.Suppression{TeamID: 1, Email: "b@example.org", Reason: store.ReasonHardBounce, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := w.Deliver(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if again, _ := st.GetEmail(ctx, ids[0]); again.Status != store.StatusQueued || again.Version != before.Version || len(pending) != 1 {
		t.Fatalf("dispatched again while its events were pending: %s version %d, %d sends; want it untouched, one send",
			again.Status, again.Version, len(pending))
	}
	if err := in.Publish(ctx, pending[0]); err != nil {
		t.Fatal(err)
	}
	rm.recorded(ids[0])
	delivered(t, st, ids[0])
	if err := w.Deliver(ctx, ids[0]); err != nil || len(pending) != 1 {
		t.Errorf("second Deliver: %v, %d sends", err, len(pending))
	}
}

// What is not a plain send takes the store claim and goes the usual way: a suppressed
// recipient makes the email SUPPRESSED, a domain that is not verified makes it FAILED, and a
// mailer that does not record its own sends gets SENT from the worker.
func TestExclusiveTakesTheStoreClaimOtherwise(t *testing.T) {
	ctx := context.Background()
	m := &countingMailer{sent: map[string]int{}}
	w, st, ids := setup(t, m, 3)
	w.Exclusive = NewClaims()
	if err := st.PutSuppression(ctx, store.Suppression{TeamID: 1, Email: "b@example.org", Reason: store.ReasonHardBounce, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := w.Deliver(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if e, _ := st.GetEmail(ctx, ids[0]); e.Status != store.StatusSuppressed || len(m.sent) != 0 {
		t.Errorf("suppressed recipient: %s, %d sends; want SUPPRESSED, none", e.Status, len(m.sent))
	}
	if err := st.DeleteSuppression(ctx, 1, "b@example.org"); err != nil {
		t.Fatal(err)
	}
	if err := w.Deliver(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	if e, _ := st.GetEmail(ctx, ids[1]); e.Status != store.StatusSent || m.sent[ids[1]] != 1 {
		t.Errorf("a mailer that is no Recorder: %s, %d sends; want SENT by the worker, one", e.Status, m.sent[ids[1]])
	}
	if _, err := st.UpdateDomain(ctx, 1, 1, func(d *store.Domain) error { d.Status = store.DomainFailed; return nil }); err != nil {
		t.Fatal(err)
	}
	rm := recorderOf(func(context.Context, mail.Outgoing) (string, error) {
		t.Error("sent through a domain that is not verified")
		return "", nil
	})
	w.Mailer = rm
	if err := w.Deliver(ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	if e, _ := st.GetEmail(ctx, ids[2]); e.Status != store.StatusFailed {
		t.Errorf("unverified domain: %s; want FAILED", e.Status)
	}
}

// TestSuppressedSaysWhy: an email whose every recipient is suppressed records the kind of its
// suppression, which the email.suppressed webhook carries: Bounce, Complaint or Manual.
func TestSuppressedSaysWhy(t *testing.T) {
	ctx := context.Background()
	m := &countingMailer{sent: map[string]int{}}
	w, st, ids := setup(t, m, 3)
	for i, c := range []struct{ reason, kind string }{
		{store.ReasonHardBounce, "Bounce"}, {store.ReasonComplaint, "Complaint"}, {store.ReasonManual, "Manual"},
	} {
		if err := st.PutSuppression(ctx, store.Suppression{TeamID: 1, Email: "b@example.org", Reason: c.reason, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := w.Deliver(ctx, ids[i]); err != nil {
			t.Fatal(err)
		}
		e, events, err := st.GetEmailDetail(ctx, ids[i])
		if err != nil || e.Status != store.StatusSuppressed {
			t.Fatalf("%s: %s, %v; want SUPPRESSED", c.reason, e.Status, err)
		}
		hook, ok := hooks.EmailEvent(e, events[len(events)-1])
		if !ok || hook.Type != "email.suppressed" || hook.Data.(hooks.EmailData).Suppression.Type != c.kind {
			t.Errorf("%s: webhook %+v, want email.suppressed of type %s", c.reason, hook, c.kind)
		}
		if err := st.DeleteSuppression(ctx, 1, "b@example.org"); err != nil {
			t.Fatal(err)
		}
	}
}

// Many Exclusive workers delivering the same emails again and again, through the real outbox
// whose events the ingester records as they come: each email is sent once, with one SENT and
// one DELIVERED entry, whether a worker reads it before, during or after its events.
func TestExclusiveConcurrentDeliverSendsOnce(t *testing.T) {
	ctx := context.Background()
	w, st, ids := setup(t, nil, 40)
	w.Exclusive = NewClaims()
	in := &ingest.Ingester{Store: st, Log: slog.New(slog.DiscardHandler), Now: time.Now}
	ob, err := outbox.New(t.TempDir(), in, outbox.WithDelay(time.Millisecond), outbox.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	w.Mailer = ob
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			order := slices.Clone(ids)
			for pass := range 3 {
				rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				for _, id := range order {
					if err := w.Deliver(ctx, id); err != nil {
						t.Error(err)
					}
				}
				time.Sleep(time.Duration(g+pass) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	if err := ob.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		delivered(t, st, id)
	}
}

// A dispatch that comes while another worker has the email is not lost: that worker delivers
// it once more when it is done (the dispatch may follow a resume or a hold's end).
func TestClaimsRunAgainWhatWasDispatchedMeanwhile(t *testing.T) {
	c := NewClaims()
	if !c.take("em1") || c.take("em1") {
		t.Fatal("a second take of a held id succeeded, or the first failed")
	}
	if !c.drop("em1") {
		t.Error("drop did not ask for the dispatch that came meanwhile")
	}
	if !c.take("em1") || c.drop("em1") {
		t.Error("a lone take and drop asked to run again")
	}
}

// delivered checks that email id is SENT with DELIVERED as its latest status and a history of
// QUEUED, SENT and DELIVERED, each once, and returns it.
func delivered(t *testing.T, st store.Store, id string) (store.Email, []store.Event) {
	t.Helper()
	e, evs, err := st.GetEmailDetail(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for _, ev := range evs {
		statuses = append(statuses, ev.Status)
	}
	if e.Status != store.StatusSent || e.LatestStatus != "DELIVERED" || !slices.Equal(statuses, []string{"QUEUED", "SENT", "DELIVERED"}) {
		t.Errorf("%s: %s/%s, history %v; want SENT/DELIVERED, QUEUED SENT DELIVERED once each", id, e.Status, e.LatestStatus, statuses)
	}
	return e, evs
}

// TestPoolYieldsToTheForeground: while the foreground is busy the pool starts one delivery per
// gap across all its workers (here an hour: one, then none), and once it is idle the rest go
// out at once.
func TestPoolYieldsToTheForeground(t *testing.T) {
	m := &countingMailer{sent: map[string]int{}}
	w, _, ids := setup(t, m, 5)
	p := NewPool(w, 4, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer p.Close(context.Background())
	var busy atomic.Bool
	busy.Store(true)
	p.YieldTo(busy.Load, time.Hour)
	p.Dispatch(context.Background(), ids...)
	m.awaitSent(1, 5*time.Second)
	time.Sleep(100 * time.Millisecond) // room for a worker that would not wait its turn
	if n := m.emails(); n != 1 {
		t.Fatalf("%d sent while the foreground is busy, want the one of the first gap", n)
	}
	busy.Store(false)
	m.awaitSent(len(ids), 5*time.Second)
	if n := m.emails(); n != len(ids) {
		t.Errorf("%d of %d sent once the foreground is idle", n, len(ids))
	}
}

// TestStopDoesNotWaitForSendSlots: when the pool closes, deliveries waiting for a send slot
// (a low SES_MAX_SEND_RATE) give up and put their emails back in QUEUED for the next start,
// instead of being sent one slot after the other before the process may stop.
func TestStopDoesNotWaitForSendSlots(t *testing.T) {
	m := &countingMailer{sent: map[string]int{}}
	w, st, ids := setup(t, m, 8)
	// One send a second (a rate under 1 paces at 1/s), on a clock stopped at the start of a
	// second: the first send goes at once, the next waits a whole second, the one after two.
	start := time.Now().Truncate(time.Second)
	w.Pacer = &Pacer{Slots: st, Rate: 1, Now: func() time.Time { return start }}
	p := NewPool(w, 4, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p.Dispatch(context.Background(), ids...)
	m.awaitSent(1, 10*time.Second)
	time.Sleep(50 * time.Millisecond) // the other workers are waiting for their slots
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p.Close(ctx)
	if n := m.emails(); n != 1 {
		t.Errorf("%d sent, want the first only: the others were waiting for slots when the pool closed", n)
	}
	queued := 0
	for _, id := range ids {
		e, err := st.GetEmail(context.Background(), id)
		switch {
		case err != nil:
			t.Fatal(err)
		case e.Status == store.StatusQueued && e.NotBefore == nil:
			queued++
		case e.Status != store.StatusSent:
			t.Errorf("%s is %s (not before %v), want QUEUED for the next start", id, e.Status, e.NotBefore)
		}
	}
	if queued != len(ids)-1 {
		t.Errorf("%d QUEUED, want %d", queued, len(ids)-1)
	}
}

// TestReplyWaitsForItsParentThroughSES: SES gives a message its Message-ID when it sends it,
// so a reply whose parent is not sent yet waits, QUEUED, and then goes out in its thread.
func TestReplyWaitsForItsParentThroughSES(t *testing.T) {
	var (
		mu  sync.Mutex
		raw = map[string]string{}
	)
	m := mailerFunc(func(_ context.Context, o mail.Outgoing) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		raw[o.EmailID] = string(o.Raw)
		return "ses-" + o.EmailID, nil
	})
	w, st, ids := setup(t, m, 4)
	ctx := context.Background()
	clock := time.Now().UTC()
	w.Now = func() time.Time { return clock }
	w.ReplyReference = func(ref store.Email) string { return "<" + ref.MessageID + "@email.amazonses.com>" }
	later := clock.Add(24 * time.Hour) // past ReplyRecheck: the reply looks again before then
	for child, parent := range map[string]string{ids[1]: ids[0], ids[3]: ids[2]} {
		if _, err := st.UpdateEmail(ctx, child, func(e *store.Email) ([]store.Event, error) { e.InReplyToID = parent; return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.UpdateEmail(ctx, ids[2], func(e *store.Email) ([]store.Event, error) {
		e.Status, e.LatestStatus, e.ScheduledAt = store.StatusScheduled, store.StatusScheduled, &later
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	for reply, until := range map[string]time.Time{ids[1]: clock.Add(ReplyWait), ids[3]: clock.Add(ReplyRecheck)} {
		if err := w.Deliver(ctx, reply); err != nil {
			t.Fatal(err)
		}
		e, _ := st.GetEmail(ctx, reply)
		if e.Status != store.StatusQueued || e.NotBefore == nil || !e.NotBefore.Equal(until) || raw[reply] != "" {
			t.Errorf("reply %s before its parent was sent: %s until %v, sent %v; want QUEUED until %v", reply, e.Status, e.NotBefore, raw[reply] != "", until)
		}
	}
	if err := w.Deliver(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(ReplyWait)
	if err := w.Deliver(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	msg, err := netmail.ReadMessage(strings.NewReader(raw[ids[1]]))
	if err != nil {
		t.Fatalf("the reply was not sent once its parent was: %v", err)
	}
	if got, want := msg.Header.Get("In-Reply-To"), "<ses-"+ids[0]+"@email.amazonses.com>"; got != want {
		t.Errorf("In-Reply-To %q, want the parent's SES Message-ID %q", got, want)
	}
}
