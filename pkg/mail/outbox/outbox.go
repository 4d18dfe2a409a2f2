// Package outbox is the local Mailer: it writes each message as a real .eml file and then plays
// the part of SES, publishing the events SES would publish (honouring the SES mailbox simulator
// addresses), so that the local run exercises the same event handling as AWS.
package outbox

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"mime"
	"net/mail"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mailport "github.com/mailroom/mailroom/pkg/mail"
	"github.com/mailroom/mailroom/pkg/sesevent"
)

// Sink receives the events the outbox produces; in the local server it is the same handler
// the SES events function runs on AWS.
type Sink interface {
	Publish(ctx context.Context, e sesevent.Event) error
}

// ErrClosed is returned by Send after Close.
var ErrClosed = errors.New("outbox: closed")

// Defaults for the options. The events come at once (a millisecond after the send, so that
// their time follows it): their acceptance is what makes an email SENT (Pending), which a
// caller expects as soon as the message is written.
const (
	DefaultDelay    = 0
	DefaultAttempts = 3
	DefaultBackoff  = 100 * time.Millisecond
)

// Option configures an Outbox.
type Option func(*Outbox)

// WithDelay sets how long after Send the events are published, as SES's come some time after
// the send. Their first acceptance (a delivery or a bounce) makes the email SENT (Pending).
func WithDelay(d time.Duration) Option { return func(o *Outbox) { o.delay = d } }

// WithRetry sets how many times a failing Publish is tried and the first pause between tries
// (doubled each time).
func WithRetry(attempts int, backoff time.Duration) Option {
	return func(o *Outbox) {
		if attempts > 0 {
			o.attempts = attempts
		}
		o.backoff = backoff
	}
}

// WithRetryLater sets how long a message whose events were refused WithRetry's attempts
// waits before they are tried again (default DefaultRetryLater; doubled each time, up to
// 16 times that).
func WithRetryLater(d time.Duration) Option { return func(o *Outbox) { o.retryLater = d } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *Outbox) { o.log = l } }

// Outbox is a mailer.Mailer writing to a directory. It is safe for concurrent use.
type Outbox struct {
	dir      string
	sink     Sink
	delay    time.Duration
	attempts int
	backoff  time.Duration
	// retryLater is the wait before a message whose events the sink kept refusing is tried
	// again (WithRetry's attempts used up), within the same run.
	retryLater time.Duration
	log        *slog.Logger

	mu       sync.Mutex
	pending  []job
	inflight map[string]string // email id → message id of the jobs in the journal not yet done
	waiting  map[string]job    // email id → the jobs whose events the sink refused, until retried
	journal  *os.File
	current  map[string]job // email id → the jobs whose events a publisher is publishing
	done     int            // jobs done since the journal was last compacted
	closed   bool
	wake     chan struct{}
	sends    sync.WaitGroup  // the sends under way
	gen      int             // the journal file's generation: compaction replaces the file
	unsynced map[string]job  // sends whose journal record may not be on disk yet
	appended uint64          // "sent" records appended to the journal so far
	ctx      context.Context // the publishing goroutine's; cancelled when Close gives up
	cancel   context.CancelFunc
	stopped  chan struct{}

	// flush is held by the send whose sync covers the records appended before it started
	// (group commit): the sends queued behind it find their record covered and return.
	flush   sync.Mutex
	flushed uint64      // records known durable (flush)
	failed  error       // a failed syncfs (flush): every send fails after it
	broken  atomic.Bool // failed is set
	dirFile *os.File    // the outbox directory, for syncfs
}

var _ mailport.Mailer = (*Outbox)(nil)

// DefaultRetryLater is how long the events of a message that the sink kept refusing wait
// before they are tried again (WithRetry's attempts used up).
const DefaultRetryLater = time.Minute

// job is one sent message whose events are still to be published.
type job struct {
	at        time.Time
	sentAt    time.Time
	messageID string
	out       mailport.Outgoing
	refused   int // how many times the sink kept refusing its events
}

// New creates dir if needed and starts the goroutine that publishes events to sink. Call Close
// to flush and stop it.
func New(dir string, sink Sink, opts ...Option) (*Outbox, error) {
	if sink == nil {
		return nil, errors.New("outbox: nil sink")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("outbox: create %s: %w", dir, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := &Outbox{
		dir:        dir,
		sink:       sink,
		delay:      DefaultDelay,
		attempts:   DefaultAttempts,
		backoff:    DefaultBackoff,
		retryLater: DefaultRetryLater,
		log:        slog.Default(),
		wake:       make(chan struct{}, 1),
		ctx:        ctx,
		cancel:     cancel,
		stopped:    make(chan struct{}),
		inflight:   map[string]string{},
		waiting:    map[string]job{},
		current:    map[string]job{},
		unsynced:   map[string]job{},
	}
	for _, opt := range opts {
		opt(o)
	}
	if err := o.loadSpool(); err != nil {
		cancel()
		return nil, err
	}
	if err := o.openJournal(); err != nil {
		cancel()
		return nil, err
	}
	d, err := os.Open(dir)
	if err != nil {
		cancel()
		o.journal.Close()
		return nil, fmt.Errorf("outbox: open %s: %w", dir, err)
	}
	o.dirFile = d
	go o.run()
	return o, nil
}

// The journal makes the events of a message as durable as the message: Send appends (and
// syncs) a "sent" record before it returns, and a "done" record follows once every event of the
// message is published. New queues the messages sent but not done, so a crash (even SIGKILL)
// between Send and the last event loses none. Events are built from the record alone (their
// times included), so a message whose events were partly published publishes the same events
// again, which the sink recognises (pkg/ingest identifies an event by its content).
const (
	journalName = ".journal"
	// compactAfter is how many done messages make the journal rewritten with the open ones only.
	compactAfter = 10000
)

// record is a journal line. Op "sent" carries the message's job; "done" its email and message id.
type record struct {
	Op         string    `json:"op"`
	EmailID    string    `json:"emailId"`
	TeamID     int64     `json:"teamId,omitempty"`
	MessageID  string    `json:"messageId"`
	SentAt     time.Time `json:"sentAt,omitzero"`
	At         time.Time `json:"at,omitzero"` // when its events happen
	From       string    `json:"from,omitempty"`
	To         []string  `json:"to,omitempty"`
	Recipients []string  `json:"recipients,omitempty"`
}

func recordOf(j job) record {
	return record{Op: "sent", EmailID: j.out.EmailID, TeamID: j.out.TeamID, MessageID: j.messageID, SentAt: j.sentAt,
		At: j.at, From: j.out.From, To: j.out.To, Recipients: j.out.Recipients}
}

// openJournal queues the messages the journal has sent but not done (those whose file is
// missing were never sent: Send writes the file first), rewrites it with them alone, and opens
// it for appending.
func (o *Outbox) openJournal() error {
	path := filepath.Join(o.dir, journalName)
	open := map[string]record{}
	var order []string
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
		for sc.Scan() {
			var r record
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				continue // a line cut by a crash
			}
			switch r.Op {
			case "sent":
				if _, ok := open[r.EmailID]; !ok {
					order = append(order, r.EmailID)
				}
				open[r.EmailID] = r
			case "done":
				if open[r.EmailID].MessageID == r.MessageID {
					delete(open, r.EmailID)
				}
			}
		}
		err := sc.Err()
		f.Close()
		if err != nil {
			return fmt.Errorf("outbox: read journal: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("outbox: open journal: %w", err)
	}
	n := 0
	for _, id := range order {
		r, ok := open[id]
		if !ok {
			continue
		}
		raw, err := os.ReadFile(o.Path(id))
		if err != nil {
			o.log.Warn("outbox journal: message file missing; it was not sent", "emailId", id)
			continue
		}
		n++
		// None of its events was published before its time: a job not due yet is due after
		// this outbox's delay at the latest.
		at := r.At
		if due := time.Now().Add(o.delay); at.After(due) {
			at = due
		}
		o.pending = append(o.pending, job{at: at, sentAt: r.SentAt, messageID: r.MessageID,
			out: mailport.Outgoing{EmailID: id, TeamID: r.TeamID, From: r.From, To: r.To, Recipients: r.Recipients, Raw: raw}})
	}
	if n > 0 {
		o.log.Info("outbox: publishing the events of messages sent before the last stop", "messages", n)
	}
	keep := make([]record, len(o.pending)) // with an earlier version's spooled jobs
	for i, j := range o.pending {
		keep[i] = recordOf(j)
		o.inflight[j.out.EmailID] = j.messageID
	}
	return o.rewriteJournal(keep)
}

// rewriteJournal replaces the journal with records, atomically, and opens it for appending.
func (o *Outbox) rewriteJournal(records []record) error {
	var b bytes.Buffer
	for _, r := range records {
		line, err := json.Marshal(r)
		if err != nil {
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(o.dir, journalName)
	tmp := path + ".tmp"
	if err := writeSynced(tmp, b.Bytes()); err != nil {
		return fmt.Errorf("outbox: journal: %w", err)
	}
	// Opened before the rename, so that a failure leaves the old journal in use and named.
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("outbox: journal: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		f.Close()
		return fmt.Errorf("outbox: journal: %w", err)
	}
	if o.journal != nil {
		o.journal.Close()
	}
	o.journal = f
	o.gen++
	o.done = 0
	return nil
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// appendJournal writes a record; o.mu is held. sync makes it durable before it returns.
func (o *Outbox) appendJournal(r record, sync bool) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := o.journal.Write(append(line, '\n')); err != nil {
		return err
	}
	if sync {
		return o.journal.Sync()
	}
	return nil
}

// markDone records that every event of j is published, and compacts the journal now and then.
func (o *Outbox) markDone(j job) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.current, j.out.EmailID)
	if o.inflight[j.out.EmailID] == j.messageID {
		delete(o.inflight, j.out.EmailID)
	}
	if err := o.appendJournal(record{Op: "done", EmailID: j.out.EmailID, MessageID: j.messageID}, false); err != nil {
		o.log.Warn("outbox journal: done not recorded; the events are published again at the next start", "emailId", j.out.EmailID, "err", err)
		return
	}
	if o.done++; o.done < compactAfter || o.closed {
		return // not once closing: what is left stays as it is for the next start
	}
	open := make([]record, 0, len(o.pending))
	for _, p := range o.pending {
		open = append(open, recordOf(p))
	}
	for _, c := range o.current {
		open = append(open, recordOf(c))
	}
	for _, u := range o.unsynced {
		open = append(open, recordOf(u))
	}
	for _, w := range o.waiting {
		open = append(open, recordOf(w))
	}
	if err := o.rewriteJournal(open); err != nil {
		o.log.Warn("outbox journal not compacted", "err", err)
	}
}

// spoolName is where earlier versions' Close kept the events it could not publish in time; New
// still publishes them (the journal has replaced it).
const spoolName = ".pending-events.json"

// spooled is a job such a spool kept; the message itself is re-read from its .eml file.
type spooled struct {
	EmailID    string    `json:"emailId"`
	TeamID     int64     `json:"teamId"`
	MessageID  string    `json:"messageId"`
	SentAt     time.Time `json:"sentAt"`
	From       string    `json:"from"`
	To         []string  `json:"to"`
	Recipients []string  `json:"recipients"`
}

// loadSpool queues the jobs an earlier version's Close spooled and removes the spool file.
func (o *Outbox) loadSpool() error {
	path := filepath.Join(o.dir, spoolName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("outbox: read spool: %w", err)
	}
	var list []spooled
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("outbox: decode spool: %w", err)
	}
	now := time.Now()
	for _, sp := range list {
		raw, err := os.ReadFile(o.Path(sp.EmailID))
		if err != nil {
			o.log.Warn("outbox spool: message file missing", "emailId", sp.EmailID)
			continue
		}
		o.pending = append(o.pending, job{at: now.Add(o.delay), sentAt: sp.SentAt, messageID: sp.MessageID,
			out: mailport.Outgoing{EmailID: sp.EmailID, TeamID: sp.TeamID, From: sp.From, To: sp.To,
				Recipients: sp.Recipients, Raw: raw}})
	}
	if len(list) > 0 {
		o.log.Info("outbox: publishing events spooled at the last shutdown", "messages", len(list))
	}
	return os.Remove(path)
}

// Pending reports whether a message of this email was sent and its events are not all
// recorded yet; they will be, in this run or after the next start. The outbox is a
// mail.Recorder: Send returns once the message's events are journaled, and every message's
// events include one that proves acceptance (a delivery or a bounce per recipient). Once they
// are recorded the email itself says it was sent.
func (o *Outbox) Pending(emailID string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.inflight[emailID]
	return ok
}

// Prune removes the message files last written before before (their emails are past their
// retention), but for a message whose events are not all recorded yet, and returns how many
// it removed: without it the folder keeps every message ever sent.
func (o *Outbox) Prune(before time.Time) (int, error) {
	entries, err := os.ReadDir(o.dir)
	if err != nil {
		return 0, fmt.Errorf("outbox: %w", err)
	}
	n := 0
	for _, de := range entries {
		id, ok := strings.CutSuffix(de.Name(), ".eml")
		if !ok || !de.Type().IsRegular() || o.Pending(id) {
			continue
		}
		info, err := de.Info()
		if err != nil || !info.ModTime().Before(before) {
			continue // gone meanwhile, or recent
		}
		if err := os.Remove(filepath.Join(o.dir, de.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, fmt.Errorf("outbox: %w", err)
		}
		n++
	}
	return n, nil
}

// Path returns the file a message with this email id is written to.
func (o *Outbox) Path(emailID string) string {
	return filepath.Join(o.dir, emailID+".eml")
}

// Send writes m.Raw to <dir>/<EmailID>.eml (atomically: a reader never sees half a message,
// and durably: the file and its journal record are synced before Send returns), journals its
// events and queues them. Send is idempotent per email id while the message's events are not
// all published (Pending): a second send (a worker that took over after a crash) returns the
// same message id and writes nothing, so the message is delivered once. A send after that
// replaces the file.
func (o *Outbox) Send(ctx context.Context, m mailport.Outgoing) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if !validEmailID(m.EmailID) {
		return "", fmt.Errorf("outbox: email id %q is not usable as a file name: %w", m.EmailID, mailport.ErrRejected)
	}
	if o.broken.Load() {
		o.flush.Lock()
		err := o.failed
		o.flush.Unlock()
		return "", fmt.Errorf("outbox: %w", err)
	}
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return "", ErrClosed
	}
	messageID, pending := o.inflight[m.EmailID]
	o.sends.Add(1) // Close waits for this send before it stops the syncs
	o.mu.Unlock()
	defer o.sends.Done()
	if pending {
		o.log.Debug("outbox: message already sent; its events are on their way", "emailId", m.EmailID)
		return messageID, nil
	}

	if err := o.writeFile(ctx, m); err != nil {
		return "", err
	}

	messageID, err := newMessageID()
	if err != nil {
		return "", fmt.Errorf("outbox: %w", err)
	}
	now := time.Now()
	j := job{at: now.Add(max(o.delay, time.Millisecond)), sentAt: now, messageID: messageID, out: m}
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return "", ErrClosed // the file is there, but unsent: the email's next send replaces it
	}
	if id, ok := o.inflight[m.EmailID]; ok {
		o.mu.Unlock()
		// A concurrent send of the same email won, but this one's file replaced its file:
		// make that one durable too.
		if !syncEachFile {
			if err := o.syncJournal(nil, 0, math.MaxUint64); err != nil {
				return "", fmt.Errorf("outbox: sync: %w", err)
			}
		}
		return id, nil
	}
	if err := o.appendJournal(recordOf(j), false); err != nil {
		o.mu.Unlock()
		return "", fmt.Errorf("outbox: journal: %w", err)
	}
	o.inflight[m.EmailID] = messageID
	o.unsynced[m.EmailID] = j
	o.appended++
	f, gen, seq := o.journal, o.gen, o.appended
	o.mu.Unlock()
	err = o.syncJournal(f, gen, seq)
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.unsynced, m.EmailID)
	if err != nil {
		delete(o.inflight, m.EmailID)
		return "", fmt.Errorf("outbox: journal: %w", err)
	}
	o.pending = append(o.pending, j)
	o.wakeOne()
	return messageID, nil
}

// writeFile writes m.Raw to its .eml file atomically (a temporary file renamed into place),
// synced by itself only where syncFiles cannot cover it.
func (o *Outbox) writeFile(ctx context.Context, m mailport.Outgoing) error {
	tmp, err := os.CreateTemp(o.dir, "."+m.EmailID+"-*.tmp")
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	renamed := false
	defer func() {
		if !renamed { // removed only when it is still there: an unlink that fails costs two syscalls
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(m.Raw); err != nil {
		return fmt.Errorf("outbox: write: %w", err)
	}
	if syncEachFile {
		if err := tmp.Sync(); err != nil {
			return fmt.Errorf("outbox: sync: %w", err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("outbox: close: %w", err)
	}
	// Cancellation before the rename leaves nothing behind, as if Send had not been called.
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), o.Path(m.EmailID)); err != nil {
		return fmt.Errorf("outbox: rename: %w", err)
	}
	renamed = true
	return nil
}

// syncFiles makes what Send wrote durable (sync_linux.go, sync_other.go); tests replace it.
var syncFiles = syncFS

// syncJournal makes the journal record numbered seq durable, with the message file written
// before it (gen names the journal file then). It runs outside o.mu and commits in groups: one
// send syncs for every record appended before its sync started, while the sends behind it wait
// on o.flush and then find their record covered.
//
// A failed syncfs breaks the outbox until the next start: syncfs reports a write-back error
// once, for the whole file system, so no later sync could tell which messages it lost. Where
// the journal file is synced on its own (and each message file by Send), a journal compacted
// meanwhile was rewritten and synced whole, with every record appended before, so a sync of
// its former file that fails because it was closed has nothing left to do.
func (o *Outbox) syncJournal(f *os.File, gen int, seq uint64) error {
	o.flush.Lock()
	defer o.flush.Unlock()
	if o.flushed >= seq {
		return nil
	}
	if err := o.failed; err != nil {
		return err
	}
	o.mu.Lock()
	upTo := o.appended
	o.mu.Unlock()
	err := syncFiles(o.dirFile, f)
	if err == nil {
		o.flushed = upTo
		return nil
	}
	if syncEachFile {
		o.mu.Lock()
		compacted := o.gen != gen
		o.mu.Unlock()
		if compacted {
			return nil
		}
		return err
	}
	o.failed = fmt.Errorf("the disk failed a sync; sends fail until the next start: %w", err)
	o.broken.Store(true)
	o.log.Error("outbox: the disk failed a sync; sends fail until the next start", "err", err)
	return o.failed
}

// Close publishes the events still pending and stops the goroutine. When ctx ends first it
// stops anyway and returns ctx's error: the rest stay in the journal for the next New. Close may
// be called more than once.
func (o *Outbox) Close(ctx context.Context) error {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	var err error
	select {
	case <-o.stopped:
	case <-ctx.Done():
		o.cancel()
		<-o.stopped
		err = ctx.Err()
	}
	o.sends.Wait() // a send under way still syncs the journal
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.journal != nil {
		o.journal.Close()
		o.journal = nil
		o.dirFile.Close()
	}
	if n := len(o.pending) + len(o.waiting); n > 0 {
		o.log.Warn("outbox closing: events kept for the next start", "messages", n)
	}
	return err
}

// publishers is how many messages have their events published at once: the sink records each
// event in its own write, so one publisher would bound delivery by one write's latency.
const publishers = 32

func (o *Outbox) run() {
	defer close(o.stopped)
	defer o.cancel()
	var wg sync.WaitGroup
	for range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o.publishLoop()
		}()
	}
	wg.Wait()
}

// wakeOne wakes an idle publisher, if one waits.
func (o *Outbox) wakeOne() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// publishLoop publishes the events of one pending message after the other, each message's in
// order, until the outbox closes with nothing pending or is torn down.
func (o *Outbox) publishLoop() {
	for {
		o.mu.Lock()
		if len(o.pending) == 0 {
			closed := o.closed
			o.mu.Unlock()
			if closed {
				o.wakeOne() // the next idle publisher sees it too
				return
			}
			select {
			case <-o.wake:
			case <-o.ctx.Done():
				return
			}
			continue
		}
		j := o.pending[0]
		o.pending = o.pending[1:]
		o.current[j.out.EmailID] = j
		more := len(o.pending) > 0
		o.mu.Unlock()
		if more {
			o.wakeOne()
		}

		if !sleep(o.ctx, time.Until(j.at)) {
			o.keep(j)
			return
		}
		published := true
		for _, e := range simulate(j) {
			ok, stop := o.publish(e)
			if stop {
				o.keep(j)
				return
			}
			published = published && ok
		}
		if published {
			o.markDone(j)
		} else {
			o.later(j)
		}
	}
}

// laterDoublings caps the wait between two tries of refused events: retryLater, doubled each
// time, at most this many times (16 times retryLater).
const laterDoublings = 4

// later keeps j, whose events the sink kept refusing, in the journal (published again at the
// next start) and tries it again in this run after retryLater, doubled each time up to 16
// times that: until its events are recorded, its email is not SENT. A timer brings it back,
// so no publisher waits.
func (o *Outbox) later(j job) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.current, j.out.EmailID)
	j.refused++
	o.waiting[j.out.EmailID] = j
	if o.closed {
		return // it stays in the journal for the next start
	}
	time.AfterFunc(o.retryLater<<min(j.refused-1, laterDoublings), func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		w, ok := o.waiting[j.out.EmailID]
		if !ok || w.messageID != j.messageID || o.closed {
			return // closing: it stays in the journal for the next start
		}
		delete(o.waiting, j.out.EmailID)
		w.at = time.Now()
		o.pending = append(o.pending, w)
		o.wakeOne()
	})
}

// keep puts j back at the head of the queue: its events are published after the next start.
func (o *Outbox) keep(j job) {
	o.mu.Lock()
	o.pending = append([]job{j}, o.pending...)
	delete(o.current, j.out.EmailID)
	o.mu.Unlock()
}

// publish hands e to the sink, retrying with backoff. ok is false when the sink kept
// failing (the message stays in the journal); stop is true when the outbox is being torn down.
func (o *Outbox) publish(e sesevent.Event) (ok, stop bool) {
	backoff := o.backoff
	for attempt := 1; ; attempt++ {
		err := o.sink.Publish(o.ctx, e)
		if err == nil {
			// How many recipients, not who: addresses are the recipients' data, not the log's.
			o.log.Debug("outbox event published", "emailId", e.EmailID(), "eventType", e.EventType,
				"recipients", len(e.Recipients()))
			return true, false
		}
		if o.ctx.Err() != nil {
			return false, true
		}
		if attempt >= o.attempts {
			o.log.Error("outbox event not published; tried again later", "emailId", e.EmailID(), "eventType", e.EventType,
				"attempts", attempt, "error", err)
			return false, false
		}
		o.log.Warn("outbox event publish failed; retrying", "emailId", e.EmailID(), "eventType", e.EventType,
			"attempt", attempt, "error", err)
		if !sleep(o.ctx, backoff) {
			return false, true
		}
		backoff *= 2
	}
}

// sleep waits d or until ctx ends; it reports whether the full wait happened.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// The SES mailbox simulator addresses (a +label before the @ is allowed, as with SES).
const (
	simulatorDomain    = "simulator.amazonses.com"
	simSuccess         = "success"
	simBounce          = "bounce"
	simOOTO            = "ooto"
	simComplaint       = "complaint"
	simSuppressionList = "suppressionlist"
)

// simulate returns the events SES would publish for j, per recipient, in order. They happen at
// j.at: the same job makes the same events.
func simulate(j job) []sesevent.Event {
	now := j.at
	base := sesevent.Mail{
		Timestamp:   j.sentAt.UTC(),
		Source:      j.out.From,
		MessageID:   j.messageID,
		Destination: addresses(j.out.Recipients),
		Tags: map[string][]string{
			"ses:operation":   {"SendEmail"},
			"ses:from-domain": {domainOf(address(j.out.From))},
		},
	}
	base.Headers, base.CommonHeaders = headers(j.out.Raw)
	now = now.UTC()
	processing := now.Sub(j.sentAt).Milliseconds()

	var out []sesevent.Event
	for _, rcpt := range base.Destination {
		delivery := sesevent.Event{EventType: sesevent.TypeDelivery, Mail: base, Delivery: &sesevent.Delivery{
			Timestamp:            now,
			ProcessingTimeMillis: processing,
			Recipients:           []string{rcpt},
			SMTPResponse:         "250 2.6.0 Message received",
			ReportingMTA:         "outbox.local",
		}}
		switch simulatorMailbox(rcpt) {
		case simBounce:
			out = append(out, bounce(base, rcpt, now, sesevent.BounceSubTypeGeneral,
				"smtp; 550 5.1.1 user unknown"))
		case simSuppressionList:
			out = append(out, bounce(base, rcpt, now, sesevent.BounceSubTypeOnAccountSuppressionList,
				"Amazon SES did not send the message to this address because it is on the suppression list for your account."))
		case simComplaint:
			// The complaint comes after the delivery, never in the same millisecond: the
			// history and the webhooks keep the order of the events' times.
			complained := now.Add(time.Millisecond)
			out = append(out, delivery, sesevent.Event{EventType: sesevent.TypeComplaint, Mail: base,
				Complaint: &sesevent.Complaint{
					ComplainedRecipients:  []sesevent.Recipient{{EmailAddress: rcpt}},
					Timestamp:             complained,
					FeedbackID:            j.messageID + "-complaint",
					UserAgent:             "Amazon SES Mailbox Simulator",
					ComplaintFeedbackType: "abuse",
					ArrivalDate:           complained.Format(time.RFC3339Nano),
				}})
		default: // success, ooto (SES also sends an auto-reply, which is no event) and real addresses
			out = append(out, delivery)
		}
	}
	return out
}

func bounce(base sesevent.Mail, rcpt string, now time.Time, subType, diagnostic string) sesevent.Event {
	return sesevent.Event{EventType: sesevent.TypeBounce, Mail: base, Bounce: &sesevent.Bounce{
		BounceType:    sesevent.BounceTypePermanent,
		BounceSubType: subType,
		BouncedRecipients: []sesevent.BouncedRecipient{{
			EmailAddress: rcpt, Action: "failed", Status: "5.1.1", DiagnosticCode: diagnostic,
		}},
		Timestamp:    now,
		FeedbackID:   base.MessageID + "-bounce",
		ReportingMTA: "dns; outbox.local",
	}}
}

// simulatorMailbox returns the simulator mailbox an address targets ("" for other addresses).
func simulatorMailbox(addr string) string {
	local, domain, ok := strings.Cut(strings.ToLower(addr), "@")
	if !ok || domain != simulatorDomain {
		return ""
	}
	local, _, _ = strings.Cut(local, "+")
	return local
}

// address returns the bare address of "Name <a@b>" or "a@b".
func address(s string) string {
	if a, err := mail.ParseAddress(s); err == nil {
		return a.Address
	}
	return strings.TrimSpace(s)
}

func addresses(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		out = append(out, address(s))
	}
	return out
}

func domainOf(addr string) string {
	if at := strings.LastIndexByte(addr, '@'); at >= 0 {
		return addr[at+1:]
	}
	return ""
}

// headers returns the header fields of raw in order, values as written (SES echoes them
// undecoded), and the common headers SES extracts (decoded).
func headers(raw []byte) ([]sesevent.Header, *sesevent.CommonHeaders) {
	r := textproto.NewReader(bufio.NewReader(io.LimitReader(bytes.NewReader(raw), 1<<20)))
	var hs []sesevent.Header
	for {
		line, err := r.ReadContinuedLine()
		if line == "" || err != nil {
			break
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		hs = append(hs, sesevent.Header{Name: strings.TrimSpace(name), Value: strings.TrimSpace(value)})
	}
	common := &sesevent.CommonHeaders{}
	dec := new(mime.WordDecoder)
	for _, h := range hs {
		switch strings.ToLower(h.Name) {
		case "from":
			common.From = decodedList(dec, h.Value)
		case "to":
			common.To = decodedList(dec, h.Value)
		case "cc":
			common.Cc = decodedList(dec, h.Value)
		case "reply-to":
			common.ReplyTo = decodedList(dec, h.Value)
		case "message-id":
			common.MessageID = h.Value
		case "date":
			common.Date = h.Value
		case "subject":
			if s, err := dec.DecodeHeader(h.Value); err == nil {
				common.Subject = s
			} else {
				common.Subject = h.Value
			}
		}
	}
	return hs, common
}

func decodedList(dec *mime.WordDecoder, v string) []string {
	list, err := (&mail.AddressParser{WordDecoder: dec}).ParseList(v)
	if err != nil {
		return []string{v}
	}
	out := make([]string, 0, len(list))
	for _, a := range list {
		if a.Name != "" {
			out = append(out, a.Name+" <"+a.Address+">")
		} else {
			out = append(out, a.Address)
		}
	}
	return out
}

// validEmailID accepts ids that are a plain file name.
func validEmailID(id string) bool {
	if id == "" || id == "." || id == ".." || len(id) > 200 {
		return false
	}
	for _, c := range id {
		ok := c == '-' || c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !ok {
			return false
		}
	}
	return true
}

// newMessageID makes an id in the shape of an SES message id.
func newMessageID() (string, error) {
	var r [16]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("message id: %w", err)
	}
	h := hex.EncodeToString(r[:])
	return fmt.Sprintf("0100%012x-%s-%s-%s-%s-%s-000000",
		time.Now().UnixMilli(), h[0:8], h[8:12], h[12:16], h[16:20], h[20:32]), nil
}
