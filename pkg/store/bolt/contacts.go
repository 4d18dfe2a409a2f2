package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	bbolt "go.etcd.io/bbolt"

	"github.com/mailroom/mailroom/pkg/store"
)

// Contacts are keyed by team|book|0x00|lower(email), so that a book's contacts are one key range
// in email order: ListContacts and ContactsAfter walk keys, PutContact finds an address with one
// Get. The id index (same prefix, then the contact id, value the email) serves GetContact,
// UpdateContact and DeleteContacts. Book ids are text, so the 0x00 separator keeps book "b1"
// apart from book "b10". A book's ContactCount lives on its record and changes in the same
// transaction as the contacts.

func bookKey(teamID int64, bookID string) []byte {
	return teamKey(teamID, []byte(bookID))
}

func contactPrefix(teamID int64, bookID string) []byte {
	return teamKey(teamID, []byte(bookID), []byte{0})
}

func contactKey(teamID int64, bookID, email string) []byte {
	return append(contactPrefix(teamID, bookID), email...)
}

func contactIDKey(teamID int64, bookID, id string) []byte {
	return append(contactPrefix(teamID, bookID), id...)
}

func lowerEmail(email string) string {
	return strings.ToLower(strings.TrimSpace(email))
}

// CreateContactBook fails with ErrConflict when the id is taken. ContactCount starts at 0
// whatever the caller set: the store keeps it.
func (s *Store) CreateContactBook(ctx context.Context, b store.ContactBook) error {
	b.ContactCount = 0
	return s.updateNow(ctx, func(tx *bbolt.Tx) error {
		books := tx.Bucket(bucketBooks)
		key := bookKey(b.TeamID, b.ID)
		if books.Get(key) != nil || tx.Bucket(bucketBooksDel).Get(key) != nil {
			return fmt.Errorf("bolt: contact book %s: %w", b.ID, store.ErrConflict)
		}
		return put(books, key, b)
	})
}

func (s *Store) GetContactBook(ctx context.Context, teamID int64, id string) (store.ContactBook, error) {
	var b store.ContactBook
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		var err error
		b, err = get[store.ContactBook](tx.Bucket(bucketBooks), bookKey(teamID, id))
		return err
	})
	return b, err
}

// ListContactBooks sorts in memory: a team has few books, so no time index is kept for them.
func (s *Store) ListContactBooks(ctx context.Context, teamID int64) ([]store.ContactBook, error) {
	var out []store.ContactBook
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		prefix := u64(teamID)
		c := tx.Bucket(bucketBooks).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var b store.ContactBook
			if err := json.Unmarshal(v, &b); err != nil {
				return fmt.Errorf("bolt: decode contact book: %w", err)
			}
			out = append(out, b)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID > out[j].ID
	})
	return out, nil
}

// UpdateContactBook is optimistic on everything but ContactCount: a contact added while fn runs
// does not make the update start over, and the write keeps the count as it stands then.
func (s *Store) UpdateContactBook(ctx context.Context, teamID int64, id string, fn func(*store.ContactBook) error) (store.ContactBook, error) {
	key := bookKey(teamID, id)
	type snapshot struct {
		book store.ContactBook
		seen []byte // its bytes without the count
	}
	return optimistic(ctx, s, "contact book "+id,
		func(tx *bbolt.Tx) (snapshot, error) {
			old, err := get[store.ContactBook](tx.Bucket(bucketBooks), key)
			if err != nil {
				return snapshot{}, err
			}
			seen, err := bookSansCount(old)
			return snapshot{old, seen}, err
		},
		func(snap snapshot) (store.ContactBook, error) {
			b := snap.book
			b.Properties = cloneMap(snap.book.Properties)
			b.Variables = append([]string(nil), snap.book.Variables...)
			if err := fn(&b); err != nil {
				return b, err
			}
			b.ID, b.TeamID = id, teamID
			return b, nil
		},
		func(tx *bbolt.Tx, snap snapshot, b *store.ContactBook) (bool, error) {
			books := tx.Bucket(bucketBooks)
			cur, err := get[store.ContactBook](books, key)
			if err != nil {
				return false, err
			}
			now, err := bookSansCount(cur)
			if err != nil {
				return false, err
			}
			if !bytes.Equal(now, snap.seen) {
				return true, nil
			}
			b.ContactCount = cur.ContactCount
			return false, put(books, key, *b)
		})
}

// bookSansCount is the encoding of a book but for its count: what UpdateContactBook compares.
func bookSansCount(b store.ContactBook) ([]byte, error) {
	b.ContactCount = 0
	raw, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("bolt: encode contact book: %w", err)
	}
	return raw, nil
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// DeleteContactBook removes the book record and marks the book deleted; DeleteContactsOfBook
// removes the contacts later. Every contact operation fails with ErrNotFound from now on, since
// each one checks the book.
func (s *Store) DeleteContactBook(ctx context.Context, teamID int64, id string) error {
	return s.updateNow(ctx, func(tx *bbolt.Tx) error {
		books := tx.Bucket(bucketBooks)
		key := bookKey(teamID, id)
		if books.Get(key) == nil {
			return store.ErrNotFound
		}
		if err := books.Delete(key); err != nil {
			return err
		}
		return tx.Bucket(bucketBooksDel).Put(key, nil)
	})
}

// DeleteContactsOfBook walks the id index of the book and removes (feeding contact.deleted) up to
// limit contacts (limit <= 0: all). The deleted-book mark goes in the same transaction as the last
// contacts, so DeletedContactBooks stops listing the book as soon as nothing is left. A book that
// still exists is refused with ErrConflict: its contacts are not garbage.
func (s *Store) DeleteContactsOfBook(ctx context.Context, teamID int64, bookID string, limit int) (int, error) {
	var n int
	err := s.updateNow(ctx, func(tx *bbolt.Tx) error {
		n = 0 // update may run this more than once
		bk := bookKey(teamID, bookID)
		if tx.Bucket(bucketBooks).Get(bk) != nil {
			return fmt.Errorf("bolt: contact book %s is not deleted: %w", bookID, store.ErrConflict)
		}
		prefix := contactPrefix(teamID, bookID)
		ids := tx.Bucket(bucketContactID)
		type pair struct{ idKey, email []byte }
		var doomed []pair
		c := ids.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && (limit <= 0 || len(doomed) < limit); k, v = c.Next() {
			doomed = append(doomed, pair{bytes.Clone(k), bytes.Clone(v)})
		}
		contacts := tx.Bucket(bucketContacts)
		for _, p := range doomed {
			if err := ids.Delete(p.idKey); err != nil {
				return err
			}
			if err := deleteContact(tx, contacts, teamID, append(bytes.Clone(prefix), p.email...)); err != nil {
				return err
			}
		}
		n = len(doomed)
		if k, _ := ids.Cursor().Seek(prefix); k == nil || !bytes.HasPrefix(k, prefix) {
			return tx.Bucket(bucketBooksDel).Delete(bk)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// deleteContact removes a contact and feeds its deletion.
func deleteContact(tx *bbolt.Tx, contacts *bbolt.Bucket, teamID int64, key []byte) error {
	if raw := contacts.Get(key); raw != nil {
		c, err := decode[store.Contact](raw, "contact")
		if err != nil {
			return err
		}
		if err := appendChange(tx, teamID, store.Change{Before: store.Record{Contact: &c}}); err != nil {
			return err
		}
	}
	return contacts.Delete(key)
}

// DeletedContactBooks lists the marks in key order (team, then book id).
func (s *Store) DeletedContactBooks(ctx context.Context, limit int) ([]store.DeletedBook, error) {
	var out []store.DeletedBook
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketBooksDel).Cursor()
		for k, _ := c.First(); k != nil && (limit <= 0 || len(out) < limit); k, _ = c.Next() {
			if len(k) < 8 {
				continue
			}
			out = append(out, store.DeletedBook{TeamID: int64(binary.BigEndian.Uint64(k[:8])), BookID: string(k[8:])})
		}
		return nil
	})
	return out, err
}

// bookExists is the check every contact operation starts with: a deleted book's contacts are
// invisible even before DeleteContactsOfBook removes them.
func bookExists(tx *bbolt.Tx, teamID int64, bookID string) bool {
	return tx.Bucket(bucketBooks).Get(bookKey(teamID, bookID)) != nil
}

// PutContact is PutContacts with one put: fn runs inside the write transaction, so of many
// concurrent puts of one new address, one creates the contact and the others update it. A new
// contact raises ContactCount in the same transaction.
func (s *Store) PutContact(ctx context.Context, teamID int64, bookID, email, newID string, fn func(c *store.Contact, existed bool) error) (store.Contact, error) {
	out, err := s.PutContacts(ctx, teamID, bookID, []store.ContactPut{{Email: email, NewID: newID, Fn: fn}})
	if err != nil {
		return store.Contact{}, err
	}
	return out[0], nil
}

// PutContacts upserts every contact in one write transaction (one disk sync however many),
// each as PutContact does; fn runs inside it, so it must be quick and may run again if the
// transaction is retried. An error writes nothing.
func (s *Store) PutContacts(ctx context.Context, teamID int64, bookID string, puts []store.ContactPut) ([]store.Contact, error) {
	var out []store.Contact
	err := s.updateNow(ctx, func(tx *bbolt.Tx) error {
		out = make([]store.Contact, 0, len(puts)) // update may run this more than once
		books := tx.Bucket(bucketBooks)
		bk := bookKey(teamID, bookID)
		book, err := get[store.ContactBook](books, bk)
		if err != nil {
			return err
		}
		contacts, ids := tx.Bucket(bucketContacts), tx.Bucket(bucketContactID)
		added := int64(0)
		for i, p := range puts {
			email := lowerEmail(p.Email)
			key := contactKey(teamID, bookID, email)
			c := store.Contact{TeamID: teamID, BookID: bookID, Email: email}
			var ch store.Change
			raw := contacts.Get(key)
			existed := raw != nil
			if existed {
				if c, err = decode[store.Contact](raw, "contact"); err != nil {
					return err
				}
				before := c
				ch.Before.Contact = &before
			}
			id := c.ID
			if !existed {
				if p.NewID == "" {
					return fmt.Errorf("bolt: put contact %d: empty new id", i)
				}
				id = p.NewID
			}
			if err := p.Fn(&c, existed); err != nil {
				return err
			}
			c.ID, c.TeamID, c.BookID, c.Email = id, teamID, bookID, email
			if !existed {
				ik := contactIDKey(teamID, bookID, id)
				if ids.Get(ik) != nil {
					return fmt.Errorf("bolt: contact id %s: %w", id, store.ErrConflict)
				}
				if err := ids.Put(ik, []byte(email)); err != nil {
					return err
				}
				added++
			}
			after := c
			ch.After.Contact = &after
			if err := appendChange(tx, teamID, ch); err != nil {
				return err
			}
			if err := put(contacts, key, c); err != nil {
				return err
			}
			out = append(out, c)
		}
		if added == 0 {
			return nil
		}
		book.ContactCount += added
		return put(books, bk, book)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readContact finds a contact by id through the index; raw is its stored encoding.
func readContact(tx *bbolt.Tx, teamID int64, bookID, id string) (c store.Contact, raw []byte, err error) {
	if !bookExists(tx, teamID, bookID) {
		return c, nil, store.ErrNotFound
	}
	email := tx.Bucket(bucketContactID).Get(contactIDKey(teamID, bookID, id))
	if email == nil {
		return c, nil, store.ErrNotFound
	}
	raw = tx.Bucket(bucketContacts).Get(contactKey(teamID, bookID, string(email)))
	if raw == nil {
		return c, nil, fmt.Errorf("bolt: contact %s in index but not stored: %w", id, store.ErrNotFound)
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, nil, fmt.Errorf("bolt: decode contact: %w", err)
	}
	return c, raw, nil
}

func (s *Store) GetContact(ctx context.Context, teamID int64, bookID, id string) (store.Contact, error) {
	var c store.Contact
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		var err error
		c, _, err = readContact(tx, teamID, bookID, id)
		return err
	})
	return c, err
}

// ListContacts walks the book's key range without decoding past the page; the total of an
// unfiltered list is the book's ContactCount, kept exact in the same transactions as the
// contacts. With Emails or IDs (both: a contact must match both) it looks the contacts up one by
// one and sorts them by email.
func (s *Store) ListContacts(ctx context.Context, teamID int64, bookID string, f store.ContactFilter) ([]store.Contact, int, error) {
	var (
		page  []store.Contact
		total int
	)
	offset := max(f.Offset, 0)
	inPage := func(i int) bool { return i >= offset && (f.Limit <= 0 || i < offset+f.Limit) }
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		books := tx.Bucket(bucketBooks)
		book, err := get[store.ContactBook](books, bookKey(teamID, bookID))
		if err != nil {
			return err
		}
		contacts := tx.Bucket(bucketContacts)
		if len(f.Emails) == 0 && len(f.IDs) == 0 {
			total = int(book.ContactCount)
			prefix := contactPrefix(teamID, bookID)
			c := contacts.Cursor()
			i := 0
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				if f.Limit > 0 && i >= offset+f.Limit {
					break
				}
				if inPage(i) {
					var ct store.Contact
					if err := json.Unmarshal(v, &ct); err != nil {
						return fmt.Errorf("bolt: decode contact: %w", err)
					}
					page = append(page, ct)
				}
				i++
			}
			return nil
		}
		// Filtered: collect the matching emails, then decode the page only.
		match := make(map[string]bool)
		if len(f.Emails) > 0 {
			for _, e := range f.Emails {
				e = lowerEmail(e)
				if contacts.Get(contactKey(teamID, bookID, e)) != nil {
					match[e] = true
				}
			}
		}
		if len(f.IDs) > 0 {
			byID := make(map[string]bool)
			ids := tx.Bucket(bucketContactID)
			for _, id := range f.IDs {
				if e := ids.Get(contactIDKey(teamID, bookID, id)); e != nil {
					byID[string(e)] = true
				}
			}
			if len(f.Emails) == 0 {
				match = byID
			} else {
				for e := range match {
					if !byID[e] {
						delete(match, e)
					}
				}
			}
		}
		emails := make([]string, 0, len(match))
		for e := range match {
			emails = append(emails, e)
		}
		sort.Strings(emails)
		total = len(emails)
		for i, e := range emails {
			if !inPage(i) {
				continue
			}
			ct, err := get[store.Contact](contacts, contactKey(teamID, bookID, e))
			if err != nil {
				return err
			}
			page = append(page, ct)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return page, total, nil
}

// ContactsAfter seeks to the cursor inside the book's key range: the cost of a page is its
// size, however deep into the book it starts. limit <= 0 means the rest of the book.
func (s *Store) ContactsAfter(ctx context.Context, teamID int64, bookID, cursor string, limit int) ([]store.Contact, error) {
	cursor = lowerEmail(cursor)
	var out []store.Contact
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		if !bookExists(tx, teamID, bookID) {
			return store.ErrNotFound
		}
		prefix := contactPrefix(teamID, bookID)
		from := contactKey(teamID, bookID, cursor)
		c := tx.Bucket(bucketContacts).Cursor()
		k, v := c.Seek(from)
		if k != nil && cursor != "" && bytes.Equal(k, from) {
			k, v = c.Next()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && (limit <= 0 || len(out) < limit); k, v = c.Next() {
			var ct store.Contact
			if err := json.Unmarshal(v, &ct); err != nil {
				return fmt.Errorf("bolt: decode contact: %w", err)
			}
			out = append(out, ct)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateContact is optimistic on the stored bytes, like UpdateTemplate. A change of email moves
// the record to the new key (refused with ErrConflict when taken) and repoints the id index.
func (s *Store) UpdateContact(ctx context.Context, teamID int64, bookID, id string, fn func(*store.Contact) error) (store.Contact, error) {
	c, err := optimistic(ctx, s, "contact "+id,
		func(tx *bbolt.Tx) ([]byte, error) {
			_, raw, err := readContact(tx, teamID, bookID, id)
			return bytes.Clone(raw), err
		},
		func(raw []byte) (changed[store.Contact], error) {
			old, err := decode[store.Contact](raw, "contact")
			if err != nil {
				return changed[store.Contact]{}, err
			}
			c, _ := decode[store.Contact](raw, "contact") // a copy fn may change
			if err := fn(&c); err != nil {
				return changed[store.Contact]{}, err
			}
			c.ID, c.TeamID, c.BookID = id, teamID, bookID
			c.Email = lowerEmail(c.Email)
			return changed[store.Contact]{old, c}, nil
		},
		func(tx *bbolt.Tx, raw []byte, ch *changed[store.Contact]) (bool, error) {
			_, cur, err := readContact(tx, teamID, bookID, id)
			if err != nil {
				return false, err
			}
			if !bytes.Equal(cur, raw) {
				return true, nil
			}
			c, old := ch.new, ch.old
			contacts := tx.Bucket(bucketContacts)
			if c.Email != old.Email {
				if c.Email == "" {
					return false, fmt.Errorf("bolt: contact %s: empty email", id)
				}
				if contacts.Get(contactKey(teamID, bookID, c.Email)) != nil {
					return false, fmt.Errorf("bolt: contact email %s: %w", c.Email, store.ErrConflict)
				}
				if err := contacts.Delete(contactKey(teamID, bookID, old.Email)); err != nil {
					return false, err
				}
				if err := tx.Bucket(bucketContactID).Put(contactIDKey(teamID, bookID, id), []byte(c.Email)); err != nil {
					return false, err
				}
			}
			if err := appendChange(tx, teamID, store.Change{Before: store.Record{Contact: &old}, After: store.Record{Contact: &c}}); err != nil {
				return false, err
			}
			return false, put(contacts, contactKey(teamID, bookID, c.Email), c)
		})
	return c.new, err
}

// DeleteContacts removes the contacts that exist among ids (each once) and lowers ContactCount
// by their number, in one transaction. ErrNotFound when the book does not exist.
func (s *Store) DeleteContacts(ctx context.Context, teamID int64, bookID string, ids []string) (int, error) {
	var n int
	err := s.updateNow(ctx, func(tx *bbolt.Tx) error {
		n = 0 // update may run this more than once
		books := tx.Bucket(bucketBooks)
		bk := bookKey(teamID, bookID)
		book, err := get[store.ContactBook](books, bk)
		if err != nil {
			return err
		}
		idx := tx.Bucket(bucketContactID)
		contacts := tx.Bucket(bucketContacts)
		for _, id := range ids {
			ik := contactIDKey(teamID, bookID, id)
			email := idx.Get(ik)
			if email == nil {
				continue // unknown, or listed twice
			}
			if err := deleteContact(tx, contacts, teamID, contactKey(teamID, bookID, string(email))); err != nil {
				return err
			}
			if err := idx.Delete(ik); err != nil {
				return err
			}
			n++
		}
		if n == 0 {
			return nil
		}
		book.ContactCount = max(book.ContactCount-int64(n), 0)
		return put(books, bk, book)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
