package bolt

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	bbolt "go.etcd.io/bbolt"
)

var testBucket = []byte("t")

func openCommitter(t *testing.T) (*bbolt.DB, *committer) {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "c.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket(testBucket); return err }); err != nil {
		t.Fatal(err)
	}
	c := newCommitter(db)
	t.Cleanup(func() { c.close(); _ = db.Close() })
	return db, c
}

func putKey(key string) func(*bbolt.Tx) error {
	return func(tx *bbolt.Tx) error { return tx.Bucket(testBucket).Put([]byte(key), []byte("v")) }
}

func stored(t *testing.T, db *bbolt.DB, key string) bool {
	t.Helper()
	var ok bool
	if err := db.View(func(tx *bbolt.Tx) error { ok = tx.Bucket(testBucket).Get([]byte(key)) != nil; return nil }); err != nil {
		t.Fatal(err)
	}
	return ok
}

// Concurrent writers share commits, and every write is committed.
func TestCommitsAreShared(t *testing.T) {
	db, c := openCommitter(t)
	const writers, each = 64, 20
	var (
		mu  sync.Mutex
		txs = map[int]bool{}
		wg  sync.WaitGroup
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				err := c.update(func(tx *bbolt.Tx) error {
					mu.Lock()
					txs[tx.ID()] = true
					mu.Unlock()
					return putKey(fmt.Sprintf("%d-%d", w, i))(tx)
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for w := range writers {
		for i := range each {
			if !stored(t, db, fmt.Sprintf("%d-%d", w, i)) {
				t.Fatalf("write %d-%d was acknowledged but is not stored", w, i)
			}
		}
	}
	if n := len(txs); n > writers*each/2 {
		t.Errorf("%d writes took %d commits: commits are not shared", writers*each, n)
	}
}

// A write that fails in a shared commit gets its own error, writes nothing, and the writes
// committed with it are kept.
func TestAFailingWriteLeavesTheOthers(t *testing.T) {
	db, c := openCommitter(t)
	hold, held := make(chan struct{}), make(chan struct{})
	go func() {
		_ = c.update(func(tx *bbolt.Tx) error {
			select {
			case <-held:
			default:
				close(held)
			}
			<-hold
			return nil
		})
	}()
	<-held // the committer is busy: what follows queues for the next commit together
	errBad := errors.New("refused")
	results := make(map[string]error)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, key := range []string{"good-1", "bad", "panics", "good-2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("panic: %v", p)
					}
				}()
				err = c.update(func(tx *bbolt.Tx) error {
					if err := putKey(key)(tx); err != nil {
						return err
					}
					switch key {
					case "bad":
						return errBad
					case "panics":
						panic("boom")
					}
					return nil
				})
			}()
			mu.Lock()
			results[key] = err
			mu.Unlock()
		}()
	}
	for c.queued() < 4 {
		runtime.Gosched()
	}
	close(hold)
	wg.Wait()
	if !errors.Is(results["bad"], errBad) {
		t.Errorf("the failing write got %v, want its own error", results["bad"])
	}
	if fmt.Sprint(results["panics"]) != "panic: boom" {
		t.Errorf("the panicking write got %v, want its panic in its own goroutine", results["panics"])
	}
	for _, key := range []string{"good-1", "good-2"} {
		if results[key] != nil || !stored(t, db, key) {
			t.Errorf("%s: err %v, stored %v; want committed", key, results[key], stored(t, db, key))
		}
	}
	for _, key := range []string{"bad", "panics"} {
		if stored(t, db, key) {
			t.Errorf("%s failed but its write is stored", key)
		}
	}
}

func TestWritesAfterCloseFail(t *testing.T) {
	_, c := openCommitter(t)
	if err := c.update(putKey("before")); err != nil {
		t.Fatal(err)
	}
	c.close()
	if err := c.update(putKey("after")); !errors.Is(err, errClosed) {
		t.Fatalf("a write after close got %v, want errClosed", err)
	}
}

// queued is how many writes wait for the next commit.
func (c *committer) queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}
