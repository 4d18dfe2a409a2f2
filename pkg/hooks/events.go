package hooks

import (
	"encoding/json"
	"strings"

	"github.com/mailroom/mailroom/pkg/store"
)

// emailTypes maps an email history entry's status to its webhook event type. SENDING (the
// worker's claim) has none.
var emailTypes = map[string]string{
	store.StatusQueued: "email.queued", store.StatusScheduled: "email.scheduled", store.StatusSent: "email.sent",
	"DELIVERY_DELAYED": "email.delivery_delayed", "DELIVERED": "email.delivered", "BOUNCED": "email.bounced",
	"REJECTED": "email.rejected", "RENDERING_FAILURE": "email.rendering_failure", "COMPLAINED": "email.complained",
	store.StatusFailed: "email.failed", store.StatusCancelled: "email.cancelled", store.StatusSuppressed: "email.suppressed",
	"OPENED": "email.opened", "CLICKED": "email.clicked",
}

// EmailData is the data of an email.* event (COMPAT.md).
type EmailData struct {
	ID          string           `json:"id"`
	Status      string           `json:"status"`
	From        string           `json:"from"`
	To          []string         `json:"to"`
	OccurredAt  string           `json:"occurredAt"`
	Subject     string           `json:"subject,omitempty"`
	CampaignID  string           `json:"campaignId,omitempty"`
	ContactID   string           `json:"contactId,omitempty"`
	DomainID    int64            `json:"domainId,omitempty"`
	Bounce      *BounceData      `json:"bounce,omitempty"`
	Failed      *FailedData      `json:"failed,omitempty"`
	Suppression *SuppressionData `json:"suppression,omitempty"`
	Open        *EngagementData  `json:"open,omitempty"`
	Click       *EngagementData  `json:"click,omitempty"`
}

// BounceData is a bounce's kind.
type BounceData struct {
	Type    string `json:"type"` // Transient, Permanent or Undetermined
	SubType string `json:"subType"`
	Message string `json:"message,omitempty"`
}

// FailedData says why an email was not sent.
type FailedData struct {
	Reason string `json:"reason"`
}

// SuppressionData says why an email went to a suppressed address's list.
type SuppressionData struct {
	Type   string `json:"type"` // Bounce, Complaint or Manual
	Reason string `json:"reason"`
	Source string `json:"source,omitempty"`
}

// EngagementData is an open's or a click's.
type EngagementData struct {
	Timestamp string `json:"timestamp"`
	URL       string `json:"url,omitempty"`
	UserAgent string `json:"userAgent,omitempty"`
	IP        string `json:"ip,omitempty"`
}

// EmailEvent is the webhook event of one entry of an email's history (ok false for an entry
// no webhook type names). Its key is the email and entry ids: the same entry seen again (a
// stream record delivered twice, a later image of the same email) is the same event.
func EmailEvent(e store.Email, ev store.Event) (Event, bool) {
	typ, ok := emailTypes[ev.Status]
	if !ok {
		return Event{}, false
	}
	d := EmailData{ID: e.ID, Status: ev.Status, From: e.From, To: e.To, OccurredAt: stamp(ev.CreatedAt),
		Subject: e.Subject, CampaignID: e.CampaignID, ContactID: e.ContactID, DomainID: e.DomainID}
	var raw map[string]any
	_ = json.Unmarshal(ev.Data, &raw)
	str := func(k string) string { s, _ := raw[k].(string); return s }
	switch ev.Status {
	case "BOUNCED":
		b := &BounceData{Type: str("bounceType"), SubType: str("bounceSubType")}
		if b.Type == "" {
			b.Type = "Undetermined"
		}
		if rs, _ := raw["bouncedRecipients"].([]any); len(rs) > 0 {
			if r, _ := rs[0].(map[string]any); r != nil {
				b.Message, _ = r["diagnosticCode"].(string)
			}
		}
		d.Bounce = b
	case store.StatusFailed, "REJECTED", "RENDERING_FAILURE":
		reason := str("error")
		if reason == "" {
			reason = strings.TrimSpace(str("reason") + " " + str("errorMessage"))
		}
		d.Failed = &FailedData{Reason: reason}
	case store.StatusSuppressed:
		kind := str("suppressionType") // Bounce, Complaint or Manual (the worker's, from the list entries)
		if kind == "" {
			kind = "Manual"
		}
		d.Suppression = &SuppressionData{Type: kind, Reason: str("error"), Source: "suppression list"}
	case "OPENED":
		d.Open = &EngagementData{Timestamp: str("timestamp"), UserAgent: str("userAgent"), IP: str("ipAddress")}
	case "CLICKED":
		d.Click = &EngagementData{Timestamp: str("timestamp"), URL: str("link"), UserAgent: str("userAgent"), IP: str("ipAddress")}
	}
	return Event{TeamID: e.TeamID, DomainID: e.DomainID, Type: typ, At: ev.CreatedAt, Key: e.ID + "/" + ev.ID, Data: d}, true
}
