// Package naturaldate reads times written as people write them ("tomorrow 9am", "next monday
// 10:00", "in 2 hours"), in English, evaluated in UTC. It is its own package because its rules
// are compiled when a program starts: only what parses such dates links it.
package naturaldate

import (
	"strings"
	"time"

	"github.com/olebedev/when"
	"github.com/olebedev/when/rules/common"
	"github.com/olebedev/when/rules/en"

	"github.com/mailroom/mailroom/pkg/fault"
)

var parser = func() *when.Parser {
	w := when.New(nil)
	w.Add(en.All...)
	w.Add(common.All...)
	return w
}()

// Parse reads a scheduledAt: RFC 3339, or natural language such as "tomorrow 9am" or
// "next monday 10:00", evaluated in UTC from now.
func Parse(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	now = now.UTC()
	r, err := parser.Parse(s, now)
	if err != nil || r == nil || strings.TrimSpace(r.Text) == "" {
		return time.Time{}, fault.Field("scheduledAt", "could not understand %q: use RFC 3339 (2026-01-02T09:00:00Z) or e.g. \"tomorrow 9am\", \"next monday 10:00\"", s)
	}
	return r.Time.UTC().Truncate(time.Second), nil
}
