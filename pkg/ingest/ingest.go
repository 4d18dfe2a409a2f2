// Package ingest records what the mail provider reports about sent emails. Every SES event
// (published through the configuration set to EventBridge on AWS, produced by the outbox
// mailer locally) goes through Ingester.Publish: it finds the email, appends the event to its
// history with SES's sub-object as data, advances latestStatus by rank, and puts hard-bounced
// and complaining addresses on the team's suppression list. A redelivered event is recorded once.
package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/metric"
	"github.com/mailroom/mailroom/pkg/sesevent"
	"github.com/mailroom/mailroom/pkg/store"
)

// Store is what ingestion needs from persistence.
type Store interface {
	store.Emails
	store.Suppressions
	// GetCampaignState finds a campaign email's contact book (store.Campaigns).
	GetCampaignState(ctx context.Context, teamID int64, id string) (store.Campaign, error)
}

// statusOf maps SES event types to email statuses (COMPAT.md).
var statusOf = map[string]string{
	"Send":              "SENT",
	"Delivery":          "DELIVERED",
	"Bounce":            "BOUNCED",
	"Complaint":         "COMPLAINED",
	"Reject":            "REJECTED",
	"Open":              "OPENED",
	"Click":             "CLICKED",
	"Rendering Failure": "RENDERING_FAILURE",
	"RenderingFailure":  "RENDERING_FAILURE",
	"DeliveryDelay":     "DELIVERY_DELAYED",
}

// ErrUnknownEmail: the event names no email Mailroom sent. Callers drop such events (they may
// come from sends made outside Mailroom through the same configuration set).
var ErrUnknownEmail = errors.New("events: email not found")

// Ingester records provider events.
type Ingester struct {
	Store Store
	Log   *slog.Logger
	Now   func() time.Time
	// Metrics counts the emails delivered, bounced and complained about (nil: none).
	Metrics metric.Counter
	// Contacts unsubscribes a campaign email's address after its hard bounce or complaint
	// (contact.Service; nil: nobody is unsubscribed, the address is only suppressed).
	Contacts Unsubscriber
}

// Unsubscriber unsubscribes every contact of a team with an address, and reports whether the
// campaign's own contact is now unsubscribed for that reason (contact.Service).
type Unsubscriber interface {
	UnsubscribeAddress(ctx context.Context, teamID int64, addr, reason, bookID, contactID string) (bool, error)
}

// eventMetric is the metric each recorded status counts in (once per event recorded: a
// redelivered event is not recorded again).
var eventMetric = map[string]string{
	"DELIVERED": metric.EmailsDelivered, "BOUNCED": metric.EmailsBounced, "COMPLAINED": metric.EmailsComplained,
}

// Publish records one event; it implements the outbox mailer's sink.
func (in *Ingester) Publish(ctx context.Context, ev sesevent.Event) error {
	status, ok := statusOf[ev.EventType]
	if !ok {
		in.Log.Warn("ignoring unknown SES event type", "eventType", ev.EventType)
		return nil
	}
	// Most events name their email (every send carries its id) and suppress no one: they go
	// straight to the update, which reads the email anyway (one read, not two). A bounce or a
	// complaint needs the email first, for its team's suppression list; and an id that names
	// no email is looked up by the provider's message id below (an email sent before the tag).
	var e store.Email
	var err error
	direct := false
	id := ev.EmailID()
	if reason, _ := suppression(ev); reason == "" && id != "" {
		e.ID, direct = id, true
	} else if e, err = in.find(ctx, ev); err != nil {
		return err
	}
	at := ev.Timestamp()
	if at.IsZero() {
		at = in.Now()
	}
	// Suppress before recording: once a caller can see BOUNCED or COMPLAINED, the address is
	// already on the list. Both steps are idempotent, so a retried event repeats them safely.
	if err := in.suppress(ctx, ev, e); err != nil {
		return err
	}
	// So are its contacts unsubscribed, for a campaign's email, as upstream does; the campaign
	// counts its recipient unsubscribed with the event.
	extra, err := in.unsubscribe(ctx, ev, e)
	if err != nil {
		return err
	}
	settled, teamID, err := in.record(ctx, ev, status, at, e.ID, extra)
	if errors.Is(err, store.ErrNotFound) && direct {
		if e, err = in.find(ctx, ev); err != nil {
			return err
		}
		settled, teamID, err = in.record(ctx, ev, status, at, e.ID, extra)
	}
	switch {
	case errors.Is(err, store.ErrDuplicateEvent), errors.Is(err, errAlreadyRecorded):
		return nil
	case err != nil:
		return fmt.Errorf("record %s for %s: %w", status, e.ID, err)
	}
	in.Log.Info("email event", "emailId", e.ID, "teamId", teamID, "status", status, "settled", settled)
	if settled {
		metric.Add(ctx, in.Metrics, metric.EmailsSent, 1)
	}
	if name, ok := eventMetric[status]; ok {
		metric.Add(ctx, in.Metrics, name, 1)
	}
	return nil
}

// suppression is what an event puts on the suppression list: a hard bounce's recipients, or a
// complaint's; reason is "" for any other event.
func suppression(ev sesevent.Event) (reason string, addrs []string) {
	switch {
	case ev.Bounce != nil && ev.Bounce.BounceType == "Permanent":
		for _, r := range ev.Bounce.BouncedRecipients {
			addrs = append(addrs, r.EmailAddress)
		}
		return store.ReasonHardBounce, addrs
	case ev.Complaint != nil:
		for _, r := range ev.Complaint.ComplainedRecipients {
			addrs = append(addrs, r.EmailAddress)
		}
		return store.ReasonComplaint, addrs
	}
	return "", nil
}

// record writes the event into the email's history (UpdateEmail). settled reports that SES's
// evidence made the email SENT; teamID is the email's team.
func (in *Ingester) record(ctx context.Context, ev sesevent.Event, status string, at time.Time, id string, extra []string) (settled bool, teamID int64, err error) {
	detail := ev.Detail()
	rec := store.Event{ID: eventID(ev.EventType, ev.Mail.MessageID, detail), EmailID: id,
		Status: status, CreatedAt: at.UTC(), Data: detail}
	_, err = in.Store.UpdateEmail(ctx, id, func(e *store.Email) ([]store.Event, error) {
		settled = false // this may run more than once
		teamID = e.TeamID
		if status == "SENT" && e.Status == store.StatusSent && e.LatestStatus != "" {
			// The worker recorded SENT itself when SES accepted the message; SES's own Send
			// event adds nothing but would double the history entry.
			return nil, errAlreadyRecorded
		}
		now := in.Now().UTC()
		events := []store.Event{rec}
		kinds := append(counterKinds(status, ev), extra...)
		if acceptance[status] && unsettled(e.Status) {
			// SES accepted the message: its evidence wins over whatever the worker knows or
			// did not get to record (it died after SES answered, its outcome write failed, or
			// an ambiguous error made it give up). The email is SENT with SES's message id, its
			// claim is cleared (the worker's late outcome is then not recorded, and the
			// reconciler never sends it again) and it is counted sent once.
			settled = true
			if e.LatestStatus == store.StatusFailed {
				e.LatestStatus = store.StatusQueued // FAILED was the worker's guess, not SES's
			}
			if err := email.Move(e, store.StatusSent, email.BySES, now); err != nil {
				return nil, err
			}
			if e.MessageID == "" {
				e.MessageID = ev.Mail.MessageID
			}
			kinds = append(kinds, store.CountSent)
			data, _ := json.Marshal(map[string]string{"messageId": ev.Mail.MessageID, "source": "SES " + ev.EventType + " event"})
			sentAt := ev.Mail.Timestamp // when SES accepted the message
			if sentAt.IsZero() || sentAt.After(at) {
				sentAt = at
			}
			sent := store.Event{ID: SentEventID, EmailID: e.ID, Status: store.StatusSent, CreatedAt: sentAt.UTC(), Data: data}
			if status == "SENT" {
				events = []store.Event{sent} // the Send event is the email's one SENT entry
			} else {
				events = append([]store.Event{sent}, events...)
			}
		}
		e.LatestStatus = email.Advance(e.LatestStatus, status)
		e.UpdatedAt = now
		// The store counts each kind once per email (recipient): the day's analytics of its
		// team and domain, and its campaign's counters.
		for _, k := range kinds {
			if !slices.Contains(e.Counted, k) {
				e.Counted = append(e.Counted, k)
			}
		}
		return events, nil
	})
	return settled, teamID, err
}

var errAlreadyRecorded = errors.New("already recorded")

// SentEventID is the id of an email's one SENT history entry, whoever records it first: the
// worker when SES answers it, or SES's own evidence when the worker could not record it. A
// second recording of it is a duplicate and is dropped.
const SentEventID = "1-SENT"

// acceptance are the statuses whose SES events prove that SES accepted the message.
var acceptance = map[string]bool{"SENT": true, "DELIVERED": true, "BOUNCED": true, "COMPLAINED": true}

// unsettled reports whether an email's own status does not yet say it was sent: queued, being
// sent (possibly by a worker that died), or failed on an ambiguous answer.
func unsettled(status string) bool {
	return status == store.StatusQueued || status == store.StatusSending || status == store.StatusFailed
}

func (in *Ingester) find(ctx context.Context, ev sesevent.Event) (store.Email, error) {
	if id := ev.EmailID(); id != "" {
		e, err := in.Store.GetEmail(ctx, id)
		if err == nil {
			return e, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return store.Email{}, fmt.Errorf("get email: %w", err)
		}
	}
	if ev.Mail.MessageID != "" {
		e, err := in.Store.FindEmailByMessageID(ctx, ev.Mail.MessageID)
		if err == nil {
			return e, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return store.Email{}, fmt.Errorf("find email by message id: %w", err)
		}
	}
	return store.Email{}, ErrUnknownEmail
}

// suppress puts the addresses of a hard bounce or a complaint on the team's list.
func (in *Ingester) suppress(ctx context.Context, ev sesevent.Event, e store.Email) error {
	reason, addrs := suppression(ev)
	for _, a := range addrs {
		s := store.Suppression{TeamID: e.TeamID, Email: strings.ToLower(email.AddressOnly(a)),
			Reason: reason, EmailID: e.ID, CreatedAt: in.Now().UTC()}
		if err := in.Store.PutSuppression(ctx, s); err != nil {
			return fmt.Errorf("suppress: %w", err)
		}
	}
	return nil
}

// unsubscribe unsubscribes the contacts of a campaign email's address after a hard bounce or a
// complaint, and returns the counter kinds that adds to the email (unsubscribed, when its own
// contact is unsubscribed for it).
func (in *Ingester) unsubscribe(ctx context.Context, ev sesevent.Event, e store.Email) ([]string, error) {
	reason, addrs := suppression(ev)
	if in.Contacts == nil || e.CampaignID == "" || reason == "" {
		return nil, nil
	}
	why := store.UnsubscribeBounced
	if reason == store.ReasonComplaint {
		why = store.UnsubscribeComplained
	}
	bookID := ""
	switch c, err := in.Store.GetCampaignState(ctx, e.TeamID, e.CampaignID); {
	case err == nil:
		bookID = c.ContactBookID
	case !errors.Is(err, store.ErrNotFound): // a deleted campaign: its address's contacts still go
		return nil, fmt.Errorf("unsubscribe: %w", err)
	}
	counted := false
	for _, a := range addrs {
		c, err := in.Contacts.UnsubscribeAddress(ctx, e.TeamID, a, why, bookID, e.ContactID)
		if err != nil {
			return nil, fmt.Errorf("unsubscribe: %w", err)
		}
		counted = counted || c
	}
	if counted {
		return []string{store.CountUnsubscribed}, nil
	}
	return nil, nil
}

// eventID identifies an event by its content, so a redelivery maps to the same ID.
func eventID(eventType, messageID string, detail []byte) string {
	h := sha256.New()
	h.Write([]byte(eventType + "\x00" + messageID + "\x00"))
	h.Write(detail)
	return "ses-" + hex.EncodeToString(h.Sum(nil))[:24]
}

// counterKinds are the counters (analytics, campaign) an event of status counts for.
func counterKinds(status string, ev sesevent.Event) []string {
	switch status {
	case "DELIVERED":
		return []string{store.CountDelivered}
	case "OPENED":
		return []string{store.CountOpened}
	case "CLICKED":
		return []string{store.CountClicked}
	case "COMPLAINED":
		return []string{store.CountComplained}
	case "BOUNCED":
		if ev.Bounce != nil && ev.Bounce.BounceType == "Permanent" {
			return []string{store.CountBounced, store.CountHardBounced}
		}
		return []string{store.CountBounced}
	}
	return nil
}
