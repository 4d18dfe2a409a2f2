package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

// testSendSlots: a second takes exactly limit sends, each with its own position, and refuses
// the next; another second has its own count.
func testSendSlots(t *testing.T, s store.Store) {
	ctx := t.Context()
	sec := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	var got []int
	for range 3 {
		pos, got1, err := s.TakeSendSlots(ctx, sec, 3, 1)
		noErr(t, "TakeSendSlots", err)
		if got1 != 1 {
			t.Fatalf("slot refused after %d of 3", len(got))
		}
		got = append(got, pos)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("positions %v, want 1, 2, 3", got)
	}
	if _, n, err := s.TakeSendSlots(ctx, sec, 3, 1); err != nil || n != 0 {
		t.Errorf("a fourth send in a second limited to 3: got %d, %v", n, err)
	}
	// Several at once: as many as fit, with consecutive positions.
	next := sec.Add(time.Second)
	if pos, n, err := s.TakeSendSlots(ctx, next, 3, 2); err != nil || n != 2 || pos != 1 {
		t.Errorf("two slots of the next second: position %d, got %d, %v; want 1 and 2", pos, n, err)
	}
	if pos, n, err := s.TakeSendSlots(ctx, next, 3, 5); err != nil || n != 1 || pos != 3 {
		t.Errorf("five slots where one is left: position %d, got %d, %v; want 3 and 1", pos, n, err)
	}
	if _, n, err := s.TakeSendSlots(ctx, next, 3, 2); err != nil || n != 0 {
		t.Errorf("a full second: got %d, %v", n, err)
	}
	// A limit a store counts in parts (DynamoDB's shards of 500 a second) is still the limit:
	// 501, not one more, each position once.
	third, taken, seen := next.Add(time.Second), 0, map[int]bool{}
	for range 120 {
		pos, n, err := s.TakeSendSlots(ctx, third, 501, 10)
		noErr(t, "TakeSendSlots", err)
		for p := pos; p < pos+n; p++ {
			if p < 1 || p > 501 || seen[p] {
				t.Fatalf("position %d taken (twice, or outside 1..501)", p)
			}
			seen[p] = true
		}
		taken += n
	}
	if taken != 501 {
		t.Errorf("%d slots taken in a second limited to 501", taken)
	}
}

// testSendSlotsConcurrent: 16 workers racing for a second limited to 10, taking 1 to 3 slots at
// a time, get 10 slots between them, never more (the counter is what every Lambda instance shares).
func testSendSlotsConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	sec := time.Date(2031, 1, 2, 3, 4, 6, 0, time.UTC)
	var mu sync.Mutex
	var wg sync.WaitGroup
	taken := 0
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2 {
				_, n, err := s.TakeSendSlots(ctx, sec, 10, 1+g%3)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				taken += n
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if taken != 10 {
		t.Errorf("%d slots taken in a second limited to 10", taken)
	}
}

// testRequestRate: a team's second takes exactly limit requests, counting them, and refuses
// the next; the next second and another team have their own counts.
func testRequestRate(t *testing.T, s store.Store) {
	ctx := t.Context()
	team, other := newTeam(t, s), newTeam(t, s)
	sec := time.Date(2031, 1, 2, 3, 4, 7, 0, time.UTC)
	for i := range int64(3) {
		n, ok, err := s.TakeRequest(ctx, team, sec, 3)
		noErr(t, "TakeRequest", err)
		if !ok || n != i+1 {
			t.Fatalf("request %d of 3: count %d, allowed %v", i+1, n, ok)
		}
	}
	if n, ok, err := s.TakeRequest(ctx, team, sec, 3); err != nil || ok || n != 3 {
		t.Errorf("a fourth request in a second limited to 3: count %d, allowed %v, %v", n, ok, err)
	}
	if n, ok, err := s.TakeRequest(ctx, team, sec.Add(time.Second), 3); err != nil || !ok || n != 1 {
		t.Errorf("the next second: count %d, allowed %v, %v", n, ok, err)
	}
	if n, ok, err := s.TakeRequest(ctx, other, sec, 3); err != nil || !ok || n != 1 {
		t.Errorf("another team: count %d, allowed %v, %v", n, ok, err)
	}
}

// testRequestRateConcurrent: 40 requests racing in a second limited to 10 get 10 through.
func testRequestRateConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	sec := time.Date(2031, 1, 2, 3, 4, 8, 0, time.UTC)
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ok, err := s.TakeRequest(ctx, team, sec, 10)
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if allowed != 10 {
		t.Errorf("%d requests allowed in a second limited to 10", allowed)
	}
}
