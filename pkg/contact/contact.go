// Package contact manages contact books and their contacts: the audiences of campaigns.
// Contacts are unique by email within a book; POST and PUT upsert by email, and only a PATCH
// re-subscribes an unsubscribed contact. A book with double opt-in keeps a new contact waiting,
// not subscribed, until it confirms through the link of its confirmation email.
package contact

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mailroom/mailroom/pkg/editor"
	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
)

// Store is what contact books need from persistence.
type Store interface {
	store.Contacts
}

// Limits.
const (
	MaxBulk       = 1000
	MaxProperties = 50
	MaxValue      = 2048
)

// Service is the contact book use cases.
type Service struct {
	Store Store
	Now   func() time.Time
	Log   *slog.Logger
	// Domains finds a team's domain by name: a double opt-in email's from must be on a verified
	// one (nil: not checked).
	Domains DomainLookup
	// DoubleOptIn sends the confirmation emails of contacts added to a book with double opt-in
	// (campaign.DoubleOptIn; nil where no route adds contacts).
	DoubleOptIn Confirmations
}

// DomainLookup finds a team's domain by name (domain.Directory).
type DomainLookup interface {
	Lookup(ctx context.Context, teamID int64, name string) (store.Domain, error)
}

// Confirmations sends the double opt-in emails of contacts waiting for their confirmation.
type Confirmations interface {
	SendConfirmations(ctx context.Context, book store.ContactBook, contacts []store.Contact) error
	// SenderDomain is the domain a book's confirmation emails go out from (0: none can).
	SenderDomain(ctx context.Context, book store.ContactBook) (int64, error)
}

type keyDomainKey struct{}

// WithKeyDomain says that the contacts ctx writes are written with an API key restricted to
// the domain id (0: any domain).
func WithKeyDomain(ctx context.Context, id int64) context.Context {
	return context.WithValue(ctx, keyDomainKey{}, id)
}

// otherDomain reports whether a book with double opt-in mails its confirmations from another
// domain than the one the caller's key is restricted to (such a key sends only from its
// domain, and picks the recipient here): a write that would mail one is then refused
// (errOtherDomain), before anything is written.
func (s *Service) otherDomain(ctx context.Context, book store.ContactBook) (bool, error) {
	keyDomain, _ := ctx.Value(keyDomainKey{}).(int64)
	if keyDomain == 0 || !book.DoubleOptInEnabled || s.DoubleOptIn == nil {
		return false, nil
	}
	from, err := s.DoubleOptIn.SenderDomain(ctx, book)
	return err == nil && from != 0 && from != keyDomain, err
}

var errOtherDomain = fault.New(fault.Forbidden, "This API key may only send from its own domain, and this book's double opt-in emails are sent from another: "+
	`add contacts that would get one with another key (with "subscribed": false none is sent)`)

// The double opt-in defaults: a book that enables it without a subject or content gets these.
const (
	DefaultDoubleOptInSubject = "Please confirm your subscription"
	// DefaultDoubleOptInContent is an email editor document: a line, a Confirm button to the
	// confirmation link, and why the email came.
	DefaultDoubleOptInContent = `{"type":"doc","content":[` +
		`{"type":"paragraph","content":[{"type":"text","text":"Please confirm that you want to receive our emails."}]},` +
		`{"type":"button","attrs":{"text":"Confirm","url":"{{doubleOptInUrl}}","alignment":"left","borderRadius":"8","buttonColor":"#000000","textColor":"#ffffff"}},` +
		`{"type":"paragraph","content":[{"type":"text","text":"If you did not ask for this, ignore this email: you will not be subscribed."}]}]}`
)

// doubleOptInURL matches the confirmation link's placeholder {{doubleOptInUrl}} (with a fallback
// too). It is compiled on first use: every function that links this package pays for an init
// regexp.
var doubleOptInURL = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\{\{\s*doubleOptInUrl(?:\s*,\s*fallback\s*=[^}]*)?\s*\}\}`)
})

// HasConfirmationLink reports whether a double opt-in content carries the confirmation link:
// the {{doubleOptInUrl}} placeholder in html, or, in an editor document, any string of it (a
// variable's id, a button's or a link's address) that holds the placeholder or is its bare
// name, as upstream checks (its JSON spaced in any way).
func HasConfirmationLink(content string) bool {
	if doubleOptInURL().MatchString(content) {
		return true
	}
	var doc any
	if json.Unmarshal([]byte(content), &doc) != nil {
		return false
	}
	var holds func(v any) bool
	holds = func(v any) bool {
		switch v := v.(type) {
		case string:
			return strings.EqualFold(strings.TrimSpace(v), "doubleOptInUrl") || doubleOptInURL().MatchString(v)
		case []any:
			return slices.ContainsFunc(v, holds)
		case map[string]any:
			for _, x := range v {
				if holds(x) {
					return true
				}
			}
		}
		return false
	}
	return holds(doc)
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns a fresh id with a prefix ("cb" for books, "ct" for contacts).
func NewID(prefix string) string {
	var b [15]byte
	_, _ = rand.Read(b[:])
	return prefix + idEncoding.EncodeToString(b[:])
}

var errBookNotFound = fault.NotFoundf("Contact book not found")

func bookErr(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return errBookNotFound
	}
	return err
}

// BookFields is a create or patch of a book; nil means not given.
type BookFields struct {
	Name               *string
	Emoji              *string
	Properties         map[string]string
	Variables          []string
	DoubleOptInEnabled *bool
	DoubleOptInFrom    *string
	DoubleOptInSubject *string
	DoubleOptInContent *string
	// KeyDomain is the domain the caller's API key is restricted to (0: any). Such a key sets a
	// book's double opt-in email only from its own domain: the email goes out from that From
	// with the content the key wrote.
	KeyDomain int64
}

// touchesDoubleOptIn reports whether f sets any of the double opt-in fields.
func (f BookFields) touchesDoubleOptIn() bool {
	return f.DoubleOptInEnabled != nil || f.DoubleOptInFrom != nil || f.DoubleOptInSubject != nil || f.DoubleOptInContent != nil
}

func (f BookFields) validate(create bool) error {
	if create && f.Name == nil {
		return fault.Field("name", "is required")
	}
	if f.Name != nil && (strings.TrimSpace(*f.Name) == "" || len(*f.Name) > 200) {
		return fault.Field("name", "must be 1 to 200 characters")
	}
	if err := checkProperties("properties", f.Properties); err != nil {
		return err
	}
	if _, err := normalizeVariables(f.Variables); err != nil {
		return err
	}
	if f.DoubleOptInFrom != nil && strings.TrimSpace(*f.DoubleOptInFrom) != "" {
		from, err := email.ParseAddress(*f.DoubleOptInFrom)
		if err != nil {
			return email.AddressError("doubleOptInFrom", *f.DoubleOptInFrom, err)
		}
		*f.DoubleOptInFrom = from
	}
	if f.DoubleOptInSubject != nil && (len(*f.DoubleOptInSubject) > email.MaxSubjectBytes || strings.ContainsAny(*f.DoubleOptInSubject, "\r\n")) {
		return fault.Field("doubleOptInSubject", "at most %d bytes on one line", email.MaxSubjectBytes)
	}
	if f.DoubleOptInContent != nil && strings.TrimSpace(*f.DoubleOptInContent) != "" {
		if len(*f.DoubleOptInContent) > MaxDoubleOptInContent {
			return fault.Field("doubleOptInContent", "at most %d KB", MaxDoubleOptInContent>>10)
		}
		if !HasConfirmationLink(*f.DoubleOptInContent) {
			return fault.Field("doubleOptInContent", "must include the {{doubleOptInUrl}} placeholder")
		}
		if editor.IsDocument(*f.DoubleOptInContent) {
			if _, err := editor.Render(*f.DoubleOptInContent); err != nil {
				return fault.Field("doubleOptInContent", "%v", err)
			}
		}
	}
	return nil
}

// MaxDoubleOptInContent bounds a book's double opt-in content.
const MaxDoubleOptInContent = 256 << 10

// checkDoubleOptIn checks the double opt-in email of book b as f leaves it: its from must be
// on a verified domain of the team and, for a key restricted to a domain, on that domain.
func (s *Service) checkDoubleOptIn(ctx context.Context, f BookFields, b store.ContactBook) error {
	if !f.touchesDoubleOptIn() {
		return nil
	}
	if b.DoubleOptInFrom == "" {
		if f.KeyDomain != 0 {
			return fault.New(fault.Forbidden, "doubleOptInFrom: this API key may only send from its own domain: name a from on it")
		}
		return nil
	}
	if s.Domains == nil {
		return nil
	}
	name := email.DomainOf(b.DoubleOptInFrom)
	d, err := s.Domains.Lookup(ctx, b.TeamID, name)
	if errors.Is(err, store.ErrNotFound) || err == nil && d.Status != store.DomainSuccess {
		return fault.Field("doubleOptInFrom", "domain %s is not a verified domain of this team", name)
	}
	if err != nil {
		return err
	}
	if f.KeyDomain != 0 && d.ID != f.KeyDomain {
		return fault.New(fault.Forbidden, "doubleOptInFrom: this API key may only send from its own domain")
	}
	return nil
}

// normalizeVariables is a book's variables as upstream keeps them: each name trimmed, blank
// ones dropped, a name that differs from an earlier one only by case dropped (the first
// spelling stays); each kept name is letters, digits and _ (ASCII, at most 64) and not one of
// the contact's own fields (email, firstName, lastName, in any case). A refused name is a 400
// naming its place in the request.
func normalizeVariables(in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	seen := make(map[string]bool, len(in))
	for i, raw := range in {
		v := strings.TrimSpace(raw)
		if v == "" {
			continue
		}
		field := fmt.Sprintf("variables[%d]", i)
		if !validVariable(v) {
			return nil, fault.Field(field, "%q is not a variable name (letters, digits and _, at most 64)", raw)
		}
		if reservedVariables[strings.ToLower(v)] {
			return nil, fault.Field(field, "%q is a contact's own field, not a variable", raw)
		}
		if seen[strings.ToLower(v)] {
			continue
		}
		seen[strings.ToLower(v)] = true
		out = append(out, v)
	}
	return out, nil
}

// reservedVariables are the contact's own fields, which a book's variables may not name.
var reservedVariables = map[string]bool{"email": true, "firstname": true, "lastname": true}

func validVariable(v string) bool {
	if v == "" || len(v) > 64 {
		return false
	}
	for _, c := range v {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

func checkProperties(field string, p map[string]string) error {
	if len(p) > MaxProperties {
		return fault.Field(field, "at most %d properties", MaxProperties)
	}
	for k, v := range p {
		if k == "" || len(k) > 64 || len(v) > MaxValue || !utf8.ValidString(k+v) || strings.ContainsFunc(k+v, isControl) {
			return fault.Field(field+"."+k, "names are 1 to 64 characters, values at most %d, without control characters", MaxValue)
		}
	}
	return nil
}

// isControl reports a control character but tab and line breaks, which a property value may
// hold (an address written on lines): JSON writes one of the others as six bytes, which a
// contact's 50 values could spend on nothing but escapes.
func isControl(r rune) bool {
	return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r'
}

func (f BookFields) apply(b *store.ContactBook) {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&b.Name, f.Name)
	set(&b.Emoji, f.Emoji)
	set(&b.DoubleOptInFrom, f.DoubleOptInFrom)
	set(&b.DoubleOptInSubject, f.DoubleOptInSubject)
	set(&b.DoubleOptInContent, f.DoubleOptInContent)
	if f.Properties != nil {
		b.Properties = f.Properties
	}
	if f.Variables != nil {
		b.Variables, _ = normalizeVariables(f.Variables) // validate refused what it would not take
	}
	if f.DoubleOptInEnabled != nil {
		b.DoubleOptInEnabled = *f.DoubleOptInEnabled
	}
	// A blank subject or content is the default one, as in useSend: a book with double opt-in
	// always has an email to send.
	b.DoubleOptInFrom = strings.TrimSpace(b.DoubleOptInFrom)
	if strings.TrimSpace(b.DoubleOptInSubject) == "" && (b.DoubleOptInEnabled || f.DoubleOptInSubject != nil) {
		b.DoubleOptInSubject = DefaultDoubleOptInSubject
	}
	if strings.TrimSpace(b.DoubleOptInContent) == "" && (b.DoubleOptInEnabled || f.DoubleOptInContent != nil) {
		b.DoubleOptInContent = DefaultDoubleOptInContent
	}
}

// DefaultEmoji is a new book's emoji when the request names none, as upstream's.
const DefaultEmoji = "📙"

// CreateBook makes a contact book.
func (s *Service) CreateBook(ctx context.Context, teamID int64, f BookFields) (store.ContactBook, error) {
	if err := f.validate(true); err != nil {
		return store.ContactBook{}, err
	}
	now := s.Now().UTC()
	b := store.ContactBook{ID: NewID("cb"), TeamID: teamID, Emoji: DefaultEmoji, Properties: map[string]string{},
		Variables: []string{}, CreatedAt: now, UpdatedAt: now}
	f.apply(&b)
	if err := s.checkDoubleOptIn(ctx, f, b); err != nil {
		return store.ContactBook{}, err
	}
	if err := s.Store.CreateContactBook(ctx, b); err != nil {
		return store.ContactBook{}, fmt.Errorf("create contact book: %w", err)
	}
	return b, nil
}

// Book reads one book of the team.
func (s *Service) Book(ctx context.Context, teamID int64, id string) (store.ContactBook, error) {
	b, err := s.Store.GetContactBook(ctx, teamID, id)
	return b, bookErr(err)
}

// Books lists the team's books.
func (s *Service) Books(ctx context.Context, teamID int64) ([]store.ContactBook, error) {
	return s.Store.ListContactBooks(ctx, teamID)
}

// UpdateBook patches a book.
func (s *Service) UpdateBook(ctx context.Context, teamID int64, id string, f BookFields) (store.ContactBook, error) {
	if err := f.validate(false); err != nil {
		return store.ContactBook{}, err
	}
	b, err := s.Store.UpdateContactBook(ctx, teamID, id, func(b *store.ContactBook) error {
		f.apply(b)
		b.UpdatedAt = s.Now().UTC()
		return s.checkDoubleOptIn(ctx, f, *b)
	})
	return b, bookErr(err)
}

// DeleteBook removes a book now; its contacts go in the background (PurgeDeletedBooks).
func (s *Service) DeleteBook(ctx context.Context, teamID int64, id string) (store.ContactBook, error) {
	b, err := s.Book(ctx, teamID, id)
	if err != nil {
		return store.ContactBook{}, err
	}
	if err := s.Store.DeleteContactBook(ctx, teamID, id); err != nil {
		return store.ContactBook{}, bookErr(err)
	}
	return b, nil
}

// PurgeDeletedBooks removes the contacts of deleted books, a page at a time, and returns how
// many it removed. It runs in the background (locally on a timer, on AWS from the periodic
// function), never on a request path.
func (s *Service) PurgeDeletedBooks(ctx context.Context) (int, error) {
	books, err := s.Store.DeletedContactBooks(ctx, 100)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, b := range books {
		for {
			n, err := s.Store.DeleteContactsOfBook(ctx, b.TeamID, b.BookID, 500)
			if err != nil {
				return total, err
			}
			total += n
			if n == 0 || ctx.Err() != nil {
				break
			}
		}
	}
	return total, nil
}

// Fields is a contact as given by a request; nil means not given.
type Fields struct {
	Email      *string
	FirstName  *string
	LastName   *string
	Properties map[string]string
	Subscribed *bool
}

// Validate checks the fields (email required when requireEmail) and returns the normalised
// email ("" when not given).
func (f Fields) Validate(at string, requireEmail bool) (string, error) {
	norm := ""
	if f.Email == nil {
		if requireEmail {
			return "", fault.Field(at+"email", "is required")
		}
	} else {
		addr, err := email.ParseAddress(*f.Email)
		if err != nil {
			return "", email.AddressError(at+"email", *f.Email, err)
		}
		norm = strings.ToLower(email.AddressOnly(addr))
	}
	for field, v := range map[string]*string{"firstName": f.FirstName, "lastName": f.LastName} {
		switch {
		case v == nil:
		case len(*v) > 200:
			return "", fault.Field(at+field, "at most 200 bytes")
		case strings.ContainsAny(*v, "\r\n"):
			return "", fault.Field(at+field, "must not contain line breaks")
		}
	}
	if err := checkProperties(at+"properties", f.Properties); err != nil {
		return "", err
	}
	return norm, nil
}

// merge applies the fields to a contact. A new contact is subscribed unless the request says
// otherwise. An existing unsubscribed contact is re-subscribed only by a PATCH of that contact
// (patch) saying subscribed: true: an upsert or an import (POST, PUT, bulk) that says so leaves
// it unsubscribed, as in useSend, so that an app's routine sync of its users never undoes an
// unsubscribe.
// Property names that name one of the book's variables in another case (or with spaces
// around) are stored under the variable's own spelling, the contact's and the request's alike,
// as upstream stores them: a later {"Company": …} replaces an earlier {"company": …} of a book
// with the variable "company" instead of standing beside it.
func (f Fields) merge(c *store.Contact, existed, patch bool, now time.Time, variables []string) {
	if f.FirstName != nil {
		c.FirstName = *f.FirstName
	}
	if f.LastName != nil {
		c.LastName = *f.LastName
	}
	if f.Properties != nil {
		// A new map: the one c holds may be shared with the stored contact the change is
		// compared with (a store's "before"), which must not change with it.
		props := make(map[string]string, len(c.Properties)+len(f.Properties))
		putProperties(props, c.Properties, variables)
		putProperties(props, f.Properties, variables)
		c.Properties = props
	}
	switch {
	case f.Subscribed != nil:
		if *f.Subscribed && existed && !c.Subscribed {
			if !patch {
				break
			}
			c.SubscribedAt = now // older unsubscribe links stop working
		}
		c.Subscribed = *f.Subscribed
		c.Pending = false // said outright: no confirmation is awaited any more
	case !existed:
		c.Subscribed = true
	}
	// As upstream keeps it: an unsubscribe the request asks for is UNSUBSCRIBED, whatever
	// unsubscribed the contact before; a subscribed contact has none.
	switch {
	case c.Subscribed:
		c.UnsubscribeReason = ""
	case f.Subscribed != nil && !*f.Subscribed:
		c.UnsubscribeReason = store.UnsubscribeUnsubscribed
	}
	if !existed {
		c.CreatedAt = now
	}
	c.UpdatedAt = now
}

// putProperties copies from into to, each name that is one of variables in another case (or
// with spaces around it) under the variable's spelling. Of two names of from that land on one
// variable the first in sorted order wins, as a campaign renders such a pair (campaign.vars),
// so that what a contact shows does not change when it is written again.
func putProperties(to, from map[string]string, variables []string) {
	set := make(map[string]bool, len(from))
	for _, k := range slices.Sorted(maps.Keys(from)) {
		name := k
		for _, v := range variables {
			if strings.EqualFold(strings.TrimSpace(k), v) {
				name = v
				break
			}
		}
		if !set[name] {
			to[name], set[name] = from[k], true
		}
	}
}

// Upsert creates the contact with that email in the book or updates it (POST and PUT). In a
// book with double opt-in a new contact waits for its confirmation (doubleOptIn).
func (s *Service) Upsert(ctx context.Context, teamID int64, bookID string, f Fields) (store.Contact, error) {
	norm, err := f.Validate("", true)
	if err != nil {
		return store.Contact{}, err
	}
	book, err := s.Book(ctx, teamID, bookID)
	if err != nil {
		return store.Contact{}, err
	}
	other, err := s.otherDomain(ctx, book)
	if err != nil {
		return store.Contact{}, err
	}
	now := s.Now().UTC()
	confirm := false
	c, err := s.Store.PutContact(ctx, teamID, bookID, norm, NewID("ct"), func(c *store.Contact, existed bool) error {
		f.merge(c, existed, false, now, book.Variables)
		confirm = doubleOptIn(book, f, c, existed)
		if confirm && other {
			return errOtherDomain // a contact it would mail; an update that mails nobody is written
		}
		return nil
	})
	if err != nil {
		return store.Contact{}, bookErr(err)
	}
	if confirm {
		s.confirm(ctx, book, []store.Contact{c})
	}
	return c, nil
}

// doubleOptIn applies a book's double opt-in to a contact just merged, and reports whether a
// confirmation email is due: a new contact that did not say subscribed: false waits for its
// confirmation instead of being subscribed, and one still waiting gets a new email each time it
// is added again. A subscribed contact, or one that unsubscribed, gets none.
func doubleOptIn(book store.ContactBook, f Fields, c *store.Contact, existed bool) bool {
	if !book.DoubleOptInEnabled || f.Subscribed != nil && !*f.Subscribed {
		return false
	}
	if !existed && c.Subscribed {
		c.Subscribed, c.Pending, c.UnsubscribeReason = false, true, ""
	}
	return c.Pending
}

// confirm sends the confirmation emails of contacts waiting for their double opt-in. A failure
// is logged, not returned: the contacts are written, and adding one again sends its email.
func (s *Service) confirm(ctx context.Context, book store.ContactBook, contacts []store.Contact) {
	if s.DoubleOptIn == nil {
		s.Log.Error("double opt-in: no confirmation email can be sent here", "bookId", book.ID)
		return
	}
	err := s.DoubleOptIn.SendConfirmations(ctx, book, contacts)
	var refused *fault.Error
	switch {
	case errors.As(err, &refused): // the team's daily quota: theirs to see, not an operator's
		s.Log.Warn("double opt-in: confirmation emails not sent", "bookId", book.ID, "teamId", book.TeamID,
			"contacts", len(contacts), "reason", refused.Message)
	case err != nil:
		s.Log.Error("double opt-in: confirmation emails not sent", "bookId", book.ID, "contacts", len(contacts), "err", err)
	}
}

// ValidateBulk validates the elements of a bulk import, as Bulk does, with those refused
// already (badAt[i]: an element that did not decode; nil for none): their addresses, and one
// error naming every bad element, as a batch send does.
func ValidateBulk(list []Fields, badAt []error) ([]string, error) {
	norms := make([]string, len(list))
	var errs []error
	for i, f := range list {
		if badAt != nil && badAt[i] != nil {
			errs = append(errs, badAt[i])
			continue
		}
		norm, err := f.Validate(fmt.Sprintf("[%d].", i), true)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		norms[i] = norm
	}
	return norms, fault.Join(errs)
}

// Bulk upserts up to MaxBulk contacts; every element is validated before any is written, and
// they are written together (store.PutContacts: one transaction on the embedded store). An
// empty list adds nothing and is no error (upstream's schema has no minimum: a sync with
// nothing new to send is not a failure).
func (s *Service) Bulk(ctx context.Context, teamID int64, bookID string, list []Fields) (int, error) {
	if len(list) > MaxBulk {
		return 0, fault.Field("body", "at most %d contacts", MaxBulk)
	}
	book, err := s.Book(ctx, teamID, bookID)
	if err != nil || len(list) == 0 {
		return 0, err
	}
	norms, err := ValidateBulk(list, nil)
	if err != nil {
		return 0, err
	}
	other, err := s.otherDomain(ctx, book)
	if err != nil {
		return 0, err
	}
	// Whether an element mails depends on its contact as stored: one that says subscribed:
	// false never does, any other may.
	for _, f := range list {
		if other && (f.Subscribed == nil || *f.Subscribed) {
			return 0, errOtherDomain
		}
	}
	puts := make([]store.ContactPut, len(list))
	now := s.Now().UTC()
	confirm := map[string]bool{} // by email: the last put of an address decides
	for i, f := range list {
		norm := norms[i]
		puts[i] = store.ContactPut{Email: norm, NewID: NewID("ct"), Fn: func(c *store.Contact, existed bool) error {
			f.merge(c, existed, false, now, book.Variables)
			confirm[norm] = doubleOptIn(book, f, c, existed)
			return nil
		}}
	}
	start := time.Now()
	done, err := s.Store.PutContacts(ctx, teamID, bookID, puts)
	s.Log.Info("bulk import", "bookId", bookID, "written", len(done), "of", len(list), "elapsedMs", time.Since(start).Milliseconds())
	var pending []store.Contact
	for _, c := range done {
		if confirm[c.Email] {
			pending = append(pending, c)
			confirm[c.Email] = false // once per address
		}
	}
	if len(pending) > 0 {
		s.confirm(ctx, book, pending)
	}
	if err != nil {
		return len(done), bookErr(err)
	}
	distinct := map[string]bool{} // a later entry of an address (Validate lower-cases it) updates the same contact
	for _, p := range puts {
		distinct[p.Email] = true
	}
	return len(distinct), nil
}

var errContactNotFound = fault.NotFoundf("Contact not found")

// Get reads one contact.
func (s *Service) Get(ctx context.Context, teamID int64, bookID, id string) (store.Contact, error) {
	c, err := s.Store.GetContact(ctx, teamID, bookID, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Contact{}, errContactNotFound
	}
	return c, err
}

// List pages a book's contacts.
func (s *Service) List(ctx context.Context, teamID int64, bookID string, f store.ContactFilter) ([]store.Contact, int, error) {
	if _, err := s.Book(ctx, teamID, bookID); err != nil {
		return nil, 0, err
	}
	return s.Store.ListContacts(ctx, teamID, bookID, f)
}

// Update patches one contact (PATCH); an email change must not collide with another contact.
func (s *Service) Update(ctx context.Context, teamID int64, bookID, id string, f Fields) (store.Contact, error) {
	norm, err := f.Validate("", false)
	if err != nil {
		return store.Contact{}, err
	}
	book, err := s.Book(ctx, teamID, bookID)
	if err != nil {
		return store.Contact{}, err
	}
	now := s.Now().UTC()
	c, err := s.Store.UpdateContact(ctx, teamID, bookID, id, func(c *store.Contact) error {
		if norm != "" {
			c.Email = norm
		}
		f.merge(c, true, true, now, book.Variables)
		return nil
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Contact{}, errContactNotFound
	case errors.Is(err, store.ErrConflict):
		return store.Contact{}, fault.New(fault.Conflict, "Another contact of the book has the email %s", norm)
	}
	return c, err
}

// Confirm subscribes a contact waiting for its double opt-in, found by id or, if it was
// removed and added again, by email. It reports whether the contact is subscribed now: a
// contact that unsubscribed meanwhile (or was never pending) is left as it is.
func (s *Service) Confirm(ctx context.Context, teamID int64, bookID, id, addr string) (bool, error) {
	subscribed := false
	err := s.updateByLink(ctx, teamID, bookID, id, addr, func(c *store.Contact) error {
		if addr != "" && !strings.EqualFold(c.Email, addr) {
			// Its address changed since the link was sent: the link confirms the address it
			// went to, not the one the contact has now.
			return store.ErrNotFound
		}
		if c.Pending {
			now := s.Now().UTC()
			c.Subscribed, c.Pending, c.SubscribedAt, c.UpdatedAt, c.UnsubscribeReason = true, false, now, now, ""
		}
		subscribed = c.Subscribed
		return nil
	})
	return subscribed, err
}

// updateByLink changes the contact a link names: by its id, or, if it was removed and added
// again (a new id), by the link's email. A contact found neither way is errContactNotFound.
func (s *Service) updateByLink(ctx context.Context, teamID int64, bookID, id, addr string, fn func(*store.Contact) error) error {
	update := func(id string) error {
		_, err := s.Store.UpdateContact(ctx, teamID, bookID, id, fn)
		return err
	}
	err := update(id)
	if errors.Is(err, store.ErrNotFound) && addr != "" {
		found, _, lerr := s.Store.ListContacts(ctx, teamID, bookID, store.ContactFilter{Emails: []string{strings.ToLower(addr)}, Limit: 1})
		if lerr == nil && len(found) == 1 {
			err = update(found[0].ID)
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		return errContactNotFound
	}
	return err
}

// Delete removes contacts by id (one, or a bulk of up to MaxBulk) and reports how many existed.
func (s *Service) Delete(ctx context.Context, teamID int64, bookID string, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, fault.Field("contactIds", "at least 1 id is required")
	}
	if len(ids) > MaxBulk {
		return 0, fault.Field("contactIds", "at most %d ids", MaxBulk)
	}
	if _, err := s.Book(ctx, teamID, bookID); err != nil {
		return 0, err
	}
	return s.Store.DeleteContacts(ctx, teamID, bookID, ids)
}

// ErrLinkBeforeResubscribe: the unsubscribe link was made before the contact subscribed again;
// it does not unsubscribe them a second time.
var ErrLinkBeforeResubscribe = errors.New("the unsubscribe link is older than the contact's latest subscription")

// Unsubscribe marks a contact unsubscribed (the one-click link) and reports whether it changed
// anything. The link names the contact by id and email: a contact deleted and imported again
// has a new id, and its old links must still unsubscribe it. A link made before the contact
// last subscribed again (linkMadeAt before SubscribedAt) is ErrLinkBeforeResubscribe; a zero
// linkMadeAt (a link from before links carried their time) is not checked.
func (s *Service) Unsubscribe(ctx context.Context, teamID int64, bookID, id, addr string, linkMadeAt time.Time) (bool, error) {
	changed := false
	err := s.updateByLink(ctx, teamID, bookID, id, addr, func(c *store.Contact) error {
		if !linkMadeAt.IsZero() && c.SubscribedAt.After(linkMadeAt) {
			return ErrLinkBeforeResubscribe
		}
		changed = c.Subscribed
		if c.Subscribed || c.UnsubscribeReason == "" {
			c.UnsubscribeReason = store.UnsubscribeUnsubscribed
		}
		c.Subscribed, c.Pending = false, false
		c.UpdatedAt = s.Now().UTC()
		return nil
	})
	return changed, err
}

// UnsubscribeAddress is what a campaign email's hard bounce or complaint does to contacts, as
// upstream does it: the campaign's own contact (contactID in bookID, found by id should its
// address have changed since) and every subscribed contact of the team with the address, in
// any other book, are unsubscribed with reason (store.UnsubscribeBounced or
// store.UnsubscribeComplained). It reports whether the campaign's contact is now unsubscribed
// for that reason (its campaign counts it unsubscribed, once per email: an event handled again
// counts nothing more). Every step is idempotent, so a retried event repeats them safely; a
// book or a contact removed meanwhile is passed over. It reads each book of the team once
// (bounces and complaints are rare; the team's books are few).
func (s *Service) UnsubscribeAddress(ctx context.Context, teamID int64, addr, reason, bookID, contactID string) (bool, error) {
	addr = strings.ToLower(email.AddressOnly(addr))
	unsubscribe := func(bookID, id string) (store.Contact, bool, error) {
		var before store.Contact
		c, err := s.Store.UpdateContact(ctx, teamID, bookID, id, func(c *store.Contact) error {
			before = *c
			if !c.Subscribed {
				return errUnchanged
			}
			c.Subscribed, c.Pending, c.UnsubscribeReason = false, false, reason
			c.UpdatedAt = s.Now().UTC()
			return nil
		})
		switch {
		case errors.Is(err, errUnchanged):
			return before, true, nil
		case errors.Is(err, store.ErrNotFound):
			return store.Contact{}, false, nil // removed meanwhile
		}
		return c, err == nil, err
	}
	counted := false
	if bookID != "" && contactID != "" {
		c, found, err := unsubscribe(bookID, contactID)
		if err != nil {
			return false, err
		}
		counted = found && !c.Subscribed && c.UnsubscribeReason == reason
	}
	books, err := s.Store.ListContactBooks(ctx, teamID)
	if err != nil {
		return counted, err
	}
	for _, b := range books {
		found, _, err := s.Store.ListContacts(ctx, teamID, b.ID, store.ContactFilter{Emails: []string{addr}, Limit: 1})
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue // the book was deleted meanwhile
		case err != nil:
			return counted, err
		}
		for _, c := range found {
			if !c.Subscribed || c.ID == contactID {
				continue
			}
			if _, _, err := unsubscribe(b.ID, c.ID); err != nil {
				return counted, err
			}
		}
	}
	return counted, nil
}

// errUnchanged ends an update that has nothing to change.
var errUnchanged = errors.New("contact: unchanged")
