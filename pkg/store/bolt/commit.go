package bolt

// Group commit of the store's write transactions.
//
// bbolt commits a write transaction with two syncs (its pages, then its meta page), one writer
// at a time. Its Batch lets the callers that arrive within a delay of each other share a
// commit, and then queues that batch for the writer: under load, several small batches wait in
// line, each paying both syncs. A delivery profile showed it: 32 publishers recording events
// spent 94% of their time in Batch, at 6 writes a commit, with the writer busy three quarters
// of the time. The committer runs, in each commit, every write that arrived while the previous
// one was being written: a lone write starts at once, and a commit under load takes everyone
// who waited for it.
//
// As with Batch, a write function may run more than once: when one of a commit's functions
// fails, that commit is rolled back, the failing function is run again alone by its caller (so
// that its error, or its panic, is its own) and the others are committed without it.

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	bbolt "go.etcd.io/bbolt"
)

// maxCommitCalls bounds the write functions of one commit.
const maxCommitCalls = 1000

type committer struct {
	db *bbolt.DB

	mu     sync.Mutex
	queue  []*commitCall
	closed bool

	kick chan struct{}
	done chan struct{}
}

type commitCall struct {
	fn  func(*bbolt.Tx) error
	err chan error // the outcome; errAlone: run fn alone
}

// errAlone tells a caller that its function failed inside a shared commit.
var errAlone = errors.New("bolt: run alone")

func newCommitter(db *bbolt.DB) *committer {
	c := &committer{db: db, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go c.loop()
	return c
}

// update runs fn in a write transaction shared with the writes that arrive meanwhile, and
// returns once it is committed.
func (c *committer) update(fn func(*bbolt.Tx) error) error {
	call := &commitCall{fn: fn, err: make(chan error, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errClosed
	}
	c.queue = append(c.queue, call)
	c.mu.Unlock()
	kick(c.kick)
	err := <-call.err
	if errors.Is(err, errAlone) {
		return c.db.Update(fn)
	}
	return err
}

// close commits what is queued and stops; later writes fail.
func (c *committer) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	kick(c.kick)
	<-c.done
}

func (c *committer) loop() {
	defer close(c.done)
	for {
		c.mu.Lock()
		n := min(len(c.queue), maxCommitCalls)
		calls := slices.Clone(c.queue[:n])
		c.queue = slices.Delete(c.queue, 0, n)
		closed := c.closed
		c.mu.Unlock()
		if n > 0 {
			c.commit(calls)
			continue
		}
		if closed {
			return
		}
		<-c.kick
	}
}

// commit runs calls in one transaction; a function that fails is handed back to its caller
// and the others are run again without it.
func (c *committer) commit(calls []*commitCall) {
	for len(calls) > 0 {
		failed := -1
		err := c.db.Update(func(tx *bbolt.Tx) error {
			for i, call := range calls {
				if err := safely(call.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			for _, call := range calls {
				call.err <- err
			}
			return
		}
		calls[failed].err <- errAlone
		calls = slices.Delete(calls, failed, failed+1)
	}
}

// safely is fn(tx) with a panic turned into an error: the function is then run again alone by
// its caller, where it panics in the caller's goroutine.
func safely(fn func(*bbolt.Tx) error, tx *bbolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("bolt: write panicked: %v", p)
		}
	}()
	return fn(tx)
}
