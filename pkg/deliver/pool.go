package deliver

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

// Pending lists emails waiting for delivery (store.Store.PendingEmails).
type Pending interface {
	PendingEmails(ctx context.Context, limit int) ([]string, error)
}

// Pool is the local stand-in for the table stream and the send worker function: it queues ids
// handed to Dispatch and runs Deliver on them with a fixed number of goroutines. Emails still
// queued when the process stops stay QUEUED in the store and are picked up by Recover at the
// next start.
type Pool struct {
	worker *Worker
	log    *slog.Logger

	mu     sync.Mutex
	cond   *sync.Cond
	queue  []string
	closed bool
	stop   chan struct{} // closed when Close starts: no delivery waits for a send slot then (WithStop)
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc

	// yieldTo: see YieldTo. ymu is held by the one worker waiting for its turn.
	yieldTo atomic.Pointer[foreground]
	ymu     sync.Mutex
	ynext   time.Time
}

// foreground is what delivery yields to (YieldTo).
type foreground struct {
	busy func() bool
	gap  time.Duration
}

// YieldTo makes delivery yield to foreground work, as a mail server's queue runner yields to
// the connections it accepts: while busy reports true (the local server is answering API
// requests), the pool starts at most one delivery per gap across all its workers, so that the
// requests get the processors and the disk; once busy is false it runs at full speed again.
// Delivery never stops: under requests without end it still sends one email per gap.
func (p *Pool) YieldTo(busy func() bool, gap time.Duration) {
	p.yieldTo.Store(&foreground{busy: busy, gap: gap})
}

// yield waits while the foreground is busy and this worker's turn has not come.
func (p *Pool) yield() {
	f := p.yieldTo.Load()
	if f == nil || !f.busy() {
		return
	}
	p.ymu.Lock()
	defer p.ymu.Unlock()
	for f.busy() {
		now := time.Now()
		if !now.Before(p.ynext) {
			p.ynext = now.Add(f.gap)
			return
		}
		// Look again soon: the foreground may have gone idle.
		t := time.NewTimer(min(p.ynext.Sub(now), 2*time.Millisecond))
		select {
		case <-t.C:
		case <-p.ctx.Done():
			t.Stop()
			return
		}
	}
}

// NewPool starts n delivery goroutines.
func NewPool(w *Worker, n int, log *slog.Logger) *Pool {
	p := &Pool{worker: w, log: log, stop: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	for range n {
		p.wg.Add(1)
		go p.run()
	}
	return p
}

// Dispatch queues emails for delivery; it never blocks on delivery.
func (p *Pool) Dispatch(_ context.Context, ids ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.queue = append(p.queue, ids...)
	p.cond.Broadcast()
}

// Recover queues every email the store still has waiting (QUEUED, or SENDING from a process
// that died mid-send: those are taken over once their lease expires).
func (p *Pool) Recover(ctx context.Context, pending Pending) (int, error) {
	ids, err := pending.PendingEmails(ctx, 100000)
	if err != nil {
		return 0, err
	}
	p.Dispatch(ctx, ids...)
	return len(ids), nil
}

// Len is the number of emails waiting in the queue.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

func (p *Pool) run() {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		for len(p.queue) == 0 && !p.closed {
			p.cond.Wait()
		}
		if p.closed {
			p.mu.Unlock()
			return
		}
		id := p.queue[0]
		p.queue = p.queue[1:]
		p.mu.Unlock()
		p.yield()
		// Unhurried: delivery waits for the store's pace (store.Unhurried).
		if err := p.worker.Deliver(store.Unhurried(WithStop(p.ctx, p.stop)), id); err != nil {
			p.log.Error("deliver", "emailId", id, "err", err)
			// Try again later rather than lose it; the store keeps it pending meanwhile.
			go func() {
				select {
				case <-time.After(5 * time.Second):
					p.Dispatch(p.ctx, id)
				case <-p.ctx.Done():
				}
			}()
		}
	}
}

// Close stops taking work and waits for the deliveries in flight to finish (or ctx to end, at
// which point in-flight sends are cancelled). What was still queued stays pending in the store.
func (p *Pool) Close(ctx context.Context) {
	p.mu.Lock()
	if !p.closed {
		close(p.stop)
	}
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		p.cancel()
		<-done
	}
	p.cancel()
}
