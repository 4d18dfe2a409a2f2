//go:build linux

package outbox

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncEachFile says whether Send syncs each message file itself. On Linux it does not: one
// syncfs of the outbox's filesystem (syncFiles) makes the message files written before it and
// the journal durable together, so a group of concurrent sends costs one flush.
const syncEachFile = false

// syncFS makes what Send wrote durable: every message file and the journal.
func syncFS(dir, _ *os.File) error {
	return unix.Syncfs(int(dir.Fd()))
}
