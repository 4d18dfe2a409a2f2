//go:build !linux

package outbox

import "os"

// syncEachFile says whether Send syncs each message file itself: without syncfs it does, and
// syncFiles syncs the journal.
const syncEachFile = true

// syncFS makes what Send wrote durable: the journal (each message file was synced by Send).
func syncFS(_, journal *os.File) error {
	return journal.Sync()
}
