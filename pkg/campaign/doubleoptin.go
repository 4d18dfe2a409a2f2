package campaign

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mailroom/mailroom/pkg/contact"
	"github.com/mailroom/mailroom/pkg/editor"
	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/metric"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/template"
)

// ConfirmFor is how long a double opt-in confirmation link works.
const ConfirmFor = 7 * 24 * time.Hour

// DoubleOptIn sends the confirmation emails of contacts added to a book with double opt-in
// (contact.Confirmations). Each is an ordinary email of the team (listed, with its history and
// webhooks), from the book's doubleOptInFrom or else hello@ the team's oldest verified domain,
// with the book's subject and content: {{doubleOptInUrl}} is the contact's signed confirmation
// link (working for ConfirmFor), and {{email}}, {{firstName}} and {{lastName}} are the
// contact's.
type DoubleOptIn struct {
	Store      Store
	Domains    Domains
	Signer     Signer
	Dispatcher email.Dispatcher
	Now        func() time.Time
	Metrics    metric.Counter
}

type publicURLKey struct{}

// WithPublicURL says at what address the API is reached, for the links of what ctx writes when
// the service has no configured one (an API function on AWS: the address its request came to).
func WithPublicURL(ctx context.Context, url string) context.Context {
	return context.WithValue(ctx, publicURLKey{}, url)
}

func publicURL(ctx context.Context) string {
	u, _ := ctx.Value(publicURLKey{}).(string)
	return u
}

type idempotencyKeyKey struct{}

// WithIdempotencyKey names the request that writes what ctx writes (by its Idempotency-Key's
// nonce, email.Service.KeyNonce): its confirmation emails then have ids made from it and the
// contact (confirmationID), so a retry of the request finds them written and mails no contact
// twice.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyKey{}, key)
}

// confirmationID is the id of the confirmation email of contact ctID in book bookID: random,
// or, for a request with an Idempotency-Key, the same for every retry of it.
func confirmationID(ctx context.Context, teamID int64, bookID, ctID string) string {
	key, _ := ctx.Value(idempotencyKeyKey{}).(string)
	if key == "" {
		return contact.NewID("em")
	}
	return derivedEmailID("confirm", strconv.FormatInt(teamID, 10), bookID, ctID, key)
}

// ErrNoSendingDomain: the team has no verified domain to send a confirmation from.
var ErrNoSendingDomain = errors.New("double opt-in needs a verified domain to send from")

// SendConfirmations writes one confirmation email per contact, and hands them to delivery.
func (d *DoubleOptIn) SendConfirmations(ctx context.Context, book store.ContactBook, contacts []store.Contact) error {
	if len(contacts) == 0 {
		return nil
	}
	if err := d.Signer.Ready(ctx); err != nil {
		return err
	}
	signer := d.Signer
	if signer.BaseURL == "" {
		signer.BaseURL = publicURL(ctx)
	}
	if signer.BaseURL == "" {
		return errors.New("double opt-in: no public URL to put the confirmation link on")
	}
	dom, from, err := d.sender(ctx, book)
	if err != nil {
		return err
	}
	subject := book.DoubleOptInSubject
	if strings.TrimSpace(subject) == "" {
		subject = contact.DefaultDoubleOptInSubject
	}
	body := book.DoubleOptInContent
	if strings.TrimSpace(body) == "" || !contact.HasConfirmationLink(body) {
		// A book stored before its content was checked may have none: the email must carry
		// the link, or the contact could never confirm.
		body = contact.DefaultDoubleOptInContent
	}
	if editor.IsDocument(body) {
		if body, err = editor.Render(body); err != nil {
			return fmt.Errorf("double opt-in content: %w", err)
		}
	}
	now := d.Now().UTC()
	emails := make([]store.Email, 0, len(contacts))
	events := make([]store.Event, 0, len(contacts))
	ids := make([]string, len(contacts))
	for i, ct := range contacts {
		ids[i] = confirmationID(ctx, book.TeamID, book.ID, ct.ID)
	}
	written, err := d.written(ctx, ids)
	if err != nil {
		return err
	}
	for i, ct := range contacts {
		id := ids[i]
		if written[i] {
			continue // by an earlier try of this request: its link and content stay as they were
		}
		link := signer.ConfirmURL(Link{TeamID: book.TeamID, BookID: book.ID, ContactID: ct.ID, Email: ct.Email,
			MadeAt: now.UnixMilli(), ExpiresAt: now.Add(ConfirmFor).UnixMilli()})
		values := map[string]string{"doubleoptinurl": link, "email": ct.Email, "firstname": ct.FirstName, "lastname": ct.LastName}
		htmlBody := Render(body, values, true)
		text := fmt.Sprintf("Please confirm your subscription: %s\n", link)
		e := store.Email{
			ID: id, TeamID: book.TeamID, DomainID: dom.ID, From: from, To: []string{ct.Email},
			Subject:   strings.TrimSpace(template.OneLine(Render(subject, values, false))),
			Content:   store.Content{HTML: &htmlBody, Text: &text},
			CreatedAt: now, ContactID: ct.ID,
		}
		_ = email.Create(&e, store.StatusQueued, now) // a new email may always be QUEUED
		emails = append(emails, e)
		events = append(events, store.Event{ID: "0-QUEUED", EmailID: e.ID, Status: store.StatusQueued, CreatedAt: now})
	}
	// Confirmations are emails the team sends: within its daily quota, as sends are (past it
	// none is written; the contacts wait, and adding them again after the reset mails them).
	tm, err := d.Store.GetTeam(ctx, book.TeamID)
	if err != nil {
		return fmt.Errorf("double opt-in: the team's daily quota: %w", err)
	}
	if err := email.CheckDailyQuota(ctx, d.Store, book.TeamID, tm.DailyEmailLimit, len(emails), now); err != nil {
		return err
	}
	for start := 0; start < len(emails); start += writeChunk {
		end := min(start+writeChunk, len(emails))
		if err := writeEmails(ctx, d.Store, d.Metrics, d.Dispatcher, emails[start:end], events[start:end]); err != nil {
			return err
		}
	}
	return nil
}

// written reports which of the confirmation emails ids were written by an earlier try of the
// same request (an Idempotency-Key's: only those ids repeat). Writing one again would skip the
// email but, on DynamoDB, store its content again under a new version (the link in it carries
// the time it was made), where nothing points at it. The ids are looked up writtenLookups at a
// time: a bulk import's thousand, one after the other, would take seconds of a function's time.
func (d *DoubleOptIn) written(ctx context.Context, ids []string) ([]bool, error) {
	out := make([]bool, len(ids))
	if key, _ := ctx.Value(idempotencyKeyKey{}).(string); key == "" {
		return out, nil
	}
	errs := make([]error, len(ids))
	slots := make(chan struct{}, writtenLookups)
	ctx, cancel := context.WithCancel(ctx) // a failed lookup ends the others
	defer cancel()
	var wg sync.WaitGroup
	for i, id := range ids {
		slots <- struct{}{}
		if ctx.Err() != nil {
			<-slots
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			switch _, err := d.Store.GetEmail(ctx, id); {
			case err == nil:
				out[i] = true
			case !errors.Is(err, store.ErrNotFound):
				errs[i] = err
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err // the first: a store that fails one lookup likely fails them all
		}
	}
	return out, nil
}

// writtenLookups is how many of written's lookups run at once.
const writtenLookups = 16

// SenderDomain is the id of the domain a book's confirmation emails go out from: its
// doubleOptInFrom's, or the team's oldest verified one; 0 when there is none to send from.
func (d *DoubleOptIn) SenderDomain(ctx context.Context, book store.ContactBook) (int64, error) {
	dom, _, err := d.sender(ctx, book)
	if errors.Is(err, ErrNoSendingDomain) {
		return 0, nil
	}
	return dom.ID, err
}

// sender is the domain and From of a book's confirmation emails.
func (d *DoubleOptIn) sender(ctx context.Context, book store.ContactBook) (store.Domain, string, error) {
	if from := strings.TrimSpace(book.DoubleOptInFrom); from != "" {
		name := email.DomainOf(from)
		dom, err := d.Domains.Lookup(ctx, book.TeamID, name)
		if errors.Is(err, store.ErrNotFound) || err == nil && dom.Status != store.DomainSuccess {
			return store.Domain{}, "", fmt.Errorf("%w: %s is not a verified domain of the team", ErrNoSendingDomain, name)
		}
		return dom, from, err
	}
	domains, err := d.Store.ListDomains(ctx, book.TeamID)
	if err != nil {
		return store.Domain{}, "", err
	}
	var oldest *store.Domain
	for i, dom := range domains {
		if dom.Status == store.DomainSuccess && (oldest == nil || dom.CreatedAt.Before(oldest.CreatedAt)) {
			oldest = &domains[i]
		}
	}
	if oldest == nil {
		return store.Domain{}, "", ErrNoSendingDomain
	}
	return *oldest, "hello@" + oldest.Name, nil
}
