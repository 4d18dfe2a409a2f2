// Package analytics serves the analytics routes of the useSend API from the store's per-day,
// per-domain counters (store.Emails.DailyStats): no Scan, no Query over emails.
package analytics

import (
	"context"
	"fmt"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

// Store is what the service reads.
type Store interface {
	DailyStats(ctx context.Context, teamID, domainID int64, from, to string) ([]store.DayStats, error)
}

// Service computes the time series and the reputation metrics.
type Service struct {
	Store Store
	Now   func() time.Time
}

// Counts are one day's (or a period's) numbers, as upstream names them.
type Counts struct {
	Sent       int64 `json:"sent"`
	Delivered  int64 `json:"delivered"`
	Opened     int64 `json:"opened"`
	Clicked    int64 `json:"clicked"`
	Bounced    int64 `json:"bounced"`
	Complained int64 `json:"complained"`
}

func (c *Counts) add(m map[string]int64) {
	c.Sent += m[store.CountSent]
	c.Delivered += m[store.CountDelivered]
	c.Opened += m[store.CountOpened]
	c.Clicked += m[store.CountClicked]
	c.Bounced += m[store.CountBounced]
	c.Complained += m[store.CountComplained]
}

// Point is one day of the series; Date is formatted as upstream does ("Nov 24").
type Point struct {
	Date string `json:"date"`
	Counts
}

// Series is GET /v1/analytics/email-time-series.
type Series struct {
	Result      []Point `json:"result"`
	TotalCounts Counts  `json:"totalCounts"`
}

// DateFormat is upstream's "MMM dd".
const DateFormat = "Jan 02"

// Days are the periods the time series offers (upstream's enum); DefaultDays when none is asked.
var Days = []int{7, 30}

// DefaultDays is the time series' period unless asked, and the reputation metrics' window.
const DefaultDays = 30

// TimeSeries returns days+1 zero-filled days, oldest first, ending today (UTC): the team's, or
// one domain's (domainID not 0).
func (s *Service) TimeSeries(ctx context.Context, teamID, domainID int64, days int) (Series, error) {
	today := s.Now().UTC().Truncate(24 * time.Hour)
	from := today.AddDate(0, 0, -days)
	stats, err := s.Store.DailyStats(ctx, teamID, domainID, from.Format(time.DateOnly), today.Format(time.DateOnly))
	if err != nil {
		return Series{}, fmt.Errorf("analytics: %w", err)
	}
	byDay := make(map[string]map[string]int64, len(stats))
	for _, d := range stats {
		byDay[d.Day] = d.Counts
	}
	out := Series{Result: make([]Point, 0, days+1)}
	for d := from; !d.After(today); d = d.AddDate(0, 0, 1) {
		p := Point{Date: d.Format(DateFormat)}
		p.add(byDay[d.Format(time.DateOnly)])
		out.TotalCounts.add(byDay[d.Format(time.DateOnly)])
		out.Result = append(out.Result, p)
	}
	return out, nil
}

// Reputation is GET /v1/analytics/reputation-metrics: the last DefaultDays days (and today)
// of hard bounces and complaints, as percentages of the emails delivered then.
type Reputation struct {
	Delivered     int64   `json:"delivered"`
	HardBounced   int64   `json:"hardBounced"`
	Complained    int64   `json:"complained"`
	BounceRate    float64 `json:"bounceRate"`
	ComplaintRate float64 `json:"complaintRate"`
}

// Reputation returns the team's metrics, or one domain's (domainID not 0).
func (s *Service) Reputation(ctx context.Context, teamID, domainID int64) (Reputation, error) {
	today := s.Now().UTC()
	stats, err := s.Store.DailyStats(ctx, teamID, domainID,
		today.AddDate(0, 0, -DefaultDays).Format(time.DateOnly), today.Format(time.DateOnly))
	if err != nil {
		return Reputation{}, fmt.Errorf("analytics: %w", err)
	}
	var r Reputation
	for _, d := range stats {
		r.Delivered += d.Counts[store.CountDelivered]
		r.HardBounced += d.Counts[store.CountHardBounced]
		r.Complained += d.Counts[store.CountComplained]
	}
	r.BounceRate, r.ComplaintRate = percent(r.HardBounced, r.Delivered), percent(r.Complained, r.Delivered)
	return r, nil
}

// percent is n of total in percent, unrounded and computed in upstream's order
// ((n/total)*100, so the same float64 as its JSON); 0 when total is 0.
func percent(n, total int64) float64 {
	if total == 0 {
		return 0
	}
	return float64(n) / float64(total) * 100
}
