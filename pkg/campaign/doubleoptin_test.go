package campaign

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
)

// TestConfirmationAlwaysCarriesItsLink: a book stored before its double opt-in content was
// checked may have content without {{doubleOptInUrl}}: its contacts get the default email, with
// the link, rather than one they cannot confirm with. The link is on the request's address
// when the signer has none (an API function on AWS), and there is none without either.
func TestConfirmationAlwaysCarriesItsLink(t *testing.T) {
	ctx := context.Background()
	s, st := stepFixture(t, 1)
	d := &DoubleOptIn{Store: st, Domains: domainsOf{st}, Signer: s.Signer, Now: time.Now}
	book := store.ContactBook{ID: "cbbench", TeamID: 1, DoubleOptInEnabled: true, DoubleOptInContent: "<p>Welcome aboard</p>"}
	ct := benchContact(0)
	if err := d.SendConfirmations(ctx, book, []store.Contact{ct}); err != nil {
		t.Fatal(err)
	}
	signer := s.Signer
	signer.BaseURL = ""
	d.Signer = signer
	if err := d.SendConfirmations(ctx, book, []store.Contact{ct}); err == nil {
		t.Error("a confirmation with no public URL to link to was written")
	}
	if err := d.SendConfirmations(WithPublicURL(ctx, "https://api.example.net"), book, []store.Contact{ct}); err != nil {
		t.Fatal(err)
	}
	list, _, err := st.ListEmails(ctx, store.EmailFilter{TeamID: 1, Limit: 10})
	if err != nil || len(list) != 2 {
		t.Fatalf("%d emails, %v; want 2", len(list), err)
	}
	bases := map[string]bool{}
	for _, m := range list {
		e, err := st.GetEmail(ctx, m.ID)
		if err != nil || e.Content.HTML == nil {
			t.Fatal(err)
		}
		html := *e.Content.HTML
		i := strings.Index(html, "/subscribe/")
		if i < 0 || !strings.Contains(html, ">Confirm</a>") {
			t.Fatalf("no confirmation button and link in %s", html)
		}
		bases[html[strings.LastIndex(html[:i], `href="`)+6:i]] = true
	}
	if !bases["http://127.0.0.1:3000"] || !bases["https://api.example.net"] {
		t.Errorf("links on %v, want the signer's and the request's", bases)
	}
}

// domainsOf looks domains up by name in a store.
type domainsOf struct{ st Store }

func (d domainsOf) Lookup(ctx context.Context, teamID int64, name string) (store.Domain, error) {
	list, err := d.st.ListDomains(ctx, teamID)
	if err != nil {
		return store.Domain{}, err
	}
	for _, x := range list {
		if x.Name == name {
			return x, nil
		}
	}
	return store.Domain{}, store.ErrNotFound
}

// TestRetriedConfirmationWritesNothing: a retry of a request with an Idempotency-Key (its first
// try lost its answer) finds its confirmation emails written and writes none of them again: on
// DynamoDB a second write would store the content again (its link carries the time it was
// made) where nothing points at it, and the email would be handed to delivery twice.
func TestRetriedConfirmationWritesNothing(t *testing.T) {
	ctx := WithIdempotencyKey(context.Background(), "nonce-1")
	s, st := stepFixture(t, 1)
	counting := &creations{Store: st}
	now := time.Now()
	d := &DoubleOptIn{Store: counting, Domains: domainsOf{st}, Signer: s.Signer, Now: func() time.Time { return now }}
	book := store.ContactBook{ID: "cbbench", TeamID: 1, DoubleOptInEnabled: true}
	first, second := benchContact(0), benchContact(2)
	if err := d.SendConfirmations(ctx, book, []store.Contact{first}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute) // the retry's link would differ
	if err := d.SendConfirmations(ctx, book, []store.Contact{first, second}); err != nil {
		t.Fatal(err)
	}
	if len(counting.ids) != 2 || counting.ids[0] == counting.ids[1] {
		t.Fatalf("emails written %v, want the first contact's once and the second's once", counting.ids)
	}
	list, _, err := st.ListEmails(ctx, store.EmailFilter{TeamID: 1, Limit: 10})
	if err != nil || len(list) != 2 {
		t.Fatalf("%d emails, %v; want 2", len(list), err)
	}
	// Without a key every call is a new request: its emails are new ones.
	if err := d.SendConfirmations(context.Background(), book, []store.Contact{first}); err != nil {
		t.Fatal(err)
	}
	if len(counting.ids) != 3 {
		t.Errorf("emails written %v, want a third for a request without a key", counting.ids)
	}
}

// creations records the ids of the emails written through it.
type creations struct {
	Store
	ids []string
}

func (c *creations) CreateEmails(ctx context.Context, emails []store.Email, events []store.Event) error {
	for _, e := range emails {
		c.ids = append(c.ids, e.ID)
	}
	return c.Store.CreateEmails(ctx, emails, events)
}

// TestConfirmationsKeepTheDailyQuota: confirmation emails are the team's emails: past its
// daily quota none of a request's is written (the contacts wait; adding them again after the
// reset mails them), within it they are.
func TestConfirmationsKeepTheDailyQuota(t *testing.T) {
	ctx := context.Background()
	s, st := stepFixture(t, 1)
	if _, err := st.UpdateTeam(ctx, 1, func(tm *store.Team) error { tm.DailyEmailLimit = 2; return nil }); err != nil {
		t.Fatal(err)
	}
	d := &DoubleOptIn{Store: st, Domains: domainsOf{st}, Signer: s.Signer, Now: time.Now}
	book := store.ContactBook{ID: "cbbench", TeamID: 1, DoubleOptInEnabled: true}
	three := []store.Contact{benchContact(0), benchContact(2), benchContact(4)}
	err := d.SendConfirmations(ctx, book, three)
	var f *fault.Error
	if !errors.As(err, &f) || f.Kind != fault.RateLimited {
		t.Fatalf("3 confirmations under a quota of 2: %v, want RATE_LIMITED", err)
	}
	if _, n, _ := st.ListEmails(ctx, store.EmailFilter{TeamID: 1, Limit: 10}); n != 0 {
		t.Fatalf("%d emails written past the quota, want none", n)
	}
	if err := d.SendConfirmations(ctx, book, three[:2]); err != nil {
		t.Fatalf("2 confirmations under a quota of 2: %v", err)
	}
	if _, n, _ := st.ListEmails(ctx, store.EmailFilter{TeamID: 1, Limit: 10}); n != 2 {
		t.Fatalf("%d emails written, want 2", n)
	}
}
