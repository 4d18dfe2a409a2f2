// Package faults drives 10,000 emails through the real send path (the SendWorker stream
// handler around deliver.Worker, the SES event ingester, the reconciler's requeue) with the
// faults AWS really has: worker invocations killed at any point (before or after SES accepted a
// message), DynamoDB writes that commit but whose answer is lost, and SES calls that time out
// before or after SES accepted the message. It checks the delivery invariants afterwards.
package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/mailroom/mailroom/pkg/deliver"
	"github.com/mailroom/mailroom/pkg/housekeeping"
	"github.com/mailroom/mailroom/pkg/ingest"
	"github.com/mailroom/mailroom/pkg/lambdafn"
	"github.com/mailroom/mailroom/pkg/mail"
	"github.com/mailroom/mailroom/pkg/sesevent"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/bolt"
)

// Fault rates.
const (
	emails          = 10000
	pKill           = 0.10  // a worker invocation is killed at a random point
	pLostWrite      = 0.03  // an email write commits and its answer is lost
	pSESThrottle    = 0.02  // SES refuses the call (throttled): not accepted
	pSESTimeoutLost = 0.02  // SES times out before accepting
	pSESAnswerLost  = 0.03  // SES accepts, and the answer is lost (a timeout)
	pSESReject      = 0.005 // SES rejects the message for good
	batchSize       = 10    // the event source mapping's BatchSize
	streamRetries   = 5     // its MaximumRetryAttempts; then the batch is dropped
	tick            = 30 * time.Second
)

var errKilled = errors.New("killed")

// invocation is one run of the send worker function; once dead, nothing it does takes effect.
type invocation struct {
	mu     sync.Mutex
	ops    int
	killAt int // 0: never
}

type invKey struct{}

// step counts an operation and reports whether the invocation is dead by now.
func step(ctx context.Context) bool {
	inv, _ := ctx.Value(invKey{}).(*invocation)
	if inv == nil {
		return false
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.ops++
	return inv.killAt > 0 && inv.ops >= inv.killAt
}

func dead(ctx context.Context) bool {
	inv, _ := ctx.Value(invKey{}).(*invocation)
	if inv == nil {
		return false
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.killAt > 0 && inv.ops >= inv.killAt
}

// sim is the world: the store, the stream, SES, its events and a clock.
type sim struct {
	t     *testing.T
	inner *bolt.Store

	mu      sync.Mutex
	rng     *rand.Rand
	now     time.Time
	seq     int
	stream  []record // records not yet handled, in order
	events  []sesevent.Event
	calls   map[string]int // SES calls per email
	refused map[string]int // calls SES did not accept (throttled, timed out before accepting)
	msgs    map[string][]string
	lost    map[string]bool // emails whose accepted message's answer was lost
	late    int             // calls after SES had accepted a message for the email
	stats   map[string]int
}

type record struct {
	seq     string
	id      string
	retries int
}

func (s *sim) roll() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.Float64()
}

func (s *sim) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

func (s *sim) count(k string) {
	s.mu.Lock()
	s.stats[k]++
	s.mu.Unlock()
}

// emit is the stream with the send worker's filter: a committed write that leaves an email
// QUEUED is a record for the worker.
func (s *sim) emit(e store.Email) {
	if e.Status != store.StatusQueued {
		return
	}
	s.mu.Lock()
	s.seq++
	s.stream = append(s.stream, record{seq: fmt.Sprintf("%012d", s.seq), id: e.ID})
	s.mu.Unlock()
}

// faultStore is the store as a worker sees it over the network.
type faultStore struct {
	store.Store
	s *sim
}

func (f faultStore) UpdateEmail(ctx context.Context, id string, fn func(*store.Email) ([]store.Event, error)) (store.Email, error) {
	if step(ctx) {
		return store.Email{}, errKilled
	}
	e, err := f.Store.UpdateEmail(ctx, id, fn)
	if err != nil {
		return e, err
	}
	f.s.emit(e)
	if dead(ctx) {
		return store.Email{}, errKilled
	}
	if f.s.roll() < pLostWrite {
		f.s.count("lost write answers")
		if f.s.roll() < 0.5 {
			return store.Email{}, errors.New("connection reset: the write's answer was lost")
		}
		// The SDK retries the conditional write, which now finds its own committed change.
		e, err = f.Store.UpdateEmail(ctx, id, fn)
		if err == nil {
			f.s.emit(e)
		}
	}
	return e, err
}

func (f faultStore) GetEmail(ctx context.Context, id string) (store.Email, error) {
	if step(ctx) {
		return store.Email{}, errKilled
	}
	return f.Store.GetEmail(ctx, id)
}

func (f faultStore) GetCampaign(ctx context.Context, teamID int64, id string) (store.Campaign, error) {
	if step(ctx) {
		return store.Campaign{}, errKilled
	}
	return f.Store.GetCampaign(ctx, teamID, id)
}

func (f faultStore) GetCampaignState(ctx context.Context, teamID int64, id string) (store.Campaign, error) {
	if step(ctx) {
		return store.Campaign{}, errKilled
	}
	return f.Store.GetCampaignState(ctx, teamID, id)
}

func (f faultStore) GetDomain(ctx context.Context, teamID, id int64) (store.Domain, error) {
	if step(ctx) {
		return store.Domain{}, errKilled
	}
	return f.Store.GetDomain(ctx, teamID, id)
}

func (f faultStore) GetSuppressions(ctx context.Context, teamID int64, addrs []string) (map[string]store.Suppression, error) {
	if step(ctx) {
		return nil, errKilled
	}
	return f.Store.GetSuppressions(ctx, teamID, addrs)
}

// ses is SES: it accepts a message (and later publishes its Send and Delivery events), or
// throttles, times out before or after accepting, or rejects.
type ses struct{ s *sim }

func (m ses) Send(ctx context.Context, o mail.Outgoing) (string, error) {
	s := m.s
	if step(ctx) {
		return "", errKilled
	}
	r := s.roll()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[o.EmailID]++
	if len(s.msgs[o.EmailID]) > 0 {
		s.late++
	}
	switch {
	case r < pSESThrottle:
		s.refused[o.EmailID]++
		return "", fmt.Errorf("throttled: %w", mail.ErrThrottled)
	case r < pSESThrottle+pSESTimeoutLost:
		s.refused[o.EmailID]++
		return "", fmt.Errorf("timeout before SES accepted: %w", mail.ErrAmbiguous)
	case r < pSESThrottle+pSESTimeoutLost+pSESReject:
		s.refused[o.EmailID]++
		return "", fmt.Errorf("invalid parameter: %w", mail.ErrRejected)
	}
	msgID := fmt.Sprintf("0100-%s-%d", o.EmailID, len(s.msgs[o.EmailID])+1)
	s.msgs[o.EmailID] = append(s.msgs[o.EmailID], msgID)
	at := s.now
	for _, typ := range []string{"Send", "Delivery"} {
		ev := sesevent.Event{EventType: typ, Mail: sesevent.Mail{Timestamp: at, MessageID: msgID,
			Destination: o.Recipients, Tags: map[string][]string{sesevent.EmailIDTag: {o.EmailID}}}}
		if typ == "Send" {
			ev.Send = &sesevent.Send{}
		} else {
			ev.Delivery = &sesevent.Delivery{Timestamp: at.Add(time.Second), Recipients: o.Recipients}
		}
		s.events = append(s.events, ev)
	}
	if r < pSESThrottle+pSESTimeoutLost+pSESReject+pSESAnswerLost {
		s.lost[o.EmailID] = true
		return "", fmt.Errorf("timeout after SES accepted: %w", mail.ErrAmbiguous)
	}
	return msgID, nil
}

func TestTenThousandEmailsUnderFaults(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("FAULTS_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (FAULTS_SEED=%d reproduces the fault sequence, not the goroutine interleaving)", seed, seed)
	inner, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	s := &sim{t: t, inner: inner, rng: rand.New(rand.NewPCG(seed, 1)),
		now:   time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC),
		calls: map[string]int{}, refused: map[string]int{}, msgs: map[string][]string{}, lost: map[string]bool{},
		stats: map[string]int{}}
	ctx := context.Background()
	seedEmails(t, inner, s)
	st := faultStore{Store: inner, s: s}
	log := slog.New(slog.DiscardHandler)
	w := &deliver.Worker{Store: st, Mailer: ses{s}, Now: s.clock, Log: log,
		Backoff: func(int) time.Duration { return time.Microsecond }}
	handler := lambdafn.SendWorker(w, log)
	in := &ingest.Ingester{Store: st, Now: s.clock, Log: log}
	rq := &housekeeping.Requeue{Store: st, Now: s.clock, Log: log}

	rounds := 0
	for ; rounds < 400; rounds++ {
		s.runStream(ctx, handler)
		s.deliverEvents(ctx, in)
		if rounds%10 == 9 { // every 5 minutes
			if _, err := rq.Run(ctx); err != nil {
				s.count("reconciler runs with errors") // a lost answer; the next run continues
			}
		}
		s.mu.Lock()
		s.now = s.now.Add(tick)
		idle := len(s.stream) == 0 && len(s.events) == 0
		s.mu.Unlock()
		if idle && allFinal(t, inner) {
			break
		}
	}
	t.Logf("%d rounds (%v simulated); faults: %v", rounds, time.Duration(rounds)*tick, s.stats)
	s.check(t, inner)
}

func seedEmails(t *testing.T, st *bolt.Store, s *sim) {
	ctx := context.Background()
	if err := st.CreateDomain(ctx, store.Domain{ID: 1, TeamID: 1, Name: "example.com", Status: store.DomainSuccess}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateCampaign(ctx, store.Campaign{ID: "cpfaults", TeamID: 1, DomainID: 1, Name: "faults",
		Status: store.CampaignRunning, BatchSize: emails, CreatedAt: s.now, UpdatedAt: s.now}); err != nil {
		t.Fatal(err)
	}
	text := "hello"
	for start := 0; start < emails; start += 500 {
		var list []store.Email
		var evs []store.Event
		for i := start; i < start+500; i++ {
			id := fmt.Sprintf("em%05d", i)
			list = append(list, store.Email{ID: id, TeamID: 1, DomainID: 1, CampaignID: "cpfaults",
				From: "news@example.com", To: []string{fmt.Sprintf("r%05d@example.org", i)}, Subject: "s",
				Content: store.Content{Text: &text}, Status: store.StatusQueued, LatestStatus: store.StatusQueued,
				Counted: []string{store.CountTotal}, CreatedAt: s.now, UpdatedAt: s.now})
			evs = append(evs, store.Event{ID: "0-QUEUED", EmailID: id, Status: store.StatusQueued, CreatedAt: s.now})
		}
		if err := st.CreateEmails(ctx, list, evs); err != nil {
			t.Fatal(err)
		}
		for _, e := range list {
			s.emit(e) // the inserts' stream records
		}
	}
}

// runStream hands the stream to the worker in batches, four shards at a time, as the event
// source mapping does: a killed invocation retries its whole batch, a reported failure retries
// from that record on, and a batch that keeps failing is dropped after its retries (its emails
// stay where they are, for the reconciler).
func (s *sim) runStream(ctx context.Context, handler func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)) {
	s.mu.Lock()
	pending := s.stream
	s.stream = nil
	s.mu.Unlock()
	var batches [][]record
	for len(pending) > 0 {
		n := min(batchSize, len(pending))
		batches = append(batches, pending[:n])
		pending = pending[n:]
	}
	var retry []record
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4) // ParallelizationFactor
	for _, b := range batches {
		inv := &invocation{}
		if s.roll() < pKill {
			s.mu.Lock()
			inv.killAt = 1 + s.rng.IntN(8*len(b))
			s.mu.Unlock()
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ev := events.DynamoDBEvent{}
			for _, r := range b {
				ev.Records = append(ev.Records, events.DynamoDBEventRecord{EventName: "MODIFY",
					Change: events.DynamoDBStreamRecord{SequenceNumber: r.seq, Keys: map[string]events.DynamoDBAttributeValue{
						"PK": events.NewStringAttribute("EMAIL#" + r.id), "SK": events.NewStringAttribute("EMAIL")}}})
			}
			ictx, cancel := context.WithTimeout(context.WithValue(ctx, invKey{}, inv), time.Minute)
			resp, _ := handler(ictx, ev)
			cancel()
			from := len(b)
			if dead(ictx) {
				s.count("worker invocations killed")
				from = 0
			} else if len(resp.BatchItemFailures) > 0 {
				from = slices.IndexFunc(b, func(r record) bool { return r.seq == resp.BatchItemFailures[0].ItemIdentifier })
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range b[from:] {
				if r.retries < streamRetries {
					r.retries++
					retry = append(retry, r)
				} else {
					s.count("stream records dropped after their retries")
				}
			}
		}()
	}
	wg.Wait()
	s.mu.Lock()
	s.stream = append(retry, s.stream...)
	s.mu.Unlock()
}

// deliverEvents publishes SES's events in a random order; one that fails (its email's write
// answer lost) stays queued, as SQS redelivers it.
func (s *sim) deliverEvents(ctx context.Context, in *ingest.Ingester) {
	s.mu.Lock()
	evs := s.events
	s.events = nil
	s.rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	s.mu.Unlock()
	var again []sesevent.Event
	for _, ev := range evs {
		if err := in.Publish(ctx, ev); err != nil {
			again = append(again, ev)
		}
	}
	s.mu.Lock()
	s.events = append(s.events, again...)
	s.mu.Unlock()
}

// allFinal reports whether every email has reached a final status.
func allFinal(t *testing.T, st *bolt.Store) bool {
	for i := range emails {
		e, err := st.GetEmail(context.Background(), fmt.Sprintf("em%05d", i))
		if err != nil {
			t.Fatal(err)
		}
		if !final(e) {
			return false
		}
	}
	return true
}

func final(e store.Email) bool {
	return (e.Status == store.StatusSent && e.LatestStatus == "DELIVERED") || e.Status == store.StatusFailed
}

func (s *sim) check(t *testing.T, st *bolt.Store) {
	ctx := context.Background()
	s.mu.Lock()
	defer s.mu.Unlock()
	var delivered, failed, extraCalls, lostMatched int
	for i := range emails {
		id := fmt.Sprintf("em%05d", i)
		e, evs, err := st.GetEmailDetail(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		msgs := s.msgs[id]
		switch {
		case !final(e):
			t.Errorf("%s is not final: %s (latest %s)", id, e.Status, e.LatestStatus)
			continue
		case len(msgs) > 1:
			t.Errorf("%s: SES accepted %d messages for it, want 1", id, len(msgs))
		case e.Status == store.StatusFailed && len(msgs) != 0:
			t.Errorf("%s: FAILED though SES accepted it", id)
		case e.Status == store.StatusSent && (len(msgs) != 1 || e.MessageID != msgs[0]):
			t.Errorf("%s: SENT with message id %q, SES accepted %v", id, e.MessageID, msgs)
		}
		// Every call beyond the first followed one SES did not accept.
		if extra := s.calls[id] - 1; extra != s.refused[id] && !(e.Status == store.StatusFailed && extra == s.refused[id]-1) {
			t.Errorf("%s: %d SES calls, %d of them not accepted", id, s.calls[id], s.refused[id])
		}
		extraCalls += s.calls[id] - 1
		if s.lost[id] {
			lostMatched++ // SENT with the accepted message's id, checked above: matched by its events
		}
		sent := 0
		for _, ev := range evs {
			if ev.Status == store.StatusSent {
				sent++
			}
		}
		if e.Status == store.StatusSent {
			delivered++
			if sent != 1 {
				t.Errorf("%s: %d SENT entries in its history, want 1", id, sent)
			}
		} else {
			failed++
		}
	}
	if s.late != 0 {
		t.Errorf("%d SES calls for emails SES had already accepted", s.late)
	}
	c, err := st.GetCampaign(ctx, 1, "cpfaults")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{store.CountTotal: emails, store.CountSent: int64(delivered), store.CountDelivered: int64(delivered)}
	for k, n := range want {
		if c.Counters[k] != n {
			t.Errorf("campaign counter %s = %d, want %d", k, c.Counters[k], n)
		}
	}
	t.Logf("%d emails: %d delivered (each accepted once by SES), %d failed (rejected); %d SES calls beyond one per email, each after a call SES did not accept; %d answers lost after SES accepted, each email matched by its events",
		emails, delivered, failed, extraCalls, lostMatched)
	if lostMatched == 0 || s.stats["worker invocations killed"] == 0 || s.stats["lost write answers"] == 0 {
		t.Errorf("the faults did not happen: %d lost SES answers, %v", lostMatched, s.stats)
	}
}
