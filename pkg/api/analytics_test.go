package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/sesevent"
	"github.com/mailroom/mailroom/pkg/store"
)

// TestAnalytics: the time series and reputation metrics count each email's sent, delivered,
// bounced and complained once (a second Delivery event of an email counts nothing), for the
// team and per domain, and a domain-restricted key sees its own domain's figures.
func TestAnalytics(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var other map[string]any
	e.mustDo("POST", "/api/v1/domains", `{"name":"other.com","region":"us-east-1"}`, &other)
	otherID := int64(other["id"].(float64))
	first := e.send(`{"from":"a@example.com","to":"x@example.org","subject":"s","text":"t"}`)
	second := e.send(`{"from":"a@other.com","to":"y@example.org","subject":"s","text":"t"}`)
	// The local server's mailer has SES's Delivery event follow each send.
	e.await(first, "DELIVERED")
	e.await(second, "DELIVERED")
	publish := func(id string, evs ...sesevent.Event) {
		t.Helper()
		em, err := e.app.Store.GetEmail(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		mail := sesevent.Mail{Timestamp: time.Now().UTC(), MessageID: em.MessageID, Destination: em.To,
			Tags: map[string][]string{sesevent.EmailIDTag: {id}}}
		for _, ev := range evs {
			ev.Mail = mail
			for range 2 { // SES delivers at least once: a repeat counts nothing
				if err := e.app.Ingester.Publish(ctx, ev); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	now := time.Now().UTC()
	publish(first, sesevent.Event{EventType: "Delivery", Delivery: &sesevent.Delivery{Timestamp: now.Add(time.Second), Recipients: []string{"x@example.org"}}})
	publish(second,
		sesevent.Event{EventType: "Bounce", Bounce: &sesevent.Bounce{BounceType: "Permanent", BounceSubType: "General", Timestamp: now,
			BouncedRecipients: []sesevent.BouncedRecipient{{EmailAddress: "y@example.org"}}}},
		sesevent.Event{EventType: "Complaint", Complaint: &sesevent.Complaint{Timestamp: now,
			ComplainedRecipients: []sesevent.Recipient{{EmailAddress: "y@example.org"}}}})

	type counts struct{ Sent, Delivered, Opened, Clicked, Bounced, Complained int64 }
	type series struct {
		Result []struct {
			Date string `json:"date"`
			counts
		} `json:"result"`
		TotalCounts counts `json:"totalCounts"`
	}
	get := func(key, query string) series {
		t.Helper()
		r := e.request(key, "GET", "/api/v1/analytics/email-time-series"+query, nil)
		if r.status != 200 {
			t.Fatalf("time series %s: %d %s", query, r.status, r.body)
		}
		var s series
		r.json(t, &s)
		return s
	}
	all := get(e.key, "")
	if len(all.Result) != 31 || all.Result[30].Date != time.Now().UTC().Format("Jan 02") ||
		all.Result[0].Date != time.Now().UTC().AddDate(0, 0, -30).Format("Jan 02") {
		t.Fatalf("default series: %d days from %q to %q, want 31 ending today", len(all.Result), all.Result[0].Date, all.Result[len(all.Result)-1].Date)
	}
	want := counts{Sent: 2, Delivered: 2, Bounced: 1, Complained: 1}
	if all.Result[30].counts != want || all.TotalCounts != want || all.Result[29].counts != (counts{}) {
		t.Errorf("team: today %+v, totals %+v, yesterday %+v; want %+v today and in total", all.Result[30].counts, all.TotalCounts, all.Result[29].counts, want)
	}
	week := get(e.key, fmt.Sprintf("?days=7&domainId=%d", e.domain))
	if len(week.Result) != 8 || week.TotalCounts != (counts{Sent: 1, Delivered: 1}) {
		t.Errorf("example.com's week: %d days, totals %+v", len(week.Result), week.TotalCounts)
	}
	// A key restricted to other.com is held to it.
	restricted := e.keyFor(store.PermissionFull, otherID)
	if got := get(restricted, "").TotalCounts; got != (counts{Sent: 1, Delivered: 1, Bounced: 1, Complained: 1}) {
		t.Errorf("other.com's key sees %+v", got)
	}
	var rep struct {
		Delivered, HardBounced, Complained int64
		BounceRate, ComplaintRate          float64
	}
	r := e.request(e.key, "GET", "/api/v1/analytics/reputation-metrics", nil)
	r.json(t, &rep)
	if r.status != 200 || rep.Delivered != 2 || rep.HardBounced != 1 || rep.Complained != 1 || rep.BounceRate != 50 || rep.ComplaintRate != 50 {
		t.Errorf("reputation %d %+v", r.status, rep)
	}
	r = e.request(e.key, "GET", fmt.Sprintf("/api/v1/analytics/reputation-metrics?domainId=%d", e.domain), nil)
	r.json(t, &rep)
	if rep.Delivered != 1 || rep.HardBounced != 0 || rep.BounceRate != 0 {
		t.Errorf("example.com's reputation %+v", rep)
	}
}
