package deliver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

// Reconcile puts back through the deliver flow every email left QUEUED or SENDING for longer
// than olderThan: a lost stream record, a worker that crashed between claim and send, a batch
// that went to the dead-letter queue. Deliver's conditional claim keeps it from sending anything
// twice, and a SENDING claim is only taken over once its lease has run out. It returns how many
// emails it handed to Deliver.
func (w *Worker) Reconcile(ctx context.Context, pending Pending, olderThan time.Duration) (int, error) {
	ids, err := pending.PendingEmails(ctx, 1000)
	if err != nil {
		return 0, fmt.Errorf("pending emails: %w", err)
	}
	cutoff := w.Now().Add(-olderThan)
	n := 0
	var errs []error
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		e, err := w.Store.GetEmail(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if e.UpdatedAt.After(cutoff) {
			continue // young: the stream or the pool has it
		}
		n++
		w.log().Info("reconcile stuck email", "emailId", id, "status", e.Status)
		if err := w.Deliver(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}
