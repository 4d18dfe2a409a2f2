package analytics

import (
	"context"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

type fakeStore struct {
	days     []store.DayStats
	from, to string
}

func (f *fakeStore) DailyStats(_ context.Context, _, _ int64, from, to string) ([]store.DayStats, error) {
	f.from, f.to = from, to
	return f.days, nil
}

// TestSeriesAndRates: the series asks for exactly its days, fills the days without counts
// with zeros, keeps upstream's date format and totals what it lists; rates are percentages of
// delivered to two decimals, 0 when nothing was delivered.
func TestSeriesAndRates(t *testing.T) {
	now := time.Date(2026, 3, 2, 15, 4, 5, 0, time.UTC)
	f := &fakeStore{days: []store.DayStats{
		{Day: "2026-02-24", Counts: map[string]int64{store.CountSent: 5, store.CountDelivered: 3}},
		{Day: "2026-03-02", Counts: map[string]int64{store.CountSent: 1, store.CountClicked: 2, store.CountHardBounced: 9}},
	}}
	s := &Service{Store: f, Now: func() time.Time { return now }}
	got, err := s.TimeSeries(context.Background(), 1, 0, 7)
	if err != nil {
		t.Fatal(err)
	}
	if f.from != "2026-02-23" || f.to != "2026-03-02" {
		t.Errorf("asked the store for %s..%s", f.from, f.to)
	}
	if len(got.Result) != 8 || got.Result[0].Date != "Feb 23" || got.Result[7].Date != "Mar 02" {
		t.Fatalf("series %+v", got.Result)
	}
	if got.Result[1].Sent != 5 || got.Result[1].Delivered != 3 || got.Result[2] != (Point{Date: "Feb 25"}) || got.Result[7].Clicked != 2 {
		t.Errorf("days %+v", got.Result)
	}
	if got.TotalCounts != (Counts{Sent: 6, Delivered: 3, Clicked: 2}) {
		t.Errorf("totals %+v", got.TotalCounts)
	}
	// The rates as upstream's (hardBounced/delivered)*100 gives them in JavaScript, unrounded.
	f.days = []store.DayStats{{Day: "2026-03-01", Counts: map[string]int64{store.CountDelivered: 3, store.CountHardBounced: 1, store.CountComplained: 2}}}
	r, err := s.Reputation(context.Background(), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r != (Reputation{Delivered: 3, HardBounced: 1, Complained: 2, BounceRate: 33.33333333333333, ComplaintRate: 66.66666666666666}) || f.from != "2026-01-31" {
		t.Errorf("reputation %+v (from %s)", r, f.from)
	}
	f.days = nil
	if r, _ := s.Reputation(context.Background(), 1, 0); r != (Reputation{}) {
		t.Errorf("reputation of nothing %+v", r)
	}
}
