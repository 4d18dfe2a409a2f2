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

// SchedulePrefix starts every email schedule's name (the IAM grant is on it).
const SchedulePrefix = "email-"

// ScheduleName is the name of an email's schedule for one time: email-<id>-<unix seconds>, and
// -r<n> for the n-th re-arm after an early fire (schedule.Rearmed). Rescheduling or cancelling
// deletes the name of the time it replaces without any lookup.
func ScheduleName(emailID string, at time.Time, rearm int) string {
	return schedule.Rearmed(fmt.Sprintf("%s%s-%d", SchedulePrefix, emailID, at.Unix()), rearm)
}

// FirePayload is what a scheduled email's schedule delivers to the scheduled-send target: the
// email, the time the schedule was for and how many times it was re-armed. Fire goes by the
// email's current scheduledAt; the time in the payload tells an early fire of the current
// schedule from a stale one.
type FirePayload struct {
	EmailID     string    `json:"emailId"`
	ScheduledAt time.Time `json:"scheduledAt"`
	Rearm       int       `json:"rearm,omitempty"`
}

func scheduleFor(e store.Email, rearm int) schedule.Schedule {
	at := e.ScheduledAt.UTC().Truncate(time.Second)
	payload, _ := json.Marshal(FirePayload{EmailID: e.ID, ScheduledAt: at, Rearm: rearm})
	return schedule.Schedule{Name: ScheduleName(e.ID, at, rearm), At: at, Payload: payload}
}

// errProcessed is the answer to changing an email that is no longer SCHEDULED.
var errProcessed = fault.Field("", "Email already processed")

// scheduleSecond is t at a schedule's precision, the whole second, rounded up: an email is
// never sent before the moment it was scheduled for (JavaScript's toISOString gives
// milliseconds).
func scheduleSecond(t time.Time) time.Time {
	s := t.UTC().Truncate(time.Second)
	if s.Before(t) {
		s = s.Add(time.Second)
	}
	return s
}

// checkScheduledAt enforces the scheduler's horizon; hint says what to do instead of a time
// too far in the past.
func checkScheduledAt(at, now time.Time, hint string) error {
	if at.Before(now.Add(-MaxPast)) {
		return fault.Field("scheduledAt", "is more than %d minutes in the past; %s", int(MaxPast.Minutes()), hint)
	}
	if at.After(now.Add(schedule.MaxAhead)) {
		return fault.Field("scheduledAt", "at most %d days ahead", int(schedule.MaxAhead.Hours()/24))
	}
	return nil
}

// MaxReschedules caps the reschedules of one email: each is an event of its history.
const MaxReschedules = 50

// MaxPast is how far in the past a scheduledAt may be (clients' clocks drift): such a time
// sends now; an earlier one is refused, as a mistake that would send at once what was meant
// for later.
const MaxPast = 10 * time.Minute

// Reschedule moves a SCHEDULED email to a new time; a time in the past (by at most MaxPast)
// sends it now. The state
// change is a conditional update, so it cannot race the schedule firing: whichever comes second
// finds the email changed.
func (s *Service) Reschedule(ctx context.Context, p auth.Principal, id string, at time.Time) error {
	now := s.Now().UTC()
	at = scheduleSecond(at)
	if err := checkScheduledAt(at, now, "give a time at most that far back, or now, to send it now"); err != nil {
		return err
	}
	sendNow := !at.After(now)
	var old time.Time
	e, err := s.update(ctx, p, id, func(e *store.Email) ([]store.Event, error) {
		if e.Status != store.StatusScheduled {
			return nil, errProcessed
		}
		if e.Reschedules >= MaxReschedules {
			return nil, fault.Field("scheduledAt", "an email may be rescheduled at most %d times; cancel it and send a new one", MaxReschedules)
		}
		e.Reschedules++
		if e.ScheduledAt != nil {
			old = *e.ScheduledAt
		}
		data, _ := json.Marshal(map[string]string{"scheduledAt": at.Format(time.RFC3339)})
		e.ScheduledAt = &at
		e.UpdatedAt = now
		status := store.StatusScheduled
		if sendNow {
			status = store.StatusQueued
			if err := Move(e, store.StatusQueued, ByCaller, now); err != nil {
				return nil, err
			}
		}
		return []store.Event{{ID: "r-" + newNonce()[:16], EmailID: e.ID, Status: status, CreatedAt: now, Data: data}}, nil
	})
	if err != nil {
		return err
	}
	if !sendNow {
		// The email already carries the new time; if this Put fails, the old schedule still
		// fires and the target puts the schedule for the email's time back (the reconciler is
		// the last resort). Report the failure so the caller retries.
		if err := s.Scheduler.Put(ctx, scheduleFor(e, 0)); err != nil {
			return fmt.Errorf("reschedule %s: %w", id, err)
		}
	}
	if !old.IsZero() && !old.Equal(at) {
		if err := s.Scheduler.Delete(ctx, ScheduleName(id, old, 0)); err != nil {
			// Harmless: it fires, finds the email moved or queued, and does nothing more.
			s.Log.Warn("delete the replaced schedule of an email", "emailId", id, "err", err)
		}
	}
	if sendNow {
		s.dispatch(ctx, id)
	}
	return nil
}

// Cancel stops a SCHEDULED email for good. A schedule that fires afterwards finds it CANCELLED
// and does nothing.
func (s *Service) Cancel(ctx context.Context, p auth.Principal, id string) error {
	now := s.Now().UTC()
	e, err := s.update(ctx, p, id, func(e *store.Email) ([]store.Event, error) {
		if e.Status != store.StatusScheduled || e.ScheduledAt == nil {
			return nil, errProcessed
		}
		if err := Move(e, store.StatusCancelled, ByCaller, now); err != nil {
			return nil, err
		}
		return []store.Event{{ID: "cancelled", EmailID: e.ID, Status: store.StatusCancelled, CreatedAt: now}}, nil
	})
	if err != nil {
		return err
	}
	if err := s.Scheduler.Delete(ctx, ScheduleName(id, *e.ScheduledAt, 0)); err != nil {
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
// own scheduledAt is due (a second early at most: at() times are rounded up to the minute, so
// an on-time fire is never early). It goes by the email, not by the time in the payload, so any
// schedule of the email heals a lost or out-of-order one. A fire before the email's time is
// one of two things. The payload's time is the email's: this schedule fired early, and it is
// re-armed for the same time under a new name (at most schedule.MaxRearms times). The payload's time is
// another: a schedule the email has moved away from (its delete failed, or a reschedule's Put
// was lost), which puts the schedule of the email's current time (create or update, so an
// existing one is left as it is). Cancelled or already sent emails are left alone; an email
// not written yet (the schedule is made first) is an error so the scheduler retries, until
// NotWrittenGrace past its time, when the schedule is dropped.
func (s *Service) Fire(ctx context.Context, payload []byte) error {
	var p FirePayload
	if err := json.Unmarshal(payload, &p); err != nil || p.EmailID == "" {
		s.Log.Error("scheduled send: malformed payload dropped")
		return nil
	}
	e, err := s.promote(ctx, p.EmailID, "fired-", BySchedule, nil)
	switch {
	case errors.Is(err, errNothingToDo), errors.Is(err, store.ErrDuplicateEvent):
		return nil
	case errors.Is(err, store.ErrNotFound) && s.Now().After(p.ScheduledAt.Add(NotWrittenGrace)):
		// Long past its time and still not written: the send that made the schedule failed
		// after it (or the email is gone). Retried on, it would end in the dead-letter queue
		// and its alarm for nothing.
		s.Log.Warn("scheduled send: no such email; schedule dropped", "emailId", p.EmailID)
		return nil
	case errors.Is(err, errNotDue):
		cur, gerr := s.Store.GetEmail(ctx, p.EmailID)
		if gerr != nil {
			return fmt.Errorf("reschedule %s: %w", p.EmailID, gerr)
		}
		if cur.Status != store.StatusScheduled || cur.ScheduledAt == nil {
			return nil
		}
		if !cur.ScheduledAt.Equal(p.ScheduledAt) {
			return s.Scheduler.Put(ctx, scheduleFor(cur, 0))
		}
		if p.Rearm >= schedule.MaxRearms {
			s.Log.Error("scheduled send: schedule keeps firing early; the reconciler will queue it", "emailId", cur.ID)
			return nil
		}
		s.Log.Warn("scheduled send fired early: re-armed", "emailId", cur.ID, "rearm", p.Rearm+1)
		return s.Scheduler.Put(ctx, scheduleFor(cur, p.Rearm+1))
	case err != nil:
		return fmt.Errorf("promote %s: %w", p.EmailID, err)
	}
	s.Log.Info("scheduled email queued", "emailId", e.ID)
	s.dispatch(ctx, e.ID)
	return nil
}

// NotWrittenGrace is how long past its time a schedule of an email not found is retried: the
// schedule is made before the email is written, which follows within seconds.
const NotWrittenGrace = 15 * time.Minute

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
		_, err := s.promote(ctx, id, "overdue-", ByReconciler, why)
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
func (s *Service) promote(ctx context.Context, id, prefix string, by Mover, data json.RawMessage) (store.Email, error) {
	now := s.Now().UTC()
	return s.Store.UpdateEmail(ctx, id, func(e *store.Email) ([]store.Event, error) {
		switch {
		case e.Status != store.StatusScheduled || e.ScheduledAt == nil:
			return nil, errNothingToDo
		case e.ScheduledAt.After(now.Add(time.Second)):
			return nil, errNotDue
		}
		if err := Move(e, store.StatusQueued, by, now); err != nil {
			return nil, err
		}
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
