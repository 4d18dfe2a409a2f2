package deliver

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/deliver/batch"
	"github.com/mailroom/mailroom/pkg/mail"
	"github.com/mailroom/mailroom/pkg/store/bolt"
)

type fixedAccount struct {
	q     mail.Quota
	reads int
}

func (a *fixedAccount) Quota(context.Context) (mail.Quota, error) {
	a.reads++
	return a.q, nil
}

// TestPacerHoldsWhenTheAccountCannotSend: a disabled account and a used-up 24-hour quota give
// a time to wait instead of a slot; an account with room gives slots at its rate, which a
// configured rate overrides without reading the account.
func TestPacerHoldsWhenTheAccountCannotSend(t *testing.T) {
	st, err := bolt.Open(t.TempDir() + "/db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	now := time.Now().UTC()
	clock := func() time.Time { return now }
	for _, tc := range []struct {
		name string
		q    mail.Quota
		wait time.Duration
	}{
		{"disabled", mail.Quota{MaxSendRate: 14, Max24HourSend: 50000, SendingEnabled: false}, PausedWait},
		{"quota used up", mail.Quota{MaxSendRate: 14, Max24HourSend: 200, SentLast24Hours: 200, SendingEnabled: true}, QuotaWait},
	} {
		p := &Pacer{Slots: st, Account: &fixedAccount{q: tc.q}, Now: clock}
		retry, err := p.Acquire(ctx, now.Add(time.Minute))
		if err != nil || !retry.Equal(now.Add(tc.wait)) {
			t.Errorf("%s: retry at %v, %v; want %v", tc.name, retry, err, now.Add(tc.wait))
		}
	}
	// Room: 3/s; the fourth acquire in the same second is booked in the next one.
	acct := &fixedAccount{q: mail.Quota{MaxSendRate: 3, Max24HourSend: 50000, SendingEnabled: true}}
	p := &Pacer{Slots: st, Account: acct}
	first := time.Now().Truncate(time.Second)
	for i := range 4 {
		if retry, err := p.Acquire(ctx, time.Now().Add(time.Minute)); err != nil || !retry.IsZero() {
			t.Fatalf("acquire %d: %v %v", i, retry, err)
		}
	}
	if next := first.Add(time.Second); time.Now().Before(next) {
		t.Errorf("4 sends at 3/s done at %v, want the fourth in the next second (%v)", time.Now(), next)
	}
	if acct.reads != 1 {
		t.Errorf("the account was read %d times, want once per refresh", acct.reads)
	}
	// No slot before the caller must stop: a time to try again, not a wait past it.
	full := &Pacer{Slots: st, Rate: 1, Account: acct}
	sec := time.Now().Truncate(time.Second).Add(10 * time.Second)
	if _, n, _ := st.TakeSendSlots(ctx, sec, 1, 1); n != 1 {
		t.Fatal("setup")
	}
	full.next = sec
	if retry, err := full.Acquire(ctx, sec.Add(500*time.Millisecond)); err != nil || !retry.Equal(sec.Add(time.Second)) {
		t.Errorf("no slot before the deadline: %v %v, want %v", retry, err, sec.Add(time.Second))
	}
	if acct.reads != 1 {
		t.Error("a configured rate read the account")
	}
}

// countingSlots counts the writes to the pacing counter.
type countingSlots struct {
	*bolt.Store
	writes atomic.Int32
}

func (c *countingSlots) TakeSendSlots(ctx context.Context, second time.Time, limit, n int) (int, int, error) {
	c.writes.Add(1)
	return c.Store.TakeSendSlots(ctx, second, limit, n)
}

// TestABatchTakesItsSlotsInOneWrite: a stream batch of 8 emails takes its send slots with one
// write of the counter (a write per send costs as much as the send's status change), and they
// are still counted against the rate; without a batch, one write per send.
func TestABatchTakesItsSlotsInOneWrite(t *testing.T) {
	st, err := bolt.Open(t.TempDir() + "/db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	slots := &countingSlots{Store: st}
	p := &Pacer{Slots: slots, Rate: 100}
	ctx := batch.With(context.Background(), 8)
	var wg sync.WaitGroup
	for range 8 { // at once, as the stream handler's deliveries
		wg.Add(1)
		go func() {
			defer wg.Done()
			if retry, err := p.Acquire(ctx, time.Now().Add(time.Minute)); err != nil || !retry.IsZero() {
				t.Errorf("acquire: %v %v", retry, err)
			}
		}()
	}
	wg.Wait()
	if n := slots.writes.Load(); n > 2 { // 2: the batch may straddle a second
		t.Errorf("a batch of 8 took its slots in %d writes, want 1", n)
	}
	slots.writes.Store(0)
	single := &Pacer{Slots: slots, Rate: 100}
	for range 3 {
		if _, err := single.Acquire(context.Background(), time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if n := slots.writes.Load(); n != 3 {
		t.Errorf("3 sends without a batch: %d writes, want 3", n)
	}
}

// TestAFractionalRateIsKeptOverSeconds: the sends a run of seconds allows are the rate times
// their number in whole sends (less than one more or fewer), for rates below one and between
// whole numbers; and the pacer's slots at 0.5/s are two seconds apart, where the rate rounded
// to whole sends gave one a second.
func TestAFractionalRateIsKeptOverSeconds(t *testing.T) {
	start := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, rate := range []float64{0.1, 0.5, 1, 1.5, 14.3, 20, 501} {
		for _, n := range []int{1, 2, 7, 10, 60} {
			total := 0
			for i := range n {
				total += slotsIn(start.Add(time.Duration(i)*time.Second), rate)
			}
			if want := rate * float64(n); math.Abs(float64(total)-want) >= 1 {
				t.Errorf("rate %g over %d s: %d sends, want %g within less than one", rate, n, total, want)
			}
		}
	}

	st, err := bolt.Open(t.TempDir() + "/db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := &Pacer{Slots: st, Rate: 0.5, Now: func() time.Time { return start }}
	var seconds []time.Time
	for range 4 {
		at, retry, err := p.take(context.Background(), start.Add(time.Minute), 0.5, 1)
		if err != nil || !retry.IsZero() {
			t.Fatalf("take: %v %v", retry, err)
		}
		seconds = append(seconds, at)
	}
	for i := 1; i < len(seconds); i++ {
		if gap := seconds[i].Sub(seconds[i-1]); gap < 2*time.Second {
			t.Errorf("slots at 0.5/s: %v, %v apart; want 2 s", seconds, gap)
		}
	}
}
