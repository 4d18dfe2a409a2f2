// Package local is the embedded schedule.Scheduler: pending schedules live in their own bbolt
// file (never the main database) and one goroutine sleeps until the earliest is due, hands its
// payload to a fire function and forgets it once fire succeeds. Schedules that came due while
// the process was down fire as soon as Start is called.
//
// Delivery is at least once: a crash between a successful fire and the delete fires again on
// the next start. A failing fire is retried with exponential backoff and, after the last
// attempt, logged and dropped (the local counterpart of a dead-letter queue).
package local

import (
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"

	"github.com/mailroom/mailroom/pkg/schedule"
)

// Fire delivers a due schedule's payload to its target. A nil error forgets the schedule; an
// error retries it later.
type Fire func(ctx context.Context, payload []byte) error

// ErrClosed is returned by calls on a closed Scheduler.
var ErrClosed = errors.New("schedule/local: closed")

var bucket = []byte("schedules")

const (
	firstBackoff = time.Second
	maxBackoff   = time.Minute
	maxAttempts  = 10
)

// Scheduler is the embedded scheduler. Put and Delete are safe for concurrent use, including
// while a schedule fires.
type Scheduler struct {
	db   *bolt.DB
	fire Fire
	log  *slog.Logger

	// Retry policy; tests shorten it before Start.
	backoff     func(attempt int) time.Duration
	maxAttempts int

	mu       sync.Mutex // guards the fields below and orders bbolt writes with the index
	pending  queue      // every stored schedule, earliest due first
	byName   map[string]*entry
	closed   bool // no more Put, Delete or Start
	dbClosed bool // the file is closed: the loop must not touch it
	started  bool

	wake   chan struct{} // nudges the loop when the earliest schedule may have changed
	stop   chan struct{}
	done   chan struct{}
	cancel context.CancelFunc
}

var _ schedule.Scheduler = (*Scheduler)(nil)

// entry is the in-memory index of one stored schedule; the payload stays on disk.
type entry struct {
	name     string
	at       time.Time
	gen      uint64    // bumped by every Put; a fire deletes only the generation it fired
	due      time.Time // at, or the next retry after a failed fire
	attempts int       // failed fires so far of this generation
	index    int       // position in the heap
}

// Open opens (creating if needed) the bbolt file at path and loads the pending schedules.
// Nothing fires before Start. A nil log discards.
func Open(path string, fire Fire, log *slog.Logger) (*Scheduler, error) {
	if fire == nil {
		return nil, errors.New("schedule/local: nil fire function")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if errors.Is(err, bberrors.ErrTimeout) {
		// Another server on the same DATA_DIR (one on BACKEND=aws keeps its schedules there too).
		return nil, fmt.Errorf("schedule/local: %s is in use by another process (stop the running server first, or give this one another DATA_DIR)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("schedule/local: open %s: %w", path, err)
	}
	s := &Scheduler{
		db:          db,
		fire:        fire,
		log:         log,
		backoff:     defaultBackoff,
		maxAttempts: maxAttempts,
		byName:      map[string]*entry{},
		wake:        make(chan struct{}, 1),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			gen, at, _, err := decode(v)
			if err != nil {
				return fmt.Errorf("schedule %q: %w", k, err)
			}
			e := &entry{name: string(k), at: at, gen: gen, due: at}
			s.byName[e.name] = e
			heap.Push(&s.pending, e)
			return nil
		})
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("schedule/local: load %s: %w", path, err)
	}
	return s, nil
}

func defaultBackoff(attempt int) time.Duration {
	d := firstBackoff << (attempt - 1)
	if attempt > 7 || d > maxBackoff {
		return maxBackoff
	}
	return d
}

// Start begins firing: schedules already due fire at once, the others at their time. ctx is
// the parent of every fire's context; cancelling it stops firing as Close does, without
// closing the file.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.started {
		return errors.New("schedule/local: already started")
	}
	s.started = true
	ctx, s.cancel = context.WithCancel(ctx)
	go s.run(ctx)
	return nil
}

// Close stops the firing goroutine, waiting for an in-flight fire to finish (or for ctx to
// end, which cancels the fire's context), and closes the file.
func (s *Scheduler) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	started := s.started
	close(s.stop)
	s.mu.Unlock()

	var waitErr error
	if started {
		select {
		case <-s.done:
		case <-ctx.Done():
			waitErr = fmt.Errorf("schedule/local: close: %w", ctx.Err())
		}
		s.cancel()
	}
	s.mu.Lock()
	s.dbClosed = true
	s.mu.Unlock()
	return errors.Join(waitErr, s.db.Close())
}

// InvokePrefix starts the names Invoke gives its entries.
const InvokePrefix = "now-"

// Invoke stores payload as a schedule due at once under a fresh name, so it fires as soon as
// the loop runs and, like any schedule, again after a crash that came before it fired.
func (s *Scheduler) Invoke(ctx context.Context, payload []byte) error {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return s.Put(ctx, schedule.Schedule{Name: InvokePrefix + hex.EncodeToString(b[:]), At: time.Now(), Payload: payload})
}

// Put stores the schedule, replacing one of the same name, and re-arms the timer.
func (s *Scheduler) Put(ctx context.Context, sc schedule.Schedule) error {
	sc, err := schedule.Normalize(sc)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	var gen uint64
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if gen, err = b.NextSequence(); err != nil {
			return err
		}
		return b.Put([]byte(sc.Name), encode(gen, sc.At, sc.Payload))
	})
	if err != nil {
		return fmt.Errorf("schedule/local: put %s: %w", sc.Name, err)
	}
	if e, ok := s.byName[sc.Name]; ok {
		e.at, e.gen, e.due, e.attempts = sc.At, gen, sc.At, 0
		heap.Fix(&s.pending, e.index)
	} else {
		e := &entry{name: sc.Name, at: sc.At, gen: gen, due: sc.At}
		s.byName[sc.Name] = e
		heap.Push(&s.pending, e)
	}
	s.nudge()
	return nil
}

// Delete removes the schedule; a missing one is not an error. A fire already in progress
// completes, but the schedule is not fired again.
func (s *Scheduler) Delete(ctx context.Context, name string) error {
	if err := schedule.CheckName(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).Delete([]byte(name))
	})
	if err != nil {
		return fmt.Errorf("schedule/local: delete %s: %w", name, err)
	}
	if e, ok := s.byName[name]; ok {
		heap.Remove(&s.pending, e.index)
		delete(s.byName, name)
		s.nudge()
	}
	return nil
}

// Get returns the stored schedule of that name, for tests and the admin CLI.
func (s *Scheduler) Get(ctx context.Context, name string) (schedule.Schedule, bool, error) {
	var out schedule.Schedule
	var found bool
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucket).Get([]byte(name))
		if v == nil {
			return nil
		}
		_, at, payload, err := decode(v)
		if err != nil {
			return err
		}
		out = schedule.Schedule{Name: name, At: at, Payload: append([]byte(nil), payload...)}
		found = true
		return nil
	})
	if err != nil {
		return schedule.Schedule{}, false, fmt.Errorf("schedule/local: get %s: %w", name, err)
	}
	return out, found, nil
}

// Len returns how many schedules are pending.
func (s *Scheduler) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byName)
}

func (s *Scheduler) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run is the one firing goroutine.
func (s *Scheduler) run(ctx context.Context) {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		var next *entry
		if len(s.pending) > 0 {
			next = s.pending[0]
		}
		var wait time.Duration
		if next != nil {
			wait = time.Until(next.due)
		}
		var name string
		var gen uint64
		if next != nil && wait <= 0 {
			name, gen = next.name, next.gen
		}
		s.mu.Unlock()

		if name != "" {
			s.fireOne(ctx, name, gen)
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			continue
		}

		var tick <-chan time.Time
		if next != nil {
			// Since Go 1.23 Reset discards a pending tick, so no draining is needed.
			timer.Reset(wait)
			tick = timer.C
		}
		select {
		case <-s.stop:
			return
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-tick:
		}
	}
}

// fireOne fires generation gen of the named schedule and settles the outcome: forget it on
// success, retry later on failure, drop it after the last attempt. Whatever Put or Delete did
// meanwhile wins: only the fired generation is touched.
func (s *Scheduler) fireOne(ctx context.Context, name string, gen uint64) {
	var payload []byte
	found := false
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucket).Get([]byte(name))
		if v == nil {
			return nil
		}
		g, _, p, err := decode(v)
		if err != nil {
			return err
		}
		if g == gen {
			payload, found = append([]byte(nil), p...), true
		}
		return nil
	})
	if errors.Is(err, bolt.ErrDatabaseNotOpen) {
		return // Close gave up waiting for us
	}
	if err != nil {
		s.log.Error("schedule unreadable, dropped", "schedule", name, "error", err)
	}
	if err != nil || !found {
		// Unreadable, or deleted or replaced since we looked (then the index has moved on
		// already and this is a no-op).
		s.forget(name, gen)
		return
	}

	fireErr := s.callFire(ctx, payload)
	if fireErr == nil {
		s.forget(name, gen)
		return
	}
	if ctx.Err() != nil {
		return // shutting down: it stays stored and fires on the next start
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byName[name]
	if !ok || e.gen != gen {
		return // deleted or replaced while firing
	}
	e.attempts++
	if e.attempts >= s.maxAttempts {
		s.log.Error("schedule dropped after its last attempt", "schedule", name, "attempts", e.attempts, "error", fireErr)
		s.forgetLocked(name, gen)
		return
	}
	delay := s.backoff(e.attempts)
	s.log.Warn("schedule fire failed, will retry", "schedule", name, "attempt", e.attempts, "retryIn", delay, "error", fireErr)
	e.due = time.Now().Add(delay)
	heap.Fix(&s.pending, e.index)
}

// callFire runs the fire function, turning a panic into an error so one bad payload cannot
// stop the scheduler.
func (s *Scheduler) callFire(ctx context.Context, payload []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("fire panicked: %v", r)
		}
	}()
	return s.fire(ctx, payload)
}

func (s *Scheduler) forget(name string, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetLocked(name, gen)
}

// forgetLocked deletes generation gen of the schedule from the file and the index; a newer
// generation is left alone.
func (s *Scheduler) forgetLocked(name string, gen uint64) {
	if s.dbClosed {
		return // Close gave up waiting: the schedule fires again on the next start
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		v := b.Get([]byte(name))
		if v == nil {
			return nil
		}
		if g, _, _, err := decode(v); err == nil && g != gen {
			return nil
		}
		return b.Delete([]byte(name))
	})
	if err != nil {
		s.log.Error("schedule delete after fire failed", "schedule", name, "error", err)
	}
	if e, ok := s.byName[name]; ok && e.gen == gen {
		heap.Remove(&s.pending, e.index)
		delete(s.byName, name)
	}
}

// A stored value is gen (8 bytes) | at, Unix seconds (8 bytes) | payload.
func encode(gen uint64, at time.Time, payload []byte) []byte {
	v := make([]byte, 16+len(payload))
	binary.BigEndian.PutUint64(v, gen)
	binary.BigEndian.PutUint64(v[8:], uint64(at.Unix()))
	copy(v[16:], payload)
	return v
}

func decode(v []byte) (gen uint64, at time.Time, payload []byte, err error) {
	if len(v) < 16 {
		return 0, time.Time{}, nil, errors.New("short record")
	}
	gen = binary.BigEndian.Uint64(v)
	at = time.Unix(int64(binary.BigEndian.Uint64(v[8:])), 0).UTC()
	return gen, at, v[16:], nil
}

// queue is a min-heap of entries by due time.
type queue []*entry

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if !q[i].due.Equal(q[j].due) {
		return q[i].due.Before(q[j].due)
	}
	return q[i].name < q[j].name
}
func (q queue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}
func (q *queue) Push(x any) {
	e := x.(*entry)
	e.index = len(*q)
	*q = append(*q, e)
}
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	e.index = -1
	return e
}
