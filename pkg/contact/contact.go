// Package contact manages contact books and their contacts: the audiences of campaigns.
// Contacts are unique by email within a book; POST and PUT upsert by email, and an
// unsubscribed contact is only re-subscribed when a request says subscribed: true explicitly.
package contact

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"
	"unicode/utf8"

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
	for i, v := range f.Variables {
		if !validVariable(v) {
			return fault.Field(fmt.Sprintf("variables[%d]", i), "%q is not a variable name (letters, digits, _ and -)", v)
		}
	}
	if f.DoubleOptInFrom != nil && *f.DoubleOptInFrom != "" {
		if _, err := email.ParseAddress(*f.DoubleOptInFrom); err != nil {
			return email.AddressError("doubleOptInFrom", *f.DoubleOptInFrom, err)
		}
	}
	return nil
}

func validVariable(v string) bool {
	if v == "" || len(v) > 64 {
		return false
	}
	for _, c := range v {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
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
		if k == "" || len(k) > 64 || len(v) > MaxValue || !utf8.ValidString(k+v) {
			return fault.Field(field+"."+k, "names are 1 to 64 characters, values at most %d", MaxValue)
		}
	}
	return nil
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
		b.Variables = f.Variables
	}
	if f.DoubleOptInEnabled != nil {
		b.DoubleOptInEnabled = *f.DoubleOptInEnabled
	}
}

// CreateBook makes a contact book.
func (s *Service) CreateBook(ctx context.Context, teamID int64, f BookFields) (store.ContactBook, error) {
	if err := f.validate(true); err != nil {
		return store.ContactBook{}, err
	}
	now := s.Now().UTC()
	b := store.ContactBook{ID: NewID("cb"), TeamID: teamID, Properties: map[string]string{}, Variables: []string{}, CreatedAt: now, UpdatedAt: now}
	f.apply(&b)
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
		return nil
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
		if v != nil && (len(*v) > 200 || strings.ContainsAny(*v, "\r\n")) {
			return "", fault.Field(at+field, "at most 200 characters on one line")
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
func (f Fields) merge(c *store.Contact, existed, patch bool, now time.Time) {
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
		maps.Copy(props, c.Properties)
		maps.Copy(props, f.Properties)
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
	case !existed:
		c.Subscribed = true
	}
	if !existed {
		c.CreatedAt = now
	}
	c.UpdatedAt = now
}

// Upsert creates the contact with that email in the book or updates it (POST and PUT).
func (s *Service) Upsert(ctx context.Context, teamID int64, bookID string, f Fields) (store.Contact, error) {
	norm, err := f.Validate("", true)
	if err != nil {
		return store.Contact{}, err
	}
	now := s.Now().UTC()
	c, err := s.Store.PutContact(ctx, teamID, bookID, norm, NewID("ct"), func(c *store.Contact, existed bool) error {
		f.merge(c, existed, false, now)
		return nil
	})
	return c, bookErr(err)
}

// Bulk upserts up to MaxBulk contacts; every element is validated before any is written, and
// they are written together (store.PutContacts: one transaction on the embedded store).
func (s *Service) Bulk(ctx context.Context, teamID int64, bookID string, list []Fields) (int, error) {
	if len(list) == 0 {
		return 0, fault.Field("body", "at least 1 contact is required")
	}
	if len(list) > MaxBulk {
		return 0, fault.Field("body", "at most %d contacts", MaxBulk)
	}
	puts := make([]store.ContactPut, len(list))
	now := s.Now().UTC()
	for i, f := range list {
		norm, err := f.Validate(fmt.Sprintf("[%d].", i), true)
		if err != nil {
			return 0, err
		}
		puts[i] = store.ContactPut{Email: norm, NewID: NewID("ct"), Fn: func(c *store.Contact, existed bool) error {
			f.merge(c, existed, false, now)
			return nil
		}}
	}
	if _, err := s.Book(ctx, teamID, bookID); err != nil {
		return 0, err
	}
	start := time.Now()
	done, err := s.Store.PutContacts(ctx, teamID, bookID, puts)
	s.Log.Info("bulk import", "bookId", bookID, "written", len(done), "of", len(list), "elapsedMs", time.Since(start).Milliseconds())
	if err != nil {
		return len(done), bookErr(err)
	}
	return len(list), nil
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
	now := s.Now().UTC()
	c, err := s.Store.UpdateContact(ctx, teamID, bookID, id, func(c *store.Contact) error {
		if norm != "" {
			c.Email = norm
		}
		f.merge(c, true, true, now)
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
	unsubscribe := func(id string) error {
		_, err := s.Store.UpdateContact(ctx, teamID, bookID, id, func(c *store.Contact) error {
			if !linkMadeAt.IsZero() && c.SubscribedAt.After(linkMadeAt) {
				return ErrLinkBeforeResubscribe
			}
			changed = c.Subscribed
			c.Subscribed = false
			c.UpdatedAt = s.Now().UTC()
			return nil
		})
		return err
	}
	err := unsubscribe(id)
	if errors.Is(err, store.ErrNotFound) && addr != "" {
		found, _, lerr := s.Store.ListContacts(ctx, teamID, bookID, store.ContactFilter{Emails: []string{strings.ToLower(addr)}, Limit: 1})
		if lerr == nil && len(found) == 1 {
			err = unsubscribe(found[0].ID)
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		return false, errContactNotFound
	}
	return changed, err
}
