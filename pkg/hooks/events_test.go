package hooks

import (
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/jsonout"
	"github.com/mailroom/mailroom/pkg/sesevent"
	"github.com/mailroom/mailroom/pkg/store"
)

// TestEmailEvents: each history entry becomes its event type with COMPAT.md's data, built from
// what the history holds (an SES event's detail as the ingester records it); a claim makes none.
func TestEmailEvents(t *testing.T) {
	e := store.Email{ID: "em_1", TeamID: 4, DomainID: 2, From: "Ada <ada@example.com>", To: []string{"x@example.org"},
		Subject: "Hi", CampaignID: "cp_1", ContactID: "ct_1"}
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	detail := func(ev sesevent.Event) []byte { return ev.Detail() }
	cases := map[string]struct {
		ev   store.Event
		want string
	}{
		"sent": {store.Event{ID: "1-SENT", Status: store.StatusSent, CreatedAt: at},
			`{"id":"em_1","status":"SENT","from":"Ada <ada@example.com>","to":["x@example.org"],"occurredAt":"2026-11-24T10:00:00.000Z","subject":"Hi","campaignId":"cp_1","contactId":"ct_1","domainId":2}`},
		"bounce": {store.Event{ID: "b", Status: "BOUNCED", CreatedAt: at, Data: detail(sesevent.Event{EventType: "Bounce",
			Bounce: &sesevent.Bounce{BounceType: "Permanent", BounceSubType: "General",
				BouncedRecipients: []sesevent.BouncedRecipient{{EmailAddress: "x@example.org", DiagnosticCode: "smtp; 550 5.1.1 user unknown"}}}})},
			`"bounce":{"type":"Permanent","subType":"General","message":"smtp; 550 5.1.1 user unknown"}`},
		"click": {store.Event{ID: "c", Status: "CLICKED", CreatedAt: at, Data: detail(sesevent.Event{EventType: "Click",
			Click: &sesevent.Click{Timestamp: at, Link: "https://example.com/a", UserAgent: "UA", IPAddress: "192.0.2.1"}})},
			`"click":{"timestamp":"2026-11-24T10:00:00Z","url":"https://example.com/a","userAgent":"UA","ip":"192.0.2.1"}`},
		"failed": {store.Event{ID: "1-FAILED", Status: store.StatusFailed, CreatedAt: at, Data: []byte(`{"error":"The mail provider rejected the message"}`)},
			`"failed":{"reason":"The mail provider rejected the message"}`},
		// As upstream's ses-hook-parser builds them: SES's detail in metadata; a subtype
		// outside the SDK's list is General; a click's url always; an engagement without its
		// own time takes the event's.
		"bounce metadata": {store.Event{ID: "b2", Status: "BOUNCED", CreatedAt: at, Data: detail(sesevent.Event{EventType: "Bounce",
			Bounce: &sesevent.Bounce{BounceType: "Undetermined", BounceSubType: "Undetermined",
				BouncedRecipients: []sesevent.BouncedRecipient{{EmailAddress: "x@example.org", DiagnosticCode: "smtp; 550"}}}})},
			`"bounce":{"type":"Undetermined","subType":"General","message":"smtp; 550"},"metadata":{"bounceSubType":"Undetermined","bounceType":"Undetermined","diagnosticCode":"smtp; 550"}`},
		"complaint metadata": {store.Event{ID: "k", Status: "COMPLAINED", CreatedAt: at, Data: detail(sesevent.Event{EventType: "Complaint",
			Complaint: &sesevent.Complaint{ComplaintFeedbackType: "abuse", UserAgent: "Yahoo!"}})},
			`"metadata":{"feedbackType":"abuse","userAgent":"Yahoo!"}`},
		"open metadata": {store.Event{ID: "o", Status: "OPENED", CreatedAt: at, Data: detail(sesevent.Event{EventType: "Open",
			Open: &sesevent.Open{Timestamp: at, UserAgent: "UA", IPAddress: "192.0.2.1"}})},
			`"open":{"timestamp":"2026-11-24T10:00:00Z","userAgent":"UA","ip":"192.0.2.1"},"metadata":{"ipAddress":"192.0.2.1","userAgent":"UA"}`},
		"reject metadata": {store.Event{ID: "r", Status: "REJECTED", CreatedAt: at, Data: detail(sesevent.Event{EventType: "Reject",
			Reject: &sesevent.Reject{Reason: "Bad content"}})},
			`"metadata":{"reason":"Bad content"}`},
		"click without a link or time": {store.Event{ID: "c2", Status: "CLICKED", CreatedAt: at, Data: []byte(`{}`)},
			`"click":{"timestamp":"2026-11-24T10:00:00.000Z","url":""}`},
	}
	for name, c := range cases {
		ev, ok := EmailEvent(e, c.ev)
		if !ok {
			t.Fatalf("%s: no event", name)
		}
		b, _ := jsonout.Marshal(ev.Data)
		if !contains(string(b), c.want) {
			t.Errorf("%s: data %s\nwant it to contain %s", name, b, c.want)
		}
		if ev.Key != "em_1/"+c.ev.ID || ev.TeamID != 4 || ev.DomainID != 2 || !ev.At.Equal(at) {
			t.Errorf("%s: %+v", name, ev)
		}
	}
	if ev, _ := EmailEvent(e, cases["sent"].ev); ev.Type != "email.sent" {
		t.Errorf("type %q", ev.Type)
	}
	if _, ok := EmailEvent(e, store.Event{ID: "claim", Status: store.StatusSending}); ok {
		t.Error("a claim made an event")
	}
}

func contains(s, sub string) bool {
	return strings.Contains(s, sub)
}
