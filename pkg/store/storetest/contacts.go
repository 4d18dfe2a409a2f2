package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

func newBook(teamID int64, name string, created time.Time) store.ContactBook {
	return store.ContactBook{
		ID:                 randID("book-"),
		TeamID:             teamID,
		Name:               name,
		Emoji:              "📙",
		Properties:         map[string]string{"source": "test"},
		Variables:          []string{"company", "plan"},
		DoubleOptInEnabled: true,
		DoubleOptInFrom:    "News <news@example.com>",
		DoubleOptInSubject: "Confirm",
		DoubleOptInContent: "<p>Confirm</p>",
		CreatedAt:          created,
		UpdatedAt:          created,
	}
}

func createBook(t *testing.T, s store.Store, teamID int64, name string, created time.Time) store.ContactBook {
	t.Helper()
	b := newBook(teamID, name, created)
	noErr(t, "CreateContactBook", s.CreateContactBook(t.Context(), b))
	return b
}

func bookCount(t *testing.T, s store.Store, teamID int64, bookID string) int64 {
	t.Helper()
	b, err := s.GetContactBook(t.Context(), teamID, bookID)
	noErr(t, "GetContactBook", err)
	return b.ContactCount
}

// putContact creates or updates the contact with first name first; it returns the contact.
func putContact(t *testing.T, s store.Store, teamID int64, bookID, email, first string) store.Contact {
	t.Helper()
	c, err := s.PutContact(t.Context(), teamID, bookID, email, randID("ct-"), func(c *store.Contact, existed bool) error {
		c.FirstName = first
		c.Subscribed = true
		if !existed {
			c.CreatedAt = now()
		}
		c.UpdatedAt = now()
		return nil
	})
	noErr(t, "PutContact("+email+")", err)
	return c
}

func contactEmails(list []store.Contact) []string {
	out := make([]string, len(list))
	for i, c := range list {
		out[i] = c.Email
	}
	return out
}

func bookIDs(list []store.ContactBook) []string {
	out := make([]string, len(list))
	for i, b := range list {
		out[i] = b.ID
	}
	return out
}

func testContactBooks(t *testing.T, s store.Store) {
	ctx := t.Context()
	team, other := newTeam(t, s), newTeam(t, s)
	base := now()
	b1 := createBook(t, s, team, "first", base)
	b2 := createBook(t, s, team, "second", base.Add(time.Second))
	b3 := createBook(t, s, team, "third", base.Add(2*time.Second))
	ob := createBook(t, s, other, "other", base.Add(3*time.Second))

	got, err := s.GetContactBook(ctx, team, b1.ID)
	noErr(t, "GetContactBook", err)
	checkBook(t, "GetContactBook", got, b1)
	_, err = s.GetContactBook(ctx, other, b1.ID)
	wantErr(t, "GetContactBook(other team's id)", err, store.ErrNotFound)
	_, err = s.GetContactBook(ctx, team, randID("book-"))
	wantErr(t, "GetContactBook(unknown)", err, store.ErrNotFound)

	list, err := s.ListContactBooks(ctx, team)
	noErr(t, "ListContactBooks", err)
	if want := []string{b3.ID, b2.ID, b1.ID}; !equalStrings(bookIDs(list), want) {
		t.Fatalf("ListContactBooks = %v, want %v (newest first)", bookIDs(list), want)
	}
	checkBook(t, "ListContactBooks[2]", list[2], b1)
	list, err = s.ListContactBooks(ctx, other)
	noErr(t, "ListContactBooks(other)", err)
	if !equalStrings(bookIDs(list), []string{ob.ID}) {
		t.Fatalf("ListContactBooks(other) = %v, want [%s]", bookIDs(list), ob.ID)
	}

	// UpdateContactBook applies fn but never ContactCount, which the store keeps.
	putContact(t, s, team, b1.ID, "a@example.com", "A")
	updated, err := s.UpdateContactBook(ctx, team, b1.ID, func(b *store.ContactBook) error {
		if b.ContactCount != 1 {
			return fmt.Errorf("fn sees ContactCount %d, want 1", b.ContactCount)
		}
		b.Name = "renamed"
		b.Variables = append(b.Variables, "city")
		b.Properties["k"] = "v"
		b.ContactCount = 99
		return nil
	})
	noErr(t, "UpdateContactBook", err)
	want := b1
	want.Name = "renamed"
	want.Variables = []string{"company", "plan", "city"}
	want.Properties = map[string]string{"source": "test", "k": "v"}
	want.ContactCount = 1
	checkBook(t, "UpdateContactBook result", updated, want)
	got, err = s.GetContactBook(ctx, team, b1.ID)
	noErr(t, "GetContactBook", err)
	checkBook(t, "GetContactBook after UpdateContactBook", got, want)

	errBoom := errors.New("boom")
	_, err = s.UpdateContactBook(ctx, team, b1.ID, func(b *store.ContactBook) error {
		b.Name = "lost"
		return errBoom
	})
	wantErr(t, "UpdateContactBook(fn fails)", err, errBoom)
	_, err = s.UpdateContactBook(ctx, other, b1.ID, func(*store.ContactBook) error { return nil })
	wantErr(t, "UpdateContactBook(other team's id)", err, store.ErrNotFound)
	got, err = s.GetContactBook(ctx, team, b1.ID)
	noErr(t, "GetContactBook", err)
	checkBook(t, "GetContactBook after refused updates", got, want)

	// Delete: scoped, then gone from Get and List.
	wantErr(t, "DeleteContactBook(other team's id)", s.DeleteContactBook(ctx, other, b2.ID), store.ErrNotFound)
	noErr(t, "DeleteContactBook", s.DeleteContactBook(ctx, team, b2.ID))
	_, err = s.GetContactBook(ctx, team, b2.ID)
	wantErr(t, "GetContactBook(deleted)", err, store.ErrNotFound)
	wantErr(t, "DeleteContactBook(deleted)", s.DeleteContactBook(ctx, team, b2.ID), store.ErrNotFound)
	list, err = s.ListContactBooks(ctx, team)
	noErr(t, "ListContactBooks", err)
	if want := []string{b3.ID, b1.ID}; !equalStrings(bookIDs(list), want) {
		t.Fatalf("ListContactBooks after delete = %v, want %v", bookIDs(list), want)
	}
}

func testPutContact(t *testing.T, s store.Store) {
	ctx := t.Context()
	team, other := newTeam(t, s), newTeam(t, s)
	book := createBook(t, s, team, "book", now())

	created := now()
	newID := randID("ct-")
	calls := 0
	c, err := s.PutContact(ctx, team, book.ID, "Alice@Example.COM", newID, func(c *store.Contact, existed bool) error {
		calls++
		if existed {
			return errors.New("fn sees existed=true for a new contact")
		}
		if c.TeamID != team || c.BookID != book.ID || c.Email != "alice@example.com" || c.ID != "" || c.FirstName != "" {
			return fmt.Errorf("fn sees %+v for a new contact, want zero but for team, book and lower-cased email", *c)
		}
		c.FirstName, c.LastName = "Alice", "Liddell"
		c.Properties = map[string]string{"company": "Acme"}
		c.Subscribed = true
		c.CreatedAt, c.UpdatedAt = created, created
		return nil
	})
	noErr(t, "PutContact(new)", err)
	if calls == 0 {
		t.Fatal("PutContact did not call fn")
	}
	want := store.Contact{
		ID: newID, TeamID: team, BookID: book.ID, Email: "alice@example.com", FirstName: "Alice", LastName: "Liddell",
		Properties: map[string]string{"company": "Acme"}, Subscribed: true, CreatedAt: created, UpdatedAt: created,
	}
	checkContact(t, "PutContact(new) result", c, want)
	got, err := s.GetContact(ctx, team, book.ID, newID)
	noErr(t, "GetContact", err)
	checkContact(t, "GetContact", got, want)
	if n := bookCount(t, s, team, book.ID); n != 1 {
		t.Fatalf("ContactCount after one new contact = %d, want 1", n)
	}

	// Same address, other case: the same contact is updated, fn sees it, the count stays.
	later := created.Add(time.Minute)
	c, err = s.PutContact(ctx, team, book.ID, "ALICE@example.com", randID("ct-"), func(c *store.Contact, existed bool) error {
		if !existed {
			return errors.New("fn sees existed=false for an existing contact")
		}
		if g := *c; g.ID != newID || g.FirstName != "Alice" || g.Properties["company"] != "Acme" || !g.CreatedAt.Equal(created) {
			return fmt.Errorf("fn sees %+v, want the stored contact", g)
		}
		c.FirstName = "Alicia"
		c.Subscribed = false
		c.UpdatedAt = later
		return nil
	})
	noErr(t, "PutContact(existing)", err)
	want.FirstName, want.Subscribed, want.UpdatedAt = "Alicia", false, later
	checkContact(t, "PutContact(existing) result", c, want)
	got, err = s.GetContact(ctx, team, book.ID, newID)
	noErr(t, "GetContact", err)
	checkContact(t, "GetContact after an update by email", got, want)
	if n := bookCount(t, s, team, book.ID); n != 1 {
		t.Fatalf("ContactCount after a second put of the same email = %d, want 1", n)
	}

	// An fn error writes nothing and counts nothing.
	errBoom := errors.New("boom")
	_, err = s.PutContact(ctx, team, book.ID, "bob@example.com", randID("ct-"), func(*store.Contact, bool) error { return errBoom })
	wantErr(t, "PutContact(fn fails)", err, errBoom)
	if n := bookCount(t, s, team, book.ID); n != 1 {
		t.Fatalf("ContactCount after a failed put = %d, want 1", n)
	}
	list, total, err := s.ListContacts(ctx, team, book.ID, store.ContactFilter{Limit: 10})
	noErr(t, "ListContacts", err)
	if total != 1 || !equalStrings(contactEmails(list), []string{"alice@example.com"}) {
		t.Fatalf("ListContacts after a failed put = %v (total %d), want [alice@example.com]", contactEmails(list), total)
	}

	// Missing book, other team's book.
	nop := func(*store.Contact, bool) error { return nil }
	_, err = s.PutContact(ctx, team, randID("book-"), "x@example.com", randID("ct-"), nop)
	wantErr(t, "PutContact(unknown book)", err, store.ErrNotFound)
	_, err = s.PutContact(ctx, other, book.ID, "x@example.com", randID("ct-"), nop)
	wantErr(t, "PutContact(other team's book)", err, store.ErrNotFound)
	if n := bookCount(t, s, team, book.ID); n != 1 {
		t.Fatalf("ContactCount after puts through another team = %d, want 1", n)
	}

	// GetContact is scoped to team and book.
	_, err = s.GetContact(ctx, other, book.ID, newID)
	wantErr(t, "GetContact(other team)", err, store.ErrNotFound)
	book2 := createBook(t, s, team, "book 2", now())
	_, err = s.GetContact(ctx, team, book2.ID, newID)
	wantErr(t, "GetContact(other book)", err, store.ErrNotFound)
	_, err = s.GetContact(ctx, team, book.ID, randID("ct-"))
	wantErr(t, "GetContact(unknown)", err, store.ErrNotFound)

	// The same address in another book is another contact.
	c2 := putContact(t, s, team, book2.ID, "alice@example.com", "Other")
	if c2.ID == newID {
		t.Fatal("the same email in two books got one contact")
	}
	if n := bookCount(t, s, team, book2.ID); n != 1 {
		t.Fatalf("ContactCount of the second book = %d, want 1", n)
	}
	if n := bookCount(t, s, team, book.ID); n != 1 {
		t.Fatalf("ContactCount of the first book after a put in the second = %d, want 1", n)
	}
}

func testPutContactConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	book := createBook(t, s, team, "book", now())
	ids := make([]string, workers)
	errs := concurrently(workers, func(i int) error {
		c, err := s.PutContact(ctx, team, book.ID, "race@example.com", fmt.Sprintf("ct-%02d-%s", i, randID("")),
			func(c *store.Contact, existed bool) error {
				c.FirstName = fmt.Sprintf("g%d", i)
				return nil
			})
		ids[i] = c.ID
		return err
	})
	for _, err := range errs {
		noErr(t, "concurrent PutContact", err)
	}
	for i := range ids {
		if ids[i] != ids[0] {
			t.Fatalf("concurrent puts of one email returned contacts %s and %s", ids[0], ids[i])
		}
	}
	list, total, err := s.ListContacts(ctx, team, book.ID, store.ContactFilter{Limit: 100})
	noErr(t, "ListContacts", err)
	if total != 1 || len(list) != 1 || list[0].ID != ids[0] {
		t.Fatalf("after %d concurrent puts of one email: %d contacts (total %d), want 1", workers, len(list), total)
	}
	if n := bookCount(t, s, team, book.ID); n != 1 {
		t.Fatalf("ContactCount after %d concurrent puts of one email = %d, want 1", workers, n)
	}
}

func testListContacts(t *testing.T, s store.Store) {
	ctx := t.Context()
	team, other := newTeam(t, s), newTeam(t, s)
	book := createBook(t, s, team, "book", now())
	otherBook := createBook(t, s, team, "other book", now())
	// Put out of order, mixed case: the list is in (lower-cased) email order.
	addrs := []string{"dave@example.com", "Bob@example.com", "erin@example.com", "alice@example.com", "carol@example.com"}
	byEmail := make(map[string]store.Contact)
	for _, a := range addrs {
		c := putContact(t, s, team, book.ID, a, "n")
		byEmail[c.Email] = c
	}
	putContact(t, s, team, otherBook.ID, "zed@example.com", "z")
	all := []string{"alice@example.com", "bob@example.com", "carol@example.com", "dave@example.com", "erin@example.com"}
	if n := bookCount(t, s, team, book.ID); n != 5 {
		t.Fatalf("ContactCount = %d, want 5", n)
	}

	cases := []struct {
		name  string
		f     store.ContactFilter
		want  []string
		total int
	}{
		{"all", store.ContactFilter{Limit: 10}, all, 5},
		{"page", store.ContactFilter{Offset: 1, Limit: 2}, all[1:3], 5},
		{"last page", store.ContactFilter{Offset: 4, Limit: 2}, all[4:], 5},
		{"past the end", store.ContactFilter{Offset: 5, Limit: 2}, nil, 5},
		{"emails", store.ContactFilter{Emails: []string{"erin@example.com", "bob@example.com", "nobody@example.com"}, Limit: 10},
			[]string{"bob@example.com", "erin@example.com"}, 2},
		{"emails paged", store.ContactFilter{Emails: []string{"erin@example.com", "bob@example.com", "alice@example.com"}, Offset: 1, Limit: 1},
			[]string{"bob@example.com"}, 3},
		{"ids", store.ContactFilter{IDs: []string{byEmail["dave@example.com"].ID, byEmail["alice@example.com"].ID, randID("ct-")}, Limit: 10},
			[]string{"alice@example.com", "dave@example.com"}, 2},
	}
	for _, tc := range cases {
		list, total, err := s.ListContacts(ctx, team, book.ID, tc.f)
		noErr(t, "ListContacts("+tc.name+")", err)
		if total != tc.total || !equalStrings(contactEmails(list), tc.want) {
			t.Fatalf("ListContacts(%s) = %v (total %d), want %v (total %d)", tc.name, contactEmails(list), total, tc.want, tc.total)
		}
	}
	list, _, err := s.ListContacts(ctx, team, book.ID, store.ContactFilter{Emails: []string{"carol@example.com"}, Limit: 10})
	noErr(t, "ListContacts", err)
	if len(list) != 1 {
		t.Fatalf("ListContacts(carol) = %v", contactEmails(list))
	}
	checkContact(t, "ListContacts(carol)", list[0], byEmail["carol@example.com"])

	// Another team sees nothing of the book (an error or an empty page).
	list, total, err := s.ListContacts(ctx, other, book.ID, store.ContactFilter{Limit: 10})
	if err == nil && (len(list) != 0 || total != 0) {
		t.Fatalf("another team lists %v (total %d) of the book", contactEmails(list), total)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ListContacts(other team): %v", err)
	}
	after, err := s.ContactsAfter(ctx, other, book.ID, "", 10)
	if err == nil && len(after) != 0 {
		t.Fatalf("another team walks %v of the book", contactEmails(after))
	}
}

func testContactsAfter(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	book := createBook(t, s, team, "book", now())
	neighbour := createBook(t, s, team, "neighbour", now())
	const n = 23
	var want []string
	for i := range n {
		// Reverse order of creation; prefixes of one another to check the byte order.
		addr := fmt.Sprintf("user%02d@example.com", n-1-i)
		putContact(t, s, team, book.ID, addr, "u")
		want = append(want, addr)
	}
	putContact(t, s, team, book.ID, "user@example.com", "u")
	putContact(t, s, team, book.ID, "user1@example.com", "u")
	want = append(want, "user@example.com", "user1@example.com")
	slices.Sort(want)
	putContact(t, s, team, neighbour.ID, "user05x@example.com", "n")
	putContact(t, s, team, neighbour.ID, "zzz@example.com", "n")

	var walked []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > len(want) {
			t.Fatalf("ContactsAfter never ends: %v", walked)
		}
		page, err := s.ContactsAfter(ctx, team, book.ID, cursor, 4)
		noErr(t, "ContactsAfter", err)
		if len(page) > 4 {
			t.Fatalf("ContactsAfter(limit 4) returned %d", len(page))
		}
		if len(page) == 0 {
			break
		}
		for _, c := range page {
			if c.BookID != book.ID || c.TeamID != team {
				t.Fatalf("ContactsAfter returned %+v of another book", c)
			}
		}
		walked = append(walked, contactEmails(page)...)
		cursor = page[len(page)-1].Email
	}
	if !equalStrings(walked, want) {
		t.Fatalf("ContactsAfter walked\n%v\nwant\n%v", walked, want)
	}
	page, err := s.ContactsAfter(ctx, team, book.ID, "user10@example.com", 2)
	noErr(t, "ContactsAfter", err)
	if got := contactEmails(page); !equalStrings(got, []string{"user11@example.com", "user12@example.com"}) {
		t.Fatalf("ContactsAfter(user10) = %v", got)
	}
	page, err = s.ContactsAfter(ctx, team, book.ID, "user10a", 1)
	noErr(t, "ContactsAfter", err)
	if got := contactEmails(page); !equalStrings(got, []string{"user11@example.com"}) {
		t.Fatalf("ContactsAfter(a cursor that is no contact) = %v", got)
	}
	page, err = s.ContactsAfter(ctx, team, book.ID, want[len(want)-1], 5)
	noErr(t, "ContactsAfter", err)
	if len(page) != 0 {
		t.Fatalf("ContactsAfter(last) = %v, want none", contactEmails(page))
	}
}

func testUpdateContact(t *testing.T, s store.Store) {
	ctx := t.Context()
	team, other := newTeam(t, s), newTeam(t, s)
	book := createBook(t, s, team, "book", now())
	a := putContact(t, s, team, book.ID, "a@example.com", "A")
	b := putContact(t, s, team, book.ID, "b@example.com", "B")

	updated, err := s.UpdateContact(ctx, team, book.ID, a.ID, func(c *store.Contact) error {
		c.LastName = "Aa"
		c.Properties = map[string]string{"plan": "pro"}
		return nil
	})
	noErr(t, "UpdateContact", err)
	want := a
	want.LastName, want.Properties = "Aa", map[string]string{"plan": "pro"}
	checkContact(t, "UpdateContact result", updated, want)
	got, err := s.GetContact(ctx, team, book.ID, a.ID)
	noErr(t, "GetContact", err)
	checkContact(t, "GetContact after UpdateContact", got, want)

	// A change of email to a taken one is refused and writes nothing.
	_, err = s.UpdateContact(ctx, team, book.ID, a.ID, func(c *store.Contact) error {
		c.Email = "B@example.com"
		c.FirstName = "lost"
		return nil
	})
	wantErr(t, "UpdateContact(email taken)", err, store.ErrConflict)
	got, err = s.GetContact(ctx, team, book.ID, a.ID)
	noErr(t, "GetContact", err)
	checkContact(t, "GetContact after a refused email change", got, want)

	// A change to a free email moves the contact; the old address becomes free.
	updated, err = s.UpdateContact(ctx, team, book.ID, a.ID, func(c *store.Contact) error {
		c.Email = "z@example.com"
		return nil
	})
	noErr(t, "UpdateContact(email change)", err)
	want.Email = "z@example.com"
	checkContact(t, "UpdateContact(email change) result", updated, want)
	list, total, err := s.ListContacts(ctx, team, book.ID, store.ContactFilter{Limit: 10})
	noErr(t, "ListContacts", err)
	if total != 2 || !equalStrings(contactEmails(list), []string{"b@example.com", "z@example.com"}) {
		t.Fatalf("ListContacts after an email change = %v (total %d)", contactEmails(list), total)
	}
	list, _, err = s.ListContacts(ctx, team, book.ID, store.ContactFilter{Emails: []string{"a@example.com"}, Limit: 10})
	noErr(t, "ListContacts", err)
	if len(list) != 0 {
		t.Fatalf("the old email still finds %v", contactEmails(list))
	}
	page, err := s.ContactsAfter(ctx, team, book.ID, "", 10)
	noErr(t, "ContactsAfter", err)
	if !equalStrings(contactEmails(page), []string{"b@example.com", "z@example.com"}) {
		t.Fatalf("ContactsAfter after an email change = %v", contactEmails(page))
	}
	fresh := putContact(t, s, team, book.ID, "a@example.com", "New A")
	if fresh.ID == a.ID {
		t.Fatal("a put of the freed email updated the moved contact")
	}
	if n := bookCount(t, s, team, book.ID); n != 3 {
		t.Fatalf("ContactCount = %d, want 3", n)
	}
	// The moved contact is found by its new email.
	c, err := s.PutContact(ctx, team, book.ID, "Z@example.com", randID("ct-"), func(c *store.Contact, existed bool) error {
		if !existed {
			return errors.New("the moved contact is not found by its new email")
		}
		return nil
	})
	noErr(t, "PutContact(new email of a moved contact)", err)
	if c.ID != a.ID {
		t.Fatalf("PutContact(z) = contact %s, want %s", c.ID, a.ID)
	}

	errBoom := errors.New("boom")
	_, err = s.UpdateContact(ctx, team, book.ID, b.ID, func(*store.Contact) error { return errBoom })
	wantErr(t, "UpdateContact(fn fails)", err, errBoom)
	_, err = s.UpdateContact(ctx, other, book.ID, b.ID, func(*store.Contact) error { return nil })
	wantErr(t, "UpdateContact(other team)", err, store.ErrNotFound)
	_, err = s.UpdateContact(ctx, team, book.ID, randID("ct-"), func(*store.Contact) error { return nil })
	wantErr(t, "UpdateContact(unknown)", err, store.ErrNotFound)
}

func testDeleteContacts(t *testing.T, s store.Store) {
	ctx := t.Context()
	team, other := newTeam(t, s), newTeam(t, s)
	book := createBook(t, s, team, "book", now())
	var ids []string
	for _, a := range []string{"a@example.com", "b@example.com", "c@example.com", "d@example.com"} {
		ids = append(ids, putContact(t, s, team, book.ID, a, "x").ID)
	}

	// Another team deletes nothing (the error, if any, is the adapter's).
	if n, err := s.DeleteContacts(ctx, other, book.ID, ids); err == nil && n != 0 {
		t.Fatalf("DeleteContacts through another team deleted %d", n)
	}
	if n := bookCount(t, s, team, book.ID); n != 4 {
		t.Fatalf("ContactCount after a delete by another team = %d, want 4", n)
	}

	n, err := s.DeleteContacts(ctx, team, book.ID, []string{ids[1], randID("ct-"), ids[3]})
	noErr(t, "DeleteContacts", err)
	if n != 2 {
		t.Fatalf("DeleteContacts = %d, want 2 (unknown ids are ignored)", n)
	}
	if c := bookCount(t, s, team, book.ID); c != 2 {
		t.Fatalf("ContactCount after deleting 2 of 4 = %d, want 2", c)
	}
	_, err = s.GetContact(ctx, team, book.ID, ids[1])
	wantErr(t, "GetContact(deleted)", err, store.ErrNotFound)
	n, err = s.DeleteContacts(ctx, team, book.ID, []string{ids[1], ids[3]})
	noErr(t, "DeleteContacts(again)", err)
	if n != 0 {
		t.Fatalf("DeleteContacts of deleted contacts = %d, want 0", n)
	}
	if c := bookCount(t, s, team, book.ID); c != 2 {
		t.Fatalf("ContactCount after a repeated delete = %d, want 2", c)
	}
	list, total, err := s.ListContacts(ctx, team, book.ID, store.ContactFilter{Limit: 10})
	noErr(t, "ListContacts", err)
	if total != 2 || !equalStrings(contactEmails(list), []string{"a@example.com", "c@example.com"}) {
		t.Fatalf("ListContacts after delete = %v (total %d)", contactEmails(list), total)
	}
	// A deleted address can come back as a new contact.
	back := putContact(t, s, team, book.ID, "b@example.com", "again")
	if back.ID == ids[1] {
		t.Fatal("a re-added address kept the deleted contact's id")
	}
	if c := bookCount(t, s, team, book.ID); c != 3 {
		t.Fatalf("ContactCount after re-adding = %d, want 3", c)
	}
}

func testDeleteContactBook(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	book := createBook(t, s, team, "doomed", now())
	keep := createBook(t, s, team, "kept", now())
	const n = 7
	var ids []string
	for i := range n {
		ids = append(ids, putContact(t, s, team, book.ID, fmt.Sprintf("c%d@example.com", i), "x").ID)
	}
	kept := putContact(t, s, team, keep.ID, "c0@example.com", "kept")

	noErr(t, "DeleteContactBook", s.DeleteContactBook(ctx, team, book.ID))
	_, err := s.GetContactBook(ctx, team, book.ID)
	wantErr(t, "GetContactBook(deleted)", err, store.ErrNotFound)
	_, err = s.PutContact(ctx, team, book.ID, "new@example.com", randID("ct-"), func(*store.Contact, bool) error { return nil })
	wantErr(t, "PutContact(deleted book)", err, store.ErrNotFound)

	listed := func() bool {
		t.Helper()
		deleted, err := s.DeletedContactBooks(ctx, 10_000)
		noErr(t, "DeletedContactBooks", err)
		for _, d := range deleted {
			if d.BookID == book.ID {
				if d.TeamID != team {
					t.Fatalf("DeletedContactBooks lists %+v, want team %d", d, team)
				}
				return true
			}
			if d.BookID == keep.ID {
				t.Fatal("DeletedContactBooks lists a live book")
			}
		}
		return false
	}
	if !listed() {
		t.Fatal("DeletedContactBooks does not list the deleted book")
	}

	removed := 0
	for steps := 0; ; steps++ {
		if steps > n {
			t.Fatalf("DeleteContactsOfBook never reports 0 (removed %d)", removed)
		}
		got, err := s.DeleteContactsOfBook(ctx, team, book.ID, 3)
		noErr(t, "DeleteContactsOfBook", err)
		if got < 0 || got > 3 {
			t.Fatalf("DeleteContactsOfBook(limit 3) = %d", got)
		}
		if got == 0 {
			break
		}
		removed += got
	}
	if removed != n {
		t.Fatalf("DeleteContactsOfBook removed %d contacts in all, want %d", removed, n)
	}
	if listed() {
		t.Fatal("DeletedContactBooks still lists the book once its contacts are gone")
	}
	for _, id := range ids {
		_, err := s.GetContact(ctx, team, book.ID, id)
		wantErr(t, "GetContact(contact of a deleted book)", err, store.ErrNotFound)
	}
	got, err := s.GetContact(ctx, team, keep.ID, kept.ID)
	noErr(t, "GetContact(contact of another book)", err)
	checkContact(t, "contact of another book", got, kept)
	if c := bookCount(t, s, team, keep.ID); c != 1 {
		t.Fatalf("ContactCount of the kept book = %d, want 1", c)
	}
}

// testPutContacts: a bulk put upserts each contact in order (a second put of an email in the
// same call updates what the first made), counts the new ones once, and stops at a put that
// fails: it and the puts after it write nothing.
func testPutContacts(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := int64(41)
	book := createBook(t, s, team, "bulk", now())
	putContact(t, s, team, book.ID, "old@example.com", "Old")
	set := func(first string) func(*store.Contact, bool) error {
		return func(c *store.Contact, existed bool) error {
			if c.FirstName != "" {
				c.LastName = c.FirstName // what the put saw
			}
			c.FirstName, c.Subscribed, c.UpdatedAt = first, true, now()
			if !existed {
				c.CreatedAt = now()
			}
			return nil
		}
	}
	got, err := s.PutContacts(ctx, team, book.ID, []store.ContactPut{
		{Email: "A@example.com", NewID: randID("ct-"), Fn: set("A1")},
		{Email: "old@example.com", NewID: randID("ct-"), Fn: set("Old2")},
		{Email: "a@EXAMPLE.com", NewID: randID("ct-"), Fn: set("A2")},
	})
	noErr(t, "PutContacts", err)
	if len(got) != 3 || got[0].ID != got[2].ID || got[2].FirstName != "A2" || got[2].LastName != "A1" || got[1].LastName != "Old" {
		t.Fatalf("PutContacts = %+v", got)
	}
	if n := bookCount(t, s, team, book.ID); n != 2 {
		t.Fatalf("ContactCount = %d, want 2 (one new contact)", n)
	}
	c, err := s.GetContact(ctx, team, book.ID, got[0].ID)
	noErr(t, "GetContact", err)
	if c.Email != "a@example.com" || c.FirstName != "A2" {
		t.Fatalf("stored %+v", c)
	}
	errBoom := errors.New("boom")
	_, err = s.PutContacts(ctx, team, book.ID, []store.ContactPut{
		{Email: "b@example.com", NewID: randID("ct-"), Fn: func(*store.Contact, bool) error { return errBoom }},
		{Email: "c@example.com", NewID: randID("ct-"), Fn: set("C")},
	})
	wantErr(t, "PutContacts(fn fails)", err, errBoom)
	list, total, err := s.ListContacts(ctx, team, book.ID, store.ContactFilter{Limit: 10})
	noErr(t, "ListContacts", err)
	if total != 2 || !equalStrings(contactEmails(list), []string{"a@example.com", "old@example.com"}) {
		t.Fatalf("after a failed bulk put: %v (total %d)", contactEmails(list), total)
	}
	_, err = s.PutContacts(ctx, team, randID("book-"), []store.ContactPut{{Email: "x@example.com", NewID: randID("ct-"), Fn: set("X")}})
	wantErr(t, "PutContacts(unknown book)", err, store.ErrNotFound)
}
