// Package scheduletest is the contract every schedule.Scheduler adapter must keep, run by each
// adapter's tests (the local scheduler directly, EventBridge Scheduler against moto).
package scheduletest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/schedule"
)

// Inspect returns what the adapter holds for a schedule name, and whether it holds one. It
// reads through the adapter's backing store (the bbolt file, GetSchedule), not through Put's
// arguments, and may assert adapter-specific fields on the way.
type Inspect func(t *testing.T, name string) (schedule.Schedule, bool)

// Run checks the Scheduler contract. newScheduler is called once per subtest and must return a
// scheduler that does not fire during the test: every time the suite uses is hours ahead.
func Run(t *testing.T, newScheduler func(t *testing.T) (schedule.Scheduler, Inspect)) {
	ctx := context.Background()
	base := time.Now().UTC().Add(3 * time.Hour).Truncate(time.Second)

	t.Run("PutThenInspect", func(t *testing.T) {
		s, inspect := newScheduler(t)
		want := schedule.Schedule{Name: "email-put-1", At: base, Payload: []byte(`{"emailId":"put-1"}`)}
		if err := s.Put(ctx, want); err != nil {
			t.Fatalf("Put: %v", err)
		}
		expect(t, inspect, want)
	})

	t.Run("AtIsUTCNeverEarly", func(t *testing.T) {
		s, inspect := newScheduler(t)
		zone := time.FixedZone("UTC+5:30", 5*3600+1800)
		at := base.In(zone).Add(750 * time.Millisecond)
		if err := s.Put(ctx, schedule.Schedule{Name: "email-zone", At: at, Payload: []byte(`{}`)}); err != nil {
			t.Fatalf("Put: %v", err)
		}
		expect(t, inspect, schedule.Schedule{Name: "email-zone", At: base, Payload: []byte(`{}`)})
	})

	t.Run("PutSameNameReplaces", func(t *testing.T) {
		s, inspect := newScheduler(t)
		first := schedule.Schedule{Name: "email-re", At: base, Payload: []byte(`{"v":1}`)}
		second := schedule.Schedule{Name: "email-re", At: base.Add(26 * time.Hour), Payload: []byte(`{"v":2}`)}
		if err := s.Put(ctx, first); err != nil {
			t.Fatalf("Put first: %v", err)
		}
		if err := s.Put(ctx, second); err != nil {
			t.Fatalf("Put second: %v", err)
		}
		expect(t, inspect, second)
		// And back to an earlier time: a reschedule may move either way.
		third := schedule.Schedule{Name: "email-re", At: base.Add(time.Minute), Payload: []byte(`{"v":3}`)}
		if err := s.Put(ctx, third); err != nil {
			t.Fatalf("Put third: %v", err)
		}
		expect(t, inspect, third)
	})

	t.Run("DeleteRemoves", func(t *testing.T) {
		s, inspect := newScheduler(t)
		keep := schedule.Schedule{Name: "email-keep", At: base, Payload: []byte(`{"k":1}`)}
		gone := schedule.Schedule{Name: "email-gone", At: base, Payload: []byte(`{"g":1}`)}
		for _, x := range []schedule.Schedule{keep, gone} {
			if err := s.Put(ctx, x); err != nil {
				t.Fatalf("Put %s: %v", x.Name, err)
			}
		}
		if err := s.Delete(ctx, gone.Name); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if got, ok := inspect(t, gone.Name); ok {
			t.Errorf("deleted schedule still held: %+v", got)
		}
		expect(t, inspect, keep)
		if err := s.Delete(ctx, gone.Name); err != nil {
			t.Errorf("second Delete: %v", err)
		}
	})

	t.Run("DeleteMissingIsFine", func(t *testing.T) {
		s, _ := newScheduler(t)
		if err := s.Delete(ctx, "email-never-existed"); err != nil {
			t.Errorf("Delete of a missing schedule: %v", err)
		}
	})

	t.Run("PutAfterDelete", func(t *testing.T) {
		s, inspect := newScheduler(t)
		x := schedule.Schedule{Name: "email-again", At: base, Payload: []byte(`{"a":1}`)}
		if err := s.Put(ctx, x); err != nil {
			t.Fatalf("Put: %v", err)
		}
		if err := s.Delete(ctx, x.Name); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		x.Payload = []byte(`{"a":2}`)
		if err := s.Put(ctx, x); err != nil {
			t.Fatalf("Put again: %v", err)
		}
		expect(t, inspect, x)
	})

	t.Run("LongestValidName", func(t *testing.T) {
		s, inspect := newScheduler(t)
		name := "aZ09-_." + strings.Repeat("x", schedule.MaxNameLen-7)
		x := schedule.Schedule{Name: name, At: base, Payload: []byte(`{}`)}
		if err := s.Put(ctx, x); err != nil {
			t.Fatalf("Put: %v", err)
		}
		expect(t, inspect, x)
	})

	t.Run("InvalidRejected", func(t *testing.T) {
		s, inspect := newScheduler(t)
		for _, name := range []string{"", "has space", "a/b", "email:1", "é", strings.Repeat("x", schedule.MaxNameLen+1)} {
			err := s.Put(ctx, schedule.Schedule{Name: name, At: base, Payload: []byte(`{}`)})
			if !errors.Is(err, schedule.ErrInvalidName) {
				t.Errorf("Put(%q) = %v, want ErrInvalidName", name, err)
			}
			if err := s.Delete(ctx, name); !errors.Is(err, schedule.ErrInvalidName) {
				t.Errorf("Delete(%q) = %v, want ErrInvalidName", name, err)
			}
		}
		err := s.Put(ctx, schedule.Schedule{Name: "email-no-time", Payload: []byte(`{}`)})
		if !errors.Is(err, schedule.ErrInvalidTime) {
			t.Errorf("Put without a time = %v, want ErrInvalidTime", err)
		}
		if got, ok := inspect(t, "email-no-time"); ok {
			t.Errorf("schedule without a time was stored: %+v", got)
		}
	})

	t.Run("ConcurrentDistinctNames", func(t *testing.T) {
		s, inspect := newScheduler(t)
		const n = 24
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				x := schedule.Schedule{Name: fmt.Sprintf("email-c%d", i), At: base.Add(time.Duration(i) * time.Minute), Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))}
				if errs[i] = s.Put(ctx, x); errs[i] != nil {
					return
				}
				if i%3 == 0 {
					errs[i] = s.Delete(ctx, x.Name)
				}
			}()
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("goroutine %d: %v", i, errs[i])
			}
		}
		for i := range n {
			name := fmt.Sprintf("email-c%d", i)
			if i%3 == 0 {
				if got, ok := inspect(t, name); ok {
					t.Errorf("%s deleted but still held: %+v", name, got)
				}
				continue
			}
			expect(t, inspect, schedule.Schedule{Name: name, At: base.Add(time.Duration(i) * time.Minute), Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))})
		}
	})
}

// expect asserts that the adapter holds exactly want under want.Name.
func expect(t *testing.T, inspect Inspect, want schedule.Schedule) {
	t.Helper()
	got, ok := inspect(t, want.Name)
	if !ok {
		t.Errorf("%s: not held", want.Name)
		return
	}
	if got.Name != want.Name {
		t.Errorf("%s: name %q", want.Name, got.Name)
	}
	// A schedule fires at its time or within the minute after (EventBridge Scheduler has
	// minute precision, so its adapter rounds up), never before.
	if got.At.Before(want.At) || !got.At.Before(want.At.Add(time.Minute)) || got.At.Location() != time.UTC {
		t.Errorf("%s: at %v, want %v or within the minute after (UTC)", want.Name, got.At, want.At)
	}
	if !bytes.Equal(got.Payload, want.Payload) {
		t.Errorf("%s: payload %q, want %q", want.Name, got.Payload, want.Payload)
	}
}

// Invoked waits until the target has received n invocations (or gives up after a few seconds)
// and returns the payloads it received, in any order.
type Invoked func(t *testing.T, n int) [][]byte

// RunInvoke checks Invoke: each payload reaches the target, as given, without a schedule of
// its own for the caller to manage. newScheduler returns a scheduler whose target reports to
// invoked.
func RunInvoke(t *testing.T, newScheduler func(t *testing.T) (schedule.Scheduler, Invoked)) {
	ctx := context.Background()
	t.Run("InvokeDelivers", func(t *testing.T) {
		s, invoked := newScheduler(t)
		want := []string{`{"campaignId":"cp1","teamId":1,"step":0}`, `{"campaignId":"cp1","teamId":1,"step":3}`, `{"campaignId":"cp2","teamId":2,"step":1}`}
		for _, p := range want {
			if err := s.Invoke(ctx, []byte(p)); err != nil {
				t.Fatalf("Invoke(%s): %v", p, err)
			}
		}
		got := invoked(t, len(want))
		seen := map[string]int{}
		for _, p := range got {
			seen[string(p)]++
		}
		for _, p := range want {
			if seen[p] != 1 {
				t.Errorf("payload %s delivered %d times, want once (got %q)", p, seen[p], got)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%d invocations, want %d", len(got), len(want))
		}
	})
}
