package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	for _, c := range []struct {
		lat  []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 50, 5 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 9 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 100, 10 * time.Millisecond},
	} {
		if got := (result{latencies: c.lat}).percentile(c.p); got != c.want {
			t.Errorf("p%v of %v = %v, want %v", c.p, c.lat, got, c.want)
		}
	}
}

// TestLoad: exactly n requests from c clients, each counted; a bad answer is an error.
func TestLoad(t *testing.T) {
	var calls, bad atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1)%10 == 0 || r.Header.Get("Authorization") != "Bearer k" {
			bad.Add(1)
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(`{"emailId":"em1"}`))
	}))
	defer srv.Close()
	r := load(context.Background(), target{name: "t", url: srv.URL, key: "k", body: []byte(`{}`)}, 100, 4)
	if r.requests != 100 || calls.Load() != 100 || int64(r.errors) != bad.Load() || r.errors != 10 {
		t.Errorf("requests %d (server saw %d), errors %d (server refused %d)", r.requests, calls.Load(), r.errors, bad.Load())
	}
	if len(r.latencies) != 100 || r.latencies[0] > r.latencies[99] {
		t.Error("latencies not recorded, or not sorted")
	}
	if r.rate() <= 0 {
		t.Errorf("rate %v", r.rate())
	}
}

func TestMilestones(t *testing.T) {
	at := func(s float64, written int) progressPoint {
		return progressPoint{at: time.Duration(s * float64(time.Second)), c: campaignCounters{Written: written}}
	}
	got := milestones([]progressPoint{at(1, 10), at(2, 30), at(4, 50), at(5, 80), at(6, 100)}, 100)
	for _, want := range []string{"10% 1.0s (10/s)", "25% 2.0s (20/s)", "50% 4.0s (10/s)", "75% 5.0s (30/s)", "100% 6.0s (20/s)"} {
		if !strings.Contains(got, want) {
			t.Errorf("milestones %q lacks %q", got, want)
		}
	}
	if got := milestones([]progressPoint{at(1, 10)}, 100); !strings.Contains(got, "25% not reached") {
		t.Errorf("unfinished run: %q", got)
	}
}

func TestOptionsCheck(t *testing.T) {
	ok := Options{Clients: 1, Requests: 1, Duration: time.Second, Workers: 1, CampaignBatch: 1, CampaignTimeout: time.Second, ImportClients: 1}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*Options){
		"clients": func(o *Options) { o.Clients = 0 }, "warmup": func(o *Options) { o.Warmup = -1 },
		"campaign": func(o *Options) { o.Campaign = -1 }, "batch": func(o *Options) { o.CampaignBatch = 0 },
	} {
		o := ok
		change(&o)
		if o.Check() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
