package local

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/schedule"
	"github.com/mailroom/mailroom/pkg/schedule/scheduletest"
)

// deadline bounds every wait for a fire; generous so that a loaded CI machine does not flake.
const deadline = 10 * time.Second

// open opens a scheduler in the test's temp dir (or at path) with a fast retry policy and
// closes it when the test ends.
func open(t *testing.T, path string, fire Fire) *Scheduler {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "schedules.db")
	}
	s, err := Open(path, fire, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	s.backoff = func(int) time.Duration { return 10 * time.Millisecond }
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func start(t *testing.T, s *Scheduler) {
	t.Helper()
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
}

// recorder is a fire function that sends every payload on a channel.
func recorder() (Fire, chan string) {
	ch := make(chan string, 100)
	return func(_ context.Context, p []byte) error {
		ch <- string(p)
		return nil
	}, ch
}

func put(t *testing.T, s *Scheduler, name string, at time.Time, payload string) {
	t.Helper()
	if err := s.Put(context.Background(), schedule.Schedule{Name: name, At: at, Payload: []byte(payload)}); err != nil {
		t.Fatalf("Put %s: %v", name, err)
	}
}

func receive(t *testing.T, ch chan string, want string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("fired %q, want %q", got, want)
		}
	case <-time.After(deadline):
		t.Fatalf("%q did not fire within %v", want, deadline)
	}
}

func quiet(t *testing.T, ch chan string, d time.Duration) {
	t.Helper()
	select {
	case got := <-ch:
		t.Fatalf("unexpected fire %q", got)
	case <-time.After(d):
	}
}

func TestContract(t *testing.T) {
	scheduletest.Run(t, func(t *testing.T) (schedule.Scheduler, scheduletest.Inspect) {
		s := open(t, "", func(context.Context, []byte) error {
			t.Error("fired during the contract suite")
			return nil
		})
		start(t, s)
		return s, func(t *testing.T, name string) (schedule.Schedule, bool) {
			t.Helper()
			got, ok, err := s.Get(context.Background(), name)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			return got, ok
		}
	})
}

func TestInvokeContract(t *testing.T) {
	scheduletest.RunInvoke(t, func(t *testing.T) (schedule.Scheduler, scheduletest.Invoked) {
		fire, ch := recorder()
		s := open(t, "", fire)
		start(t, s)
		return s, func(t *testing.T, n int) [][]byte {
			var got [][]byte
			timeout := time.After(5 * time.Second)
			for len(got) < n {
				select {
				case p := <-ch:
					got = append(got, []byte(p))
				case <-timeout:
					return got
				}
			}
			quiet(t, ch, 200*time.Millisecond) // and nothing more
			return got
		}
	})
}

func TestInvokeSurvivesARestartBeforeItFires(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedules.db")
	s := open(t, path, func(context.Context, []byte) error { return nil })
	if err := s.Invoke(context.Background(), []byte(`{"step":1}`)); err != nil { // not started: nothing fires
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	fire, ch := recorder()
	s = open(t, path, fire)
	start(t, s)
	receive(t, ch, `{"step":1}`)
}

func TestDueScheduleFires(t *testing.T) {
	fire, ch := recorder()
	s := open(t, "", fire)
	start(t, s)
	// At has second precision: "200 ms ahead" rounds down, so this is due within a second.
	put(t, s, "email-soon", time.Now().Add(200*time.Millisecond), `{"emailId":"soon"}`)
	receive(t, ch, `{"emailId":"soon"}`)
	waitLen(t, s, 0)
}

func TestPastScheduleFiresAtStart(t *testing.T) {
	fire, ch := recorder()
	s := open(t, "", fire)
	put(t, s, "email-late", time.Now().Add(-time.Hour), `{"late":true}`)
	quiet(t, ch, 300*time.Millisecond) // nothing before Start
	start(t, s)
	receive(t, ch, `{"late":true}`)
}

func TestPersistsAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedules.db")
	first, err := Open(path, func(context.Context, []byte) error {
		t.Error("first instance fired")
		return nil
	}, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	put(t, first, "email-persist", time.Now().Add(time.Second), `{"p":1}`)
	put(t, first, "email-persist-gone", time.Now().Add(time.Second), `{"p":2}`)
	if err := first.Delete(context.Background(), "email-persist-gone"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := first.Put(context.Background(), schedule.Schedule{Name: "x", At: time.Now(), Payload: []byte("{}")}); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close = %v, want ErrClosed", err)
	}

	fire, ch := recorder()
	second := open(t, path, fire)
	if n := second.Len(); n != 1 {
		t.Fatalf("reopened with %d schedules, want 1", n)
	}
	start(t, second)
	receive(t, ch, `{"p":1}`)
	quiet(t, ch, 1500*time.Millisecond)
}

func TestFailingFireIsRetried(t *testing.T) {
	var calls atomic.Int32
	ok := make(chan struct{})
	s := open(t, "", func(context.Context, []byte) error {
		if calls.Add(1) < 3 {
			return errors.New("target unavailable")
		}
		close(ok)
		return nil
	})
	start(t, s)
	put(t, s, "email-flaky", time.Now(), `{}`)
	select {
	case <-ok:
	case <-time.After(deadline):
		t.Fatalf("no successful fire after %d calls", calls.Load())
	}
	waitLen(t, s, 0)
	if n := calls.Load(); n != 3 {
		t.Errorf("fire called %d times, want 3", n)
	}
}

func TestFailingFireIsDroppedAfterLastAttempt(t *testing.T) {
	var calls atomic.Int32
	s := open(t, "", func(context.Context, []byte) error {
		calls.Add(1)
		return errors.New("always fails")
	})
	s.maxAttempts = 4
	start(t, s)
	put(t, s, "email-doomed", time.Now(), `{}`)
	waitLen(t, s, 0)
	if n := calls.Load(); n != 4 {
		t.Errorf("fire called %d times, want 4", n)
	}
	if _, found, _ := s.Get(context.Background(), "email-doomed"); found {
		t.Error("dropped schedule is still stored")
	}
}

func TestFailingFireDoesNotBlockOthers(t *testing.T) {
	ch := make(chan string, 10)
	s := open(t, "", func(_ context.Context, p []byte) error {
		if string(p) == "bad" {
			return errors.New("always fails")
		}
		ch <- string(p)
		return nil
	})
	s.backoff = func(int) time.Duration { return time.Hour }
	start(t, s)
	put(t, s, "email-bad", time.Now().Add(-time.Second), "bad")
	put(t, s, "email-good", time.Now(), "good")
	receive(t, ch, "good")
}

func TestDeleteBeforeDueNeverFires(t *testing.T) {
	fire, ch := recorder()
	s := open(t, "", fire)
	start(t, s)
	put(t, s, "email-cancel", time.Now().Add(time.Second), `{"c":1}`)
	if err := s.Delete(context.Background(), "email-cancel"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	quiet(t, ch, 2500*time.Millisecond)
}

func TestRescheduleFiresOnceAtNewTime(t *testing.T) {
	fire, ch := recorder()
	s := open(t, "", fire)
	start(t, s)
	now := time.Now()
	put(t, s, "email-move", now.Add(time.Second), `{"v":1}`)
	put(t, s, "email-move", now.Add(3*time.Second), `{"v":2}`)
	quiet(t, ch, time.Until(now.Add(2*time.Second))) // the old time passes in silence
	receive(t, ch, `{"v":2}`)
	quiet(t, ch, time.Second)
}

func TestDeleteWhileFiringDoesNotResurrect(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	s := open(t, "", func(context.Context, []byte) error {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		return errors.New("fails, so it would be retried")
	})
	start(t, s)
	put(t, s, "email-del", time.Now(), `{}`)
	<-entered
	if err := s.Delete(context.Background(), "email-del"); err != nil { // must not wait for the fire
		t.Fatalf("Delete: %v", err)
	}
	close(release)
	waitLen(t, s, 0)
	time.Sleep(200 * time.Millisecond)
	if n := calls.Load(); n != 1 {
		t.Errorf("fire called %d times, want 1", n)
	}
	if _, found, _ := s.Get(context.Background(), "email-del"); found {
		t.Error("deleted schedule came back")
	}
}

func TestPutWhileFiringKeepsNewVersion(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	ch := make(chan string, 10)
	s := open(t, "", func(_ context.Context, p []byte) error {
		if string(p) == "old" {
			close(entered)
			<-release
		}
		ch <- string(p)
		return nil
	})
	start(t, s)
	put(t, s, "email-swap", time.Now(), "old")
	<-entered
	newAt := time.Now().Add(time.Hour).Truncate(time.Second) // a whole second: kept as it is
	put(t, s, "email-swap", newAt, "new")
	close(release)
	receive(t, ch, "old")
	time.Sleep(100 * time.Millisecond)
	got, found, err := s.Get(context.Background(), "email-swap")
	if err != nil || !found || string(got.Payload) != "new" || !got.At.Equal(newAt) {
		t.Fatalf("after the old version fired: %+v found=%v err=%v, want the new version", got, found, err)
	}
}

func TestCloseWaitsForInFlightFire(t *testing.T) {
	entered := make(chan struct{})
	var finished atomic.Bool
	path := filepath.Join(t.TempDir(), "schedules.db")
	s, err := Open(path, func(context.Context, []byte) error {
		close(entered)
		time.Sleep(300 * time.Millisecond)
		finished.Store(true)
		return nil
	}, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	start(t, s)
	put(t, s, "email-slow", time.Now(), `{}`)
	<-entered
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !finished.Load() {
		t.Fatal("Close returned before the in-flight fire finished")
	}
	// The fire succeeded before Close returned, so it is forgotten on disk too.
	fire, ch := recorder()
	again := open(t, path, fire)
	start(t, again)
	quiet(t, ch, 300*time.Millisecond)
}

// TestConcurrentPutDeleteWhileFiring runs many goroutines that Put and Delete schedules, due
// now or shortly, while they fire and sometimes fail. Every version (payload) must fire at most
// once, and the last version of each name that ended with a Put must fire exactly once.
func TestConcurrentPutDeleteWhileFiring(t *testing.T) {
	var mu sync.Mutex
	fired := map[string]int{}
	s := open(t, "", func(_ context.Context, p []byte) error {
		if rand.IntN(5) == 0 {
			return errors.New("transient")
		}
		mu.Lock()
		fired[string(p)]++
		mu.Unlock()
		return nil
	})
	start(t, s)

	const workers, namesPerWorker, ops = 16, 4, 40
	finals := make([][]string, workers) // per worker: payloads that must fire
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := map[string]string{} // name → payload of its last Put, "" when deleted
			for i := range ops {
				name := fmt.Sprintf("email-w%d-n%d", w, rand.IntN(namesPerWorker))
				if rand.IntN(4) == 0 {
					if err := s.Delete(context.Background(), name); err != nil {
						t.Errorf("Delete: %v", err)
					}
					last[name] = ""
					continue
				}
				payload := fmt.Sprintf("%s-v%d", name, i)
				at := time.Now().Add(time.Duration(rand.IntN(1500)-500) * time.Millisecond)
				if err := s.Put(context.Background(), schedule.Schedule{Name: name, At: at, Payload: []byte(payload)}); err != nil {
					t.Errorf("Put: %v", err)
				}
				last[name] = payload
				time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
			}
			for _, p := range last {
				if p != "" {
					finals[w] = append(finals[w], p)
				}
			}
		}()
	}
	wg.Wait()

	waitLen(t, s, 0)
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for p, n := range fired {
		if n > 1 {
			t.Errorf("%s fired %d times", p, n)
		}
	}
	for _, ps := range finals {
		for _, p := range ps {
			if fired[p] != 1 {
				t.Errorf("last version %s fired %d times, want 1", p, fired[p])
			}
		}
	}
}

func TestOpenRejectsNilFire(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "x.db"), nil, nil); err == nil {
		t.Fatal("Open with a nil fire function succeeded")
	}
}

// waitLen waits until n schedules are pending.
func waitLen(t *testing.T, s *Scheduler, n int) {
	t.Helper()
	end := time.Now().Add(deadline)
	for s.Len() != n {
		if time.Now().After(end) {
			t.Fatalf("%d schedules pending after %v, want %d", s.Len(), deadline, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestASecondServerOnTheFolderIsToldWhy: a second process (here a second open) on the same
// schedules file is refused with what to do, not bbolt's bare timeout.
func TestASecondServerOnTheFolderIsToldWhy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedules.db")
	fire := func(context.Context, []byte) error { return nil }
	first, err := Open(path, fire, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(context.Background())
	if _, err := Open(path, fire, nil); err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("a second open: %v, want it in use by another process", err)
	}
}
