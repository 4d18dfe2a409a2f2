package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/mail"
	"github.com/mailroom/mailroom/pkg/mail/mailtest"
	"github.com/mailroom/mailroom/pkg/sesevent"
)

// recorder is a Sink that keeps what it receives and can fail the first calls.
type recorder struct {
	mu     sync.Mutex
	events []sesevent.Event
	fail   int // how many calls fail before one succeeds
	calls  int
}

func (r *recorder) Publish(ctx context.Context, e sesevent.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.fail > 0 {
		r.fail--
		return errors.New("sink down")
	}
	r.events = append(r.events, e)
	return nil
}

func (r *recorder) snapshot() []sesevent.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newOutbox(t *testing.T, sink Sink, opts ...Option) *Outbox {
	t.Helper()
	o, err := New(t.TempDir(), sink, append([]Option{WithLogger(quiet())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := o.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return o
}

func TestContract(t *testing.T) {
	mailtest.Run(t, func(t *testing.T) (mail.Mailer, mailtest.Inspect) {
		o := newOutbox(t, &recorder{}, WithDelay(0))
		return o, func(t *testing.T, emailID, _ string) []byte {
			data, err := os.ReadFile(o.Path(emailID))
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	})
}

func build(t *testing.T, emailID string, to, cc []string) mail.Outgoing {
	t.Helper()
	m := mail.Message{EmailID: emailID, From: "Acme <hello@acme.test>", To: to, CC: cc,
		Subject: "Grüße", Text: "hello"}
	raw, err := mail.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	return mail.Outgoing{EmailID: emailID, From: m.From, Recipients: m.Recipients(), To: m.To, Raw: raw}
}

func TestSimulator(t *testing.T) {
	type want struct {
		eventType, subType string
	}
	cases := []struct {
		rcpt string
		want []want
	}{
		{"success@simulator.amazonses.com", []want{{sesevent.TypeDelivery, ""}}},
		{"success+label@simulator.amazonses.com", []want{{sesevent.TypeDelivery, ""}}},
		{"bounce@simulator.amazonses.com", []want{{sesevent.TypeBounce, sesevent.BounceSubTypeGeneral}}},
		{"Bounce+x@Simulator.AmazonSES.com", []want{{sesevent.TypeBounce, sesevent.BounceSubTypeGeneral}}},
		{"suppressionlist@simulator.amazonses.com", []want{{sesevent.TypeBounce, sesevent.BounceSubTypeOnAccountSuppressionList}}},
		{"complaint@simulator.amazonses.com", []want{{sesevent.TypeDelivery, ""}, {sesevent.TypeComplaint, "abuse"}}},
		{"ooto@simulator.amazonses.com", []want{{sesevent.TypeDelivery, ""}}},
		{"Jane <jane@example.com>", []want{{sesevent.TypeDelivery, ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.rcpt, func(t *testing.T) {
			t.Parallel()
			sink := &recorder{}
			o := newOutbox(t, sink, WithDelay(time.Millisecond))
			out := build(t, "em-sim", []string{tc.rcpt}, nil)
			out.Recipients = []string{tc.rcpt} // just this one
			msgID, err := o.Send(context.Background(), out)
			if err != nil {
				t.Fatal(err)
			}
			if err := o.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := sink.snapshot()
			if len(got) != len(tc.want) {
				t.Fatalf("events = %d, want %d: %+v", len(got), len(tc.want), got)
			}
			addr := address(tc.rcpt)
			for i, w := range tc.want {
				e := got[i]
				if e.EventType != w.eventType {
					t.Errorf("event %d = %s, want %s", i, e.EventType, w.eventType)
				}
				if e.EmailID() != "em-sim" || e.Mail.MessageID != msgID || !slices.Equal(e.Mail.Destination, []string{addr}) {
					t.Errorf("mail = %+v", e.Mail)
				}
				if e.Mail.CommonHeaders == nil || e.Mail.CommonHeaders.Subject != "Grüße" {
					t.Errorf("commonHeaders = %+v", e.Mail.CommonHeaders)
				}
				if !slices.Equal(e.Recipients(), []string{addr}) {
					t.Errorf("recipients = %v", e.Recipients())
				}
				switch e.EventType {
				case sesevent.TypeBounce:
					if e.Bounce.BounceType != sesevent.BounceTypePermanent || e.Bounce.BounceSubType != w.subType {
						t.Errorf("bounce = %+v", e.Bounce)
					}
				case sesevent.TypeComplaint:
					if e.Complaint.ComplaintFeedbackType != w.subType {
						t.Errorf("complaint = %+v", e.Complaint)
					}
					if !e.Timestamp().After(got[i-1].Timestamp()) {
						t.Errorf("complaint at %v, not after its delivery at %v", e.Timestamp(), got[i-1].Timestamp())
					}
				}
				// What the events function stores must decode like an SES record.
				if _, err := sesevent.Decode(mustJSON(t, e)); err != nil {
					t.Errorf("event does not decode as an SES record: %v", err)
				}
				if e.Timestamp().Before(e.Mail.Timestamp) {
					t.Errorf("event time %v before send time %v", e.Timestamp(), e.Mail.Timestamp)
				}
			}
		})
	}
}

func TestEveryEnvelopeRecipient(t *testing.T) {
	sink := &recorder{}
	o := newOutbox(t, sink, WithDelay(0))
	out := build(t, "em-all", []string{"bounce@simulator.amazonses.com"}, []string{"success@simulator.amazonses.com"})
	out.Recipients = append(out.Recipients, "hidden@acme.test") // bcc: envelope only
	if _, err := o.Send(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range sink.snapshot() {
		types = append(types, e.EventType+":"+e.Recipients()[0])
		if len(e.Mail.Destination) != 3 {
			t.Errorf("destination = %v", e.Mail.Destination)
		}
	}
	want := []string{"Bounce:bounce@simulator.amazonses.com", "Delivery:success@simulator.amazonses.com",
		"Delivery:hidden@acme.test"}
	if !slices.Equal(types, want) {
		t.Errorf("events = %v, want %v", types, want)
	}
}

func TestEventsComeAfterTheDelay(t *testing.T) {
	sink := &recorder{}
	o := newOutbox(t, sink, WithDelay(200*time.Millisecond))
	if _, err := o.Send(context.Background(), build(t, "em-delay", []string{"a@b.test"}, nil)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(sink.snapshot()); n != 0 {
		t.Fatalf("%d events before the delay", n)
	}
	if err := o.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(sink.snapshot()); n != 1 {
		t.Fatalf("Close flushed %d events, want 1", n)
	}
}

func TestSinkErrorsAreRetried(t *testing.T) {
	sink := &recorder{fail: 2}
	o := newOutbox(t, sink, WithDelay(0), WithRetry(3, time.Millisecond))
	if _, err := o.Send(context.Background(), build(t, "em-retry", []string{"a@b.test"}, nil)); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(sink.snapshot()) != 1 || sink.calls != 3 {
		t.Errorf("events %d after %d calls; want 1 after 3", len(sink.snapshot()), sink.calls)
	}

	// A sink that never recovers: the event is given up after the attempts, and the outbox
	// goes on with the next message.
	sink = &recorder{fail: 100}
	o = newOutbox(t, sink, WithDelay(0), WithRetry(2, time.Millisecond))
	for _, id := range []string{"em-a", "em-b"} {
		if _, err := o.Send(context.Background(), build(t, id, []string{"a@b.test"}, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sink.calls != 4 {
		t.Errorf("calls = %d, want 4 (2 messages x 2 attempts)", sink.calls)
	}
}

func TestCloseGivesUpWithItsContext(t *testing.T) {
	sink := &recorder{}
	o, err := New(t.TempDir(), sink, WithLogger(quiet()), WithDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Send(context.Background(), build(t, "em-slow", []string{"a@b.test"}, nil)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := o.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
	if len(sink.snapshot()) != 0 {
		t.Error("events published after Close gave up")
	}
	if _, err := o.Send(context.Background(), build(t, "em-late", []string{"a@b.test"}, nil)); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close = %v, want ErrClosed", err)
	}
	if err := o.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestFilesAreAtomicAndNamedByEmailID(t *testing.T) {
	dir := t.TempDir()
	o, err := New(dir, &recorder{}, WithLogger(quiet()), WithDelay(0))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(context.Background())
	out := build(t, "em-file", []string{"a@b.test"}, nil)
	if _, err := o.Send(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{journalName, "em-file.eml"}) {
		t.Errorf("directory holds %v, want the journal and em-file.eml", names)
	}
	if o.Path("em-file") != filepath.Join(dir, "em-file.eml") {
		t.Errorf("Path = %s", o.Path("em-file"))
	}
	for _, bad := range []string{"", "../escape", "a/b", ".."} {
		out.EmailID = bad
		if _, err := o.Send(context.Background(), out); !errors.Is(err, mail.ErrRejected) {
			t.Errorf("email id %q: err = %v, want ErrRejected", bad, err)
		}
	}
}

func TestNewRejectsNilSink(t *testing.T) {
	if _, err := New(t.TempDir(), nil); err == nil {
		t.Error("New accepted a nil sink")
	}
}

func mustJSON(t *testing.T, e sesevent.Event) []byte {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEventsCutOffByCloseArePublishedAfterRestart: events Close could not wait for are spooled
// and published by the next Outbox on the same directory, so no email stays SENT for ever.
func TestEventsCutOffByCloseArePublishedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	first, err := New(dir, &recorder{}, WithLogger(quiet()), WithDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"em-one", "em-two"} {
		if _, err := first.Send(context.Background(), build(t, id, []string{"bounce@simulator.amazonses.com"}, nil)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_ = first.Close(ctx)

	sink := &recorder{}
	second, err := New(dir, sink, WithLogger(quiet()), WithDelay(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Close(context.Background()); err != nil { // flushes the spooled events
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range sink.snapshot() {
		got[e.EmailID()] = e.EventType
	}
	if got["em-one"] != "Bounce" || got["em-two"] != "Bounce" {
		t.Errorf("published after restart: %v, want a Bounce for both", got)
	}
	if _, err := os.Stat(filepath.Join(dir, spoolName)); !os.IsNotExist(err) {
		t.Errorf("spool file left behind: %v", err)
	}
}

// TestSendIsIdempotentUntilDone: a second send of an email whose events are not all published
// (a worker taking over after a crash) gets the same message id and sends nothing more; once
// they are, a send is a new message.
func TestSendIsIdempotentUntilDone(t *testing.T) {
	sink := &recorder{}
	o, err := New(t.TempDir(), sink, WithLogger(quiet()), WithDelay(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	out := build(t, "em-twice", []string{"a@b.test"}, nil)
	first, err := o.Send(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	second, err := o.Send(context.Background(), out)
	if err != nil || second != first {
		t.Fatalf("second send = %q, %v; want %q", second, err, first)
	}
	if err := o.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if evs := sink.snapshot(); len(evs) != 1 || evs[0].Mail.MessageID != first {
		t.Fatalf("events %+v, want one delivery of %s", evs, first)
	}
}

// TestJournalAfterCrash: a message journaled but not done (the process died, no Close) has its
// events published by the next outbox on the directory, and the same record makes the same
// events wherever it is published, so a sink that got some of them before the crash recognises
// them. A journal line cut by the crash is skipped.
func TestJournalAfterCrash(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	out := build(t, "em-crash", []string{"complaint@simulator.amazonses.com"}, nil)
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	rec := recordOf(job{at: at, sentAt: at.Add(-time.Second), messageID: "0100-crash", out: out})
	line, _ := json.Marshal(rec)
	var got [2][]string
	for i, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, "em-crash.eml"), out.Raw, 0o600); err != nil {
			t.Fatal(err)
		}
		journal := string(line) + "\n" + `{"op":"sent","emailId":"em-cut","mess`
		if err := os.WriteFile(filepath.Join(dir, journalName), []byte(journal), 0o600); err != nil {
			t.Fatal(err)
		}
		sink := &recorder{}
		o, err := New(dir, sink, WithLogger(quiet()))
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, e := range sink.snapshot() {
			got[i] = append(got[i], string(mustJSON(t, e)))
		}
		// Done: a third outbox on the directory publishes nothing.
		again := &recorder{}
		o, err = New(dir, again, WithLogger(quiet()))
		if err != nil {
			t.Fatal(err)
		}
		_ = o.Close(context.Background())
		if n := len(again.snapshot()); n != 0 {
			t.Errorf("events published again after they were done: %d", n)
		}
	}
	if len(got[0]) != 2 || !slices.Equal(got[0], got[1]) {
		t.Fatalf("events after the crash:\n%v\n%v\nwant the same delivery and complaint", got[0], got[1])
	}
	if !strings.Contains(got[0][0], `"timestamp":"2026-11-24T12:00:00Z"`) {
		t.Errorf("the events do not happen at the journaled time: %s", got[0][0])
	}
}

// TestConcurrentSendsAreJournaled: sends from many goroutines commit their files and journal
// records in groups (one sync covers the records appended before it); every send returns only
// once a sync covered its record, and an outbox stopped before publishing anything leaves every
// message to the next one.
func TestConcurrentSendsAreJournaled(t *testing.T) {
	dir := t.TempDir()
	o, err := New(dir, &recorder{}, WithLogger(quiet()), WithDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	const senders, each = 32, 8
	outs := make([]mail.Outgoing, senders*each)
	for n := range outs {
		outs[n] = build(t, fmt.Sprintf("em-%03d", n), []string{"success@simulator.amazonses.com"}, nil)
	}
	var wg sync.WaitGroup
	errs := make(chan error, senders*each)
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := o.Send(context.Background(), outs[g*each+i]); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	o.mu.Lock()
	appended := o.appended
	o.mu.Unlock()
	o.flush.Lock()
	flushed := o.flushed
	o.flush.Unlock()
	if appended != senders*each || flushed != appended {
		t.Errorf("%d records appended, %d covered by a sync; want %d and all", appended, flushed, senders*each)
	}
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	_ = o.Close(stopped) // gives up at once: every message stays in the journal

	next := &recorder{}
	o2, err := New(dir, next, WithLogger(quiet()), WithDelay(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := o2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, e := range next.snapshot() {
		ids[e.EmailID()] = true
	}
	if len(ids) != senders*each {
		t.Errorf("the next outbox published events for %d messages, want %d", len(ids), senders*each)
	}
}

// TestAFailedSyncFailsEverySendAfterIt: a syncfs reports a write-back error once for the whole
// file system, so after one fails no later success covers the messages written before it: the
// sends waiting on that sync and every send after it fail, and nothing new is queued.
func TestAFailedSyncFailsEverySendAfterIt(t *testing.T) {
	if syncEachFile {
		t.Skip("each file is synced on its own here: its error is its own")
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	real := syncFiles
	syncFiles = func(dir, journal *os.File) error {
		if calls.Add(1) == 1 {
			close(entered)
			<-release // the other sends queue behind this sync
			return errors.New("EIO")
		}
		return real(dir, journal) // a later sync would succeed: it must not count
	}
	t.Cleanup(func() { syncFiles = real })

	sink := &recorder{}
	o, err := New(t.TempDir(), sink, WithLogger(quiet()), WithDelay(0))
	if err != nil {
		t.Fatal(err)
	}
	const sends = 8
	outs := make([]mail.Outgoing, sends+1)
	for n := range outs {
		outs[n] = build(t, fmt.Sprintf("em-fail-%d", n), []string{"success@simulator.amazonses.com"}, nil)
	}
	errs := make(chan error, sends)
	go func() {
		_, err := o.Send(context.Background(), outs[0])
		errs <- err
	}()
	<-entered
	for n := 1; n < sends; n++ {
		go func() {
			_, err := o.Send(context.Background(), outs[n])
			errs <- err
		}()
	}
	time.Sleep(50 * time.Millisecond) // the others append and wait on the sync
	close(release)
	for range sends {
		if err := <-errs; err == nil {
			t.Error("a send returned success after the sync covering it failed")
		}
	}
	if _, err := o.Send(context.Background(), outs[sends]); err == nil {
		t.Error("a send after the failed sync succeeded")
	}
	if err := o.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(sink.snapshot()); n != 0 {
		t.Errorf("%d events published for sends that failed", n)
	}
}

// Pending is true from Send until the message's events are all recorded, also while the sink
// refuses them; the worker leaves such an email to its events.
func TestPendingUntilTheEventsAreRecorded(t *testing.T) {
	sink := &recorder{fail: 2}
	o := newOutbox(t, sink, WithDelay(0), WithRetry(2, time.Millisecond), WithRetryLater(50*time.Millisecond))
	if o.Pending("em-pending") {
		t.Fatal("pending before any send")
	}
	sent := time.Now()
	if _, err := o.Send(context.Background(), build(t, "em-pending", []string{"a@b.test"}, nil)); err != nil {
		t.Fatal(err)
	}
	if !o.Pending("em-pending") {
		t.Error("not pending right after the send")
	}
	waitFor(t, func() bool { return !o.Pending("em-pending") })
	sink.mu.Lock()
	calls, events := sink.calls, len(sink.events)
	sink.mu.Unlock()
	if calls != 3 || events != 1 {
		t.Errorf("sink called %d times, %d events; want 3 (2 refused, 1 later) and 1", calls, events)
	}
	if took := time.Since(sent); took < 50*time.Millisecond {
		t.Errorf("refused events tried again after %s; want the 50 ms of WithRetryLater", took)
	}
}

// Close does not wait for refused events: they stay in the journal, pending, and the next
// outbox on the directory publishes them.
func TestRefusedEventsWaitForTheNextStart(t *testing.T) {
	dir := t.TempDir()
	sink := &recorder{fail: 100}
	o, err := New(dir, sink, WithLogger(quiet()), WithDelay(0), WithRetry(1, time.Millisecond), WithRetryLater(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Send(context.Background(), build(t, "em-refused", []string{"a@b.test"}, nil)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { sink.mu.Lock(); defer sink.mu.Unlock(); return sink.calls == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := o.Close(ctx); err != nil || time.Since(start) > 2*time.Second {
		t.Fatalf("Close: %v after %s", err, time.Since(start))
	}
	next := &gatedSink{open: make(chan struct{})}
	o2, err := New(dir, next, WithLogger(quiet()), WithDelay(0))
	if err != nil {
		t.Fatal(err)
	}
	if !o2.Pending("em-refused") {
		t.Error("the refused message is not pending after the restart")
	}
	close(next.open)
	waitFor(t, func() bool { return len(next.snapshot()) == 1 && !o2.Pending("em-refused") })
	if err := o2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// gatedSink records what it receives once open is closed.
type gatedSink struct {
	recorder
	open chan struct{}
}

func (g *gatedSink) Publish(ctx context.Context, e sesevent.Event) error {
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.recorder.Publish(ctx, e)
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPruneRemovesOnlyOldSettledMessages: Prune removes the message files written before its
// time whose events are recorded, and keeps a recent one, one whose events are still pending
// and every file that is not a message (the journal).
func TestPruneRemovesOnlyOldSettledMessages(t *testing.T) {
	dir := t.TempDir()
	sink := &recorder{}
	o, err := New(dir, sink, WithLogger(quiet()), WithDelay(0))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(context.Background())
	for _, id := range []string{"em-old", "em-new"} {
		if _, err := o.Send(context.Background(), build(t, id, []string{"a@b.test"}, nil)); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); (o.Pending("em-old") || o.Pending("em-new")) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	// A third whose events cannot be recorded yet: it stays pending.
	sink.mu.Lock()
	sink.fail = 1 << 30
	sink.mu.Unlock()
	if _, err := o.Send(context.Background(), build(t, "em-pending", []string{"a@b.test"}, nil)); err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-100 * 24 * time.Hour)
	for _, id := range []string{"em-old", "em-pending"} {
		if err := os.Chtimes(o.Path(id), long, long); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(filepath.Join(dir, journalName), long, long); err != nil {
		t.Fatal(err)
	}
	n, err := o.Prune(time.Now().Add(-90 * 24 * time.Hour))
	if err != nil || n != 1 {
		t.Errorf("Prune = %d, %v; want the old settled message only", n, err)
	}
	for id, want := range map[string]bool{"em-old": false, "em-new": true, "em-pending": true} {
		if _, err := os.Stat(o.Path(id)); (err == nil) != want {
			t.Errorf("%s present %v after the pruning, want %v", id, err == nil, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, journalName)); err != nil {
		t.Errorf("the journal: %v", err)
	}
}
