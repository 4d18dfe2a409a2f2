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

// TakeSendSlot implements store.Pacing.
func (s *Store) TakeSendSlot(ctx context.Context, second time.Time, limit int) (int, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
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
	if s.slots.count[sec] >= limit {
		return 0, false, nil
	}
	s.slots.count[sec]++
	return s.slots.count[sec], true, nil
}
