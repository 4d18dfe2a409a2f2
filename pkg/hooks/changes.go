package hooks

import (
	"cmp"
	"reflect"
	"time"

	"github.com/mailroom/mailroom/pkg/jsonout"
	"github.com/mailroom/mailroom/pkg/store"
)

// stamp formats a record's times as the API does.
func stamp(t time.Time) string { return jsonout.Time(t) }

// ContactData is the data of a contact.* event (COMPAT.md).
type ContactData struct {
	ID            string            `json:"id"`
	Email         string            `json:"email"`
	ContactBookID string            `json:"contactBookId"`
	Subscribed    bool              `json:"subscribed"`
	Properties    map[string]string `json:"properties"`
	FirstName     *string           `json:"firstName"` // null when unset, as upstream sends it
	LastName      *string           `json:"lastName"`
	CreatedAt     string            `json:"createdAt"`
	UpdatedAt     string            `json:"updatedAt"`
}

// orNull is s, or nil (JSON null) when it is empty.
func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func contactData(c *store.Contact) ContactData {
	d := ContactData{ID: c.ID, Email: c.Email, ContactBookID: c.BookID, Subscribed: c.Subscribed, Properties: c.Properties,
		FirstName: orNull(c.FirstName), LastName: orNull(c.LastName), CreatedAt: stamp(c.CreatedAt), UpdatedAt: stamp(c.UpdatedAt)}
	if d.Properties == nil {
		d.Properties = map[string]string{}
	}
	return d
}

// DomainData is the data of a domain.* event (COMPAT.md).
type DomainData struct {
	ID            int64  `json:"id"`
	Name          string `json:"name"`
	Status        string `json:"status"`
	Region        string `json:"region"`
	CreatedAt     string `json:"createdAt"`
	UpdatedAt     string `json:"updatedAt"`
	ClickTracking bool   `json:"clickTracking"`
	OpenTracking  bool   `json:"openTracking"`
	// As upstream sends them: null when unset (its SES tenant, which Mailroom has none of,
	// always), and DKIM and SPF NOT_STARTED until the first check.
	Subdomain   *string `json:"subdomain"`
	SESTenantID *string `json:"sesTenantId"`
	DKIMStatus  string  `json:"dkimStatus"`
	SPFDetails  string  `json:"spfDetails"`
	DMARCAdded  bool    `json:"dmarcAdded"`
}

func domainData(d *store.Domain) DomainData {
	return DomainData{ID: d.ID, Name: d.Name, Status: d.Status, Region: d.Region, CreatedAt: stamp(d.CreatedAt),
		UpdatedAt: stamp(d.UpdatedAt), ClickTracking: d.ClickTracking, OpenTracking: d.OpenTracking,
		Subdomain: orNull(d.Subdomain), DKIMStatus: cmp.Or(d.DKIMStatus, store.DomainNotStarted),
		SPFDetails: cmp.Or(d.SPFDetails, store.DomainNotStarted), DMARCAdded: d.DMARCAdded}
}

// CampaignData is the data of a campaign.* event: the campaign's identity, what it sends to
// whom, and its status.
type CampaignData struct {
	ID            string  `json:"id"`
	Name          string  `json:"name"`
	Status        string  `json:"status"`
	From          string  `json:"from"`
	Subject       string  `json:"subject"`
	ContactBookID string  `json:"contactBookId"`
	DomainID      int64   `json:"domainId,omitempty"`
	ScheduledAt   *string `json:"scheduledAt,omitempty"`
	// PausedReason says why Mailroom paused it (its domain or book gone); absent otherwise.
	PausedReason string `json:"pausedReason,omitempty"`
	CreatedAt    string `json:"createdAt"`
	UpdatedAt    string `json:"updatedAt"`
}

func campaignData(c *store.Campaign) CampaignData {
	d := CampaignData{ID: c.ID, Name: c.Name, Status: c.Status, From: c.From, Subject: c.Subject,
		ContactBookID: c.ContactBookID, DomainID: c.DomainID, PausedReason: c.PausedReason,
		CreatedAt: stamp(c.CreatedAt), UpdatedAt: stamp(c.UpdatedAt)}
	if c.ScheduledAt != nil {
		s := stamp(*c.ScheduledAt)
		d.ScheduledAt = &s
	}
	return d
}

// campaignTypes are the campaign statuses whose arrival is an event. A campaign that resumes
// after a pause starts again: campaign.started.
var campaignTypes = map[string]string{
	store.CampaignRunning: "campaign.started", store.CampaignPaused: "campaign.paused", store.CampaignSent: "campaign.sent",
}

// ChangeEvent is the webhook event of a write to a contact, domain or campaign (ok false for a
// write that is none). key is unique to the write (a stream record's id, a feed entry's
// sequence): a write seen twice is one event, at the same time (the record's updatedAt, or c.At).
//
//   - contact: created, deleted, and updated when its event data changes;
//   - domain: created, deleted, verified when its status becomes SUCCESS, and updated when
//     its event data changes otherwise (not for a check that found nothing new);
//   - campaign: started, paused, sent when its status becomes RUNNING, PAUSED, SENT.
func ChangeEvent(c store.Change, key string) (Event, bool) {
	b, a := c.Before, c.After
	ev := Event{At: c.At, Key: key}
	switch {
	case b.Contact != nil || a.Contact != nil:
		ev.Type, ev.Data = lifecycle("contact", b.Contact, a.Contact, contactData)
		ev.TeamID = orOther(a.Contact, b.Contact).TeamID
		if a.Contact != nil {
			ev.At = a.Contact.UpdatedAt
		}
	case b.Domain != nil || a.Domain != nil:
		ev.Type, ev.Data = lifecycle("domain", b.Domain, a.Domain, domainData)
		if d := a.Domain; d != nil && d.Status == store.DomainSuccess && b.Domain != nil && b.Domain.Status != store.DomainSuccess {
			ev.Type = "domain.verified"
		}
		d := orOther(a.Domain, b.Domain)
		ev.TeamID, ev.DomainID = d.TeamID, d.ID
		if a.Domain != nil {
			ev.At = a.Domain.UpdatedAt
		}
	case a.Campaign != nil && b.Campaign != nil:
		typ, ok := campaignTypes[a.Campaign.Status]
		if !ok || a.Campaign.Status == b.Campaign.Status {
			return Event{}, false
		}
		ev.Type, ev.TeamID, ev.DomainID, ev.Data = typ, a.Campaign.TeamID, a.Campaign.DomainID, campaignData(a.Campaign)
		ev.At = a.Campaign.UpdatedAt
	}
	if ev.Type == "" {
		return Event{}, false
	}
	return ev, true
}

func orOther[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

// eventData is a record's event data, which can drop its updatedAt.
type eventData[D any] interface{ sansUpdate() D }

func (d ContactData) sansUpdate() ContactData { d.UpdatedAt = ""; return d }
func (d DomainData) sansUpdate() DomainData   { d.UpdatedAt = ""; return d }

// lifecycle is the created, updated or deleted event of a record with its data; "" for an
// update that changed none of the event's data but updatedAt.
func lifecycle[T any, D eventData[D]](kind string, before, after *T, data func(*T) D) (string, any) {
	switch {
	case before == nil:
		return kind + ".created", data(after)
	case after == nil:
		return kind + ".deleted", data(before)
	}
	was, is := data(before), data(after)
	if reflect.DeepEqual(was.sansUpdate(), is.sansUpdate()) {
		return "", nil
	}
	return kind + ".updated", is
}
