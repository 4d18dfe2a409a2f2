package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/auth"
	"github.com/mailroom/mailroom/pkg/fault"
)

type limiter struct {
	counts map[int64]int64
	err    error
}

func (l *limiter) TakeRequest(_ context.Context, _ int64, second time.Time, limit int64) (int64, bool, error) {
	if l.err != nil {
		return 0, false, l.err
	}
	if l.counts[second.Unix()] >= limit {
		return limit, false, nil
	}
	l.counts[second.Unix()]++
	return l.counts[second.Unix()], true, nil
}

// TestRateLimitWindow: the window is the whole second; the server's default applies to a team
// without its own limit; Retry-After rounds the rest of the second up; a failing limiter lets
// the request through.
func TestRateLimitWindow(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 400_000_000, time.UTC)
	l := &limiter{counts: map[int64]int64{}}
	s := &Services{Limiter: l, DefaultRateLimit: 2, now: func() time.Time { return now }, Log: slog.New(slog.DiscardHandler)}
	p := auth.Principal{TeamID: 1, RateLimit: auth.DefaultRateLimit}
	for i := range 3 {
		w := httptest.NewRecorder()
		err := s.rateLimit(context.Background(), w, p)
		fe, _ := fault.As(err)
		switch {
		case i < 2 && err != nil:
			t.Fatalf("request %d: %v", i+1, err)
		case i == 2 && (fe == nil || fe.Kind != fault.RateLimited || fe.Message != "Rate limit exceeded. Try again in 1 seconds."):
			t.Fatalf("request 3: %v", err)
		}
		if h := w.Header(); h.Get("X-RateLimit-Limit") != "2" || h.Get("X-RateLimit-Reset") != "1795514401" {
			t.Errorf("request %d headers %v", i+1, h)
		}
		if i == 2 {
			writeError(w, err) // Retry-After is written with the error
			if w.Header().Get("Retry-After") != "1" || w.Code != 429 {
				t.Errorf("%d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
			}
		}
	}
	now = now.Add(600 * time.Millisecond) // the next second
	if err := s.rateLimit(context.Background(), httptest.NewRecorder(), p); err != nil {
		t.Errorf("the next second: %v", err)
	}
	p.RateLimit = 0 // the team's own: none
	for range 5 {
		if err := s.rateLimit(context.Background(), httptest.NewRecorder(), p); err != nil {
			t.Fatalf("an unlimited team: %v", err)
		}
	}
	l.err = errors.New("table unavailable")
	p.RateLimit = 1
	w := httptest.NewRecorder()
	if err := s.rateLimit(context.Background(), w, p); err != nil || w.Header().Get("X-RateLimit-Limit") != "" {
		t.Errorf("a failing limiter: %v, headers %v", err, w.Header())
	}
}
