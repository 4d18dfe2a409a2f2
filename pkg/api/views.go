package api

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/mailroom/mailroom/pkg/jsonout"
	"github.com/mailroom/mailroom/pkg/store"
)

// timeFormat is how times go out: UTC with milliseconds, as JavaScript's toISOString writes
// them (the SDKs' users parse them with new Date()).
const timeFormat = jsonout.TimeFormat

func ts(t time.Time) string { return jsonout.Time(t) }

func tsPtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := ts(*t)
	return &s
}

// views maps records to their JSON views (never nil, so an empty list is [] not null).
func views[T, V any](in []T, view func(T) V) []V {
	out := make([]V, len(in))
	for i, x := range in {
		out[i] = view(x)
	}
	return out
}

func list(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// emailItem is an element of GET /emails.
type emailItem struct {
	ID           string   `json:"id"`
	To           []string `json:"to"`
	ReplyTo      []string `json:"replyTo"`
	CC           []string `json:"cc"`
	BCC          []string `json:"bcc"`
	From         string   `json:"from"`
	Subject      string   `json:"subject"`
	HTML         *string  `json:"html"`
	Text         *string  `json:"text"`
	CreatedAt    string   `json:"createdAt"`
	UpdatedAt    string   `json:"updatedAt"`
	LatestStatus string   `json:"latestStatus"`
	ScheduledAt  *string  `json:"scheduledAt"`
	DomainID     int64    `json:"domainId"`
	// HTMLOmitted and TextOmitted say that a body was left out (null) for its size: a list's
	// over its bounds (the whole email is at GET /emails/{id}), or a detail's over 4 MB.
	HTMLOmitted bool `json:"htmlOmitted,omitempty"`
	TextOmitted bool `json:"textOmitted,omitempty"`
}

// Response bounds, in encoded bytes (jsonout.QuotedLen): a listed body longer than maxListedBody is
// null (flagged), and a page's bodies come to at most maxListedPage in all (later ones are
// left out, flagged); an email's detail leaves out a body that would take it past
// maxDetailBytes. A response so stays under Lambda's 6 MB whatever the emails carry (HTTP
// sends a large one base64-encoded, 4/3 of its size, where its JSON escaping would cost more).
const (
	maxListedBody  = 64 << 10
	maxListedPage  = 2 << 20
	maxDetailBytes = 4 << 20
)

// listBudget leaves out of a list the bodies over the bounds above: one over maxListedBody, and
// every one past maxListedPage in all.
type listBudget struct{ left int }

func newListBudget() *listBudget { return &listBudget{left: maxListedPage} }

// keep returns p, or nil and true when it is left out.
func (b *listBudget) keep(p *string) (*string, bool) {
	if p == nil {
		return nil, false
	}
	if len(*p)+2 > min(maxListedBody, b.left) { // encoded it is at least that: no need to count
		return nil, true
	}
	n := jsonout.QuotedLen(*p, false)
	if n > maxListedBody || n > b.left {
		return nil, true
	}
	b.left -= n
	return p, false
}

// boundedItems makes the list items of emails, leaving out bodies over the bounds.
func boundedItems(emails []store.Email) []emailItem {
	out := make([]emailItem, len(emails))
	budget := newListBudget()
	for i, e := range emails {
		it := newEmailItem(e)
		it.HTML, it.HTMLOmitted = budget.keep(it.HTML)
		it.Text, it.TextOmitted = budget.keep(it.Text)
		if e.ContentOmitted {
			it.HTML, it.Text, it.HTMLOmitted, it.TextOmitted = nil, nil, true, true
		}
		out[i] = it
	}
	return out
}

func newEmailItem(e store.Email) emailItem {
	return emailItem{
		ID: e.ID, To: list(e.To), ReplyTo: list(e.ReplyTo), CC: list(e.CC), BCC: list(e.BCC),
		From: e.From, Subject: e.Subject, HTML: e.Content.HTML, Text: e.Content.Text,
		CreatedAt: ts(e.CreatedAt), UpdatedAt: ts(e.UpdatedAt), LatestStatus: e.LatestStatus,
		ScheduledAt: tsPtr(e.ScheduledAt), DomainID: e.DomainID,
	}
}

type eventView struct {
	EmailID   string          `json:"emailId"`
	Status    string          `json:"status"`
	CreatedAt string          `json:"createdAt"`
	Data      json.RawMessage `json:"data"`
	// DataOmitted says that the event's data was left out (null) for the detail's size: a
	// history of many large events (a click's link and user agent are the clicker's).
	DataOmitted bool `json:"dataOmitted,omitempty"`
}

// emailDetail is GET /emails/{id}: the list item plus teamId and the history.
type emailDetail struct {
	emailItem
	TeamID      int64       `json:"teamId"`
	EmailEvents []eventView `json:"emailEvents"`
}

func newEmailDetail(e store.Email, events []store.Event) emailDetail {
	d := emailDetail{emailItem: newEmailItem(e), TeamID: e.TeamID, EmailEvents: make([]eventView, len(events))}
	for i, ev := range events {
		data := json.RawMessage("null")
		if len(ev.Data) > 0 {
			data = ev.Data
		}
		d.EmailEvents[i] = eventView{EmailID: e.ID, Status: ev.Status, CreatedAt: ts(ev.CreatedAt), Data: data}
	}
	// The larger body goes first, then the other, while the detail is over its bound.
	size := func(p *string) int {
		if p == nil {
			return 0
		}
		return jsonout.QuotedLen(*p, false)
	}
	html, text := size(d.HTML), size(d.Text)
	rest := 64 << 10 // everything but the bodies, generously: headers of the answer, ids, dates
	for _, ev := range d.EmailEvents {
		rest += len(ev.Data) + 128
	}
	if rest+html+text > maxDetailBytes && html >= text && html > 0 {
		d.HTML, d.HTMLOmitted, html = nil, true, 0
	}
	if rest+html+text > maxDetailBytes && text > 0 {
		d.Text, d.TextOmitted, text = nil, true, 0
	}
	if rest+html+text > maxDetailBytes && html > 0 {
		d.HTML, d.HTMLOmitted, html = nil, true, 0
	}
	// Still over (the events themselves): their data goes, the largest first.
	if rest+html+text > maxDetailBytes {
		order := make([]int, len(d.EmailEvents))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return len(d.EmailEvents[b].Data) - len(d.EmailEvents[a].Data) })
		for _, i := range order {
			if rest+html+text <= maxDetailBytes {
				break
			}
			ev := &d.EmailEvents[i]
			rest -= len(ev.Data) - len("null")
			ev.Data, ev.DataOmitted = json.RawMessage("null"), true
		}
	}
	return d
}

// domainView is a domain as the API shows it: never the private key.
type domainView struct {
	ID                int64             `json:"id"`
	Name              string            `json:"name"`
	TeamID            int64             `json:"teamId"`
	Status            string            `json:"status"`
	Region            string            `json:"region"`
	ClickTracking     bool              `json:"clickTracking"`
	OpenTracking      bool              `json:"openTracking"`
	PublicKey         string            `json:"publicKey"`
	DKIMStatus        *string           `json:"dkimStatus"`
	SPFDetails        *string           `json:"spfDetails"`
	CreatedAt         string            `json:"createdAt"`
	UpdatedAt         string            `json:"updatedAt"`
	DMARCAdded        bool              `json:"dmarcAdded"`
	IsVerifying       bool              `json:"isVerifying"`
	ErrorMessage      *string           `json:"errorMessage"`
	Subdomain         *string           `json:"subdomain"`
	VerificationError *string           `json:"verificationError"`
	LastCheckedTime   *string           `json:"lastCheckedTime"`
	DNSRecords        []store.DNSRecord `json:"dnsRecords"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func newDomainView(d store.Domain) domainView {
	recs := d.DNSRecords
	if recs == nil {
		recs = []store.DNSRecord{}
	}
	return domainView{
		ID: d.ID, Name: d.Name, TeamID: d.TeamID, Status: d.Status, Region: d.Region,
		ClickTracking: d.ClickTracking, OpenTracking: d.OpenTracking, PublicKey: d.PublicKey,
		DKIMStatus: nullable(d.DKIMStatus), SPFDetails: nullable(d.SPFDetails),
		CreatedAt: ts(d.CreatedAt), UpdatedAt: ts(d.UpdatedAt), DMARCAdded: d.DMARCAdded,
		IsVerifying: d.IsVerifying, ErrorMessage: nullable(d.ErrorMessage),
		Subdomain: nullable(d.Subdomain), VerificationError: nullable(d.VerificationError),
		LastCheckedTime: tsPtr(d.LastCheckedTime), DNSRecords: recs,
	}
}

type templateView struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Subject   string `json:"subject"`
	HTML      string `json:"html"`
	Text      string `json:"text"`
	CreatedAt string `json:"createdAt"`
	UpdatedAt string `json:"updatedAt"`
}

func newTemplateView(t store.Template) templateView {
	return templateView{ID: t.ID, Name: t.Name, Subject: t.Subject, HTML: t.HTML, Text: t.Text,
		CreatedAt: ts(t.CreatedAt), UpdatedAt: ts(t.UpdatedAt)}
}

// templateItem is a template in GET /templates: its html or text is null, flagged, past the
// list's bounds (as an email's in GET /emails); the whole template is at GET /templates/{id}.
type templateItem struct {
	templateView
	HTML        *string `json:"html"` // in place of templateView's
	Text        *string `json:"text"`
	HTMLOmitted bool    `json:"htmlOmitted,omitempty"`
	TextOmitted bool    `json:"textOmitted,omitempty"`
}

// boundedTemplates makes the list items of templates, leaving out bodies over the bounds.
func boundedTemplates(list []store.Template) []templateItem {
	out := make([]templateItem, len(list))
	budget := newListBudget()
	for i, t := range list {
		it := templateItem{templateView: newTemplateView(t)}
		it.HTML, it.HTMLOmitted = budget.keep(&t.HTML)
		it.Text, it.TextOmitted = budget.keep(&t.Text)
		out[i] = it
	}
	return out
}
