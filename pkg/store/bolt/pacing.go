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

// requests is the embedded store's API request counters: in memory, since the process that
// holds the file serves every request.
type requests struct {
	mu    sync.Mutex
	count map[[2]int64]int64 // team, second
}

// TakeRequest implements store.RateLimits.
func (s *Store) TakeRequest(ctx context.Context, teamID int64, second time.Time, limit int64) (int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	k := [2]int64{teamID, second.Unix()}
	s.requests.mu.Lock()
	defer s.requests.mu.Unlock()
	if s.requests.count == nil {
		s.requests.count = map[[2]int64]int64{}
	}
	if len(s.requests.count) > 4096 { // forget the seconds that have passed
		now := time.Now().Unix()
		for k := range s.requests.count {
			if k[1] < now-1 {
				delete(s.requests.count, k)
			}
		}
	}
	if s.requests.count[k] >= limit {
		return s.requests.count[k], false, nil
	}
	s.requests.count[k]++
	return s.requests.count[k], true, nil
}
