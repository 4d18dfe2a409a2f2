package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net/http"
	"strings"

	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/contact"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
)

// campaignView is a campaign as interface.md 2.5 and the OpenAPI document show it.
type campaignView struct {
	ID                 string   `json:"id"`
	Name               string   `json:"name"`
	From               string   `json:"from"`
	Subject            string   `json:"subject"`
	PreviewText        *string  `json:"previewText"`
	ContactBookID      *string  `json:"contactBookId"`
	HTML               *string  `json:"html"`
	Content            *string  `json:"content"`
	Status             string   `json:"status"`
	ScheduledAt        *string  `json:"scheduledAt"`
	BatchSize          int      `json:"batchSize"`
	BatchWindowMinutes int      `json:"batchWindowMinutes"`
	Total              int64    `json:"total"`
	Sent               int64    `json:"sent"`
	Delivered          int64    `json:"delivered"`
	Opened             int64    `json:"opened"`
	Clicked            int64    `json:"clicked"`
	Unsubscribed       int64    `json:"unsubscribed"`
	Bounced            int64    `json:"bounced"`
	HardBounced        int64    `json:"hardBounced"`
	Complained         int64    `json:"complained"`
	ReplyTo            []string `json:"replyTo"`
	CC                 []string `json:"cc"`
	BCC                []string `json:"bcc"`
	CreatedAt          string   `json:"createdAt"`
	UpdatedAt          string   `json:"updatedAt"`
	// PausedReason (Mailroom's own) says why Mailroom paused the campaign: its domain or
	// contact book is gone. Absent for a pause of the team's own.
	PausedReason string `json:"pausedReason,omitempty"`
}

func newCampaignView(c store.Campaign) campaignView {
	n := func(k string) int64 { return c.Counters[k] }
	return campaignView{
		ID: c.ID, Name: c.Name, From: c.From, Subject: c.Subject, PreviewText: nullable(c.PreviewText),
		ContactBookID: nullable(c.ContactBookID), HTML: nullable(c.HTML), Content: nullable(c.Content),
		Status: c.Status, ScheduledAt: tsPtr(c.ScheduledAt), BatchSize: c.BatchSize,
		BatchWindowMinutes: c.BatchWindowMinutes, Total: c.Total(), Sent: n(store.CountSent),
		Delivered: n(store.CountDelivered), Opened: n(store.CountOpened), Clicked: n(store.CountClicked),
		Unsubscribed: n(store.CountUnsubscribed), Bounced: n(store.CountBounced),
		HardBounced: n(store.CountHardBounced), Complained: n(store.CountComplained),
		ReplyTo: list(c.ReplyTo), CC: list(c.CC), BCC: list(c.BCC),
		CreatedAt: ts(c.CreatedAt), UpdatedAt: ts(c.UpdatedAt), PausedReason: c.PausedReason,
	}
}

// campaignItem is an element of GET /campaigns.
type campaignItem struct {
	ID           string  `json:"id"`
	Name         string  `json:"name"`
	From         string  `json:"from"`
	Subject      string  `json:"subject"`
	CreatedAt    string  `json:"createdAt"`
	UpdatedAt    string  `json:"updatedAt"`
	Status       string  `json:"status"`
	ScheduledAt  *string `json:"scheduledAt"`
	Total        int64   `json:"total"`
	Sent         int64   `json:"sent"`
	Delivered    int64   `json:"delivered"`
	Unsubscribed int64   `json:"unsubscribed"`
}

// addresses decodes a string or an array of strings (replyTo, cc, bcc of a campaign).
func addresses(raw json.RawMessage, field string) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err != nil {
		return nil, fault.Field(field, "must be a string or an array of strings")
	}
	return []string{one}, nil
}

func (s *Services) createCampaign(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r, maxCampaignBody)
	if err != nil {
		return err
	}
	var in struct {
		Name               string          `json:"name"`
		From               string          `json:"from"`
		Subject            string          `json:"subject"`
		PreviewText        string          `json:"previewText"`
		ContactBookID      string          `json:"contactBookId"`
		Content            string          `json:"content"`
		HTML               string          `json:"html"`
		ReplyTo            json.RawMessage `json:"replyTo"`
		CC                 json.RawMessage `json:"cc"`
		BCC                json.RawMessage `json:"bcc"`
		SendNow            bool            `json:"sendNow"`
		ScheduledAt        *string         `json:"scheduledAt"`
		BatchSize          *int            `json:"batchSize"`
		BatchWindowMinutes int             `json:"batchWindowMinutes"`
	}
	if err := decodeKnown(body, &in); err != nil {
		return err
	}
	scheduledAt, err := optionalTime(in.ScheduledAt)
	if err != nil {
		return err
	}
	batchSize, err := batchSizeOf(in.BatchSize)
	if err != nil {
		return err
	}
	req := campaign.Request{Name: in.Name, From: in.From, Subject: in.Subject, PreviewText: in.PreviewText,
		ContactBookID: in.ContactBookID, HTML: in.HTML, Content: in.Content, SendNow: in.SendNow,
		ScheduledAt: scheduledAt, BatchSize: batchSize, BatchWindowMinutes: in.BatchWindowMinutes,
		KeyDomain: principal(r).DomainID}
	if req.ReplyTo, err = addresses(in.ReplyTo, "replyTo"); err != nil {
		return err
	}
	if req.CC, err = addresses(in.CC, "cc"); err != nil {
		return err
	}
	if req.BCC, err = addresses(in.BCC, "bcc"); err != nil {
		return err
	}
	c, err := s.Campaigns.Create(r.Context(), principal(r).TeamID, req, s.Contacts)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newCampaignView(c))
	return nil
}

func (s *Services) listCampaigns(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	page, err := pageOf(r)
	if err != nil {
		return err
	}
	list, pages, err := s.Campaigns.List(r.Context(), principal(r).TeamID, principal(r).DomainID, page, q.Get("status"), q.Get("search"))
	if err != nil {
		return err
	}
	out := make([]campaignItem, len(list))
	for i, c := range list {
		v := newCampaignView(c)
		out[i] = campaignItem{ID: v.ID, Name: v.Name, From: v.From, Subject: v.Subject, CreatedAt: v.CreatedAt,
			UpdatedAt: v.UpdatedAt, Status: v.Status, ScheduledAt: v.ScheduledAt, Total: v.Total, Sent: v.Sent,
			Delivered: v.Delivered, Unsubscribed: v.Unsubscribed}
	}
	writeJSON(w, http.StatusOK, map[string]any{"campaigns": out, "totalPage": pages})
	return nil
}

// campaignID is the campaign of the path, once the caller may see it: a key restricted to a
// domain sees the campaigns of that domain only (another is not found).
func (s *Services) campaignID(r *http.Request) (string, error) {
	id, err := pathID(r, "campaignId", "Campaign")
	if err != nil {
		return "", err
	}
	if p := principal(r); p.DomainID != 0 {
		c, err := s.Campaigns.Get(r.Context(), p.TeamID, id)
		if err != nil {
			return "", err
		}
		if c.DomainID != p.DomainID {
			return "", fault.NotFoundf("Campaign not found")
		}
	}
	return id, nil
}

func (s *Services) getCampaign(w http.ResponseWriter, r *http.Request) error {
	id, err := s.campaignID(r)
	if err != nil {
		return err
	}
	c, err := s.Campaigns.Get(r.Context(), principal(r).TeamID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newCampaignView(c))
	return nil
}

func (s *Services) deleteCampaign(w http.ResponseWriter, r *http.Request) error {
	id, err := s.campaignID(r)
	if err != nil {
		return err
	}
	c, err := s.Campaigns.Delete(r.Context(), principal(r).TeamID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newCampaignView(c))
	return nil
}

// batchSizeOf is a body's batchSize: 0 when it is absent or null (the default, or the
// campaign's own on schedule); given, it is from 1 to campaign.MaxBatchSize.
func batchSizeOf(v *int) (int, error) {
	if v == nil {
		return 0, nil
	}
	if err := campaign.CheckBatchSize(*v); err != nil { // an explicit 0 too
		return 0, err
	}
	return *v, nil
}

func (s *Services) scheduleCampaign(w http.ResponseWriter, r *http.Request) error {
	id, err := s.campaignID(r)
	if err != nil {
		return err
	}
	body, err := readBody(w, r, maxSmallBody)
	if err != nil {
		return err
	}
	// sendNow is not in upstream's OpenAPI but in its SDKs' types (the Python SDK's
	// CampaignSchedule); upstream's validator drops it and starts now, so true starts now
	// here too and wins over scheduledAt, as on create.
	var in struct {
		SendNow     bool    `json:"sendNow"`
		ScheduledAt *string `json:"scheduledAt"`
		BatchSize   *int    `json:"batchSize"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeKnown(body, &in); err != nil {
			return err
		}
	}
	scheduledAt, err := optionalTime(in.ScheduledAt)
	if err != nil {
		return err
	}
	batchSize, err := batchSizeOf(in.BatchSize)
	if err != nil {
		return err
	}
	when := campaign.When{Now: in.SendNow || scheduledAt == ""}
	if !when.Now {
		at, err := s.Campaigns.ParseTime(scheduledAt, s.Campaigns.Now())
		if err != nil {
			return err
		}
		when.At = &at
	}
	if err := s.Campaigns.Schedule(r.Context(), principal(r).TeamID, id, when, batchSize); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}

func (s *Services) pauseCampaign(w http.ResponseWriter, r *http.Request) error {
	id, err := s.campaignID(r)
	if err != nil {
		return err
	}
	if err := s.Campaigns.Pause(r.Context(), principal(r).TeamID, id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}

func (s *Services) resumeCampaign(w http.ResponseWriter, r *http.Request) error {
	id, err := s.campaignID(r)
	if err != nil {
		return err
	}
	if err := s.Campaigns.Resume(r.Context(), principal(r).TeamID, id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}

// The unsubscribe pages are HTML for people, not JSON: GET only shows a confirmation form,
// so link scanners that follow the URL unsubscribe nobody; the form (and a mail client's
// RFC 8058 one-click POST) unsubscribes.
type page struct {
	Title, Text string
	Form        bool
	Button      string // the form's button ("Unsubscribe" when empty)
}

// writePage writes the page of a link in a mailbox (unsubscribe, confirm a subscription). It is built with html.EscapeString rather than
// html/template: a binary that links a template package keeps every exported method of every
// type (templates call methods by name), which doubles each Lambda function's size and the
// time it takes to start.
func writePage(w http.ResponseWriter, status int, p page) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// Not framed by another site (its button would be clicked through a decoy), nothing loaded,
	// and the token in the URL not handed on as a referrer.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	title, text := html.EscapeString(p.Title), html.EscapeString(p.Text)
	form := ""
	if p.Form {
		button := p.Button
		if button == "" {
			button = "Unsubscribe"
		}
		form = `<form method="post"><button type="submit" style="font-size:1.1rem;padding:.6rem 1.4rem">` + html.EscapeString(button) + `</button></form>` + "\n"
	}
	_, _ = io.WriteString(w, `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>`+title+`</title></head>
<body style="font-family:sans-serif;max-width:32rem;margin:4rem auto;text-align:center">
<h1>`+title+`</h1><p>`+text+`</p>
`+form+`</body></html>`)
}

func (s *Services) unsubscribeForm(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.Campaigns.UnsubscribeLink(r.Context(), r.PathValue("token")); errors.Is(err, campaign.ErrBadToken) {
		writePage(w, http.StatusNotFound, page{Title: "Link not valid", Text: "This unsubscribe link is not valid."})
		return nil
	} else if err != nil {
		return err // the keys could not be read: a 500, not a link called invalid
	}
	writePage(w, http.StatusOK, page{Title: "Unsubscribe", Text: "Stop receiving these emails?", Form: true})
	return nil
}

func (s *Services) unsubscribe(w http.ResponseWriter, r *http.Request) error {
	_, err := s.Campaigns.Unsubscribe(r.Context(), r.PathValue("token"))
	switch {
	case errors.Is(err, campaign.ErrBadToken):
		writePage(w, http.StatusNotFound, page{Title: "Link not valid", Text: "This unsubscribe link is not valid."})
		return nil
	case errors.Is(err, contact.ErrLinkBeforeResubscribe):
		writePage(w, http.StatusOK, page{Title: "Still subscribed", Text: "This link is from an email sent before you subscribed again, so it does not unsubscribe you. Use the link in a newer email."})
		return nil
	case err != nil:
		if fe, ok := fault.As(err); ok && fe.Kind == fault.NotFound {
			writePage(w, http.StatusOK, page{Title: "Unsubscribed", Text: "You will not receive these emails any more."})
			return nil
		}
		return err
	}
	writePage(w, http.StatusOK, page{Title: "Unsubscribed", Text: "You will not receive these emails any more."})
	return nil
}

// confirmForm shows a double opt-in link's page: a button that confirms (a POST), so that a
// link scanner's GET subscribes nobody.
func (s *Services) confirmForm(w http.ResponseWriter, r *http.Request) error {
	_, err := s.Campaigns.ConfirmLink(r.Context(), r.PathValue("token"))
	if done, err := confirmationError(w, err); done {
		return err
	}
	writePage(w, http.StatusOK, page{Title: "Confirm your subscription", Text: "Confirm that you want to receive these emails.", Form: true, Button: "Confirm"})
	return nil
}

func (s *Services) confirm(w http.ResponseWriter, r *http.Request) error {
	subscribed, err := s.Campaigns.Confirm(r.Context(), r.PathValue("token"))
	if done, err := confirmationError(w, err); done {
		return err
	}
	if !subscribed {
		writePage(w, http.StatusOK, page{Title: "Not subscribed", Text: "This address unsubscribed after the link was sent, so the link does not subscribe it again."})
		return nil
	}
	writePage(w, http.StatusOK, page{Title: "Subscription confirmed", Text: "Thank you: you will receive these emails."})
	return nil
}

// confirmationError answers a confirmation link that failed with its page, and says whether it
// did; an error it returns is the request's (the keys could not be read: a 500, not a link
// called invalid).
func confirmationError(w http.ResponseWriter, err error) (bool, error) {
	fe, isFault := fault.As(err)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, campaign.ErrBadToken), isFault && fe.Kind == fault.NotFound:
		writePage(w, http.StatusNotFound, page{Title: "Link not valid", Text: "This confirmation link is not valid."})
	case errors.Is(err, campaign.ErrLinkExpired):
		writePage(w, http.StatusGone, page{Title: "Link expired", Text: "This confirmation link has expired. Sign up again to get a new one."})
	default:
		return true, err
	}
	return true, nil
}

// optionalTime is a scheduledAt that may be left out (or null), but not empty: "" from an empty
// form field would otherwise start at once, or leave a draft, with no word said.
func optionalTime(v *string) (string, error) {
	if v == nil {
		return "", nil
	}
	if strings.TrimSpace(*v) == "" {
		return "", fault.Field("scheduledAt", "must be a date-time (leave it out, or null, for none)")
	}
	return *v, nil
}
