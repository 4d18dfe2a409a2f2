// Package naturaldate reads a campaign's scheduledAt as people write it, in English, evaluated
// in UTC. A date written out in full is read as it says:
//
//	RFC 3339 and ISO 8601             ("2026-12-24T09:00:00Z", "2026-12-24T09:00:00+0200",
//	                                   "2026-12-24T09:00", "2026-12-24 09:00:00", "2026-12-24")
//	the date forms of HTTP and mail   ("Thu, 24 Dec 2026 09:00:00 GMT", RFC 1123, 850, 822)
//	a month written out, with a year  ("December 24, 2026 9:00", "Dec 24 2026 at 9am",
//	                                   "24 December 2026")
//
// (without a zone, or with UTC or GMT as its last word, in UTC; without a time, at midnight). A
// phrase names a time to come:
//
//	now
//	in <n> minute(s) | hour(s) | day(s) | week(s)       ("in 2 hours", "in an hour")
//	[today | tomorrow | [next] <weekday>] [at] [<time>]  ("tomorrow 9am", "next monday 10:00")
//	<time>                                               ("5pm": today, or tomorrow once past)
//
// where <time> is 9am, 9 am, 9:30pm, 21:15, noon or midnight. A day without a time keeps the
// current time of day; a weekday is the next one after today. Anything else — a phrase about
// the past ("last monday", "2 days ago"), a bare number, a numeric date whose order depends on
// the country ("03/04/2027"), an impossible date ("Feb 30 2027") — is not understood and the
// caller asks for RFC 3339. The grammar is written here rather than taken from a date-parsing
// library: those compile rules for several languages when a program starts, which every cold
// start of a function that links them pays, and they accept phrases about the past.
package naturaldate

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// ErrNotUnderstood is the error of a phrase outside the grammar.
var ErrNotUnderstood = errors.New("not understood")

// MaxLen bounds the input: a time phrase is short.
const MaxLen = 64

var units = map[string]time.Duration{
	"minute": time.Minute, "minutes": time.Minute, "min": time.Minute, "mins": time.Minute,
	"hour": time.Hour, "hours": time.Hour,
	"day": 24 * time.Hour, "days": 24 * time.Hour,
	"week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

var weekdays = map[string]time.Weekday{
	"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday,
	"thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday,
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday, "thu": time.Thursday,
	"fri": time.Friday, "sat": time.Saturday,
}

// Parse reads s at now (both taken in UTC), to the second.
func Parse(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxLen {
		return time.Time{}, ErrNotUnderstood
	}
	if t, ok := Absolute(s); ok {
		return t, nil
	}
	// The zone everything here is read in, said outright ("Dec 24 2026 9:00 UTC", "tomorrow
	// 9am GMT"), changes nothing.
	if rest, ok := cutUTC(s); ok {
		if t, ok := Absolute(rest); ok {
			return t, nil
		}
		s = rest
	}
	now = now.UTC().Truncate(time.Second)
	s = strings.NewReplacer(",", " ", "a.m.", "am", "p.m.", "pm").Replace(strings.ToLower(s))
	words := strings.Fields(s)
	switch {
	case len(words) == 0:
		return time.Time{}, ErrNotUnderstood
	case len(words) == 1 && words[0] == "now":
		return now, nil
	case words[0] == "in":
		return in(words[1:], now)
	}
	midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	day, dayNamed := midnight, true
	switch w := words[0]; {
	case w == "today":
		words = words[1:]
	case w == "tomorrow":
		day, words = midnight.AddDate(0, 0, 1), words[1:]
	default:
		if w == "next" {
			words = words[1:]
			if len(words) == 0 {
				return time.Time{}, ErrNotUnderstood
			}
		}
		wd, ok := weekdays[words[0]]
		if !ok {
			if w == "next" {
				return time.Time{}, ErrNotUnderstood
			}
			dayNamed = false
			break
		}
		ahead := (int(wd) - int(now.Weekday()) + 7) % 7
		if ahead == 0 {
			ahead = 7
		}
		day, words = midnight.AddDate(0, 0, ahead), words[1:]
	}
	if len(words) > 0 && words[0] == "at" {
		if words = words[1:]; len(words) == 0 {
			return time.Time{}, ErrNotUnderstood // "tomorrow at": at what?
		}
	}
	if len(words) == 0 {
		if !dayNamed {
			return time.Time{}, ErrNotUnderstood
		}
		t := day.Add(now.Sub(midnight)) // the current time of day
		if !t.After(now) && day.Equal(midnight) {
			return now, nil // "today": now
		}
		return t, nil
	}
	if len(words) > 2 || (len(words) == 2 && words[1] != "am" && words[1] != "pm") {
		return time.Time{}, ErrNotUnderstood // a time, and at most "am" or "pm" apart from it
	}
	clock, ok := timeOfDay(strings.Join(words, ""))
	if !ok {
		return time.Time{}, ErrNotUnderstood
	}
	t := day.Add(clock)
	if !dayNamed && !t.After(now) {
		t = t.AddDate(0, 0, 1) // a bare time already past today: tomorrow
	}
	if !t.After(now) {
		return time.Time{}, ErrNotUnderstood // "today 9am" at noon names the past
	}
	return t, nil
}

// layouts are the full dates time.Parse reads (a layout without a zone reads UTC; a fraction
// of a second after the seconds is read too).
var layouts = []string{
	time.RFC3339,
	"2006-01-02T15:04:05Z0700", "2006-01-02T15:04:05Z07", "2006-01-02T15:04:05",
	"2006-01-02T15:04Z07:00", "2006-01-02T15:04Z0700", "2006-01-02T15:04",
	"2006-01-02 15:04:05Z07:00", "2006-01-02 15:04:05Z0700", "2006-01-02 15:04:05",
	"2006-01-02 15:04Z07:00", "2006-01-02 15:04",
	"2006-01-02",
	time.RFC1123, time.RFC1123Z, time.RFC850, time.RFC822, time.RFC822Z,
	"Mon, 2 Jan 2006 15:04:05 MST", "Mon, 2 Jan 2006 15:04:05 -0700", // mail's one-digit day
}

var months = map[string]time.Month{
	"january": time.January, "february": time.February, "march": time.March, "april": time.April,
	"may": time.May, "june": time.June, "july": time.July, "august": time.August,
	"september": time.September, "october": time.October, "november": time.November, "december": time.December,
	"jan": time.January, "feb": time.February, "mar": time.March, "apr": time.April, "jun": time.June,
	"jul": time.July, "aug": time.August, "sep": time.September, "sept": time.September, "oct": time.October,
	"nov": time.November, "dec": time.December,
}

// UpperTZ writes an RFC 3339 date-time's "t" and "z" in upper case: RFC 3339 (§5.6) lets
// them be either, and Go's layouts read upper case only.
func UpperTZ(s string) string {
	if len(s) > 10 && s[10] == 't' {
		s = s[:10] + "T" + s[11:]
	}
	if strings.HasSuffix(s, "z") {
		s = s[:len(s)-1] + "Z"
	}
	return s
}

// Absolute reads a date written out in full (the package's first list), in UTC. It does not
// look at the clock: the date may be past.
func Absolute(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if len(s) > MaxLen {
		return time.Time{}, false
	}
	for _, layout := range layouts {
		t, err := time.Parse(layout, UpperTZ(s))
		if err != nil {
			continue
		}
		if zone, _ := t.Zone(); strings.Contains(layout, "MST") && zone != "GMT" && zone != "UTC" && zone != "UT" {
			// Go reads an abbreviation it does not know (PST, CET) as UTC: 8 hours off.
			// Only the universal ones are certain.
			return time.Time{}, false
		}
		if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
			return time.Time{}, false // +24:00, which Go reads and no standard writes
		}
		if strings.Contains(layout, "Mon") && !strings.HasPrefix(strings.ToLower(s), strings.ToLower(t.Weekday().String()[:3])) {
			// Go does not check a written weekday against the date: "Mon, 24 Dec 2026"
			// (a Thursday) is a mistake in one or the other, so it is no date.
			return time.Time{}, false
		}
		return t.UTC(), true
	}
	words := strings.Fields(strings.NewReplacer(",", " ", "a.m.", "am", "p.m.", "pm").Replace(strings.ToLower(s)))
	if len(words) < 3 {
		return time.Time{}, false
	}
	// "December 24 2026" or "24 December 2026", then [at] [<time>].
	month, ok := months[words[0]]
	dayWord := words[1]
	if !ok {
		if month, ok = months[words[1]]; !ok {
			return time.Time{}, false
		}
		dayWord = words[0]
	}
	dayWord = strings.TrimRight(dayWord, "stndrh") // 24th, 1st, 2nd, 3rd
	day, err := number(dayWord)
	if err != nil || len(dayWord) > 2 || len(words[2]) != 4 {
		return time.Time{}, false
	}
	year, err := number(words[2])
	if err != nil {
		return time.Time{}, false
	}
	t := time.Date(year, month, day, 0, 0, 0, 0, time.UTC)
	if t.Day() != day || t.Month() != month {
		return time.Time{}, false // February 30th
	}
	rest := words[3:]
	if len(rest) > 0 && rest[0] == "at" {
		rest = rest[1:]
		if len(rest) == 0 {
			return time.Time{}, false
		}
	}
	if len(rest) == 0 {
		return t, true
	}
	if len(rest) > 2 || (len(rest) == 2 && rest[1] != "am" && rest[1] != "pm") {
		return time.Time{}, false
	}
	clock, ok := timeOfDay(strings.Join(rest, ""))
	if !ok {
		return time.Time{}, false
	}
	return t.Add(clock), true
}

// in reads "<n> <unit>" after "in".
func in(words []string, now time.Time) (time.Time, error) {
	if len(words) != 2 {
		return time.Time{}, ErrNotUnderstood
	}
	n, err := number(words[0])
	if words[0] == "a" || words[0] == "an" {
		n, err = 1, nil
	}
	unit, ok := units[words[1]]
	if err != nil || !ok || n < 1 || n > 10000 {
		return time.Time{}, ErrNotUnderstood
	}
	return now.Add(time.Duration(n) * unit), nil
}

// number reads ASCII digits only (no sign, no spaces).
func number(s string) (int, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, ErrNotUnderstood
	}
	return strconv.Atoi(s)
}

// timeOfDay reads 9am, 9:30pm, 21:15, noon or midnight (spaces already removed) as the time
// since midnight.
func timeOfDay(s string) (time.Duration, bool) {
	switch s {
	case "noon":
		return 12 * time.Hour, true
	case "midnight":
		return 0, true
	}
	meridiem := ""
	if rest, ok := strings.CutSuffix(s, "am"); ok {
		s, meridiem = rest, "am"
	} else if rest, ok := strings.CutSuffix(s, "pm"); ok {
		s, meridiem = rest, "pm"
	}
	hs, ms, hasMinutes := strings.Cut(s, ":")
	h, err := number(hs)
	if err != nil || len(hs) > 2 {
		return 0, false
	}
	m := 0
	if hasMinutes {
		if len(ms) != 2 {
			return 0, false
		}
		if m, err = number(ms); err != nil || m > 59 {
			return 0, false
		}
	} else if meridiem == "" {
		return 0, false // a bare number is not a time
	}
	switch meridiem {
	case "":
		if h > 23 {
			return 0, false
		}
	default:
		if h < 1 || h > 12 {
			return 0, false
		}
		h %= 12
		if meridiem == "pm" {
			h += 12
		}
	}
	return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute, true
}

// cutUTC returns s without a last word UTC or GMT (in any case), and whether it had one.
func cutUTC(s string) (string, bool) {
	i := strings.LastIndexAny(s, " \t")
	if i < 0 {
		return s, false
	}
	switch strings.ToLower(s[i+1:]) {
	case "utc", "gmt":
		return strings.TrimSpace(s[:i]), true
	}
	return s, false
}
