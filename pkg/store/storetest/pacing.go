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
		pos, ok, err := s.TakeSendSlot(ctx, sec, 3)
		noErr(t, "TakeSendSlot", err)
		if !ok {
			t.Fatalf("slot refused after %d of 3", len(got))
		}
		got = append(got, pos)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("positions %v, want 1, 2, 3", got)
	}
	if _, ok, err := s.TakeSendSlot(ctx, sec, 3); err != nil || ok {
		t.Errorf("a fourth send in a second limited to 3: ok %v, %v", ok, err)
	}
	if pos, ok, err := s.TakeSendSlot(ctx, sec.Add(time.Second), 3); err != nil || !ok || pos != 1 {
		t.Errorf("the next second: %d %v %v, want position 1", pos, ok, err)
	}
}

// testSendSlotsConcurrent: 16 workers racing for a second limited to 10 get 10 slots between
// them, never more (the counter is what every Lambda instance shares).
func testSendSlotsConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	sec := time.Date(2031, 1, 2, 3, 4, 6, 0, time.UTC)
	var mu sync.Mutex
	var wg sync.WaitGroup
	taken := 0
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2 {
				_, ok, err := s.TakeSendSlot(ctx, sec, 10)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					taken++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if taken != 10 {
		t.Errorf("%d slots taken in a second limited to 10", taken)
	}
}
