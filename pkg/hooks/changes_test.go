package hooks

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

// TestChangeEvents: writes to contacts, domains and campaigns become the events COMPAT.md
// names, with their data; writes that change nothing an event carries make none.
func TestChangeEvents(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	contact := store.Contact{ID: "ct_1", TeamID: 3, BookID: "cb_1", Email: "ada@example.com", FirstName: "Ada",
		Subscribed: true, Properties: map[string]string{"plan": "pro"}, CreatedAt: t0, UpdatedAt: t0}
	unsubscribed := contact
	unsubscribed.Subscribed, unsubscribed.UpdatedAt = false, t1
	touched := contact
	touched.UpdatedAt = t1
	domain := store.Domain{ID: 7, TeamID: 3, Name: "example.com", Region: "us-east-1", Status: "PENDING", CreatedAt: t0, UpdatedAt: t0}
	verified := domain
	verified.Status, verified.DKIMStatus, verified.UpdatedAt = store.DomainSuccess, "SUCCESS", t1
	tracked := verified
	tracked.OpenTracking = true
	checked := verified
	checked.LastCheckedTime, checked.UpdatedAt = &t1, t1.Add(time.Hour)
	camp := store.Campaign{ID: "cp_1", TeamID: 3, DomainID: 7, Name: "Launch", From: "hi@example.com", Subject: "News",
		ContactBookID: "cb_1", Status: store.CampaignScheduled, CreatedAt: t0, UpdatedAt: t0}
	with := func(c store.Campaign, status string, batches int) *store.Campaign {
		c.Status, c.BatchesDone, c.UpdatedAt = status, batches, t1
		return &c
	}
	rec := func(v any) store.Record {
		switch v := v.(type) {
		case store.Contact:
			return store.Record{Contact: &v}
		case store.Domain:
			return store.Record{Domain: &v}
		case *store.Campaign:
			return store.Record{Campaign: v}
		}
		return store.Record{}
	}
	// The data as upstream's webhook payloads have it: an unset name null (contact-service.ts),
	// a new domain's subdomain and SES tenant null, DKIM and SPF NOT_STARTED, dmarcAdded false
	// (domain-service.ts).
	cases := []struct {
		name   string
		change store.Change
		typ    string // "": no event
		domain int64
		data   string
		at     time.Time
	}{
		{"contact created", store.Change{After: rec(contact)}, "contact.created", 0,
			`{"id":"ct_1","email":"ada@example.com","contactBookId":"cb_1","subscribed":true,"properties":{"plan":"pro"},"firstName":"Ada","lastName":null,"createdAt":"2026-11-24T10:00:00.000Z","updatedAt":"2026-11-24T10:00:00.000Z"}`, t0},
		{"contact unsubscribed", store.Change{Before: rec(contact), After: rec(unsubscribed)}, "contact.updated", 0, `"subscribed":false`, t1},
		{"contact written unchanged", store.Change{Before: rec(contact), After: rec(touched)}, "", 0, "", time.Time{}},
		{"contact deleted", store.Change{Before: rec(contact), At: t1}, "contact.deleted", 0, `"id":"ct_1"`, t1},
		{"domain created", store.Change{After: rec(domain)}, "domain.created", 7,
			`{"id":7,"name":"example.com","status":"PENDING","region":"us-east-1","createdAt":"2026-11-24T10:00:00.000Z","updatedAt":"2026-11-24T10:00:00.000Z","clickTracking":false,"openTracking":false,"subdomain":null,"sesTenantId":null,"dkimStatus":"NOT_STARTED","spfDetails":"NOT_STARTED","dmarcAdded":false}`, t0},
		{"domain verified", store.Change{Before: rec(domain), After: rec(verified)}, "domain.verified", 7, `"status":"SUCCESS","region"`, t1},
		{"domain tracking", store.Change{Before: rec(verified), After: rec(tracked)}, "domain.updated", 7, `"openTracking":true`, t1},
		{"domain checked, nothing new", store.Change{Before: rec(verified), After: rec(checked)}, "", 0, "", time.Time{}},
		{"domain deleted", store.Change{Before: rec(verified), At: t1.Add(time.Hour)}, "domain.deleted", 7, `"name":"example.com"`, t1.Add(time.Hour)},
		{"campaign started", store.Change{Before: rec(&camp), After: rec(with(camp, store.CampaignRunning, 0))}, "campaign.started", 7,
			`{"id":"cp_1","name":"Launch","status":"RUNNING","from":"hi@example.com","subject":"News","contactBookId":"cb_1","domainId":7,"createdAt":"2026-11-24T10:00:00.000Z","updatedAt":"2026-11-24T10:01:00.000Z"}`, t1},
		{"campaign batch", store.Change{Before: rec(with(camp, store.CampaignRunning, 0)), After: rec(with(camp, store.CampaignRunning, 1))}, "", 0, "", time.Time{}},
		{"campaign paused", store.Change{Before: rec(with(camp, store.CampaignRunning, 1)), After: rec(with(camp, store.CampaignPaused, 1))}, "campaign.paused", 7, `"status":"PAUSED"`, t1},
		{"campaign resumed", store.Change{Before: rec(with(camp, store.CampaignPaused, 1)), After: rec(with(camp, store.CampaignRunning, 1))}, "campaign.started", 7, `"status":"RUNNING"`, t1},
		{"campaign sent", store.Change{Before: rec(with(camp, store.CampaignRunning, 1)), After: rec(with(camp, store.CampaignSent, 2))}, "campaign.sent", 7, `"status":"SENT"`, t1},
		{"campaign created", store.Change{After: rec(&camp)}, "", 0, "", time.Time{}},
		{"campaign deleted", store.Change{Before: rec(&camp)}, "", 0, "", time.Time{}},
	}
	for _, c := range cases {
		ev, ok := ChangeEvent(c.change, "k1")
		if ok != (c.typ != "") || ev.Type != c.typ {
			t.Errorf("%s: event %q (%v), want %q", c.name, ev.Type, ok, c.typ)
			continue
		}
		if !ok {
			continue
		}
		b, _ := json.Marshal(ev.Data)
		if !contains(string(b), c.data) {
			t.Errorf("%s: data %s\nwant it to contain %s", c.name, b, c.data)
		}
		if ev.TeamID != 3 || ev.DomainID != c.domain || ev.Key != "k1" || !ev.At.Equal(c.at) {
			t.Errorf("%s: team %d domain %d key %q at %v, want 3, %d, k1, %v", c.name, ev.TeamID, ev.DomainID, ev.Key, ev.At, c.domain, c.at)
		}
	}
}
