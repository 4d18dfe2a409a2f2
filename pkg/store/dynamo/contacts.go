package dynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mailroom/mailroom/pkg/store"
)

// Contact books and contacts (see keys.go for the layout). A book of 100k+ contacts is the
// target: nothing reads a whole book on a request path but ListContacts with a deep Offset,
// the count comes from the book's ContactCount, and deleting a book is one transaction followed
// by background pages of BatchWriteItem.

const attrContactCount = "ContactCount"

type bookItem struct {
	keys
	store.ContactBook
	Version int64
}

func (st *Store) CreateContactBook(ctx context.Context, b store.ContactBook) error {
	b.ContactCount = 0
	m, err := marshal(bookItem{keys: bookKey(b.TeamID, b.ID).keys(), ContactBook: b})
	if err != nil {
		return err
	}
	return st.putNew(ctx, m)
}

func (st *Store) getBook(ctx context.Context, teamID int64, id string) (bookItem, error) {
	var it bookItem
	err := st.getInto(ctx, bookKey(teamID, id), true, &it)
	return it, err
}

func (st *Store) GetContactBook(ctx context.Context, teamID int64, id string) (store.ContactBook, error) {
	it, err := st.getBook(ctx, teamID, id)
	return it.ContactBook, err
}

// ListContactBooks is one Query of the team's BOOK# items, sorted newest first in code.
func (st *Store) ListContactBooks(ctx context.Context, teamID int64) ([]store.ContactBook, error) {
	return newestFirst(ctx, st, bookKey(teamID, "").PK, bookPrefix, func(it bookItem) store.ContactBook { return it.ContactBook },
		func(b store.ContactBook) (time.Time, string) { return b.CreatedAt, b.ID })
}

// UpdateContactBook is an UpdateItem that SETs every attribute but ContactCount, conditioned on
// the Version read: contacts created meanwhile keep their count.
func (st *Store) UpdateContactBook(ctx context.Context, teamID int64, id string, fn func(*store.ContactBook) error) (store.ContactBook, error) {
	k := bookKey(teamID, id)
	return optimistic(ctx, st, "contact book "+id, func() (store.ContactBook, error) {
		old, err := st.getBook(ctx, teamID, id)
		if err != nil {
			return store.ContactBook{}, err
		}
		b := old.ContactBook
		b.Properties, b.Variables = maps.Clone(b.Properties), slices.Clone(b.Variables)
		if err := fn(&b); err != nil {
			return store.ContactBook{}, err
		}
		b.ID, b.TeamID = id, teamID
		m, err := marshal(bookItem{keys: k.keys(), ContactBook: b, Version: old.Version + 1})
		if err != nil {
			return store.ContactBook{}, err
		}
		stamp(m)
		expr, names, values := setAll(m, attrContactCount)
		values[":v"] = avN(old.Version)
		set := maps.Clone(m)
		delete(set, attrContactCount)
		out, err := st.updateCond(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(st.table),
			Key:                       k.av(),
			UpdateExpression:          aws.String(expr),
			ConditionExpression:       aws.String("Version = :v"),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: values,
			ReturnValues:              types.ReturnValueAllNew,
		}, set)
		if conditionFailed(err) {
			return store.ContactBook{}, errLost
		}
		if err != nil {
			return store.ContactBook{}, fmt.Errorf("dynamo: update contact book: %w", err)
		}
		var cur bookItem
		if err := unmarshal(out.Attributes, &cur); err != nil {
			return store.ContactBook{}, err
		}
		return cur.ContactBook, nil
	})
}

// DeleteContactBook deletes the book item and writes its deleted-book marker in one
// transaction. From then on the book's contacts are unreachable (every contact operation checks
// the book) and no contact can be added to it (creates are conditioned on the book existing);
// DeleteContactsOfBook removes them in the background.
func (st *Store) DeleteContactBook(ctx context.Context, teamID int64, id string) error {
	marker, err := marshal(struct {
		keys
		TeamID int64
		BookID string
	}{keys: deletedBookKey(teamID, id).keys(), TeamID: teamID, BookID: id})
	if err != nil {
		return err
	}
	err = st.transactOnce(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{
			TableName: aws.String(st.table), Key: bookKey(teamID, id).av(),
			ConditionExpression: aws.String("attribute_exists(PK)"),
		}},
		{Put: &types.Put{TableName: aws.String(st.table), Item: marker}},
	}, store.ErrNotFound)
	if errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("dynamo: delete contact book: %w", err)
	}
	return nil
}

// DeleteContactsOfBook reads up to limit contacts of a deleted book (limit <= 0: all) with one
// Query (keys and ids only) and deletes them and their id items with BatchWriteItem, 25 items a
// call. When the Query reaches the end of the book the marker goes too: nothing can be added to
// a deleted book, so the partition stays empty. Without a marker nothing is left to delete (0),
// unless the book still exists: its contacts are not garbage (ErrConflict).
func (st *Store) DeleteContactsOfBook(ctx context.Context, teamID int64, bookID string, limit int) (int, error) {
	mk := deletedBookKey(teamID, bookID)
	got, err := st.batchGet(ctx, []key{mk, bookKey(teamID, bookID)}, true)
	if err != nil {
		return 0, err
	}
	if got[bookKey(teamID, bookID)] != nil {
		return 0, fmt.Errorf("dynamo: contact book %s is not deleted: %w", bookID, store.ErrConflict)
	}
	if got[mk] == nil {
		return 0, nil
	}
	in := &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": avS(contactPartition(teamID, bookID))},
		ProjectionExpression:      aws.String("#pk, #sk, #id"),
		ExpressionAttributeNames:  map[string]string{"#pk": AttrPK, "#sk": AttrSK, "#id": "ID"},
		ConsistentRead:            aws.Bool(true),
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(min(limit, 1000)))
	}
	items, err := st.query(ctx, in, max(limit, 0))
	if err != nil {
		return 0, err
	}
	reqs := make([]types.WriteRequest, 0, 2*len(items))
	for _, m := range items {
		var it struct{ ID string }
		if err := unmarshal(m, &it); err != nil {
			return 0, err
		}
		reqs = append(reqs,
			types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: keyOf(m).av()}},
			types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: contactIDKey(teamID, bookID, it.ID).av()}},
		)
	}
	if err := st.batchWrite(ctx, reqs); err != nil {
		return 0, err
	}
	if limit <= 0 || len(items) < limit {
		if _, err := st.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(st.table), Key: mk.av()}); err != nil {
			return 0, fmt.Errorf("dynamo: delete book marker: %w", err)
		}
	}
	return len(items), nil
}

// DeletedContactBooks is one Query of the markers' partition.
func (st *Store) DeletedContactBooks(ctx context.Context, limit int) ([]store.DeletedBook, error) {
	in := &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": avS(deletedBooksPartition)},
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(min(limit, 1000)))
	}
	items, err := st.query(ctx, in, max(limit, 0))
	if err != nil {
		return nil, err
	}
	out := make([]store.DeletedBook, 0, len(items))
	for _, m := range items {
		var d store.DeletedBook
		if err := unmarshal(m, &d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Contacts.

type contactItem struct {
	keys
	store.Contact
	Version int64
}

type contactIDItem struct {
	keys
	Email string
}

func (st *Store) contactIDPut(teamID int64, bookID, id, email string) (*types.Put, error) {
	m, err := marshal(contactIDItem{keys: contactIDKey(teamID, bookID, id).keys(), Email: email})
	if err != nil {
		return nil, err
	}
	return &types.Put{TableName: aws.String(st.table), Item: m, ConditionExpression: aws.String("attribute_not_exists(PK)")}, nil
}

// bookCountUpdate adds n to the book's ContactCount on the condition that the book exists: a
// contact can never be created in (or counted into) a deleted book.
func (st *Store) bookCountUpdate(teamID int64, bookID string, n int64) *types.Update {
	return &types.Update{
		TableName:                 aws.String(st.table),
		Key:                       bookKey(teamID, bookID).av(),
		UpdateExpression:          aws.String("ADD #c :n"),
		ConditionExpression:       aws.String("attribute_exists(PK)"),
		ExpressionAttributeNames:  map[string]string{"#c": attrContactCount},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": avN(n)},
	}
}

func cloneContact(c store.Contact) store.Contact {
	c.Properties = maps.Clone(c.Properties)
	return c
}

// PutContact reads the book and the contact in one BatchGetItem, then writes: an existing
// contact with one PutItem conditioned on its Version; a new one with a transaction of the
// contact (attribute_not_exists: the email's uniqueness in the book), its id item and the
// book's ContactCount (conditioned on the book existing). A lost race reads again.
func (st *Store) PutContact(ctx context.Context, teamID int64, bookID, email, newID string, fn func(c *store.Contact, existed bool) error) (store.Contact, error) {
	email = strings.ToLower(email)
	bk, ck := bookKey(teamID, bookID), contactKey(teamID, bookID, email)
	return optimistic(ctx, st, "contact "+email, func() (store.Contact, error) {
		got, err := st.batchGet(ctx, []key{bk, ck}, true)
		if err != nil {
			return store.Contact{}, err
		}
		if got[bk] == nil {
			return store.Contact{}, store.ErrNotFound
		}
		old := contactItem{Contact: store.Contact{TeamID: teamID, BookID: bookID, Email: email}}
		existed := got[ck] != nil
		if existed {
			if err := unmarshal(got[ck], &old); err != nil {
				return store.Contact{}, err
			}
		}
		c := cloneContact(old.Contact)
		if err := fn(&c, existed); err != nil {
			return store.Contact{}, err
		}
		c.TeamID, c.BookID, c.Email, c.ID = teamID, bookID, email, old.ID
		if !existed {
			c.ID = newID
		}
		m, err := marshal(contactItem{keys: ck.keys(), Contact: c, Version: old.Version + 1})
		if err != nil {
			return store.Contact{}, err
		}
		if existed {
			return c, st.putIfVersion(ctx, m, old.Version, "contact")
		}
		idPut, err := st.contactIDPut(teamID, bookID, c.ID, email)
		if err != nil {
			return store.Contact{}, err
		}
		_, err = st.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String(st.table), Item: m, ConditionExpression: aws.String("attribute_not_exists(PK)")}},
				{Put: idPut},
				{Update: st.bookCountUpdate(teamID, bookID, 1)},
			},
		})
		if reasons, ok := cancelReasons(err); ok {
			switch {
			case len(reasons) == 3 && reasonIsCondition(reasons[2]):
				return store.Contact{}, store.ErrNotFound
			case len(reasons) == 3 && reasonIsCondition(reasons[1]):
				return store.Contact{}, fmt.Errorf("dynamo: contact id %s taken: %w", c.ID, store.ErrConflict)
			case len(reasons) == 3 && reasonIsCondition(reasons[0]), retryableCancel(reasons):
				return store.Contact{}, errLost // created concurrently: update it instead
			}
		}
		if err != nil {
			return store.Contact{}, fmt.Errorf("dynamo: create contact: %w", err)
		}
		return c, nil
	})
}

// contactByID resolves a contact id: one BatchGetItem of the book and the id item, then one
// GetItem of the contact. A deleted book's contacts are not found.
// PutContacts puts each contact with PutContact: a put is a conditional transaction of its own.
func (st *Store) PutContacts(ctx context.Context, teamID int64, bookID string, puts []store.ContactPut) ([]store.Contact, error) {
	out := make([]store.Contact, 0, len(puts))
	for i, p := range puts {
		c, err := st.PutContact(ctx, teamID, bookID, p.Email, p.NewID, p.Fn)
		if err != nil {
			return out, fmt.Errorf("contact %d: %w", i, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func (st *Store) contactByID(ctx context.Context, teamID int64, bookID, id string) (contactItem, error) {
	ik := contactIDKey(teamID, bookID, id)
	got, err := st.batchGet(ctx, []key{bookKey(teamID, bookID), ik}, true)
	if err != nil {
		return contactItem{}, err
	}
	if got[bookKey(teamID, bookID)] == nil || got[ik] == nil {
		return contactItem{}, store.ErrNotFound
	}
	var ptr contactIDItem
	if err := unmarshal(got[ik], &ptr); err != nil {
		return contactItem{}, err
	}
	var it contactItem
	if err := st.getInto(ctx, contactKey(teamID, bookID, ptr.Email), true, &it); err != nil {
		return contactItem{}, err
	}
	if it.ID != id {
		return contactItem{}, store.ErrNotFound // the pointer moved meanwhile
	}
	return it, nil
}

func (st *Store) GetContact(ctx context.Context, teamID int64, bookID, id string) (store.Contact, error) {
	it, err := st.contactByID(ctx, teamID, bookID, id)
	return it.Contact, err
}

// ListContacts reads the book (for its existence and its ContactCount, the total when nothing
// is filtered) and then either pages the book's partition in email order, skipping Offset
// contacts (offset paging reads what it skips), or, with Emails or IDs, reads just those
// contacts by key.
func (st *Store) ListContacts(ctx context.Context, teamID int64, bookID string, f store.ContactFilter) ([]store.Contact, int, error) {
	book, err := st.getBook(ctx, teamID, bookID)
	if err != nil {
		return nil, 0, err
	}
	offset := max(f.Offset, 0)
	if len(f.Emails) == 0 && len(f.IDs) == 0 {
		total := int(book.ContactCount)
		want := 0
		if f.Limit > 0 {
			want = offset + f.Limit
		}
		in := &dynamodb.QueryInput{
			KeyConditionExpression:    aws.String("PK = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": avS(contactPartition(teamID, bookID))},
		}
		if want > 0 {
			in.Limit = aws.Int32(int32(min(want, 1000)))
		}
		items, err := st.query(ctx, in, want)
		if err != nil {
			return nil, 0, err
		}
		out, err := decodeContacts(items[min(offset, len(items)):])
		return out, total, err
	}
	var all []store.Contact
	if len(f.Emails) > 0 {
		ks := make([]key, len(f.Emails))
		for i, e := range f.Emails {
			ks[i] = contactKey(teamID, bookID, e)
		}
		got, err := st.batchGet(ctx, ks, true)
		if err != nil {
			return nil, 0, err
		}
		if all, err = decodeContacts(slices.Collect(maps.Values(got))); err != nil {
			return nil, 0, err
		}
		if len(f.IDs) > 0 {
			all = slices.DeleteFunc(all, func(c store.Contact) bool { return !slices.Contains(f.IDs, c.ID) })
		}
	} else {
		ks := make([]key, len(f.IDs))
		for i, id := range f.IDs {
			ks[i] = contactIDKey(teamID, bookID, id)
		}
		ptrs, err := st.batchGet(ctx, ks, true)
		if err != nil {
			return nil, 0, err
		}
		ks = ks[:0]
		for _, m := range ptrs {
			var p contactIDItem
			if err := unmarshal(m, &p); err != nil {
				return nil, 0, err
			}
			ks = append(ks, contactKey(teamID, bookID, p.Email))
		}
		got, err := st.batchGet(ctx, ks, true)
		if err != nil {
			return nil, 0, err
		}
		if all, err = decodeContacts(slices.Collect(maps.Values(got))); err != nil {
			return nil, 0, err
		}
		all = slices.DeleteFunc(all, func(c store.Contact) bool { return !slices.Contains(f.IDs, c.ID) })
	}
	slices.SortFunc(all, func(a, b store.Contact) int { return strings.Compare(a.Email, b.Email) })
	total := len(all)
	all = all[min(offset, len(all)):]
	if f.Limit > 0 && len(all) > f.Limit {
		all = all[:f.Limit]
	}
	return all, total, nil
}

func decodeContacts(items []map[string]types.AttributeValue) ([]store.Contact, error) {
	return decodeAll(items, func(it contactItem) store.Contact { return it.Contact })
}

// ContactsAfter is a GetItem of the book (a deleted book has no contacts) and one
// Limit-bounded Query of the book's partition from SK > CONTACT#<cursor>.
func (st *Store) ContactsAfter(ctx context.Context, teamID int64, bookID, cursor string, limit int) ([]store.Contact, error) {
	if _, err := st.getBook(ctx, teamID, bookID); err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		KeyConditionExpression: aws.String("PK = :pk AND SK > :after"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": avS(contactPartition(teamID, bookID)), ":after": avS(contactPrefix + strings.ToLower(cursor)),
		},
		ConsistentRead: aws.Bool(true),
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(min(limit, 1000)))
	}
	items, err := st.query(ctx, in, max(limit, 0))
	if err != nil {
		return nil, err
	}
	return decodeContacts(items)
}

// UpdateContact writes back with the condition Version = the version read. A change of email
// moves the contact: one transaction deletes the old key (Version-conditioned), puts the new
// one (attribute_not_exists: ErrConflict when the book has that email), repoints the id item
// and checks that the book still exists (so a deleted book never gains a contact its deletion
// could miss).
func (st *Store) UpdateContact(ctx context.Context, teamID int64, bookID, id string, fn func(*store.Contact) error) (store.Contact, error) {
	return optimistic(ctx, st, "contact "+id, func() (store.Contact, error) {
		old, err := st.contactByID(ctx, teamID, bookID, id)
		if err != nil {
			return store.Contact{}, err
		}
		c := cloneContact(old.Contact)
		if err := fn(&c); err != nil {
			return store.Contact{}, err
		}
		c.ID, c.TeamID, c.BookID, c.Email = id, teamID, bookID, strings.ToLower(c.Email)
		nk := contactKey(teamID, bookID, c.Email)
		m, err := marshal(contactItem{keys: nk.keys(), Contact: c, Version: old.Version + 1})
		if err != nil {
			return store.Contact{}, err
		}
		vcond, vvals := aws.String("Version = :v"), map[string]types.AttributeValue{":v": avN(old.Version)}
		if c.Email == old.Email {
			return c, st.putIfVersion(ctx, m, old.Version, "contact")
		}
		_, err = st.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: []types.TransactWriteItem{
				{Delete: &types.Delete{
					TableName: aws.String(st.table), Key: old.keys.key().av(),
					ConditionExpression: vcond, ExpressionAttributeValues: vvals,
				}},
				{Put: &types.Put{TableName: aws.String(st.table), Item: m, ConditionExpression: aws.String("attribute_not_exists(PK)")}},
				{Update: &types.Update{
					TableName: aws.String(st.table), Key: contactIDKey(teamID, bookID, id).av(),
					UpdateExpression:          aws.String("SET #e = :e"),
					ConditionExpression:       aws.String("attribute_exists(PK)"),
					ExpressionAttributeNames:  map[string]string{"#e": "Email"},
					ExpressionAttributeValues: map[string]types.AttributeValue{":e": avS(c.Email)},
				}},
				{ConditionCheck: &types.ConditionCheck{
					TableName: aws.String(st.table), Key: bookKey(teamID, bookID).av(),
					ConditionExpression: aws.String("attribute_exists(PK)"),
				}},
			},
		})
		if reasons, ok := cancelReasons(err); ok {
			switch {
			case len(reasons) == 4 && reasonIsCondition(reasons[1]):
				return store.Contact{}, fmt.Errorf("dynamo: contact email %s: %w", c.Email, store.ErrConflict)
			case len(reasons) == 4 && (reasonIsCondition(reasons[0]) || reasonIsCondition(reasons[2]) || reasonIsCondition(reasons[3])),
				retryableCancel(reasons):
				return store.Contact{}, errLost // changed, moved or deleted meanwhile: read again
			}
		}
		if err != nil {
			return store.Contact{}, fmt.Errorf("dynamo: update contact: %w", err)
		}
		return c, nil
	})
}

// maxContactsPerDelete: each contact takes two actions (contact, id item) plus one for the
// book's count, within the 100 actions of a transaction.
const maxContactsPerDelete = (maxTransactActions - 1) / 2

// DeleteContacts resolves the ids in one BatchGetItem (with the book) and deletes the contacts,
// their id items and their share of ContactCount in transactions of up to 49 contacts. A contact
// deleted or moved meanwhile fails its condition; the transaction is retried without it.
func (st *Store) DeleteContacts(ctx context.Context, teamID int64, bookID string, ids []string) (int, error) {
	bk := bookKey(teamID, bookID)
	ks := []key{bk}
	for _, id := range ids {
		ks = append(ks, contactIDKey(teamID, bookID, id))
	}
	got, err := st.batchGet(ctx, ks, true)
	if err != nil {
		return 0, err
	}
	if got[bk] == nil {
		return 0, store.ErrNotFound
	}
	type target struct{ id, email string }
	var targets []target
	seen := map[string]bool{}
	for _, id := range ids {
		m := got[contactIDKey(teamID, bookID, id)]
		if m == nil || seen[id] {
			continue
		}
		seen[id] = true
		var p contactIDItem
		if err := unmarshal(m, &p); err != nil {
			return 0, err
		}
		targets = append(targets, target{id, p.Email})
	}
	deleted := 0
	for len(targets) > 0 {
		batch := targets[:min(maxContactsPerDelete, len(targets))]
		targets = targets[len(batch):]
		for attempt := 0; len(batch) > 0; attempt++ {
			if attempt >= maxConflictAttempts {
				return deleted, &LostRaceError{Item: "contacts of book " + bookID, Attempts: attempt}
			}
			if attempt > 0 {
				if err := backoff(ctx, attempt); err != nil {
					return deleted, err
				}
			}
			var actions []types.TransactWriteItem
			for _, t := range batch {
				actions = append(actions,
					types.TransactWriteItem{Delete: &types.Delete{
						TableName: aws.String(st.table), Key: contactKey(teamID, bookID, t.email).av(),
						ConditionExpression:       aws.String("#id = :id"),
						ExpressionAttributeNames:  map[string]string{"#id": "ID"},
						ExpressionAttributeValues: map[string]types.AttributeValue{":id": avS(t.id)},
					}},
					types.TransactWriteItem{Delete: &types.Delete{
						TableName: aws.String(st.table), Key: contactIDKey(teamID, bookID, t.id).av(),
					}},
				)
			}
			actions = append(actions, types.TransactWriteItem{Update: st.bookCountUpdate(teamID, bookID, -int64(len(batch)))})
			_, err := st.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: actions})
			if err == nil {
				deleted += len(batch)
				break
			}
			reasons, ok := cancelReasons(err)
			if !ok {
				return deleted, fmt.Errorf("dynamo: delete contacts: %w", err)
			}
			if len(reasons) == len(actions) && reasonIsCondition(reasons[len(actions)-1]) {
				return deleted, store.ErrNotFound // the book was deleted meanwhile
			}
			gone := map[int]bool{}
			for i, r := range reasons {
				if i < len(actions)-1 && i%2 == 0 && reasonIsCondition(r) {
					gone[i/2] = true
				}
			}
			if len(gone) == 0 && !retryableCancel(reasons) {
				return deleted, fmt.Errorf("dynamo: delete contacts: %w", err)
			}
			kept := batch[:0:0]
			for i, t := range batch {
				if !gone[i] {
					kept = append(kept, t)
				}
			}
			batch = kept
		}
	}
	return deleted, nil
}
