package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/contact"
	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/jsonout"
	"github.com/mailroom/mailroom/pkg/store"
)

// maxBulkBody fits 1000 contacts with properties.
const maxBulkBody = 8 << 20

type bookView struct {
	ID                 string            `json:"id"`
	Name               string            `json:"name"`
	TeamID             int64             `json:"teamId"`
	Properties         map[string]string `json:"properties"`
	Variables          []string          `json:"variables"`
	Emoji              string            `json:"emoji"`
	DoubleOptInEnabled bool              `json:"doubleOptInEnabled"`
	DoubleOptInFrom    *string           `json:"doubleOptInFrom"`
	DoubleOptInSubject *string           `json:"doubleOptInSubject"`
	DoubleOptInContent *string           `json:"doubleOptInContent"`
	// DoubleOptInContentOmitted: GET /contactBooks left the content out (null) past the list's
	// bounds, as GET /emails does a body; the whole book is at GET /contactBooks/{id}.
	DoubleOptInContentOmitted bool   `json:"doubleOptInContentOmitted,omitempty"`
	CreatedAt                 string `json:"createdAt"`
	UpdatedAt                 string `json:"updatedAt"`
	Count                     struct {
		Contacts int64 `json:"contacts"`
	} `json:"_count"`
}

func newBookView(b store.ContactBook) bookView {
	v := bookView{ID: b.ID, Name: b.Name, TeamID: b.TeamID, Properties: b.Properties, Variables: list(b.Variables),
		Emoji: b.Emoji, DoubleOptInEnabled: b.DoubleOptInEnabled, DoubleOptInFrom: nullable(b.DoubleOptInFrom),
		DoubleOptInSubject: nullable(b.DoubleOptInSubject), DoubleOptInContent: nullable(b.DoubleOptInContent),
		CreatedAt: ts(b.CreatedAt), UpdatedAt: ts(b.UpdatedAt)}
	if v.Properties == nil {
		v.Properties = map[string]string{}
	}
	v.Count.Contacts = b.ContactCount
	return v
}

type contactView struct {
	ID            string            `json:"id"`
	FirstName     *string           `json:"firstName"`
	LastName      *string           `json:"lastName"`
	Email         string            `json:"email"`
	Subscribed    bool              `json:"subscribed"`
	Properties    map[string]string `json:"properties"`
	ContactBookID string            `json:"contactBookId"`
	// UnsubscribeReason is upstream's: UNSUBSCRIBED, BOUNCED or COMPLAINED, null while
	// subscribed or waiting for its confirmation.
	UnsubscribeReason *string `json:"unsubscribeReason"`
	CreatedAt         string  `json:"createdAt"`
	UpdatedAt         string  `json:"updatedAt"`
}

func newContactView(c store.Contact) contactView {
	v := contactView{ID: c.ID, FirstName: nullable(c.FirstName), LastName: nullable(c.LastName), Email: c.Email,
		Subscribed: c.Subscribed, Properties: c.Properties, ContactBookID: c.BookID,
		CreatedAt: ts(c.CreatedAt), UpdatedAt: ts(c.UpdatedAt)}
	if v.Properties == nil {
		v.Properties = map[string]string{}
	}
	switch {
	case c.Subscribed || c.Pending:
	case c.UnsubscribeReason != "":
		v.UnsubscribeReason = &c.UnsubscribeReason
	default: // unsubscribed before contacts kept a reason: by a link or a request
		r := store.UnsubscribeUnsubscribed
		v.UnsubscribeReason = &r
	}
	return v
}

// pathID reads a path id; ids longer than any we issue are simply not found.
func pathID(r *http.Request, name, what string) (string, error) {
	id := r.PathValue(name)
	if id == "" || len(id) > email.MaxIDLength {
		return "", fault.NotFoundf("%s not found", what)
	}
	return id, nil
}

func bookID(r *http.Request) (string, error) { return pathID(r, "contactBookId", "Contact book") }

func bookFields(w http.ResponseWriter, r *http.Request) (contact.BookFields, error) {
	body, err := readBody(w, r, maxOtherBody)
	if err != nil {
		return contact.BookFields{}, err
	}
	var in struct {
		Name               *string   `json:"name"`
		Emoji              *string   `json:"emoji"`
		Properties         stringMap `json:"properties"`
		Variables          []string  `json:"variables"`
		DoubleOptInEnabled *bool     `json:"doubleOptInEnabled"`
		DoubleOptInFrom    *string   `json:"doubleOptInFrom"`
		DoubleOptInSubject *string   `json:"doubleOptInSubject"`
		DoubleOptInContent *string   `json:"doubleOptInContent"`
	}
	if err := decodeObject(body, &in); err != nil {
		return contact.BookFields{}, err
	}
	return contact.BookFields{Name: in.Name, Emoji: in.Emoji, Properties: in.Properties, Variables: in.Variables,
		DoubleOptInEnabled: in.DoubleOptInEnabled, DoubleOptInFrom: in.DoubleOptInFrom, DoubleOptInSubject: in.DoubleOptInSubject,
		DoubleOptInContent: in.DoubleOptInContent, KeyDomain: principal(r).DomainID}, nil
}

func (s *Services) listContactBooks(w http.ResponseWriter, r *http.Request) error {
	books, err := s.Contacts.Books(r.Context(), principal(r).TeamID)
	if err != nil {
		return err
	}
	out := views(books, newBookView)
	budget := newListBudget()
	for i := range out {
		out[i].DoubleOptInContent, out[i].DoubleOptInContentOmitted = budget.keep(out[i].DoubleOptInContent)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Services) createContactBook(w http.ResponseWriter, r *http.Request) error {
	f, err := bookFields(w, r)
	if err != nil {
		return err
	}
	b, err := s.Contacts.CreateBook(r.Context(), principal(r).TeamID, f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newBookView(b))
	return nil
}

func (s *Services) getContactBook(w http.ResponseWriter, r *http.Request) error {
	id, err := bookID(r)
	if err != nil {
		return err
	}
	b, err := s.Contacts.Book(r.Context(), principal(r).TeamID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newBookView(b))
	return nil
}

func (s *Services) updateContactBook(w http.ResponseWriter, r *http.Request) error {
	id, err := bookID(r)
	if err != nil {
		return err
	}
	f, err := bookFields(w, r)
	if err != nil {
		return err
	}
	b, err := s.Contacts.UpdateBook(r.Context(), principal(r).TeamID, id, f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newBookView(b))
	return nil
}

func (s *Services) deleteContactBook(w http.ResponseWriter, r *http.Request) error {
	id, err := bookID(r)
	if err != nil {
		return err
	}
	if _, err := s.Contacts.DeleteBook(r.Context(), principal(r).TeamID, id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "success": true, "message": "Contact book deleted successfully"})
	return nil
}

// contactIn is a contact in a request body.
type contactIn struct {
	Email      *string   `json:"email"`
	FirstName  *string   `json:"firstName"`
	LastName   *string   `json:"lastName"`
	Properties stringMap `json:"properties"`
	Subscribed *bool     `json:"subscribed"`
}

func (c contactIn) fields() contact.Fields {
	return contact.Fields{Email: c.Email, FirstName: c.FirstName, LastName: c.LastName, Properties: c.Properties, Subscribed: c.Subscribed}
}

// stringMap is an object of strings whose type error names the key: "properties.plan: must be
// a string", not "properties".
type stringMap map[string]string

func (m *stringMap) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return &json.UnmarshalTypeError{Value: "value", Type: reflect.TypeFor[map[string]string]()}
	}
	if raw == nil {
		*m = nil
		return nil
	}
	out := make(stringMap, len(raw))
	for k, v := range raw {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return &json.UnmarshalTypeError{Value: "value", Type: reflect.TypeFor[string](), Field: k}
		}
		out[k] = s
	}
	*m = out
	return nil
}

func contactFields(w http.ResponseWriter, r *http.Request) (contact.Fields, error) {
	body, err := readBody(w, r, maxSmallBody)
	if err != nil {
		return contact.Fields{}, err
	}
	var in contactIn
	if err := decodeObject(body, &in); err != nil { // a field given twice too
		return contact.Fields{}, err
	}
	return in.fields(), nil
}

// upsertContact serves POST .../contacts and PUT .../contacts/{contactId}: both upsert by email.
func (s *Services) upsertContact(w http.ResponseWriter, r *http.Request) error {
	id, err := bookID(r)
	if err != nil {
		return err
	}
	ctx, err := s.contactContext(r)
	if err != nil {
		return err
	}
	f, err := contactFields(w, r)
	if err != nil {
		return err
	}
	c, err := s.Contacts.Upsert(ctx, principal(r).TeamID, id, f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"contactId": c.ID})
	return nil
}

func (s *Services) listContacts(w http.ResponseWriter, r *http.Request) error {
	id, err := bookID(r)
	if err != nil {
		return err
	}
	page, limit, err := pagingUpTo(r, ContactsLimit, ContactsLimit)
	if err != nil {
		return err
	}
	// Comma-separated, and repeated keys too (ids=A&ids=B; API Gateway joins those with a
	// comma itself). A filter given with nothing in it (emails=, as a client joining an empty
	// list sends it) matches no contact, as upstream's `in: [""]` does.
	q := r.URL.Query()
	split := func(name string) []string {
		var out []string
		for _, v := range q[name] {
			for _, p := range strings.Split(v, ",") {
				if p = strings.TrimSpace(p); p != "" {
					out = append(out, p)
				}
			}
		}
		return out
	}
	f := store.ContactFilter{IDs: split("ids"), Offset: (page - 1) * limit, Limit: limit}
	for _, e := range split("emails") {
		f.Emails = append(f.Emails, strings.ToLower(e))
	}
	if q.Has("ids") && len(f.IDs) == 0 || q.Has("emails") && len(f.Emails) == 0 {
		if _, err := s.Contacts.Book(r.Context(), principal(r).TeamID, id); err != nil {
			return err
		}
		writeRaw(w, http.StatusOK, []byte("[]"))
		return nil
	}
	list, _, err := s.Contacts.List(r.Context(), principal(r).TeamID, id, f)
	if err != nil {
		return err
	}
	out, err := json.Marshal(views(list, newContactView))
	if err != nil {
		return err
	}
	// A Lambda function's answer is at most 6 MB as its invocation carries it (escaped or
	// base64): 5,000 ordinary contacts take about 1.5 MB; a page of contacts with many long
	// properties must be asked for in smaller pieces, here as on AWS.
	if n, _ := jsonout.InvocationLen(string(out)); n > jsonout.MaxInvocationBody {
		return fault.Field("limit", "these %d contacts come to %.1f MB as an answer carries them, more than it may (%.1f MB, Lambda's limit on AWS): ask for fewer at a time",
			len(list), float64(n)/(1<<20), float64(jsonout.MaxInvocationBody)/(1<<20))
	}
	writeRaw(w, http.StatusOK, out)
	return nil
}

func (s *Services) getContact(w http.ResponseWriter, r *http.Request) error {
	book, err := bookID(r)
	if err != nil {
		return err
	}
	id, err := pathID(r, "contactId", "Contact")
	if err != nil {
		return err
	}
	c, err := s.Contacts.Get(r.Context(), principal(r).TeamID, book, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newContactView(c))
	return nil
}

func (s *Services) updateContact(w http.ResponseWriter, r *http.Request) error {
	book, err := bookID(r)
	if err != nil {
		return err
	}
	id, err := pathID(r, "contactId", "Contact")
	if err != nil {
		return err
	}
	f, err := contactFields(w, r)
	if err != nil {
		return err
	}
	c, err := s.Contacts.Update(r.Context(), principal(r).TeamID, book, id, f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"contactId": c.ID})
	return nil
}

func (s *Services) deleteContact(w http.ResponseWriter, r *http.Request) error {
	book, err := bookID(r)
	if err != nil {
		return err
	}
	id, err := pathID(r, "contactId", "Contact")
	if err != nil {
		return err
	}
	n, err := s.Contacts.Delete(r.Context(), principal(r).TeamID, book, []string{id})
	if err != nil {
		return err
	}
	if n == 0 {
		return fault.NotFoundf("Contact not found")
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}

func (s *Services) bulkCreateContacts(w http.ResponseWriter, r *http.Request) error {
	book, err := bookID(r)
	if err != nil {
		return err
	}
	ctx, err := s.contactContext(r)
	if err != nil {
		return err
	}
	body, err := readBody(w, r, maxBulkBody)
	if err != nil {
		return err
	}
	var elems []json.RawMessage
	if !json.Valid(body) {
		return email.ErrMalformedJSON
	}
	if err := json.Unmarshal(body, &elems); err != nil || elems == nil {
		return fault.Field("body", "must be an array of contacts {email, firstName, lastName, properties, subscribed}")
	}
	list := make([]contact.Fields, len(elems))
	badAt := make([]error, len(elems)) // every bad element is named, as a batch send does
	bad := false
	for i, raw := range elems {
		var c contactIn
		if err := decodeObject(raw, &c); err != nil {
			fe, ok := fault.As(err)
			if !ok || fe.Kind != fault.Invalid {
				return err
			}
			if rest, whole := strings.CutPrefix(fe.Message, "body: "); whole {
				badAt[i] = fault.Field(fmt.Sprintf("[%d]", i), "%s", rest)
			} else {
				badAt[i] = fault.Field("", "[%d].%s", i, fe.Message)
			}
			bad = true
			continue
		}
		list[i] = c.fields()
	}
	if bad { // with what the others' own checks say
		_, err := contact.ValidateBulk(list, badAt)
		return err
	}
	n, err := s.Contacts.Bulk(ctx, principal(r).TeamID, book, list)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"message": "Contacts added", "count": n})
	return nil
}

func (s *Services) bulkDeleteContacts(w http.ResponseWriter, r *http.Request) error {
	book, err := bookID(r)
	if err != nil {
		return err
	}
	body, err := readBody(w, r, maxBulkBody)
	if err != nil {
		return err
	}
	var in struct {
		ContactIDs []string `json:"contactIds"`
	}
	if err := decodeObject(body, &in); err != nil {
		return err
	}
	n, err := s.Contacts.Delete(r.Context(), principal(r).TeamID, book, in.ContactIDs)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "count": n})
	return nil
}

// contactContext is r's context for a write that may send double opt-in confirmations: with
// the address r came to (https, unless it says otherwise), where a link goes when the service
// has no PUBLIC_URL (on AWS, API Gateway's host, which routes by it), and with r's
// Idempotency-Key, if any (its nonce, claimed for a day at its first use), so that a retried
// request writes the confirmations it wrote before under the same ids (written once) instead
// of mailing each contact again.
func (s *Services) contactContext(r *http.Request) (context.Context, error) {
	key, err := idempotencyKey(r)
	if err != nil {
		return nil, err
	}
	ctx := contact.WithKeyDomain(r.Context(), principal(r).DomainID)
	if key != "" {
		nonce, err := s.Emails.KeyNonce(ctx, principal(r).TeamID, "contacts", key)
		if err != nil {
			return nil, err
		}
		ctx = campaign.WithIdempotencyKey(ctx, nonce)
	}
	scheme := "https"
	if p := r.Header.Get("X-Forwarded-Proto"); p == "http" {
		scheme = p
	}
	if r.Host == "" {
		return ctx, nil
	}
	return campaign.WithPublicURL(ctx, scheme+"://"+r.Host), nil
}
