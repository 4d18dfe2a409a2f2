package bolt

import (
	"context"
	"sync"
	"time"
)

// slots is the embedded store's send counters: in memory, since the process that holds the
// file is the only sender, and a count of a second that has passed is never read again.
type slots struct {
	mu    sync.Mutex
	count map[int64]int
}

// TakeSendSlots implements store.Pacing.
func (s *Store) TakeSendSlots(ctx context.Context, second time.Time, limit, n int) (int, int, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	sec := second.Unix()
	s.slots.mu.Lock()
	defer s.slots.mu.Unlock()
	if s.slots.count == nil {
		s.slots.count = map[int64]int{}
	}
	if len(s.slots.count) > 1024 { // forget the seconds that have passed
		now := time.Now().Unix()
		for k := range s.slots.count {
			if k < now-1 {
				delete(s.slots.count, k)
			}
		}
	}
	got := min(max(n, 1), limit-s.slots.count[sec])
	if got <= 0 {
		return 0, 0, nil
	}
	first := s.slots.count[sec] + 1
	s.slots.count[sec] += got
	return first, got, nil
}
