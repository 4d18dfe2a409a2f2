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
	Subject     string           `json:"subject"`
	CampaignID  string           `json:"campaignId,omitempty"`
	ContactID   string           `json:"contactId,omitempty"`
	DomainID    int64            `json:"domainId,omitempty"`
	Bounce      *BounceData      `json:"bounce,omitempty"`
	Failed      *FailedData      `json:"failed,omitempty"`
	Suppression *SuppressionData `json:"suppression,omitempty"`
	Open        *EngagementData  `json:"open,omitempty"`
	Click       *ClickData       `json:"click,omitempty"`
	// Metadata is SES's detail of the event, as upstream gives it (buildEmailMetadata): a
	// bounce's type, subtype and diagnostic code, a complaint's feedback type, an open's or a
	// click's address and user agent (and link), a delay's type, expiry and recipients, a
	// rejection's reason, a rendering failure's message and template.
	Metadata map[string]any `json:"metadata,omitempty"`
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

// EngagementData is an open's.
type EngagementData struct {
	Timestamp string `json:"timestamp"`
	UserAgent string `json:"userAgent,omitempty"`
	IP        string `json:"ip,omitempty"`
}

// ClickData is a click's: its url always ("" when SES gave none), as upstream sends it.
type ClickData struct {
	Timestamp string `json:"timestamp"`
	URL       string `json:"url"`
	UserAgent string `json:"userAgent,omitempty"`
	IP        string `json:"ip,omitempty"`
}

// bounceSubTypes are the subtypes a bounce's webhook data names (upstream's, the SDK's type).
var bounceSubTypes = map[string]bool{"General": true, "NoEmail": true, "Suppressed": true, "OnAccountSuppressionList": true,
	"MailboxFull": true, "MessageTooLarge": true, "ContentRejected": true, "AttachmentRejected": true}

// bounceSubType is SES's subtype as the webhook names it: without spaces, and General for one
// outside the list (SES's Undetermined), as upstream's normalizeBounceSubType.
func bounceSubType(s string) string {
	s = strings.Join(strings.Fields(s), "")
	if bounceSubTypes[s] {
		return s
	}
	return "General"
}

// metadataKeys are the fields of SES's event data that go into metadata, by status.
var metadataKeys = map[string][]string{
	"COMPLAINED":        {"complaintFeedbackType:feedbackType", "userAgent"},
	"OPENED":            {"ipAddress", "userAgent"},
	"CLICKED":           {"ipAddress", "userAgent", "link"},
	"RENDERING_FAILURE": {"errorMessage", "templateName"},
	"DELIVERY_DELAYED":  {"delayType", "expirationTime", "delayedRecipients"},
	"REJECTED":          {"reason"},
}

// metadata is upstream's metadata of an event of that status from SES's data (nil: none).
func metadata(status string, raw map[string]any) map[string]any {
	out := map[string]any{}
	if status == "BOUNCED" {
		for _, k := range []string{"bounceType", "bounceSubType"} {
			if v, ok := raw[k]; ok {
				out[k] = v
			}
		}
		if rs, _ := raw["bouncedRecipients"].([]any); len(rs) > 0 {
			if r, _ := rs[0].(map[string]any); r != nil && r["diagnosticCode"] != nil {
				out["diagnosticCode"] = r["diagnosticCode"]
			}
		}
	}
	for _, k := range metadataKeys[status] {
		from, to, renamed := strings.Cut(k, ":")
		if !renamed {
			to = from
		}
		if v, ok := raw[from]; ok {
			out[to] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
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
	d.Metadata = metadata(ev.Status, raw)
	// An open's or a click's own time, else the event's (upstream: else occurredAt).
	at := func() string {
		if t := str("timestamp"); t != "" {
			return t
		}
		return d.OccurredAt
	}
	switch ev.Status {
	case "BOUNCED":
		b := &BounceData{Type: str("bounceType"), SubType: bounceSubType(str("bounceSubType"))}
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
		d.Open = &EngagementData{Timestamp: at(), UserAgent: str("userAgent"), IP: str("ipAddress")}
	case "CLICKED":
		d.Click = &ClickData{Timestamp: at(), URL: str("link"), UserAgent: str("userAgent"), IP: str("ipAddress")}
	}
	return Event{TeamID: e.TeamID, DomainID: e.DomainID, Type: typ, At: ev.CreatedAt, Key: e.ID + "/" + ev.ID, Data: d}, true
}
