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
