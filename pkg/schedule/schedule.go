// Package schedule declares the scheduler port: one-time jobs that deliver a JSON payload to a
// target at a given time (scheduled email sends, campaign batches). Adapters:
// pkg/schedule/local (an in-process timer persisted in its own bbolt file) and
// pkg/schedule/eventbridge (EventBridge Scheduler one-time schedules). Both keep the contract in
// pkg/schedule/scheduletest.
//
// Invoke is the same delivery without a schedule, for work due now (a campaign started or
// resumed now, the next step of a run that reached its deadline).
//
// Delivery is at least once and may be late: a target must be idempotent (the scheduled-send
// target promotes SCHEDULED → QUEUED with a conditional update, so a repeat finds nothing to do).
package schedule

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// MaxAhead is the furthest in the future a schedule may be; the product rejects a later
// scheduledAt with a 400 that names this limit. EventBridge Scheduler documents no upper bound
// for at() expressions, so this is our own product limit.
const MaxAhead = 365 * 24 * time.Hour

// MaxNameLen is the longest schedule name EventBridge Scheduler accepts.
const MaxNameLen = 64

// ErrInvalidName marks a schedule name outside [0-9a-zA-Z-_.]{1,64}.
var ErrInvalidName = errors.New("schedule: invalid name")

// ErrInvalidTime marks a schedule without a time.
var ErrInvalidTime = errors.New("schedule: invalid time")

// ErrThrottled marks a call refused for rate reasons; the caller may retry with backoff.
var ErrThrottled = errors.New("schedule: throttled")

// Schedule is a one-time job: at At, the target receives Payload.
type Schedule struct {
	Name    string    // deterministic, e.g. "email-<emailId>"; [0-9a-zA-Z-_.]{1,64}
	At      time.Time // fires at this instant; adapters keep it in UTC, truncated to the second
	Payload []byte    // JSON delivered to the target as is
}

// Scheduler creates and removes one-time schedules.
type Scheduler interface {
	// Put creates the schedule or replaces the one with the same name (reschedule). A time in
	// the past fires as soon as possible.
	Put(ctx context.Context, s Schedule) error
	// Delete removes it; a missing schedule is not an error.
	Delete(ctx context.Context, name string) error
	// Invoke hands payload to the target now, asynchronously and at least once, without a
	// schedule: what "now" means, where an at() in the past would be a time whose behaviour
	// EventBridge Scheduler does not document.
	Invoke(ctx context.Context, payload []byte) error
}

// MaxRearms bounds how often a schedule that fired before its time is put back for it.
const MaxRearms = 5

// Rearmed is the name of the n-th re-arm of the schedule named name (name itself for n = 0):
// a re-arm never reuses the name of the schedule that just fired, which EventBridge Scheduler
// deletes once it completes, and a create under that name would conflict with it.
func Rearmed(name string, n int) string {
	if n > 0 {
		name += "-r" + strconv.Itoa(n)
	}
	return name
}

// ValidName reports whether name is a valid schedule name: 1 to 64 characters from
// [0-9a-zA-Z-_.], the set EventBridge Scheduler accepts.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > MaxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z',
			c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// CheckName returns an error wrapping ErrInvalidName when name is not valid.
func CheckName(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	return nil
}

// Normalize checks s and returns it with At in UTC, to the second (the precision of an at()
// expression), a fraction rounded up: a schedule never fires before its time (a campaign's
// next batch not before its whole window). Adapters call it first in Put.
func Normalize(s Schedule) (Schedule, error) {
	if err := CheckName(s.Name); err != nil {
		return s, err
	}
	if s.At.IsZero() {
		return s, fmt.Errorf("%w: schedule %q has no time", ErrInvalidTime, s.Name)
	}
	at := s.At.UTC()
	if whole := at.Truncate(time.Second); whole.Before(at) {
		at = whole.Add(time.Second)
	}
	s.At = at
	return s, nil
}
