package naturaldate_test

import (
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/naturaldate"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 3, 4, 15, 30, 0, 0, time.UTC) // a Wednesday
	for _, c := range []struct {
		in   string
		want time.Time
	}{
		{"2026-05-01T09:00:00Z", time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)},
		{"2026-05-01T11:00:00+02:00", time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)},
		{"tomorrow 9am", time.Date(2026, 3, 5, 9, 0, 0, 0, time.UTC)},
		{"in 2 hours", time.Date(2026, 3, 4, 17, 30, 0, 0, time.UTC)},
		{"next monday 10:00", time.Date(2026, 3, 9, 10, 0, 0, 0, time.UTC)},
	} {
		got, err := naturaldate.Parse(c.in, now)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	if _, err := naturaldate.Parse("whenever you like", now); err == nil {
		t.Error("nonsense parsed")
	}
}
