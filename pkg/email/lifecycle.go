package email

import (
	"errors"
	"fmt"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

// Mover is who moves an email from one delivery status to another.
type Mover string

// The movers.
const (
	ByAPI        Mover = "the API"        // a send, a batch, a campaign step: the first status
	ByCaller     Mover = "the caller"     // cancel, or a reschedule to a time that has passed
	BySchedule   Mover = "the schedule"   // the scheduled-send target, when the email's time has come
	ByWorker     Mover = "the worker"     // the send worker; out of SENDING only with its own claim
	ByReconciler Mover = "the reconciler" // housekeeping: it hands stuck emails back, never sends
	ByCampaign   Mover = "the campaign"   // a campaign step, releasing the emails held while it was paused
	BySES        Mover = "SES's evidence" // a Send, Delivery, Bounce or Complaint event
)

// Transition is one move the delivery state machine allows.
type Transition struct {
	From, To string // From "" is the email's creation
	By       Mover
	When     string
}

// Lifecycle is the delivery state machine of an email's own status (what the pipeline knows;
// latestStatus is what its events say): every move there is, and who may make it. Every writer
// of a status goes through Move, so a move not listed here cannot happen; the README's table is
// this one (TestReadmeHasTheLifecycle).
//
// Its invariants: an email is handed to SES at most once unless SES provably did not take it
// (only a claim, QUEUED → SENDING, leads to a send, and an email leaves SENDING for QUEUED
// only when its worker released it before sending or when, after the lease and a grace, no
// evidence from SES came); every accepted email reaches a final status (whatever is stuck in
// QUEUED or SENDING is handed back by the reconciler, SCHEDULED ones past their time are
// queued); a counter counts each email once (the kinds counted are recorded on the email, in
// the same write as the move).
var Lifecycle = []Transition{
	{"", store.StatusQueued, ByAPI, "written with its first event"},
	{"", store.StatusScheduled, ByAPI, "written with a future scheduledAt, after its schedule"},
	{store.StatusScheduled, store.StatusQueued, BySchedule, "the email's own time has come"},
	{store.StatusScheduled, store.StatusQueued, ByCaller, "rescheduled to a time that has passed"},
	{store.StatusScheduled, store.StatusQueued, ByReconciler, "5 minutes past its time (the schedule was lost)"},
	{store.StatusScheduled, store.StatusCancelled, ByCaller, "cancelled"},
	{store.StatusQueued, store.StatusSending, ByWorker, "the claim (a claim whose answer was lost is recognised as its own)"},
	{store.StatusQueued, store.StatusQueued, ByReconciler, "touched after 2 minutes, or once its hold time has passed: a new stream record for the worker"},
	{store.StatusQueued, store.StatusQueued, ByWorker, "held: its campaign is paused (it leaves the pending index for the campaign's held list)"},
	{store.StatusQueued, store.StatusQueued, ByCampaign, "released: its campaign resumed, or was deleted (the worker then cancels it)"},
	{store.StatusSending, store.StatusSent, ByWorker, "SES accepted the message"},
	{store.StatusSending, store.StatusFailed, ByWorker, "SES refused it, or it cannot be sent (domain, content)"},
	{store.StatusSending, store.StatusSuppressed, ByWorker, "every recipient is suppressed, or the contact unsubscribed"},
	{store.StatusSending, store.StatusCancelled, ByWorker, "its campaign was deleted"},
	{store.StatusSending, store.StatusQueued, ByWorker, "released without a send: shutdown, too little of the invocation left, or held until a time (SES throttled it, no send slot in time, the account paused, or the deployment may not send: a 403 or 404 from SES)"},
	{store.StatusSending, store.StatusQueued, ByReconciler, "the claim is older than its lease plus the grace for SES's evidence"},
	{store.StatusQueued, store.StatusSent, BySES, "SES accepted it (the claim, if any, is cleared); locally, every plain send: the local server claims it in memory, and the outbox's events record each send"},
	{store.StatusSending, store.StatusSent, BySES, "SES accepted it: the worker died or lost the answer; locally, a send made under a claim in the store"},
	{store.StatusFailed, store.StatusSent, BySES, "SES accepted it after all"},
}

// ErrTransition is the error of a move the lifecycle does not allow.
var ErrTransition = errors.New("email: move not allowed")

// Allowed reports whether by may move an email from one status to another.
func Allowed(from, to string, by Mover) bool {
	for _, t := range Lifecycle {
		if t.From == from && t.To == to && t.By == by {
			return true
		}
	}
	return false
}

// Move moves e to status to on behalf of by, at now: its status, its latestStatus (see
// Advance; a cancelled email's is CANCELLED, where it ends), its claim (set by a claim, cleared
// by every other move) and its update time. A move the lifecycle does not allow returns an
// error wrapping ErrTransition and leaves e as it was.
func Move(e *store.Email, to string, by Mover, now time.Time) error {
	if !Allowed(e.Status, to, by) {
		return fmt.Errorf("%w: %s cannot move an email from %s to %s", ErrTransition, by, e.Status, to)
	}
	e.Status = to
	e.LatestStatus = Advance(e.LatestStatus, to)
	if to == store.StatusCancelled {
		e.LatestStatus = to // ranks below QUEUED, but it is where the email ends
	}
	if to == store.StatusSending {
		e.ClaimedAt = &now
	} else {
		e.ClaimedAt = nil
	}
	e.UpdatedAt = now
	e.NotBefore, e.Held = nil, false // a release or a hold sets them after the move
	return nil
}

// ErrNotHeld is ReleaseHeld's answer for an email that is not held (released already).
var ErrNotHeld = errors.New("email: not held")

// ReleaseHeld is the UpdateEmail change that releases a held campaign email to the worker:
// QUEUED again, on behalf of its campaign (resumed or deleted), with a new stream record.
func ReleaseHeld(now time.Time) func(*store.Email) ([]store.Event, error) {
	return func(e *store.Email) ([]store.Event, error) {
		if !e.Held {
			return nil, ErrNotHeld
		}
		return nil, Move(e, store.StatusQueued, ByCampaign, now)
	}
}

// Create gives a new email its first status (QUEUED or SCHEDULED) on behalf of by.
func Create(e *store.Email, to string, now time.Time) error {
	e.Status = ""
	return Move(e, to, ByAPI, now)
}
