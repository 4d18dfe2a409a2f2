package housekeeping_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/housekeeping"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/bolt"
)

type recorder struct {
	mu  sync.Mutex
	ids []string
}

func (r *recorder) Dispatch(_ context.Context, ids ...string) {
	r.mu.Lock()
	r.ids = append(r.ids, ids...)
	r.mu.Unlock()
}

// backlog writes n emails QUEUED an hour ago (their stream records lost) and one SENDING whose
// worker died an hour ago, and one claimed a minute ago.
func backlog(t *testing.T, n int) (*bolt.Store, time.Time) {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	old := now.Add(-time.Hour)
	var list []store.Email
	for i := range n {
		list = append(list, store.Email{ID: fmt.Sprintf("em%05d", i), TeamID: 1, DomainID: 1, Status: store.StatusQueued,
			LatestStatus: store.StatusQueued, CreatedAt: old, UpdatedAt: old})
	}
	recent := now.Add(-time.Minute)
	list = append(list,
		store.Email{ID: "emdead", TeamID: 1, DomainID: 1, Status: store.StatusSending, ClaimedAt: &old, CreatedAt: old, UpdatedAt: old},
		store.Email{ID: "emalive", TeamID: 1, DomainID: 1, Status: store.StatusSending, ClaimedAt: &recent, CreatedAt: old, UpdatedAt: recent})
	if err := st.CreateEmails(context.Background(), list, nil); err != nil {
		t.Fatal(err)
	}
	return st, now
}

// TestRequeueBacklog: a backlog of 1,000 stuck emails is handed back to the worker within the
// reconciler's 10 s budget, by conditional touches: the reconciler sends nothing itself (it has
// no mailer), a worker that died goes back to QUEUED with an event, a live claim is left alone.
func TestRequeueBacklog(t *testing.T) {
	st, now := backlog(t, 999)
	d := &recorder{}
	rq := &housekeeping.Requeue{Store: st, Dispatcher: d, Now: func() time.Time { return now }, Log: slog.New(slog.DiscardHandler),
		Budget: 10 * time.Second}
	start := time.Now()
	n, err := rq.Run(context.Background())
	if elapsed := time.Since(start); err != nil || n != 1000 || len(d.ids) != 1000 || elapsed > 10*time.Second {
		t.Fatalf("requeued %d (dispatched %d) in %v, %v; want 1000 within the 10 s budget", n, len(d.ids), elapsed, err)
	}
	e, err := st.GetEmail(context.Background(), "em00000")
	if err != nil || e.Status != store.StatusQueued || !e.UpdatedAt.Equal(now) {
		t.Errorf("a stuck QUEUED email: %s updated %v, want touched now", e.Status, e.UpdatedAt)
	}
	dead, evs, err := st.GetEmailDetail(context.Background(), "emdead")
	if err != nil || dead.Status != store.StatusQueued || dead.ClaimedAt != nil || len(evs) != 1 {
		t.Errorf("the dead worker's email: %s, claim %v, %d events; want QUEUED, none, 1", dead.Status, dead.ClaimedAt, len(evs))
	}
	if alive, _ := st.GetEmail(context.Background(), "emalive"); alive.Status != store.StatusSending {
		t.Errorf("a live claim was taken: %s", alive.Status)
	}
	// Run again at once: nothing is stuck any more.
	if n, err := rq.Run(context.Background()); err != nil || n != 0 {
		t.Errorf("second run requeued %d, %v", n, err)
	}
}

// TestRequeueKeepsItsBudget: a run whose budget ends stops there without an error; the next
// run continues.
func TestRequeueKeepsItsBudget(t *testing.T) {
	st, now := backlog(t, 200)
	rq := &housekeeping.Requeue{Store: st, Now: func() time.Time { return now }, Log: slog.New(slog.DiscardHandler),
		Budget: time.Millisecond}
	n, err := rq.Run(context.Background())
	if err != nil || n >= 201 {
		t.Fatalf("a 1 ms budget requeued %d, %v; want it to stop early without an error", n, err)
	}
	rq.Budget = 10 * time.Second
	rest, err := rq.Run(context.Background())
	if err != nil || n+rest != 201 {
		t.Errorf("the next run requeued %d more (%d in all), %v; want every stuck email once", rest, n+rest, err)
	}
}
