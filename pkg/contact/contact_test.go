package contact_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/contact"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/bolt"
)

func ptr[T any](v T) *T { return &v }

func newService(t *testing.T) (*contact.Service, string) {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s := &contact.Service{Store: st, Now: time.Now, Log: slog.New(slog.DiscardHandler)}
	b, err := s.CreateBook(context.Background(), 1, contact.BookFields{Name: ptr("News")})
	if err != nil {
		t.Fatal(err)
	}
	return s, b.ID
}

// TestUpsertSubscription: the subscription rules of an upsert by email. A new contact is
// subscribed unless it says otherwise; an unsubscribed contact stays unsubscribed through any
// upsert, "subscribed": true included (only a PATCH re-subscribes: TestPatchResubscribes).
func TestUpsertSubscription(t *testing.T) {
	for _, c := range []struct {
		name     string
		existing *bool // nil: no contact yet; else its subscription
		request  *bool
		want     bool
	}{
		{"new, unspecified", nil, nil, true},
		{"new, subscribed false", nil, ptr(false), false},
		{"new, subscribed true", nil, ptr(true), true},
		{"unsubscribed, re-imported without the field", ptr(false), nil, false},
		{"unsubscribed, re-imported with false", ptr(false), ptr(false), false},
		{"unsubscribed, re-imported with true", ptr(false), ptr(true), false},
		{"subscribed, re-imported without the field", ptr(true), nil, true},
		{"subscribed, unsubscribed by the request", ptr(true), ptr(false), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, book := newService(t)
			ctx := context.Background()
			if c.existing != nil {
				if _, err := s.Upsert(ctx, 1, book, contact.Fields{Email: ptr("Ann@Example.org"), Subscribed: c.existing, FirstName: ptr("Ann")}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.Upsert(ctx, 1, book, contact.Fields{Email: ptr("ann@example.org"), Subscribed: c.request})
			if err != nil {
				t.Fatal(err)
			}
			if got.Subscribed != c.want {
				t.Errorf("subscribed = %v, want %v", got.Subscribed, c.want)
			}
			if got.Email != "ann@example.org" {
				t.Errorf("email %q, want it lower-cased (one contact per address)", got.Email)
			}
			if c.existing != nil && got.FirstName != "Ann" {
				t.Errorf("first name %q: an upsert that does not name a field keeps it", got.FirstName)
			}
			_, n, err := s.List(ctx, 1, book, storeFilter())
			if err != nil || n != 1 {
				t.Errorf("%d contacts (%v), want 1", n, err)
			}
		})
	}
}

// TestPatchResubscribes: a bulk import saying "subscribed": true leaves an unsubscribed contact
// unsubscribed, and keeps its other fields coming; a PATCH of the contact re-subscribes it.
func TestPatchResubscribes(t *testing.T) {
	s, book := newService(t)
	ctx := context.Background()
	c, err := s.Upsert(ctx, 1, book, contact.Fields{Email: ptr("ann@example.org"), Subscribed: ptr(false)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Bulk(ctx, 1, book, []contact.Fields{{Email: ptr("ann@example.org"), FirstName: ptr("Ann"), Subscribed: ptr(true)}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, 1, book, c.ID)
	if err != nil || got.Subscribed || got.FirstName != "Ann" {
		t.Fatalf("after a bulk import with subscribed true: %+v, %v; want unsubscribed, named Ann", got, err)
	}
	got, err = s.Update(ctx, 1, book, c.ID, contact.Fields{Subscribed: ptr(true)})
	if err != nil || !got.Subscribed {
		t.Fatalf("after a PATCH with subscribed true: %+v, %v; want subscribed", got, err)
	}
}

// TestBulk: every element is validated before any is written, the error names the element,
// and the size is bounded.
func TestBulk(t *testing.T) {
	many := make([]contact.Fields, contact.MaxBulk+1)
	for i := range many {
		many[i] = contact.Fields{Email: ptr(strings.Repeat("a", 1+i%5) + "@example.org")}
	}
	for _, c := range []struct {
		name    string
		list    []contact.Fields
		wantN   int
		wantErr string
	}{
		{"empty", nil, 0, ""},
		{"too many", many, 0, "body: at most 1000 contacts"},
		{"one bad element", []contact.Fields{{Email: ptr("a@example.org")}, {Email: ptr("not an address")}}, 0, "[1].email"},
		{"every bad element named", []contact.Fields{{Email: ptr("a@example.org")}, {Email: ptr("bad")}, {FirstName: ptr("x")}}, 0, "[1].email: invalid email address \"bad\"; [2].email"},
		{"missing email", []contact.Fields{{FirstName: ptr("x")}}, 0, "[0].email"},
		{"two good ones", []contact.Fields{{Email: ptr("a@example.org")}, {Email: ptr("B@example.org")}}, 2, ""},
		// One address twice (in two spellings) is one contact, and counts once.
		{"one address twice", []contact.Fields{{Email: ptr("d@example.org"), FirstName: ptr("A")},
			{Email: ptr("D@example.org"), FirstName: ptr("B")}}, 1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, book := newService(t)
			ctx := context.Background()
			n, err := s.Bulk(ctx, 1, book, c.list)
			if c.wantErr != "" {
				fe, ok := fault.As(err)
				if !ok || fe.Kind != fault.Invalid || !strings.Contains(fe.Error(), c.wantErr) {
					t.Fatalf("err %v, want a 400 naming %q", err, c.wantErr)
				}
			} else if err != nil || n != c.wantN {
				t.Fatalf("n %d err %v, want %d", n, err, c.wantN)
			}
			_, total, err := s.List(ctx, 1, book, storeFilter())
			if err != nil || total != c.wantN {
				t.Errorf("%d contacts stored (%v), want %d: nothing is written unless all are valid", total, err, c.wantN)
			}
		})
	}
}

// TestBulkEmptyOfAnUnknownBook: an empty list is no error, but the book must exist.
func TestBulkEmptyOfAnUnknownBook(t *testing.T) {
	s, _ := newService(t)
	if _, err := s.Bulk(context.Background(), 1, "nobook", nil); !isNotFound(err) {
		t.Errorf("err %v, want a 404", err)
	}
}

func isNotFound(err error) bool {
	fe, ok := fault.As(err)
	return ok && fe.Kind == fault.NotFound
}

func storeFilter() store.ContactFilter { return store.ContactFilter{Limit: 100} }
