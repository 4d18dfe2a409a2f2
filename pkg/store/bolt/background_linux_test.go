//go:build linux

package bolt

import (
	"syscall"
	"testing"

	bbolt "go.etcd.io/bbolt"
)

// niceness is the nice value of the calling thread (Linux's getpriority answers 20 - nice).
func niceness(t *testing.T) int {
	t.Helper()
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	if err != nil {
		t.Fatal(err)
	}
	return 20 - p
}

// TestCommitsRunInTheBackground: the committer's writes run on a thread of the lowest
// priority, and the caller's thread keeps its own.
func TestCommitsRunInTheBackground(t *testing.T) {
	_, c := openCommitter(t)
	mine := niceness(t)
	var in int
	if err := c.update(func(*bbolt.Tx) error { in = niceness(t); return nil }); err != nil {
		t.Fatal(err)
	}
	if in != 19 {
		t.Errorf("a commit ran at nice %d, want 19", in)
	}
	if now := niceness(t); now != mine {
		t.Errorf("the caller's thread went from nice %d to %d", mine, now)
	}
}
