package email

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mailroom/mailroom/pkg/auth"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/schedule"
	"github.com/mailroom/mailroom/pkg/store"
)

// Scheduler creates and removes the one-time schedules of scheduled emails.
type Scheduler interface {
	Put(ctx context.Context, s schedule.Schedule) error
	Delete(ctx context.Context, name string) error
}

// ScheduleName is the deterministic schedule name of an email: rescheduling replaces it and
// cancelling deletes it without any lookup.
func ScheduleName(emailID string) string { return "email-" + emailID }

// FirePayload is what a scheduled email's schedule delivers to the scheduled-send target (the
// time is informative: Fire goes by the email's current scheduledAt).
type FirePayload struct {
	EmailID     string    `json:"emailId"`
	ScheduledAt time.Time `json:"scheduledAt"`
}

func scheduleFor(e store.Email) schedule.Schedule {
	payload, _ := json.Marshal(FirePayload{EmailID: e.ID, ScheduledAt: *e.ScheduledAt})
	return schedule.Schedule{Name: ScheduleName(e.ID), At: *e.ScheduledAt, Payload: payload}
}

// errProcessed is the answer to changing an email that is no longer SCHEDULED.
var errProcessed = fault.Field("", "Email already processed")

// checkScheduledAt enforces the scheduler's horizon.
func checkScheduledAt(at, now time.Time) error {
	if at.After(now.Add(schedule.MaxAhead)) {
		return fault.Field("scheduledAt", "at most %d days ahead", int(schedule.MaxAhead.Hours()/24))
	}
	return nil
}

// Reschedule moves a SCHEDULED email to a new time; a time in the past sends it now. The state
// change is a conditional update, so it cannot race the schedule firing: whichever comes second
// finds the email changed.
func (s *Service) Reschedule(ctx context.Context, p auth.Principal, id string, at time.Time) error {
	now := s.Now().UTC()
	at = at.UTC().Truncate(time.Second)
	if err := checkScheduledAt(at, now); err != nil {
		return err
	}
	sendNow := !at.After(now)
	e, err := s.update(ctx, p, id, func(e *store.Email) ([]store.Event, error) {
		if e.Status != store.StatusScheduled {
			return nil, errProcessed
		}
		data, _ := json.Marshal(map[string]string{"scheduledAt": at.Format(time.RFC3339)})
		e.ScheduledAt = &at
		e.UpdatedAt = now
		status := store.StatusScheduled
		if sendNow {
			status = store.StatusQueued
			e.Status, e.LatestStatus = store.StatusQueued, Advance(e.LatestStatus, store.StatusQueued)
		}
		return []store.Event{{ID: "r-" + newNonce()[:16], EmailID: e.ID, Status: status, CreatedAt: now, Data: data}}, nil
	})
	if err != nil {
		return err
	}
	if sendNow {
		if err := s.Scheduler.Delete(ctx, ScheduleName(id)); err != nil {
			s.Log.Warn("delete schedule of an email sent now", "emailId", id, "err", err)
		}
		s.dispatch(ctx, id)
		return nil
	}
	// The email already carries the new time; if this Put fails, the old schedule still fires
	// and the target, seeing a later scheduledAt, leaves it alone. Report the failure so the
	// caller retries.
	if err := s.Scheduler.Put(ctx, scheduleFor(e)); err != nil {
		return fmt.Errorf("reschedule %s: %w", id, err)
	}
	return nil
}

// Cancel stops a SCHEDULED email for good. A schedule that fires afterwards finds it CANCELLED
// and does nothing.
func (s *Service) Cancel(ctx context.Context, p auth.Principal, id string) error {
	now := s.Now().UTC()
	_, err := s.update(ctx, p, id, func(e *store.Email) ([]store.Event, error) {
		if e.Status != store.StatusScheduled {
			return nil, errProcessed
		}
		e.Status, e.LatestStatus, e.UpdatedAt = store.StatusCancelled, Advance(e.LatestStatus, store.StatusCancelled), now
		return []store.Event{{ID: "cancelled", EmailID: e.ID, Status: store.StatusCancelled, CreatedAt: now}}, nil
	})
	if err != nil {
		return err
	}
	if err := s.Scheduler.Delete(ctx, ScheduleName(id)); err != nil {
		// Harmless: the schedule will fire and find the email cancelled.
		s.Log.Warn("delete schedule of a cancelled email", "emailId", id, "err", err)
	}
	return nil
}

// update runs fn on one of the caller's emails; another team's email is not found.
func (s *Service) update(ctx context.Context, p auth.Principal, id string, fn func(*store.Email) ([]store.Event, error)) (store.Email, error) {
	e, err := s.Store.UpdateEmail(ctx, id, func(e *store.Email) ([]store.Event, error) {
		if !visible(p, *e) {
			return nil, store.ErrNotFound
		}
		return fn(e)
	})
	if errors.Is(err, store.ErrNotFound) {
		return store.Email{}, fault.NotFoundf("Email not found")
	}
	return e, err
}

// Fire is the scheduled-send target: it promotes the email SCHEDULED → QUEUED when the email's
// own scheduledAt is due. It goes by the email, not by the time in the payload, so any schedule
// of the email heals a lost or out-of-order one: a schedule that fires before the email's time
// (a reschedule whose Put was lost, or two reschedules whose Puts crossed) puts the schedule
// for the email's current time back. Cancelled or already sent emails are left alone; an email
// not written yet (the schedule is made first) is an error so the scheduler retries.
func (s *Service) Fire(ctx context.Context, payload []byte) error {
	var p FirePayload
	if err := json.Unmarshal(payload, &p); err != nil || p.EmailID == "" {
		s.Log.Error("scheduled send: malformed payload dropped")
		return nil
	}
	e, err := s.promote(ctx, p.EmailID, "fired-", nil)
	switch {
	case errors.Is(err, errNothingToDo), errors.Is(err, store.ErrDuplicateEvent):
		return nil
	case errors.Is(err, errNotDue):
		cur, gerr := s.Store.GetEmail(ctx, p.EmailID)
		if gerr != nil {
			return fmt.Errorf("reschedule %s: %w", p.EmailID, gerr)
		}
		if cur.Status == store.StatusScheduled && cur.ScheduledAt != nil {
			return s.Scheduler.Put(ctx, scheduleFor(cur))
		}
		return nil
	case err != nil:
		return fmt.Errorf("promote %s: %w", p.EmailID, err)
	}
	s.Log.Info("scheduled email queued", "emailId", e.ID)
	s.dispatch(ctx, e.ID)
	return nil
}

// ClaimLease is how long a worker's SENDING claim holds before it may be taken over.
const ClaimLease = 5 * time.Minute

// OverdueGrace is how long after its time a SCHEDULED email is taken for one whose schedule
// was lost: EventBridge Scheduler fires within the minute and retries for a while.
const OverdueGrace = 5 * time.Minute

// PromoteOverdue is the backstop for a schedule that never fires (dead-lettered, deleted, never
// created): every SCHEDULED email whose time passed more than grace ago is queued through the
// same conditional update as Fire, once, with an event saying why. It returns how many it
// queued; a late schedule that fires afterwards finds the email QUEUED and does nothing.
func (s *Service) PromoteOverdue(ctx context.Context, grace time.Duration) (int, error) {
	ids, err := s.Store.OverdueScheduled(ctx, s.Now().UTC().Add(-grace), 1000)
	if err != nil {
		return 0, fmt.Errorf("overdue scheduled emails: %w", err)
	}
	why, _ := json.Marshal(map[string]string{"reason": "The schedule did not fire: queued by the reconciler"})
	n := 0
	var errs []error
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		_, err := s.promote(ctx, id, "overdue-", why)
		switch {
		case errors.Is(err, errNothingToDo), errors.Is(err, errNotDue), errors.Is(err, store.ErrDuplicateEvent):
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("promote %s: %w", id, err))
			continue
		}
		n++
		s.Log.Warn("overdue scheduled email queued", "emailId", id)
		s.dispatch(ctx, id)
	}
	return n, errors.Join(errs...)
}

// promote moves a due SCHEDULED email to QUEUED with an event whose id is prefix and the time
// it was scheduled for (so each time is promoted once); errNothingToDo when it is no longer
// SCHEDULED, errNotDue when its time is more than a second away.
func (s *Service) promote(ctx context.Context, id, prefix string, data json.RawMessage) (store.Email, error) {
	now := s.Now().UTC()
	return s.Store.UpdateEmail(ctx, id, func(e *store.Email) ([]store.Event, error) {
		switch {
		case e.Status != store.StatusScheduled || e.ScheduledAt == nil:
			return nil, errNothingToDo
		case e.ScheduledAt.After(now.Add(time.Second)):
			return nil, errNotDue
		}
		e.Status, e.LatestStatus, e.UpdatedAt = store.StatusQueued, Advance(e.LatestStatus, store.StatusQueued), now
		return []store.Event{{ID: prefix + e.ScheduledAt.Format("20060102T150405"), EmailID: e.ID,
			Status: store.StatusQueued, CreatedAt: now, Data: data}}, nil
	})
}

var errNotDue = errors.New("not due yet")

var errNothingToDo = errors.New("nothing to do")

func (s *Service) dispatch(ctx context.Context, ids ...string) {
	if s.Dispatcher != nil && len(ids) > 0 {
		s.Dispatcher.Dispatch(ctx, ids...)
	}
}
