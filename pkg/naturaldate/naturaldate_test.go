package naturaldate_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/naturaldate"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 3, 4, 15, 30, 20, 0, time.UTC) // a Wednesday afternoon
	at := func(d, h, m int) time.Time { return time.Date(2026, 3, d, h, m, 0, 0, time.UTC) }
	for _, c := range []struct {
		in   string
		want time.Time
	}{
		{"2026-05-01T09:00:00Z", time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)},
		{"2026-05-01T11:00:00+02:00", time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)},
		{"2026-05-01t09:00:00z", time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}, // RFC 3339 §5.6: either case
		{"now", now},
		{"tomorrow 9am", at(5, 9, 0)},
		{"Tomorrow at 9:30 PM", at(5, 21, 30)},
		{"tomorrow", at(5, 15, 30).Add(20 * time.Second)},
		{"in 2 hours", now.Add(2 * time.Hour)},
		{"in an hour", now.Add(time.Hour)},
		{"in 10 minutes", now.Add(10 * time.Minute)},
		{"in 3 days", now.AddDate(0, 0, 3)},
		{"in 1 week", now.AddDate(0, 0, 7)},
		{"next monday 10:00", at(9, 10, 0)},
		{"monday 10am", at(9, 10, 0)},
		{"friday, noon", at(6, 12, 0)},
		{"next wednesday at midnight", at(11, 0, 0)}, // a weekday is the next one after today
		{"wednesday 9am", at(11, 9, 0)},
		{"5pm", at(4, 17, 0)}, // later today
		{"9am", at(5, 9, 0)},  // already past today: tomorrow
		{"today 23:59", at(4, 23, 59)},
		{"today", now},
		{"tomorrow 5 p.m.", at(5, 17, 0)},
		{"tomorrow 9:30 A.M.", at(5, 9, 30)},
		{"tomorrow 09:00", at(5, 9, 0)},
		// The zone all this is read in, said outright, changes nothing.
		{"tomorrow 9am UTC", at(5, 9, 0)},
		{"next monday 10:00 gmt", at(9, 10, 0)},
		{"Dec 24 2026 9:00 GMT", time.Date(2026, 12, 24, 9, 0, 0, 0, time.UTC)},
		{"December 24, 2026 9:00 UTC", time.Date(2026, 12, 24, 9, 0, 0, 0, time.UTC)},
		{"24 December 2026 09:00 GMT", time.Date(2026, 12, 24, 9, 0, 0, 0, time.UTC)},
		{"2026-12-24 09:00:00 UTC", time.Date(2026, 12, 24, 9, 0, 0, 0, time.UTC)},
		// Dates written out in full, UTC unless they say otherwise; midnight without a time.
		{"2026-05-01T09:00:00", time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)},
		{"2026-05-01T09:00:00.250", time.Date(2026, 5, 1, 9, 0, 0, 250e6, time.UTC)},
		{"2026-05-01T11:00:00+0200", time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)},
		{"2026-05-01T11:00:00+02", time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)},
		{"2026-05-01T09:00", time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)},
		{"2026-05-01 09:00:00", time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)},
		{"2026-05-01 04:00-05:00", time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)},
		{"2026-05-01", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)},
		{"Fri, 01 May 2026 09:00:00 GMT", time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)},
		{"Fri, 1 May 2026 11:00:00 +0200", time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)},
		{"fri, 01 may 2026 09:00:00 GMT", time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)},
		{"Thu, 24 Dec 2026 23:30:00 -0500", time.Date(2026, 12, 25, 4, 30, 0, 0, time.UTC)}, // its weekday where it was written
		{"December 24, 2026 9:00", time.Date(2026, 12, 24, 9, 0, 0, 0, time.UTC)},
		{"Dec 24 2026 at 9pm", time.Date(2026, 12, 24, 21, 0, 0, 0, time.UTC)},
		{"24 December 2026", time.Date(2026, 12, 24, 0, 0, 0, 0, time.UTC)},
		{"September 1st, 2026 at 10:30 a.m.", time.Date(2026, 9, 1, 10, 30, 0, 0, time.UTC)},
		{"2025-01-01T00:00:00Z", time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}, // past: the caller decides
	} {
		got, err := naturaldate.Parse(c.in, now)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{
		"", "whenever you like", "last monday", "2 days ago", "yesterday 9am", "today 9am", "in -2 hours",
		"in 2 fortnights", "in 0 days", "next", "next week", "13pm", "0am", "24:00", "9:7", "9", "1200",
		"03/04/2027", "Feb 30", "tomorrow at", "monday tuesday", strings.Repeat("in 2 hours ", 10),
		"tomorrow -5:00", "-1:00", "tomorrow 9:-5", "tomorrow -0:-5", "in +3 hours", "tomorrow 2 1:15",
		"tomorrow 1 2:30pm", "9:30 am pm",
		"Feb 30 2027", "February 29, 2027", "Fri, 01 May 2026 09:00:00 PST", "2026-13-01", "2026-05-01T25:00",
		"December 24, 26 9:00", "December 24 2026 at", "December 2026", "24 2026 December", "December 24, 2026 9",
		// A weekday the date does not fall on (24 December 2026 is a Thursday); an offset of a day.
		"Mon, 24 Dec 2026 09:00:00 GMT", "Monday, 24-Dec-26 09:00:00 UTC", "2026-05-01T09:00:00+24:00", "2026-05-01 09:00-23:60",
	} {
		if got, err := naturaldate.Parse(in, now); !errors.Is(err, naturaldate.ErrNotUnderstood) {
			t.Errorf("Parse(%q) = %v, %v; want not understood", in, got, err)
		}
	}
}

// FuzzParse: no input panics, and whatever is understood but a date written out in full is not
// in the past.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"tomorrow 9am", "next monday 10:00", "in 2 hours", "5pm", "now", "12:60", "next"} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 4, 15, 30, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := naturaldate.Parse(s, now)
		if err == nil && got.Before(now) {
			if _, full := naturaldate.Absolute(s); !full {
				t.Errorf("Parse(%q) = %v, before now", s, got)
			}
		}
	})
}
