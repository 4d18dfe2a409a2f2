package api_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

// TestRateLimit: a team's own limit is counted per second: past it a request is a 429
// RATE_LIMITED with Retry-After, and every counted response has the X-RateLimit headers; a
// team without a limit (the local server's default) gets none; a bad key is refused before
// any counting.
func TestRateLimit(t *testing.T) {
	e := newEnv(t)
	key, teamID := e.newTeam("limited", store.PermissionFull, 0)
	one := int64(1)
	if _, err := e.app.Store.UpdateTeam(context.Background(), teamID, func(tm *store.Team) error {
		tm.APIRateLimit = &one
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var refused, allowed int
	for range 5 {
		r := e.request(key, "GET", "/api/v1/emails", nil)
		if r.header.Get("X-RateLimit-Limit") != "1" {
			t.Fatalf("X-RateLimit-Limit %q", r.header.Get("X-RateLimit-Limit"))
		}
		reset, err := strconv.ParseInt(r.header.Get("X-RateLimit-Reset"), 10, 64)
		if err != nil || reset < time.Now().Unix() || reset > time.Now().Unix()+2 {
			t.Errorf("X-RateLimit-Reset %q, want the next second", r.header.Get("X-RateLimit-Reset"))
		}
		switch r.status {
		case 200:
			allowed++
			if r.header.Get("X-RateLimit-Remaining") != "0" {
				t.Errorf("remaining %q after the one request of the second", r.header.Get("X-RateLimit-Remaining"))
			}
		case 429:
			refused++
			var body struct {
				Error struct{ Code, Message string }
			}
			_ = json.Unmarshal(r.body, &body)
			if body.Error.Code != "RATE_LIMITED" || !strings.HasPrefix(body.Error.Message, "Rate limit exceeded. Try again in ") ||
				r.header.Get("Retry-After") != "1" || r.header.Get("X-RateLimit-Remaining") != "0" {
				t.Errorf("refusal: %s, Retry-After %q", r.body, r.header.Get("Retry-After"))
			}
		default:
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	}
	if refused == 0 || allowed == 0 || allowed > 2 {
		t.Errorf("5 requests at 1/s: %d allowed, %d refused", allowed, refused)
	}
	// The main team has no limit of its own, and the local server none by default.
	if r := e.request(e.key, "GET", "/api/v1/emails", nil); r.status != 200 || r.header.Get("X-RateLimit-Limit") != "" {
		t.Errorf("unlimited team: %d, limit header %q", r.status, r.header.Get("X-RateLimit-Limit"))
	}
	if r := e.request("us_aaaaaaaaaa_0123456789abcdef0123456789abcdef", "GET", "/api/v1/emails", nil); r.status != 403 ||
		r.header.Get("X-RateLimit-Limit") != "" {
		t.Errorf("a bad key: %d, limit header %q", r.status, r.header.Get("X-RateLimit-Limit"))
	}
	// A good key on a route it may not call: authenticated, so counted, with the headers.
	sending, sendingTeam := e.newTeam("sending", store.PermissionSending, 0)
	if _, err := e.app.Store.UpdateTeam(context.Background(), sendingTeam, func(tm *store.Team) error {
		tm.APIRateLimit = &one
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if r := e.request(sending, "GET", "/api/v1/domains", nil); r.status != 403 || r.header.Get("X-RateLimit-Limit") != "1" {
		t.Errorf("a SENDING key on a FULL route: %d, limit header %q; want 403 with the headers", r.status, r.header.Get("X-RateLimit-Limit"))
	}
}

// TestDailyQuota: a team's daily quota refuses, with a 429 naming it and its reset, a send or
// batch that would pass it; nothing of a refused batch is written.
func TestDailyQuota(t *testing.T) {
	e := newEnv(t)
	key, teamID := e.newTeam("quota", store.PermissionFull, 0)
	if _, err := e.app.Store.UpdateTeam(context.Background(), teamID, func(tm *store.Team) error {
		tm.DailyEmailLimit = 3
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if r := e.request(key, "POST", "/api/v1/domains", []byte(`{"name":"quota.example","region":"us-east-1"}`)); r.status != 200 {
		t.Fatalf("domain: %d %s", r.status, r.body)
	} else {
		r.json(t, &d)
	}
	one := `{"from":"a@quota.example","to":"x@example.org","subject":"s","text":"t"}`
	send := func(path, body string) response {
		t.Helper()
		return e.request(key, "POST", path, []byte(body))
	}
	for i := range 2 {
		if r := send("/api/v1/emails", one); r.status != 200 {
			t.Fatalf("send %d: %d %s", i+1, r.status, r.body)
		}
	}
	r := send("/api/v1/emails/batch", "["+one+","+one+"]")
	tomorrow := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour).Format(time.RFC3339)
	if r.status != 429 || !strings.Contains(string(r.body), `"RATE_LIMITED"`) || !strings.Contains(string(r.body), "quota of 3 emails") ||
		!strings.Contains(string(r.body), tomorrow) {
		t.Fatalf("a batch past the quota: %d %s", r.status, r.body)
	}
	if !strings.Contains(string(r.body), "2 accepted today, so 2 more would exceed it") {
		t.Errorf("a batch past the quota says %s, want how many it would add", r.body)
	}
	// Retry-After: the seconds to the quota's reset at midnight UTC.
	untilReset := time.Until(time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)).Seconds()
	if s, err := strconv.ParseFloat(r.header.Get("Retry-After"), 64); err != nil || s < untilReset-5 || s > untilReset+5 {
		t.Errorf("Retry-After %q, want about %.0f", r.header.Get("Retry-After"), untilReset)
	}
	var page struct{ Count int }
	e.request(key, "GET", "/api/v1/emails", nil).json(t, &page)
	if page.Count != 2 {
		t.Fatalf("%d emails after the refused batch, want 2", page.Count)
	}
	if r := send("/api/v1/emails", one); r.status != 200 {
		t.Fatalf("the third email: %d %s", r.status, r.body)
	}
	if r := send("/api/v1/emails", one); r.status != 429 || !strings.Contains(string(r.body), "quota of 3 emails reached (3 accepted today)") {
		t.Fatalf("the fourth email: %d %s", r.status, r.body)
	}
}
