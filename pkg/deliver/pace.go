package deliver

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/mailroom/mailroom/pkg/deliver/batch"
	"github.com/mailroom/mailroom/pkg/mail"
	"github.com/mailroom/mailroom/pkg/metric"
	"github.com/mailroom/mailroom/pkg/store"
)

// Pacer keeps the sends of every worker, in every process, within the mail account's rate.
//
// The design: one counter per second in the store (store.Pacing), shared by all workers. A
// send takes a slot of a second with one conditional write that succeeds while the second has
// fewer sends than the rate allows, then waits for its place within that second (so a second's
// sends are spread over it, not sent in a burst at its start). A full second sends the worker
// to the next one. A process remembers the first second it has not seen full, so under a
// backlog workers book ahead instead of asking again for seconds already full. When no slot is
// free before the worker must stop (its invocation's deadline), the email goes back to QUEUED
// with the time to try again. Why this and not a token bucket in one item: a bucket needs a
// read-modify-write of a shared refill time under contention (a retry storm at high rates),
// while the per-second counter is a single atomic ADD per send, never contended beyond one
// second, sharded by the store above 500 sends/s, and expires by TTL.
type Pacer struct {
	Slots store.Pacing
	// Account reads the account's rate and daily quota (SES GetAccount); nil: Rate only.
	Account mail.Account
	// Rate overrides the account's rate and quota, in sends per second (SES_MAX_SEND_RATE);
	// 0: the account's. With neither, sends are not paced.
	Rate float64
	Now  func() time.Time
	Log  *slog.Logger
	// Refresh is how long a read of the account holds (default 5 minutes).
	Refresh time.Duration
	// Metrics counts metric.SendingPaused when the account cannot send (nil: none).
	Metrics metric.Counter

	taking sync.Mutex // one batch's slots are taken by one of its sends
	mu     sync.Mutex
	// reserved is the slots taken for this process and not yet used: positions pos..pos+left-1
	// of second sec, which takes limit sends.
	reserved struct {
		sec              time.Time
		limit, pos, left int
	}
	quota       mail.Quota
	quotaAt     time.Time
	next        time.Time // the first second this process has not seen full
	pausedUntil time.Time
	warned      time.Time
}

// Pause waits for a paused or suspended account: until then Acquire hands out no slot.
func (p *Pacer) Pause(until time.Time, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if until.After(p.pausedUntil) {
		p.pausedUntil = until
	}
	p.warn("sending is paused for the account: emails wait in QUEUED", "until", until.Format(time.RFC3339), "reason", why)
}

// warn logs and counts that the account cannot send, once a minute per process. p.mu is held.
func (p *Pacer) warn(msg string, args ...any) {
	if p.now().Sub(p.warned) < time.Minute {
		return
	}
	p.warned = p.now()
	p.log().Error(msg, args...)
	metric.Add(context.Background(), p.Metrics, metric.SendingPaused, 1)
}

// Acquire waits for a send slot that starts before before. It returns a zero time when the
// caller may send now, or the time to try again (no slot before before, a paused account, an
// exhausted daily quota).
func (p *Pacer) Acquire(ctx context.Context, before time.Time) (time.Time, error) {
	rate, retry, err := p.limits(ctx)
	if err != nil || !retry.IsZero() || rate <= 0 {
		return retry, err
	}
	if at, ok := p.fromReserved(before); ok {
		return time.Time{}, sleepUntil(ctx, at, p.now())
	}
	want := min(max(1, batch.Of(ctx)), int(math.Ceil(rate)), maxReserve)
	if want > 1 {
		// The sends of a batch ask at about the same time: one of them takes the slots of all,
		// the others wait for it and use them (the lock is not held while a send waits for
		// its place in the second).
		p.taking.Lock()
		if at, ok := p.fromReserved(before); ok {
			p.taking.Unlock()
			return time.Time{}, sleepUntil(ctx, at, p.now())
		}
	}
	at, retry, err := p.take(ctx, before, rate, want)
	if want > 1 {
		p.taking.Unlock()
	}
	if err != nil || !retry.IsZero() {
		return retry, err
	}
	return time.Time{}, sleepUntil(ctx, at, p.now())
}

// slotsIn is how many sends the second that starts at sec may take at rate: the whole sends due
// by its end less those due by its start (from the Unix epoch), so that a fraction of a send
// per second is kept over the seconds: at 0.5/s every other second takes one, at 14.3/s a
// second takes 14 or 15 and ten seconds 143.
func slotsIn(sec time.Time, rate float64) int {
	t := float64(sec.Unix())
	return int(math.Floor(rate*(t+1)) - math.Floor(rate*t))
}

// take takes up to want slots of the first second before before that has room, keeps all but
// the first for the process, and returns when the first's send may start; or, when no second
// before before has room, the time to try again.
func (p *Pacer) take(ctx context.Context, before time.Time, rate float64, want int) (at, retry time.Time, err error) {
	p.mu.Lock()
	sec := p.now().Truncate(time.Second)
	if p.next.After(sec) {
		sec = p.next
	}
	p.mu.Unlock()
	for ; sec.Before(before); sec = sec.Add(time.Second) {
		limit, got, pos := slotsIn(sec, rate), 0, 0
		if limit > 0 {
			if pos, got, err = p.Slots.TakeSendSlots(ctx, sec, limit, min(want, limit)); err != nil {
				return time.Time{}, time.Time{}, fmt.Errorf("take a send slot: %w", err)
			}
		}
		if got == 0 {
			p.mu.Lock()
			if sec.Add(time.Second).After(p.next) {
				p.next = sec.Add(time.Second)
			}
			p.mu.Unlock()
			continue
		}
		if got > 1 {
			// The rest is this process's for the sends of its batch (a second that passes
			// unused is lost: they are at most a batch's worth).
			p.mu.Lock()
			p.reserved.sec, p.reserved.limit, p.reserved.pos, p.reserved.left = sec, limit, pos+1, got-1
			p.mu.Unlock()
		}
		return sec.Add(time.Duration(pos-1) * time.Second / time.Duration(limit)), time.Time{}, nil
	}
	return time.Time{}, sec, nil
}

// fromReserved takes the next slot this process holds, if it is of a second that has not
// passed and starts before before; at is when its send may start.
func (p *Pacer) fromReserved(before time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := &p.reserved
	if r.left == 0 || r.sec.Before(p.now().Truncate(time.Second)) || !r.sec.Before(before) {
		return time.Time{}, false
	}
	at := r.sec.Add(time.Duration(r.pos-1) * time.Second / time.Duration(r.limit))
	r.pos, r.left = r.pos+1, r.left-1
	return at, true
}

// maxReserve bounds the slots one write takes for a batch.
const maxReserve = 10

// sleepUntil waits until at (measured from now), or until ctx ends.
func sleepUntil(ctx context.Context, at, now time.Time) error {
	wait := at.Sub(now)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// limits returns the rate to keep, or a time to wait until when the account may not send.
func (p *Pacer) limits(ctx context.Context) (float64, time.Time, error) {
	now := p.now()
	p.mu.Lock()
	if now.Before(p.pausedUntil) {
		defer p.mu.Unlock()
		return 0, p.pausedUntil, nil
	}
	if p.Account == nil || p.Rate > 0 {
		// A configured rate is the whole limit: the account is not read (SES refuses sends
		// past the daily quota itself, and a refusal waits like a throttle).
		defer p.mu.Unlock()
		return p.Rate, time.Time{}, nil
	}
	refresh := p.Refresh
	if refresh <= 0 {
		refresh = 5 * time.Minute
	}
	stale, known := p.quotaAt.IsZero() || now.Sub(p.quotaAt) >= refresh, !p.quotaAt.IsZero()
	p.mu.Unlock()
	if stale {
		// Outside the lock: the other sends go on with the last quota meanwhile.
		q, err := p.Account.Quota(ctx)
		if err != nil && !known {
			return 0, time.Time{}, err
		}
		if err != nil {
			p.log().Warn("read the account's sending quota; keeping the last one", "err", err)
		}
		p.mu.Lock()
		if err == nil {
			p.quota = q
		}
		p.quotaAt = now // after a failure too: the next read waits a refresh, not a send
		p.mu.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.quota
	switch {
	case !q.SendingEnabled:
		p.pausedUntil = now.Add(PausedWait)
		p.warn("sending is disabled for the account: emails wait in QUEUED", "until", p.pausedUntil.Format(time.RFC3339))
		return 0, p.pausedUntil, nil
	case q.Max24HourSend > 0 && q.SentLast24Hours >= q.Max24HourSend:
		p.pausedUntil = now.Add(QuotaWait)
		p.warn("the account's 24-hour sending quota is used up: emails wait in QUEUED",
			"max24HourSend", q.Max24HourSend, "sentLast24Hours", q.SentLast24Hours, "until", p.pausedUntil.Format(time.RFC3339))
		p.quotaAt = time.Time{} // read it again when the wait ends
		return 0, p.pausedUntil, nil
	}
	rate := p.Rate
	if rate <= 0 {
		rate = q.MaxSendRate
	}
	return rate, time.Time{}, nil
}

// Waits of an email that cannot go now.
const (
	PausedWait = 5 * time.Minute  // the account's sending is paused or suspended
	QuotaWait  = 15 * time.Minute // the 24-hour quota is used up
)

func (p *Pacer) now() time.Time {
	if p.Now != nil {
		return p.Now().UTC()
	}
	return time.Now().UTC()
}

func (p *Pacer) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.New(slog.DiscardHandler)
}
