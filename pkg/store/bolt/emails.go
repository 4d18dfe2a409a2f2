package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
	bbolt "go.etcd.io/bbolt"
)

// indexEntry is one secondary-index key of an email.
type indexEntry struct {
	bucket []byte
	key    []byte
	value  []byte
}

func isPending(status string) bool {
	return status == store.StatusQueued || status == store.StatusSending
}

// emailIndexes lists every index key an email has, so that create and update maintain all
// indexes through one code path (update: remove the old set, add the new one).
func emailIndexes(e store.Email) []indexEntry {
	tk := timeKey(e.CreatedAt)
	out := []indexEntry{
		{bucketEmTime, teamKey(e.TeamID, tk, []byte(e.ID)), nil},
		{bucketEmDomTime, teamKey(e.TeamID, u64(e.DomainID), tk, []byte(e.ID)), nil},
	}
	if e.MessageID != "" {
		out = append(out, indexEntry{bucketMsgID, []byte(e.MessageID), []byte(e.ID)})
	}
	switch {
	case e.Status == store.StatusQueued && e.Held && e.CampaignID != "":
		out = append(out, indexEntry{bucketHeld, heldKey(e.TeamID, e.CampaignID, tk, e.ID), nil})
	case isPending(e.Status):
		out = append(out, indexEntry{bucketPending, join(tk, []byte(e.ID)), nil})
	}
	if e.Status == store.StatusScheduled && e.ScheduledAt != nil {
		out = append(out, indexEntry{bucketSchedAt, join(timeKey(*e.ScheduledAt), []byte(e.ID)), nil})
	}
	return out
}

// indexScheduled adds every SCHEDULED email to the scheduled index.
func indexScheduled(tx *bbolt.Tx) error {
	idx := tx.Bucket(bucketSchedAt)
	return tx.Bucket(bucketEmails).ForEach(func(k, v []byte) error {
		var e store.Email
		if err := json.Unmarshal(v, &e); err != nil {
			return err
		}
		if e.Status != store.StatusScheduled || e.ScheduledAt == nil {
			return nil
		}
		return idx.Put(join(timeKey(*e.ScheduledAt), k), nil)
	})
}

// writeEmail stores the metadata and the heavy content apart: index maintenance and version
// checks decode only the small metadata record, and the layout mirrors the DynamoDB adapter,
// which has to split the content for its 400 KB item limit.
func writeEmail(tx *bbolt.Tx, e store.Email) error {
	content := e.Content
	e.Content = store.Content{}
	if err := put(tx.Bucket(bucketEmails), []byte(e.ID), e); err != nil {
		return err
	}
	return put(tx.Bucket(bucketContent), []byte(e.ID), content)
}

// readEmail reads an email with its content; one past the retention is not found.
func (s *Store) readEmail(tx *bbolt.Tx, id string) (store.Email, error) {
	e, err := readEmailRaw(tx, id)
	if err == nil && s.expired(e) {
		return store.Email{}, store.ErrNotFound
	}
	return e, err
}

func readEmailRaw(tx *bbolt.Tx, id string) (store.Email, error) {
	e, err := get[store.Email](tx.Bucket(bucketEmails), []byte(id))
	if err != nil {
		return e, err
	}
	c, err := get[store.Content](tx.Bucket(bucketContent), []byte(id))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return e, err
	}
	e.Content = c
	return e, nil
}

func putIndexes(tx *bbolt.Tx, entries []indexEntry) error {
	for _, ie := range entries {
		if err := tx.Bucket(ie.bucket).Put(ie.key, ie.value); err != nil {
			return fmt.Errorf("bolt: index %s: %w", ie.bucket, err)
		}
	}
	return nil
}

// changedIndexes compares a record's index entries before and after a change: gone are the
// entries to delete, added those to put; an entry in both, value included, is in neither.
func changedIndexes(before, after []indexEntry) (gone, added []indexEntry) {
	same := func(a, b indexEntry) bool { return bytes.Equal(a.bucket, b.bucket) && bytes.Equal(a.key, b.key) }
	for _, b := range before {
		if !slices.ContainsFunc(after, func(a indexEntry) bool { return same(a, b) }) {
			gone = append(gone, b)
		}
	}
	for _, a := range after {
		if !slices.ContainsFunc(before, func(b indexEntry) bool { return same(a, b) && bytes.Equal(a.value, b.value) }) {
			added = append(added, a)
		}
	}
	return gone, added
}

func deleteIndexes(tx *bbolt.Tx, entries []indexEntry) error {
	for _, ie := range entries {
		if err := tx.Bucket(ie.bucket).Delete(ie.key); err != nil {
			return fmt.Errorf("bolt: index %s: %w", ie.bucket, err)
		}
	}
	return nil
}

// CreateEmails logs the emails and returns once the log is on disk (wal.go); they are then
// written into bbolt, all of one call in one transaction. An existing id is skipped with its
// events and its campaign counts, which is what makes a retried send exactly-once. Within one
// email, a second first event with an already used ID is ignored. A campaign email's Counted
// kinds (each once, however often listed) are added to its campaign's counters in the same
// transaction.
func (s *Store) CreateEmails(ctx context.Context, emails []store.Email, firstEvents []store.Event) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// What bbolt would refuse is refused before it is logged: a logged record is applied
	// until it goes in.
	for _, e := range emails {
		if len(e.ID) == 0 || len(e.ID) > maxIDLen {
			return fmt.Errorf("bolt: an email id of %d bytes", len(e.ID))
		}
	}
	for _, ev := range firstEvents {
		if len(ev.ID) > maxIDLen || len(ev.EmailID) > maxIDLen {
			return fmt.Errorf("bolt: an event id of %d bytes", len(ev.ID))
		}
	}
	// Copies: the caller may reuse its slices before the applier gets to them.
	return s.wal.append(walRecord{Emails: slices.Clone(emails), Events: slices.Clone(firstEvents)})
}

// maxIDLen bounds the ids CreateEmails takes, far below bbolt's 32 KB keys (an id is part of
// several index keys).
const maxIDLen = 1024

// createEmailsTx is CreateEmails' writes, applied from the log (wal.go).
func createEmailsTx(tx *bbolt.Tx, emails []store.Email, firstEvents []store.Event) (created int, err error) {
	byEmail := make(map[string][]store.Event)
	for _, ev := range firstEvents {
		byEmail[ev.EmailID] = append(byEmail[ev.EmailID], ev)
	}
	ems := tx.Bucket(bucketEmails)
	evs := tx.Bucket(bucketEvents)
	for _, e := range emails {
		if ems.Get([]byte(e.ID)) != nil {
			continue
		}
		created++
		e.Version = 1
		e.ScheduleCounted = e.Status == store.StatusScheduled
		if e.ScheduleCounted {
			if err := addScheduled(tx, e.TeamID, 1); err != nil {
				return 0, err
			}
		}
		if err := writeEmail(tx, e); err != nil {
			return 0, err
		}
		if err := putIndexes(tx, emailIndexes(e)); err != nil {
			return 0, err
		}
		if err := countKinds(tx, e.TeamID, e.CampaignID, newKinds(nil, e.Counted)); err != nil {
			return 0, err
		}
		if err := countStats(tx, e, newKinds(nil, e.Counted), e.CreatedAt); err != nil {
			return 0, err
		}
		for _, ev := range byEmail[e.ID] {
			key := eventKey(e.ID, ev.ID)
			if evs.Get(key) != nil {
				continue
			}
			if err := appendFeed(tx, e.TeamID, e.ID, ev.ID); err != nil {
				return 0, err
			}
			if err := put(evs, key, ev); err != nil {
				return 0, err
			}
		}
	}
	return created, nil
}

func (s *Store) GetEmail(ctx context.Context, id string) (store.Email, error) {
	if err := s.wal.settleEmail(ctx, id); err != nil {
		return store.Email{}, err
	}
	var e store.Email
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		var err error
		e, err = s.readEmail(tx, id)
		return err
	})
	return e, err
}

func (s *Store) GetEmailDetail(ctx context.Context, id string) (store.Email, []store.Event, error) {
	var (
		e      store.Email
		events []store.Event
	)
	if err := s.wal.settleEmail(ctx, id); err != nil {
		return store.Email{}, nil, err
	}
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		var err error
		if e, err = s.readEmail(tx, id); err != nil {
			return err
		}
		prefix := eventPrefix(id)
		c := tx.Bucket(bucketEvents).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var ev store.Event
			if err := json.Unmarshal(v, &ev); err != nil {
				return fmt.Errorf("bolt: decode event: %w", err)
			}
			events = append(events, ev)
		}
		return nil
	})
	if err != nil {
		return store.Email{}, nil, err
	}
	sort.SliceStable(events, func(i, j int) bool {
		if !events[i].CreatedAt.Equal(events[j].CreatedAt) {
			return events[i].CreatedAt.Before(events[j].CreatedAt)
		}
		return events[i].ID < events[j].ID
	})
	return e, events, nil
}

// emailRef is one index hit: enough to order and page without decoding the email.
type emailRef struct {
	time []byte
	id   string
}

// ListEmails walks the team (or team+domain) time index from the newest key, counting every hit
// within the bounds and decoding only the page. With several domains the hits of each domain
// index are merged by time.
func (s *Store) ListEmails(ctx context.Context, f store.EmailFilter) ([]store.Email, int, error) {
	var lo, hi []byte // inclusive bounds on the time part
	if f.Start != nil {
		lo = timeKey(*f.Start)
	}
	if s.retention > 0 {
		// Expired emails are neither listed nor counted, swept yet or not (whole days).
		if from := timeKey(store.RetainedFrom(time.Now(), s.retention)); lo == nil || bytes.Compare(lo, from) < 0 {
			lo = from
		}
	}
	if f.End != nil {
		hi = timeKey(*f.End)
	}
	var (
		page  []store.Email
		total int
	)
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var refs []emailRef
		if len(f.DomainIDs) == 0 {
			refs = scanTime(tx.Bucket(bucketEmTime), u64(f.TeamID), lo, hi)
		} else {
			seen := make(map[int64]bool)
			for _, d := range f.DomainIDs {
				if seen[d] {
					continue
				}
				seen[d] = true
				refs = append(refs, scanTime(tx.Bucket(bucketEmDomTime), teamKey(f.TeamID, u64(d)), lo, hi)...)
			}
			sort.Slice(refs, func(i, j int) bool {
				if c := bytes.Compare(refs[i].time, refs[j].time); c != 0 {
					return c > 0
				}
				return refs[i].id > refs[j].id
			})
		}
		total = len(refs)
		start := min(max(f.Offset, 0), len(refs))
		end := len(refs)
		if f.Limit > 0 {
			end = min(start+f.Limit, len(refs))
		}
		for _, r := range refs[start:end] {
			e, err := s.readEmail(tx, r.id)
			if errors.Is(err, store.ErrNotFound) {
				continue // expired since the window was chosen (midnight)
			}
			if err != nil {
				return fmt.Errorf("bolt: email %s in index: %w", r.id, err)
			}
			page = append(page, e)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return page, total, nil
}

// scanTime returns the refs under prefix whose 12-byte time part lies in [lo, hi] (nil: open),
// newest first. Keys are prefix|time|email id.
func scanTime(b *bbolt.Bucket, prefix, lo, hi []byte) []emailRef {
	var refs []emailRef
	c := b.Cursor()
	// Position after the last key of the range: seek to the first key past hi (or past the
	// prefix), then step back once.
	var k []byte
	var seekTo []byte
	if hi != nil {
		seekTo = join(prefix, hi, []byte{0xff})
		// An email id never starts with 0xff (ids are text), so every key with time == hi
		// sorts before seekTo; step back to reach them.
	} else {
		seekTo = prefixEnd(prefix)
	}
	if seekTo == nil {
		k, _ = c.Last()
	} else if k, _ = c.Seek(seekTo); k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
		rest := k[len(prefix):]
		if len(rest) < 12 {
			continue
		}
		tk := rest[:12]
		if hi != nil && bytes.Compare(tk, hi) > 0 {
			continue
		}
		if lo != nil && bytes.Compare(tk, lo) < 0 {
			break
		}
		refs = append(refs, emailRef{time: bytes.Clone(tk), id: string(rest[12:])})
	}
	return refs
}

// prefixEnd returns the smallest key greater than every key with the prefix, or nil when there
// is none (a prefix of all 0xff).
// lastWithPrefix positions c on the last key that starts with prefix (or wherever the walk
// back will find none): the start of a newest-first scan of one team's index.
func lastWithPrefix(c *bbolt.Cursor, prefix []byte) ([]byte, []byte) {
	end := prefixEnd(prefix)
	if end == nil {
		return c.Last()
	}
	if k, _ := c.Seek(end); k != nil {
		return c.Prev()
	}
	return c.Last()
}

func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// UpdateEmail implements optimistic concurrency on Version: fn runs on a snapshot outside the
// write transaction; the write succeeds only if Version is unchanged, otherwise it starts over.
// Events fn returns get EmailID set to the email; a repeated event ID (already stored, or twice
// in the batch) aborts the whole write with ErrDuplicateEvent. The kinds fn adds to Counted
// (those in the new Counted and not in the old one) are added to the campaign's counters in the
// same transaction as the email, so a lost race or an aborted write counts nothing.
func (s *Store) UpdateEmail(ctx context.Context, id string, fn func(*store.Email) ([]store.Event, error)) (store.Email, error) {
	// The snapshot keeps the record's stored bytes: the write compares them instead of
	// decoding the record again, and the new record is encoded before the write transaction,
	// which every writer shares, so that the transaction only checks and puts.
	type snapshot struct {
		e   store.Email
		raw []byte // the emails bucket's value, without the content
	}
	type emailChange struct {
		new       store.Email
		events    []store.Event
		raw       []byte // new encoded, without the content
		content   []byte // the content encoded, nil when it did not change
		scheduled int64  // what the change adds to the team's scheduled count
	}
	if err := s.wal.settleEmail(ctx, id); err != nil {
		return store.Email{}, err
	}
	c, err := optimistic(ctx, s, "email "+id,
		func(tx *bbolt.Tx) (snapshot, error) {
			raw := tx.Bucket(bucketEmails).Get([]byte(id))
			e, err := s.readEmail(tx, id)
			return snapshot{e, bytes.Clone(raw)}, err
		},
		func(snap snapshot) (emailChange, error) {
			old := snap.e
			e := cloneEmail(old)
			events, err := fn(&e)
			if err != nil {
				return emailChange{}, err
			}
			e.ID = id
			e.Version = old.Version + 1
			e.ScheduleCounted = old.ScheduleCounted
			c := emailChange{new: e, events: events}
			switch { // the write proceeds only on this very snapshot, so this holds then
			case old.ScheduleCounted && e.Status != store.StatusScheduled:
				c.new.ScheduleCounted, c.scheduled = false, -1
			case !old.ScheduleCounted && old.Status != store.StatusScheduled && e.Status == store.StatusScheduled:
				c.new.ScheduleCounted, c.scheduled = true, 1
			}
			record := c.new
			record.Content = store.Content{}
			if c.raw, err = json.Marshal(record); err != nil {
				return emailChange{}, fmt.Errorf("bolt: encode: %w", err)
			}
			if !reflect.DeepEqual(c.new.Content, old.Content) {
				if c.content, err = json.Marshal(c.new.Content); err != nil {
					return emailChange{}, fmt.Errorf("bolt: encode: %w", err)
				}
			}
			return c, nil
		},
		func(tx *bbolt.Tx, snap snapshot, c *emailChange) (bool, error) {
			old := snap.e
			if !bytes.Equal(tx.Bucket(bucketEmails).Get([]byte(id)), snap.raw) {
				return true, nil // changed since the snapshot
			}
			evs := tx.Bucket(bucketEvents)
			batch := make(map[string]bool, len(c.events))
			for _, ev := range c.events {
				if batch[ev.ID] || evs.Get(eventKey(id, ev.ID)) != nil {
					return false, fmt.Errorf("bolt: email %s event %s: %w", id, ev.ID, store.ErrDuplicateEvent)
				}
				batch[ev.ID] = true
			}
			gone, added := changedIndexes(emailIndexes(old), emailIndexes(c.new))
			if err := deleteIndexes(tx, gone); err != nil {
				return false, err
			}
			if c.scheduled != 0 {
				if err := addScheduled(tx, old.TeamID, c.scheduled); err != nil {
					return false, err
				}
			}
			if err := tx.Bucket(bucketEmails).Put([]byte(id), c.raw); err != nil {
				return false, fmt.Errorf("bolt: put: %w", err)
			}
			if c.content != nil {
				if err := tx.Bucket(bucketContent).Put([]byte(id), c.content); err != nil {
					return false, fmt.Errorf("bolt: put: %w", err)
				}
			}
			if err := putIndexes(tx, added); err != nil {
				return false, err
			}
			if err := countKinds(tx, c.new.TeamID, c.new.CampaignID, newKinds(old.Counted, c.new.Counted)); err != nil {
				return false, err
			}
			if err := countStats(tx, c.new, newKinds(old.Counted, c.new.Counted), c.new.UpdatedAt); err != nil {
				return false, err
			}
			for _, ev := range c.events {
				ev.EmailID = id
				if err := put(evs, eventKey(id, ev.ID), ev); err != nil {
					return false, err
				}
				if err := appendFeed(tx, c.new.TeamID, id, ev.ID); err != nil {
					return false, err
				}
			}
			return false, nil
		})
	return c.new, err
}

// cloneEmail copies the slices fn may modify in place, so that a retried fn never sees the
// changes of a previous, discarded attempt.
func cloneEmail(e store.Email) store.Email {
	c := e
	c.To = append([]string(nil), e.To...)
	c.CC = append([]string(nil), e.CC...)
	c.BCC = append([]string(nil), e.BCC...)
	c.ReplyTo = append([]string(nil), e.ReplyTo...)
	c.Counted = append([]string(nil), e.Counted...)
	c.Content.Headers = append([]store.Header(nil), e.Content.Headers...)
	c.Content.Attachments = append([]store.Attachment(nil), e.Content.Attachments...)
	if e.Content.HTML != nil { // fn may write through the pointers: the snapshot keeps its own
		html := *e.Content.HTML
		c.Content.HTML = &html
	}
	if e.Content.Text != nil {
		text := *e.Content.Text
		c.Content.Text = &text
	}
	return c
}

func (s *Store) FindEmailByMessageID(ctx context.Context, messageID string) (store.Email, error) {
	var e store.Email
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		id := tx.Bucket(bucketMsgID).Get([]byte(messageID))
		if id == nil {
			return store.ErrNotFound
		}
		var err error
		e, err = s.readEmail(tx, string(id))
		return err
	})
	return e, err
}

// PendingEmails reads the pending index, which holds exactly the QUEUED and SENDING emails
// keyed by creation time.
func (s *Store) PendingEmails(ctx context.Context, limit int) ([]string, error) {
	var ids []string
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketPending).Cursor()
		for k, _ := c.First(); k != nil && (limit <= 0 || len(ids) < limit); k, _ = c.Next() {
			ids = append(ids, string(k[12:]))
		}
		return nil
	})
	return ids, err
}

func heldKey(teamID int64, campaignID string, tk []byte, id string) []byte {
	return teamKey(teamID, []byte(campaignID), []byte{0}, tk, []byte(id))
}

// HeldEmails reads the held index of the campaign.
func (s *Store) HeldEmails(ctx context.Context, teamID int64, campaignID string, limit int) ([]string, error) {
	var ids []string
	prefix := teamKey(teamID, []byte(campaignID), []byte{0})
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketHeld).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && (limit <= 0 || len(ids) < limit); k, _ = c.Next() {
			ids = append(ids, string(k[len(prefix)+12:]))
		}
		return nil
	})
	return ids, err
}

// OverdueScheduled reads the scheduled index, which holds exactly the SCHEDULED emails keyed
// by their scheduledAt, up to before.
func (s *Store) OverdueScheduled(ctx context.Context, before time.Time, limit int) ([]string, error) {
	var ids []string
	end := timeKey(before)
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketSchedAt).Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k[:12], end) < 0 && (limit <= 0 || len(ids) < limit); k, _ = c.Next() {
			ids = append(ids, string(k[12:]))
		}
		return nil
	})
	return ids, err
}

// ExpireEmails deletes up to limit emails created before the retention, oldest first per team,
// with their content, events and index entries. Campaign counters are separate and keep their
// counts; list counts are counted from the index, so they follow.
func (s *Store) ExpireEmails(ctx context.Context, limit int) (int, error) {
	if s.retention <= 0 {
		return 0, nil
	}
	cutoff := timeKey(store.RetainedFrom(time.Now(), s.retention))
	var ids []string
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketEmTime).Cursor()
		for k, _ := c.First(); k != nil && (limit <= 0 || len(ids) < limit); {
			if len(k) < 20 {
				k, _ = c.Next()
				continue
			}
			if bytes.Compare(k[8:20], cutoff) < 0 {
				ids = append(ids, string(k[20:]))
				k, _ = c.Next()
				continue
			}
			// This team's remaining emails are newer: on to the next team.
			next := binary.BigEndian.Uint64(k[:8]) + 1
			if next == 0 {
				break
			}
			k, _ = c.Seek(u64(int64(next)))
		}
		return nil
	})
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	n := 0
	for start := 0; start < len(ids); start += 500 {
		chunk := ids[start:min(start+500, len(ids))]
		deleted := 0
		err := s.update(ctx, func(tx *bbolt.Tx) error {
			deleted = 0 // the function may run more than once
			for _, id := range chunk {
				e, err := readEmailRaw(tx, id)
				if errors.Is(err, store.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				if !s.expired(e) {
					continue // created before the window but scheduled later: kept until then
				}
				if e.ScheduleCounted {
					if err := addScheduled(tx, e.TeamID, -1); err != nil {
						return err
					}
				}
				if err := deleteIndexes(tx, emailIndexes(e)); err != nil {
					return err
				}
				evs := tx.Bucket(bucketEvents)
				prefix := eventPrefix(id)
				var keys [][]byte
				c := evs.Cursor()
				for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
					keys = append(keys, append([]byte(nil), k...))
				}
				for _, k := range keys {
					if err := evs.Delete(k); err != nil {
						return err
					}
				}
				if err := tx.Bucket(bucketContent).Delete([]byte(id)); err != nil {
					return err
				}
				if err := tx.Bucket(bucketEmails).Delete([]byte(id)); err != nil {
					return err
				}
				deleted++
			}
			return nil
		})
		if err != nil {
			return n, err
		}
		n += deleted // not the kept ones (scheduled later) nor those gone meanwhile
	}
	return n, nil
}

// addScheduled adds delta to the team's ScheduledCount, never below 0.
func addScheduled(tx *bbolt.Tx, teamID int64, delta int64) error {
	b := tx.Bucket(bucketSchedCnt)
	k := teamKey(teamID)
	var n int64
	if v := b.Get(k); v != nil {
		n = int64(binary.BigEndian.Uint64(v))
	}
	if err := b.Put(k, u64(max(n+delta, 0))); err != nil {
		return fmt.Errorf("bolt: scheduled count: %w", err)
	}
	return nil
}

// ScheduledCount reads the team's count of SCHEDULED emails.
func (s *Store) ScheduledCount(ctx context.Context, teamID int64) (int64, error) {
	var n int64
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		if v := tx.Bucket(bucketSchedCnt).Get(teamKey(teamID)); v != nil {
			n = int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return n, err
}

// statsKey is a day's counter of one kind for the team (domainID 0) or one of its domains.
func statsKey(teamID int64, day string, domainID int64, kind string) []byte {
	return append(teamKey(teamID, []byte(day), u64(domainID)), kind...)
}

// countStats adds 1 to the analytics counters of the email's newly counted kinds, for its team
// and its domain, on the UTC day of at.
func countStats(tx *bbolt.Tx, e store.Email, kinds []string, at time.Time) error {
	if at.IsZero() {
		at = time.Now()
	}
	b := tx.Bucket(bucketStats)
	d := at.UTC().Format(time.DateOnly)
	for _, kind := range kinds {
		if !slices.Contains(store.AnalyticsKinds, kind) {
			continue
		}
		for _, dom := range []int64{0, e.DomainID} {
			k := statsKey(e.TeamID, d, dom, kind)
			var n uint64
			if v := b.Get(k); v != nil {
				n = binary.BigEndian.Uint64(v)
			}
			if err := b.Put(k, u64(int64(n+1))); err != nil {
				return fmt.Errorf("bolt: daily stats: %w", err)
			}
		}
	}
	return nil
}

// DailyStats walks the team's counters of the days from..to.
func (s *Store) DailyStats(ctx context.Context, teamID, domainID int64, from, to string) ([]store.DayStats, error) {
	var out []store.DayStats
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketStats).Cursor()
		prefix := teamKey(teamID)
		for k, v := c.Seek(teamKey(teamID, []byte(from))); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			rest := k[len(prefix):]
			if len(rest) < len(time.DateOnly)+8 {
				continue
			}
			d := string(rest[:len(time.DateOnly)])
			if d > to {
				break
			}
			if int64(binary.BigEndian.Uint64(rest[len(time.DateOnly):len(time.DateOnly)+8])) != domainID {
				continue
			}
			kind := string(rest[len(time.DateOnly)+8:])
			if len(out) == 0 || out[len(out)-1].Day != d {
				out = append(out, store.DayStats{Day: d, Counts: map[string]int64{}})
			}
			out[len(out)-1].Counts[kind] += int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return out, err
}

// FeedEntry is one email history entry, or one write to a contact, domain or campaign
// (Change), in the order the store wrote them: what the local server's webhook runner turns
// into calls. The feed is written in the same transaction as the entry or the write, so a crash
// loses none; a consumer that crashed before FeedDone reads the same entries again (calls are
// idempotent by their ids, and an entry's Seq is its key).
type FeedEntry struct {
	Seq     uint64
	TeamID  int64
	EmailID string
	EventID string
	Change  *store.Change // instead of EmailID and EventID
}

// A feed value is the team (8 bytes) then the email id, 0x00 and the event id; or feedChange
// and a Change's JSON.
const feedChange = 0x01

func appendFeed(tx *bbolt.Tx, teamID int64, emailID, eventID string) error {
	b := tx.Bucket(bucketFeed)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	return b.Put(u64(int64(seq)), join(u64(teamID), []byte(emailID), []byte{0}, []byte(eventID)))
}

// appendChange feeds a write to a contact, domain or campaign.
func appendChange(tx *bbolt.Tx, teamID int64, c store.Change) error {
	c.At = time.Now().UTC()
	raw, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("bolt: encode change: %w", err)
	}
	b := tx.Bucket(bucketFeed)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	return b.Put(u64(int64(seq)), join(u64(teamID), []byte{feedChange}, raw))
}

// FeedAfter returns up to limit entries after seq, oldest first.
func (s *Store) FeedAfter(ctx context.Context, seq uint64, limit int) ([]FeedEntry, error) {
	var out []FeedEntry
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketFeed).Cursor()
		for k, v := c.Seek(u64(int64(seq + 1))); k != nil && (limit <= 0 || len(out) < limit); k, v = c.Next() {
			if len(v) < 9 {
				continue
			}
			en := FeedEntry{Seq: binary.BigEndian.Uint64(k), TeamID: int64(binary.BigEndian.Uint64(v[:8]))}
			if v[8] == feedChange {
				en.Change = new(store.Change)
				if err := json.Unmarshal(v[9:], en.Change); err != nil {
					return fmt.Errorf("bolt: decode change: %w", err)
				}
				out = append(out, en)
				continue
			}
			em, ev, ok := bytes.Cut(v[8:], []byte{0})
			if !ok {
				continue
			}
			en.EmailID, en.EventID = string(em), string(ev)
			out = append(out, en)
		}
		return nil
	})
	return out, err
}

// FeedDone removes the entries up to seq: their consumer is done with them.
func (s *Store) FeedDone(ctx context.Context, seq uint64) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketFeed).Cursor()
		for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= seq; k, _ = c.First() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}
