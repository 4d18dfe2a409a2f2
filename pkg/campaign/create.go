package campaign

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mailroom/mailroom/pkg/contact"
	"github.com/mailroom/mailroom/pkg/editor"
	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/template"
)

// Request is a validated create request.
type Request struct {
	Name, From, Subject, PreviewText, ContactBookID, HTML, Content string
	ReplyTo, CC, BCC                                               []string
	SendNow                                                        bool
	ScheduledAt                                                    string
	BatchSize                                                      int
	BatchWindowMinutes                                             int
	// KeyDomain is the domain the caller's API key is restricted to (0: any): the campaign
	// must send from it.
	KeyDomain int64
}

// MaxHTMLBytes caps a campaign's html (and content): every recipient's email is rendered from
// it, so its size is paid once per contact.
const MaxHTMLBytes = 512 << 10

// validate checks what needs no store.
func (r *Request) validate() error {
	for _, f := range []struct{ name, v string }{{"name", r.Name}, {"from", r.From}, {"subject", r.Subject}, {"contactBookId", r.ContactBookID}} {
		if strings.TrimSpace(f.v) == "" {
			return fault.Field(f.name, "is required")
		}
	}
	switch {
	case len(r.Name) > 200:
		return fault.Field("name", "at most 200 bytes")
	case len(r.Subject) > email.MaxSubjectBytes:
		return fault.Field("subject", "at most %d bytes", email.MaxSubjectBytes)
	case strings.ContainsAny(r.Subject, "\r\n"):
		return fault.Field("subject", "must not contain line breaks")
	}
	if template.HasControl(r.Subject) {
		return fault.Field("subject", "must not contain control characters")
	}
	from, err := email.ParseAddress(r.From)
	if err != nil {
		return email.AddressError("from", r.From, err)
	}
	r.From = from
	if r.HTML == "" && r.Content == "" {
		return fault.Field("html", "html or content is required")
	}
	if len(r.HTML) > MaxHTMLBytes {
		return fault.Field("html", "at most %d KB", MaxHTMLBytes>>10)
	}
	if len(r.Content) > MaxHTMLBytes {
		return fault.Field("content", "at most %d KB", MaxHTMLBytes>>10)
	}
	if n := 1 + len(r.CC) + len(r.BCC) + len(r.ReplyTo); n > email.MaxRecipients {
		// Every recipient's email carries the campaign's cc, bcc and reply-to as well.
		return fault.Field("cc", "the contact, cc, bcc and replyTo together are at most %d addresses (%d)", email.MaxRecipients, n)
	}
	field := "html"
	if editor.IsDocument(r.Content) {
		// The email editor's document, as useSend's SDKs send it: rendered once here, and the
		// html it gives is the campaign's (it wins over an html given with it, as in useSend).
		html, err := editor.Render(r.Content)
		if err != nil {
			return fault.Field("content", "%v", err)
		}
		if len(html) > MaxHTMLBytes {
			return fault.Field("content", "renders to more than %d KB of html", MaxHTMLBytes>>10)
		}
		r.HTML, field = html, "content"
	}
	body := r.HTML
	if body == "" {
		body, field = r.Content, "content"
	}
	if !HasUnsubscribe(body) {
		return fault.Field(field, "must contain the unsubscribe link placeholder {{usesend_unsubscribe_url}}")
	}
	if r.BatchSize == 0 {
		r.BatchSize = DefaultBatchSize
	}
	if err := CheckBatchSize(r.BatchSize); err != nil {
		return err
	}
	if r.BatchWindowMinutes < 0 || r.BatchWindowMinutes > MaxWindowMinutes {
		return fault.Field("batchWindowMinutes", "must be from 0 to %d", MaxWindowMinutes)
	}
	for field, list := range map[string][]string{"replyTo": r.ReplyTo, "cc": r.CC, "bcc": r.BCC} {
		for i, a := range list {
			norm, err := email.ParseAddress(a)
			if err != nil {
				return email.AddressError(fmt.Sprintf("%s[%d]", field, i), a, err)
			}
			list[i] = norm
		}
	}
	return nil
}

// Create validates and stores a campaign; with sendNow or scheduledAt it also starts it (sendNow
// wins). A campaign that cannot start (no subscribed contact) is refused and nothing is stored.
func (s *Service) Create(ctx context.Context, teamID int64, r Request, books Books) (store.Campaign, error) {
	if err := r.validate(); err != nil {
		return store.Campaign{}, err
	}
	now := s.Now().UTC()
	var w When
	switch {
	case r.SendNow:
		w.Now = true
	case r.ScheduledAt != "":
		at, err := s.ParseTime(r.ScheduledAt, now)
		if err != nil {
			return store.Campaign{}, err
		}
		w.At = &at
	}
	name := email.DomainOf(r.From)
	dom, err := s.Domains.Lookup(ctx, teamID, name)
	if errors.Is(err, store.ErrNotFound) || (err == nil && dom.Status != store.DomainSuccess) {
		return store.Campaign{}, fault.Field("from", "domain %s is not a verified domain of this team", name)
	}
	if err != nil {
		return store.Campaign{}, err
	}
	if r.KeyDomain != 0 && dom.ID != r.KeyDomain {
		return store.Campaign{}, fault.New(fault.Forbidden, "from: this API key may only send from its own domain")
	}
	if _, err := books.Book(ctx, teamID, r.ContactBookID); err != nil {
		if fe, ok := fault.As(err); ok && fe.Kind == fault.NotFound {
			return store.Campaign{}, fault.Field("contactBookId", "contact book %s not found", r.ContactBookID)
		}
		return store.Campaign{}, err
	}
	c := store.Campaign{
		ID: contact.NewID("cp"), TeamID: teamID, DomainID: dom.ID, Name: r.Name, From: r.From,
		Subject: r.Subject, PreviewText: r.PreviewText, ContactBookID: r.ContactBookID, HTML: r.HTML,
		Content: r.Content, ReplyTo: r.ReplyTo, CC: r.CC, BCC: r.BCC, Status: store.CampaignDraft,
		BatchSize: r.BatchSize, BatchWindowMinutes: r.BatchWindowMinutes, Counters: map[string]int64{},
		CreatedAt: now, UpdatedAt: now,
	}
	starting := w.Now || w.At != nil
	if starting {
		if err := s.checkAudience(ctx, c); err != nil {
			return store.Campaign{}, err
		}
	}
	if err := s.Store.CreateCampaign(ctx, c); err != nil {
		return store.Campaign{}, fmt.Errorf("create campaign: %w", err)
	}
	if starting {
		if err := s.Schedule(ctx, teamID, c.ID, w, 0); err != nil {
			// Leave nothing behind: the caller sees the error and no half-made campaign.
			_ = s.Store.DeleteCampaign(context.WithoutCancel(ctx), teamID, c.ID)
			return store.Campaign{}, err
		}
	}
	return s.Get(ctx, teamID, c.ID)
}

// Books reads contact books (contact.Service).
type Books interface {
	Book(ctx context.Context, teamID int64, id string) (store.ContactBook, error)
}
