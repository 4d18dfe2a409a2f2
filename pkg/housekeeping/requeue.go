package housekeeping

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/store"
)

// Requeue is the reconciler's sweep of stuck emails. It never sends: it hands each email back
// to the worker. An email QUEUED for longer than Stuck (its stream record was lost, or its batch
// went to the dead-letter queue) is touched, a conditional write that produces a new stream
// record for the send worker on AWS (locally, the email is handed to the delivery pool). An
// email SENDING whose claim is older than the lease plus Grace, with no evidence from SES
// meanwhile (an SES event would have made it SENT, see pkg/ingest), goes back to QUEUED with an
// event saying why. It stops when its Budget runs out; the next run continues.
type Requeue struct {
	Store interface {
		PendingEmails(ctx context.Context, limit int) ([]string, error)
		UpdateEmail(ctx context.Context, id string, fn func(*store.Email) ([]store.Event, error)) (store.Email, error)
	}
	// Dispatcher hands requeued emails to in-process delivery (the local server; nil on AWS).
	Dispatcher email.Dispatcher
	Now        func() time.Time
	Log        *slog.Logger
	Stuck      time.Duration // how long QUEUED before a touch (2 minutes)
	Grace      time.Duration // beyond the claim's lease, how long to wait for SES's evidence (2 minutes)
	Budget     time.Duration // the most one run takes (10 s)
	// StartedAt, when set, is when this process started, and no other process can hold a
	// claim (the local server, which alone holds its data folder): a claim made before it is
	// taken over at once. (Emails QUEUED at start need no touch: the local server hands every
	// pending email to delivery as it starts, deliver.Pool.Recover.)
	StartedAt time.Time
}

var errUntouched = errors.New("not stuck")

// Run requeues what is stuck and returns how many emails it handed back.
func (r *Requeue) Run(ctx context.Context) (int, error) {
	budget := r.Budget
	if budget <= 0 {
		budget = 10 * time.Second
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	ids, err := r.Store.PendingEmails(ctx, 5000) // ids only; the budget bounds the work
	if err != nil && ctx.Err() != nil && parent.Err() == nil {
		return 0, nil // the budget ran out (the local store may wait for its log): the next run
	}
	if err != nil {
		return 0, fmt.Errorf("pending emails: %w", err)
	}
	now := r.Now().UTC()
	stuck, takeover := now.Add(-r.stuck()), now.Add(-email.ClaimLease-r.grace())
	if !r.StartedAt.IsZero() {
		takeover = r.StartedAt
	}
	why, _ := json.Marshal(map[string]string{"reason": "The worker that claimed it stopped; queued again"})
	var handed []string
	var errs []error
	for _, id := range ids {
		if ctx.Err() != nil {
			break // the budget: the next run continues
		}
		_, err := r.Store.UpdateEmail(ctx, id, func(e *store.Email) ([]store.Event, error) {
			switch {
			case e.Status == store.StatusQueued && e.NotBefore != nil:
				if now.Before(*e.NotBefore) {
					return nil, errUntouched // held back until then
				}
				// Its wait is over: the touch clears it.
				return nil, email.Move(e, store.StatusQueued, email.ByReconciler, now)
			case e.Status == store.StatusQueued && e.UpdatedAt.Before(stuck):
				// The touch: a new stream record for the worker.
				return nil, email.Move(e, store.StatusQueued, email.ByReconciler, now)
			case e.Status == store.StatusSending && e.ClaimedAt != nil && e.ClaimedAt.Before(takeover):
				claimed := *e.ClaimedAt
				if err := email.Move(e, store.StatusQueued, email.ByReconciler, now); err != nil {
					return nil, err
				}
				return []store.Event{{ID: "requeued-" + claimed.Format("20060102T150405.000000000"), EmailID: e.ID,
					Status: store.StatusQueued, CreatedAt: now, Data: why}}, nil
			}
			return nil, errUntouched
		})
		switch {
		case err == nil:
			handed = append(handed, id)
		case errors.Is(err, errUntouched), errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrDuplicateEvent):
		case ctx.Err() != nil:
		default:
			errs = append(errs, fmt.Errorf("requeue %s: %w", id, err))
		}
	}
	if len(handed) > 0 {
		r.Log.Info("requeued stuck emails", "count", len(handed), "budgetLeft", ctx.Err() == nil)
		if r.Dispatcher != nil {
			r.Dispatcher.Dispatch(context.WithoutCancel(ctx), handed...)
		}
	}
	return len(handed), errors.Join(errs...)
}

func (r *Requeue) stuck() time.Duration {
	if r.Stuck > 0 {
		return r.Stuck
	}
	return 2 * time.Minute
}

func (r *Requeue) grace() time.Duration {
	if r.Grace > 0 {
		return r.Grace
	}
	return 2 * time.Minute
}
