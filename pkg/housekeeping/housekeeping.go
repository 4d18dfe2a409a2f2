// Package housekeeping is the periodic work that keeps every email and campaign moving: the
// local server runs it on a timer, the Reconciler function every 5 minutes.
package housekeeping

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/contact"
	"github.com/mailroom/mailroom/pkg/email"
)

// Job is one part of the housekeeping: it returns how many items it handled.
type Job struct {
	Name string
	Run  func(context.Context) (int, error)
}

// Jobs are Mailroom's: emails stuck QUEUED or SENDING go back to the worker (requeue: never a
// send of its own),
// SCHEDULED emails whose schedule never fired are queued, running campaigns that stopped
// moving get their next step again, paused campaigns of deleted books let their held emails
// go (to be settled), and the contacts of deleted books are removed; so are, on the embedded
// store, emails, webhook calls and idempotency keys past their time.
func Jobs(reconcile func(context.Context) (int, error), emails *email.Service, campaigns *campaign.Service,
	contacts *contact.Service, records Expiring) []Job {
	expire := func(ctx context.Context) (int, error) {
		return emails.Store.ExpireEmails(ctx, 10000) // the embedded store; DynamoDB's TTL does it itself
	}
	return []Job{
		{"reconciled stuck emails", reconcile},
		{"queued overdue scheduled emails", func(ctx context.Context) (int, error) {
			return emails.PromoteOverdue(ctx, email.OverdueGrace)
		}},
		{"resumed stalled campaigns", func(ctx context.Context) (int, error) {
			return campaigns.RecoverRunning(ctx, 5*time.Minute)
		}},
		// Before the purge: a book is listed as deleted until its contacts are all gone.
		{"released held emails of campaigns whose book was deleted", campaigns.SettleDeletedBooks},
		{"removed contacts of deleted books", contacts.PurgeDeletedBooks},
		{"removed emails past their retention", expire},
		{"removed webhook calls past their retention or of deleted webhooks", func(ctx context.Context) (int, error) {
			return records.ExpireWebhookCalls(ctx, 10000)
		}},
		{"removed expired idempotency keys", func(ctx context.Context) (int, error) {
			return records.ExpireIdempotency(ctx, 10000)
		}},
	}
}

// Expiring is the records the embedded store removes itself once past their time (DynamoDB's
// TTL does it on AWS, where these remove nothing).
type Expiring interface {
	ExpireWebhookCalls(ctx context.Context, limit int) (int, error)
	ExpireIdempotency(ctx context.Context, limit int) (int, error)
}

// Run runs every job, logs each that did something or failed, and returns the failures
// joined: every job runs whatever the others did.
func Run(ctx context.Context, log *slog.Logger, jobs []Job) error {
	var errs []error
	for _, j := range jobs {
		n, err := j.Run(ctx)
		if n > 0 || err != nil {
			log.Info(j.Name, "count", n, "err", err)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", j.Name, err))
		}
	}
	return errors.Join(errs...)
}
