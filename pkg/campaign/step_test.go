package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/schedule"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/bolt"
)

// stepFixture is a campaign of 5 contacts on the embedded store: reader0..reader4, of whom
// reader1 unsubscribed and reader3 is suppressed, so 3 are mailed.
func stepFixture(t *testing.T, batchSize int) (*Service, *bolt.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	now := time.Now().UTC()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.CreateTeam(ctx, store.Team{ID: 1, Name: "t", CreatedAt: now}))
	must(st.CreateDomain(ctx, store.Domain{ID: 1, TeamID: 1, Name: "example.com", Region: "us-east-1",
		Status: store.DomainSuccess, CreatedAt: now, UpdatedAt: now}))
	must(st.CreateContactBook(ctx, store.ContactBook{ID: "cbbench", TeamID: 1, Name: "b", CreatedAt: now, UpdatedAt: now}))
	for i := range 5 {
		c := benchContact(i)
		c.Subscribed = i != 1
		_, err := st.PutContact(ctx, 1, "cbbench", c.Email, c.ID, func(x *store.Contact, _ bool) error {
			*x = c
			return nil
		})
		must(err)
	}
	must(st.PutSuppression(ctx, store.Suppression{TeamID: 1, Email: benchContact(3).Email, Reason: store.ReasonManual, CreatedAt: now}))
	c := benchCampaign()
	c.BatchSize, c.Status = batchSize, store.CampaignScheduled
	c.CreatedAt, c.UpdatedAt = now, now
	must(st.CreateCampaign(ctx, c))
	return benchService(st), st
}

// TestStep: batch steps, table-driven: which steps run, what they write, where the cursor and
// the status end.
func TestStep(t *testing.T) {
	type run struct {
		n        int
		wantNext int
		wantMore bool
	}
	for _, c := range []struct {
		name       string
		batchSize  int
		before     func(t *testing.T, st *bolt.Store)
		steps      []run
		wantStatus string
		wantTotal  int64 // emails written (the campaign's total)
		wantCursor string
		wantReason string // why Mailroom paused it ("" for none)
	}{
		// A batch is 2 emails: the unsubscribed reader1 and the suppressed reader3 take no
		// place in it, so the three others go out in two steps.
		{name: "batches of 2 walk the book in email order", batchSize: 2,
			steps:      []run{{0, 1, true}, {1, 2, false}},
			wantStatus: store.CampaignSent, wantTotal: 3, wantCursor: benchContact(4).Email},
		{name: "a full last batch ends the campaign at once", batchSize: 5,
			steps:      []run{{0, 1, false}},
			wantStatus: store.CampaignSent, wantTotal: 3, wantCursor: benchContact(4).Email},
		{name: "a repeated step writes nothing", batchSize: 2,
			steps:      []run{{0, 1, true}, {0, 0, false}, {0, 0, false}},
			wantStatus: store.CampaignRunning, wantTotal: 2, wantCursor: benchContact(2).Email},
		{name: "a step out of order does nothing", batchSize: 2,
			steps:      []run{{0, 1, true}, {2, 0, false}},
			wantStatus: store.CampaignRunning, wantTotal: 2, wantCursor: benchContact(2).Email},
		{name: "a paused campaign does not move", batchSize: 2,
			before: func(t *testing.T, st *bolt.Store) {
				setStatus(t, st, store.CampaignPaused)
			},
			steps:      []run{{0, 0, false}},
			wantStatus: store.CampaignPaused, wantTotal: 0, wantCursor: ""},
		{name: "a deleted book pauses the campaign", batchSize: 2,
			before: func(t *testing.T, st *bolt.Store) {
				if err := st.DeleteContactBook(context.Background(), 1, "cbbench"); err != nil {
					t.Fatal(err)
				}
			},
			steps:      []run{{0, 0, false}},
			wantStatus: store.CampaignPaused, wantTotal: 0, wantCursor: "", wantReason: "the contact book was deleted"},
		{name: "an unverified domain pauses the campaign", batchSize: 2,
			before: func(t *testing.T, st *bolt.Store) {
				if _, err := st.UpdateDomain(context.Background(), 1, 1, func(d *store.Domain) error {
					d.Status = store.DomainFailed
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			},
			steps:      []run{{0, 0, false}},
			wantStatus: store.CampaignPaused, wantTotal: 0, wantCursor: "", wantReason: "the sending domain is gone or not verified"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, st := stepFixture(t, c.batchSize)
			if c.before != nil {
				c.before(t, st)
			}
			for _, r := range c.steps {
				next, more, err := s.Step(context.Background(), 1, "cpbench", r.n)
				if err != nil || next != r.wantNext || more != r.wantMore {
					t.Fatalf("Step(%d) = %d, %v, %v; want %d, %v", r.n, next, more, err, r.wantNext, r.wantMore)
				}
			}
			got, err := st.GetCampaign(context.Background(), 1, "cpbench")
			if err != nil {
				t.Fatal(err)
			}
			if got.PausedReason != c.wantReason {
				t.Errorf("paused reason %q, want %q", got.PausedReason, c.wantReason)
			}
			if c.wantReason != "" {
				// What paused it would pause it again at once: resume says so instead.
				err := s.Resume(context.Background(), 1, "cpbench")
				if fe, ok := fault.As(err); !ok || fe.Kind != fault.Invalid || !strings.Contains(fe.Message, "cannot be resumed") {
					t.Errorf("resume of a campaign that cannot send: %v, want a 400 saying why", err)
				}
				if again, _ := st.GetCampaign(context.Background(), 1, "cpbench"); again.Status != store.CampaignPaused {
					t.Errorf("after a refused resume the campaign is %s", again.Status)
				}
			}
			if got.Status != c.wantStatus || got.Counters[store.CountTotal] != c.wantTotal || got.Cursor != c.wantCursor {
				t.Errorf("status %s, total %d, cursor %q; want %s, %d, %q", got.Status, got.Counters[store.CountTotal],
					got.Cursor, c.wantStatus, c.wantTotal, c.wantCursor)
			}
			// Nobody unsubscribed or suppressed is ever mailed.
			for _, skipped := range []int{1, 3} {
				if _, err := st.GetEmail(context.Background(), EmailID("cpbench", benchContact(skipped).ID)); err == nil {
					t.Errorf("reader%d was mailed", skipped)
				}
			}
		})
	}
}

func setStatus(t *testing.T, st *bolt.Store, status string) {
	t.Helper()
	if _, err := st.UpdateCampaign(context.Background(), 1, "cpbench", func(c *store.Campaign) error {
		c.Status = status
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// staleHeldIndex lists an email in the held index that the table no longer has (expired, or
// released and the index not caught up).
type staleHeldIndex struct{ Store }

func (staleHeldIndex) HeldEmails(context.Context, int64, string, int) ([]string, error) {
	return []string{"em-gone"}, nil
}

// TestReleaseHeldDoesNotSpinOnAStaleIndex: a step of a running campaign whose held index still
// lists an email that cannot be released returns at once instead of listing it for ever.
func TestReleaseHeldDoesNotSpinOnAStaleIndex(t *testing.T) {
	s, st := stepFixture(t, 10)
	s.Store = staleHeldIndex{st}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.releaseHeld(ctx, 1, "cpbench"); err != nil {
		t.Fatalf("releaseHeld: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("releaseHeld spun until the deadline")
	}
}

// TestScheduleRefusesABatchSizeOutOfRange: the service checks the batch size itself, whoever
// calls it, and a refused schedule changes nothing.
func TestScheduleRefusesABatchSizeOutOfRange(t *testing.T) {
	s, st := stepFixture(t, 7)
	ctx := context.Background()
	for _, n := range []int{-1, MaxBatchSize + 1} {
		err := s.Schedule(ctx, 1, "cpbench", When{Now: true}, n)
		if err == nil || !strings.Contains(err.Error(), "batchSize: must be from 1 to") {
			t.Errorf("batch size %d: %v", n, err)
		}
	}
	c, err := st.GetCampaign(ctx, 1, "cpbench")
	if err != nil || c.BatchSize != 7 {
		t.Fatalf("campaign after refused schedules: batch size %d, %v", c.BatchSize, err)
	}
}

// TestAudience: a campaign's total is its audience, the contacts its steps mail (subscribed,
// not suppressed), counted before its first batch, or over its first steps AudienceChunk
// contacts at a time; until then, the emails written.
func TestAudience(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		chunk       int
		wantCounted bool
		wantTotal   int64 // after the last step
	}{
		{chunk: 0, wantCounted: true, wantTotal: 3},  // the whole book at the first step
		{chunk: 3, wantCounted: true, wantTotal: 3},  // reader0..2 at the first step, reader3..4 at the second
		{chunk: 5, wantCounted: true, wantTotal: 3},  // a chunk the size of the book: counted at the first step
		{chunk: 2, wantCounted: false, wantTotal: 3}, // not done when the last batch went: the emails written
		{chunk: 1, wantCounted: false, wantTotal: 3},
		{chunk: 100, wantCounted: true, wantTotal: 3}, // a chunk past the book
	} {
		s, st := stepFixture(t, 2)
		s.AudienceChunk = c.chunk
		next, more, err := s.Step(ctx, 1, "cpbench", 0)
		if err != nil || next != 1 || !more {
			t.Fatalf("chunk %d: step 0 = %d %v %v", c.chunk, next, more, err)
		}
		first, _ := st.GetCampaign(ctx, 1, "cpbench")
		if (c.chunk == 0 || c.chunk >= 5) && (first.Total() != 3 || !first.AudienceCounted) {
			t.Errorf("after the first batch of 2: total %d (counted %v), want the audience, 3", first.Total(), first.AudienceCounted)
		}
		if _, _, err := s.Step(ctx, 1, "cpbench", 1); err != nil {
			t.Fatal(err)
		}
		got, _ := st.GetCampaign(ctx, 1, "cpbench")
		if got.Status != store.CampaignSent || got.AudienceCounted != c.wantCounted || got.Total() != c.wantTotal {
			t.Errorf("chunk %d: %s, counted %v, audience %d, total %d; want SENT, %v, total %d", c.chunk, got.Status,
				got.AudienceCounted, got.Audience, got.Total(), c.wantCounted, c.wantTotal)
		}
	}
}

// duringCount runs what once, the first time a step reads the book's contacts: a change made
// while a step counts the audience.
type duringCount struct {
	Store
	once sync.Once
	what func()
}

func (d *duringCount) ContactsAfter(ctx context.Context, teamID int64, bookID, cursor string, limit int) ([]store.Contact, error) {
	d.once.Do(d.what)
	return d.Store.ContactsAfter(ctx, teamID, bookID, cursor, limit)
}

// TestAudienceCountThenLook: a campaign deleted, paused, or stepped by another process while a
// step counts its audience gets no batch from that step.
func TestAudienceCountThenLook(t *testing.T) {
	ctx := context.Background()
	for name, change := range map[string]func(s *Service, st *bolt.Store){
		"deleted": func(s *Service, st *bolt.Store) {
			if err := st.DeleteCampaign(ctx, 1, "cpbench"); err != nil {
				t.Error(err)
			}
		},
		"paused": func(s *Service, st *bolt.Store) { setStatus(t, st, store.CampaignPaused) },
		"stepped elsewhere": func(s *Service, st *bolt.Store) {
			other := *s
			other.Store, other.AudienceChunk = st, 1
			if _, _, err := other.Step(ctx, 1, "cpbench", 0); err != nil {
				t.Error(err)
			}
		},
	} {
		s, st := stepFixture(t, 2)
		s.Store = &duringCount{Store: st, what: func() { change(s, st) }}
		if _, _, err := s.Step(ctx, 1, "cpbench", 0); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := st.GetCampaign(ctx, 1, "cpbench")
		wantWritten, wantDone := int64(0), 0
		if name == "stepped elsewhere" {
			wantWritten, wantDone = 2, 1 // the other step's batch, and no second one
		}
		if name == "deleted" {
			if err == nil {
				t.Errorf("deleted: the campaign is back")
			}
			if _, n, _ := st.ListEmails(ctx, store.EmailFilter{TeamID: 1, Limit: 10}); n != 0 {
				t.Errorf("deleted: %d emails written", n)
			}
			continue
		}
		if err != nil || got.Counters[store.CountTotal] != wantWritten || got.BatchesDone != wantDone {
			t.Errorf("%s: %d written, %d steps done (%v); want %d, %d", name, got.Counters[store.CountTotal], got.BatchesDone, err,
				wantWritten, wantDone)
		}
	}
}

// TestAudienceConcurrentFirstSteps: the first step fired many times at once, counting its
// audience a contact at a time, writes one batch.
func TestAudienceConcurrentFirstSteps(t *testing.T) {
	ctx := context.Background()
	s, st := stepFixture(t, 2)
	s.AudienceChunk = 1
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := s.Step(ctx, 1, "cpbench", 0); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, _ := st.GetCampaign(ctx, 1, "cpbench")
	if got.BatchesDone != 1 || got.Counters[store.CountTotal] != 2 {
		t.Errorf("%d steps done, %d written; want 1 and 2", got.BatchesDone, got.Counters[store.CountTotal])
	}
}

// TestAudienceOfEarlierCode: a campaign whose first step ran under code that recorded an
// audience without a cursor (suppressed contacts included) is counted again from the start,
// not on top of it.
func TestAudienceOfEarlierCode(t *testing.T) {
	ctx := context.Background()
	s, st := stepFixture(t, 2)
	if _, err := st.UpdateCampaign(ctx, 1, "cpbench", func(c *store.Campaign) error {
		c.Status, c.Audience = store.CampaignRunning, 4
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Step(ctx, 1, "cpbench", 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetCampaign(ctx, 1, "cpbench"); !got.AudienceCounted || got.Audience != 3 {
		t.Errorf("audience %d (counted %v), want 3", got.Audience, got.AudienceCounted)
	}
}

// failingSuppressions fails the suppression lookup, as a throttled table does.
type failingSuppressions struct{ Store }

var errThrottled = errors.New("throttled")

func (failingSuppressions) GetSuppressions(context.Context, int64, []string) (map[string]store.Suppression, error) {
	return nil, errThrottled
}

// TestAudienceCountFailsWithItsCause: a step whose count cannot read the suppressions fails
// with the store's error (the step is retried), and writes nothing.
func TestAudienceCountFailsWithItsCause(t *testing.T) {
	ctx := context.Background()
	s, st := stepFixture(t, 2)
	s.Store = failingSuppressions{st}
	if _, _, err := s.Step(ctx, 1, "cpbench", 0); !errors.Is(err, errThrottled) {
		t.Errorf("step = %v, want the store's error", err)
	}
	if got, _ := st.GetCampaign(ctx, 1, "cpbench"); got.BatchesDone != 0 || got.Counters[store.CountTotal] != 0 {
		t.Errorf("a failed count wrote a batch: %+v", got)
	}
}

// downScheduler is a scheduler whose invocations (and, when putDown, schedules) fail; a
// hook runs first in each call when set.
type downScheduler struct {
	putDown  bool
	puts     []time.Time
	payloads [][]byte
	names    []string
	deleted  []string
	onPut    func() error
	onInvoke func()
}

func (d *downScheduler) Put(_ context.Context, s schedule.Schedule) error {
	if d.onPut != nil {
		if err := d.onPut(); err != nil {
			return err
		}
	}
	if d.putDown {
		return errors.New("scheduler unavailable")
	}
	d.puts = append(d.puts, s.At)
	d.payloads = append(d.payloads, s.Payload)
	d.names = append(d.names, s.Name)
	return nil
}
func (d *downScheduler) Delete(_ context.Context, name string) error {
	d.deleted = append(d.deleted, name)
	return nil
}
func (d *downScheduler) Invoke(context.Context, []byte) error {
	if d.onInvoke != nil {
		d.onInvoke()
	}
	return errors.New("invoke unavailable")
}

// TestAFailedStartChangesNothing: a schedule whose start cannot be made (the invocation of a
// start now, or the schedule of a later one, fails) is an error, and the campaign is as it
// was: a draft stays a draft; one scheduled for later keeps its time and gets its schedule
// back.
func TestAFailedStartChangesNothing(t *testing.T) {
	ctx := context.Background()
	s, st := stepFixture(t, 7)
	sched := &downScheduler{}
	s.Scheduler = sched
	draft := func() {
		t.Helper()
		if _, err := st.UpdateCampaign(ctx, 1, "cpbench", func(c *store.Campaign) error {
			c.Status, c.ScheduledAt = store.CampaignDraft, nil
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	draft()
	if err := s.Schedule(ctx, 1, "cpbench", When{Now: true}, 9); err == nil {
		t.Fatal("a start now whose invocation failed answered no error")
	}
	if c, _ := st.GetCampaign(ctx, 1, "cpbench"); c.Status != store.CampaignDraft || c.ScheduledAt != nil || c.BatchSize != 7 {
		t.Errorf("after a failed start now: %s at %v, batch size %d; want the draft as it was", c.Status, c.ScheduledAt, c.BatchSize)
	}
	later := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	if err := s.Schedule(ctx, 1, "cpbench", When{At: &later}, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Schedule(ctx, 1, "cpbench", When{Now: true}, 0); err == nil {
		t.Fatal("a start now whose invocation failed answered no error")
	}
	c, _ := st.GetCampaign(ctx, 1, "cpbench")
	if c.Status != store.CampaignScheduled || c.ScheduledAt == nil || !c.ScheduledAt.Equal(later) {
		t.Errorf("after a failed start now: %s at %v, want SCHEDULED at %s", c.Status, c.ScheduledAt, later)
	}
	if n := len(sched.puts); n != 2 || !sched.puts[1].Equal(later) {
		t.Errorf("schedules put: %v, want the later start's twice (made, then put back)", sched.puts)
	}
	draft()
	sched.putDown = true
	if err := s.Schedule(ctx, 1, "cpbench", When{At: &later}, 0); err == nil {
		t.Fatal("a later start whose schedule failed answered no error")
	}
	if c, _ := st.GetCampaign(ctx, 1, "cpbench"); c.Status != store.CampaignDraft || c.ScheduledAt != nil {
		t.Errorf("after a failed schedule: %s at %v, want the draft", c.Status, c.ScheduledAt)
	}

	// A retry that succeeded while the first request's schedule was failing is not undone by
	// the first: the campaign keeps the retry's schedule.
	draft()
	sched.putDown = false
	first := true
	sched.onPut = func() error {
		if !first {
			return nil
		}
		first = false
		if err := s.Schedule(ctx, 1, "cpbench", When{At: &later}, 0); err != nil { // the retry
			t.Errorf("the retry: %v", err)
		}
		return errors.New("scheduler timed out")
	}
	if err := s.Schedule(ctx, 1, "cpbench", When{At: &later}, 0); err == nil {
		t.Fatal("the first request's failed schedule answered no error")
	}
	if c, _ := st.GetCampaign(ctx, 1, "cpbench"); c.Status != store.CampaignScheduled || c.ScheduledAt == nil || !c.ScheduledAt.Equal(later) {
		t.Errorf("after a retry that succeeded: %s at %v, want SCHEDULED at %s", c.Status, c.ScheduledAt, later)
	}
	// An invocation that failed after it was made (the step already runs) is no failure.
	sched.onPut = nil
	draft()
	sched.onInvoke = func() {
		if _, err := st.UpdateCampaign(ctx, 1, "cpbench", func(c *store.Campaign) error {
			c.Status = store.CampaignRunning
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Schedule(ctx, 1, "cpbench", When{Now: true}, 0); err != nil {
		t.Errorf("a start that runs answered %v", err)
	}
	if c, _ := st.GetCampaign(ctx, 1, "cpbench"); c.Status != store.CampaignRunning {
		t.Errorf("a start that runs: %s", c.Status)
	}
}

// hold makes the campaign's email to contact i one its worker held (the campaign paused).
func hold(t *testing.T, st *bolt.Store, i int) string {
	t.Helper()
	id := EmailID("cpbench", benchContact(i).ID)
	if _, err := st.UpdateEmail(context.Background(), id, func(e *store.Email) ([]store.Event, error) {
		e.Held = true
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

func held(t *testing.T, st *bolt.Store, id string) bool {
	t.Helper()
	e, err := st.GetEmail(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e.Held
}

// TestDeletingAPausedCampaignReleasesWhatItHeld: the emails a paused campaign held go back
// to the worker when it is deleted even if the step the deletion invokes never runs, because
// the deletion first put that step a minute ahead; a deletion that cannot put it fails before
// it deletes anything.
func TestDeletingAPausedCampaignReleasesWhatItHeld(t *testing.T) {
	s, st := stepFixture(t, 2)
	ctx := context.Background()
	if _, _, err := s.Step(ctx, 1, "cpbench", 0); err != nil {
		t.Fatal(err)
	}
	setStatus(t, st, store.CampaignPaused)
	id := hold(t, st, 0)

	s.Scheduler = &downScheduler{putDown: true}
	if _, err := s.Delete(ctx, 1, "cpbench"); err == nil {
		t.Fatal("Delete succeeded though nothing would release the held emails")
	}
	if _, err := st.GetCampaign(ctx, 1, "cpbench"); err != nil {
		t.Fatalf("the campaign after a failed Delete: %v", err)
	}

	sched := &downScheduler{} // schedules are put; the direct invocation fails
	s.Scheduler = sched
	before := time.Now()
	if _, err := s.Delete(ctx, 1, "cpbench"); err != nil {
		t.Fatal(err)
	}
	if len(sched.puts) != 1 || sched.puts[0].Before(before) || sched.puts[0].After(time.Now().Add(releaseBackstop)) {
		t.Fatalf("schedules put by Delete: %v, want one within %v", sched.puts, releaseBackstop)
	}
	if want := ScheduleName("cpbench", 1, 0); !slices.Contains(sched.deleted, want) {
		t.Errorf("schedules deleted: %v, want the pending step's, %s (it would wait there until its time)", sched.deleted, want)
	}
	if !held(t, st, id) {
		t.Fatal("released though the invocation failed (the test holds nothing)")
	}
	if err := s.Fire(ctx, sched.payloads[0]); err != nil { // the release fires
		t.Fatal(err)
	}
	if held(t, st, id) {
		t.Fatal("the deleted campaign's email is still held after its scheduled release")
	}
}

// failingDelete is a store whose campaign deletions fail.
type failingDelete struct{ *bolt.Store }

func (failingDelete) DeleteCampaign(context.Context, int64, string) error {
	return errors.New("table unavailable")
}

// TestAFailedDeletionChangesNothing: a deletion that fails after putting its release leaves
// the campaign as it was: its next batch keeps its time, and the release, when it fires,
// finds the campaign there and does nothing (not a batch early).
func TestAFailedDeletionChangesNothing(t *testing.T) {
	s, st := stepFixture(t, 2)
	ctx := context.Background()
	if _, _, err := s.Step(ctx, 1, "cpbench", 0); err != nil {
		t.Fatal(err)
	}
	sched := &downScheduler{}
	s.Scheduler = sched
	s.Store = failingDelete{st}
	if _, err := s.Delete(ctx, 1, "cpbench"); err == nil {
		t.Fatal("Delete succeeded though the store failed")
	}
	if len(sched.names) != 1 || sched.names[0] != ReleaseScheduleName("cpbench") {
		t.Fatalf("schedules put %v, want the release alone (the next step's stays)", sched.names)
	}
	if err := s.Fire(ctx, sched.payloads[0]); err != nil {
		t.Fatal(err)
	}
	c, err := st.GetCampaign(ctx, 1, "cpbench")
	if err != nil || c.BatchesDone != 1 || c.Status != store.CampaignRunning {
		t.Fatalf("after the release of a campaign still there: %s, %d batches, %v; want RUNNING after 1", c.Status, c.BatchesDone, err)
	}
}

// holdInStep is a store on which a worker holds the first email a step writes, and on which
// the first release of it fails.
type holdInStep struct {
	*bolt.Store
	id        string
	failFirst bool
	atStep    int // the step (the campaign's BatchesDone) whose first email written is held
}

func (h *holdInStep) CreateEmails(ctx context.Context, emails []store.Email, first []store.Event) error {
	if err := h.Store.CreateEmails(ctx, emails, first); err != nil || h.id != "" {
		return err
	}
	if c, err := h.Store.GetCampaign(ctx, 1, "cpbench"); err != nil || c.BatchesDone < h.atStep {
		return err
	}
	h.id = emails[0].ID
	_, err := h.Store.UpdateEmail(ctx, h.id, func(e *store.Email) ([]store.Event, error) {
		e.Held = true
		return nil, nil
	})
	return err
}

func (h *holdInStep) UpdateEmail(ctx context.Context, id string, fn func(*store.Email) ([]store.Event, error)) (store.Email, error) {
	if id == h.id && h.failFirst {
		h.failFirst = false
		return store.Email{}, errors.New("table unavailable")
	}
	return h.Store.UpdateEmail(ctx, id, fn)
}

// TestTheLastStepRetriedReleasesWhatItHeld: the last step's release of held emails failing
// fails the step, and its retry (the campaign SENT by then) releases them.
func TestTheLastStepRetriedReleasesWhatItHeld(t *testing.T) {
	s, st := stepFixture(t, 10)
	ctx := context.Background()
	h := &holdInStep{Store: st, failFirst: true}
	s.Store = h
	if _, _, err := s.Step(ctx, 1, "cpbench", 0); err == nil {
		t.Fatal("the last step succeeded though its release failed")
	}
	c, err := st.GetCampaign(ctx, 1, "cpbench")
	if err != nil || c.Status != store.CampaignSent || h.id == "" || !held(t, st, h.id) {
		t.Fatalf("after the failed release: %s, %v, %q held; want SENT and one email still held", c.Status, err, h.id)
	}
	if _, _, err := s.Step(ctx, 1, "cpbench", 0); err != nil { // the retry
		t.Fatal(err)
	}
	if held(t, st, h.id) {
		t.Fatal("held after the last step's retry")
	}
}

// TestARetriedChainReleasesWhatItHeld: a Fire that ran several steps (no batch window) and
// failed in its last step's release is retried with the step it started from, not the last:
// the retry finds the campaign SENT and releases what it held all the same.
func TestARetriedChainReleasesWhatItHeld(t *testing.T) {
	s, st := stepFixture(t, 2) // three contacts to mail: two steps
	ctx := context.Background()
	h := &holdInStep{Store: st, failFirst: true, atStep: 1} // held in the last step
	s.Store = h
	payload, _ := json.Marshal(Payload{CampaignID: "cpbench", TeamID: 1, Step: 0})
	if err := s.Fire(ctx, payload); err == nil {
		t.Fatal("the chain succeeded though its last release failed")
	}
	c, err := st.GetCampaign(ctx, 1, "cpbench")
	if err != nil || c.Status != store.CampaignSent || c.BatchesDone != 2 || h.id == "" || !held(t, st, h.id) {
		t.Fatalf("after the failed release: %s, %d batches, %v, %q; want SENT after 2 and an email held", c.Status, c.BatchesDone, err, h.id)
	}
	if err := s.Fire(ctx, payload); err != nil { // the retry, with the same payload
		t.Fatal(err)
	}
	if held(t, st, h.id) {
		t.Fatal("held after the retried chain")
	}
}
