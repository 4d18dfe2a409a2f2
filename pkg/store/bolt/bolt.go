// Package bolt is the embedded adapter of the store port: one bbolt file on disk, no server.
// It is the default when Mailroom runs on one machine and keeps the guarantees of the DynamoDB
// adapter (conditional writes, optimistic concurrency, expiry, duplicate-event detection), which
// the shared contract suite in pkg/store/storetest checks.
//
// Layout. Records are JSON values in one bucket per record type; secondary indexes are buckets
// of keys with empty (or tiny) values, so that lists walk keys and decode only the page they
// return. Integers in keys are big-endian and times are encoded so that byte order is time
// order (see timeKey).
//
// Concurrency. bbolt serialises writers, so a check-then-write inside one Update transaction is
// already a conditional write. The callbacks of the Update* methods are nevertheless run outside
// any transaction (they are caller code and may be slow or even use the store); the write then
// checks that the record did not change in between and retries otherwise, exactly like the
// conditional update of the DynamoDB adapter.
package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"

	"github.com/mailroom/mailroom/pkg/store"
)

var _ store.Store = (*Store)(nil)

// Bucket names. Each index bucket documents its key layout; "|" in the comments means plain
// concatenation (fixed-width parts need no separator).
var (
	bucketSeq       = []byte("seq")                        // name → uint64
	bucketTeams     = []byte("teams")                      // team id → Team
	bucketKeys      = []byte("apikeys")                    // key id → APIKey
	bucketKeysTeam  = []byte("apikeys_by_team")            // team|key id → ""
	bucketDomains   = []byte("domains")                    // team|domain id → Domain
	bucketDomName   = []byte("domain_names")               // team|lower(name) → domain id
	bucketTemplates = []byte("templates")                  // team|template id → Template
	bucketEmails    = []byte("emails")                     // email id → Email without Content
	bucketContent   = []byte("email_content")              // email id → Content
	bucketEvents    = []byte("events")                     // email id|0x00|event id → Event
	bucketEmTime    = []byte("emails_by_team_time")        // team|time|email id → ""
	bucketEmDomTime = []byte("emails_by_team_domain_time") // team|domain|time|email id → ""
	bucketMsgID     = []byte("emails_by_message_id")       // message id → email id
	bucketPending   = []byte("emails_pending")             // time|email id → "" (QUEUED and SENDING only)
	bucketSchedAt   = []byte("emails_scheduled")           // scheduledAt|email id → "" (SCHEDULED only)
	bucketIdem      = []byte("idempotency")                // team|key → Idempotency
	bucketSupp      = []byte("suppressions")               // team|lower(email) → Suppression
	bucketSuppTime  = []byte("suppressions_by_team_time")  // team|time|lower(email) → reason
	bucketBooks     = []byte("contact_books")              // team|book id → ContactBook
	bucketBooksDel  = []byte("contact_books_deleted")      // team|book id → "" (contacts left to remove)
	bucketContacts  = []byte("contacts")                   // team|book id|0x00|lower(email) → Contact
	bucketContactID = []byte("contacts_by_id")             // team|book id|0x00|contact id → lower(email)
	bucketCampaigns = []byte("campaigns")                  // team|campaign id → Campaign without Counters
	bucketCampTime  = []byte("campaigns_by_team_time")     // team|time|campaign id → campaignRef
	bucketCampCount = []byte("campaign_counters")          // team|campaign id|0x00|kind → uint64
)

func allBuckets() [][]byte {
	return [][]byte{
		bucketSeq, bucketTeams, bucketKeys, bucketKeysTeam, bucketDomains, bucketDomName,
		bucketTemplates, bucketEmails, bucketContent, bucketEvents, bucketEmTime, bucketEmDomTime,
		bucketMsgID, bucketPending, bucketSchedAt, bucketIdem, bucketSupp, bucketSuppTime, bucketBooks,
		bucketBooksDel, bucketContacts, bucketContactID, bucketCampaigns, bucketCampTime,
		bucketCampCount,
	}
}

// maxRetries bounds the optimistic-concurrency loop of the Update* methods. bbolt writers are
// serialised, so a retry only happens when another writer slipped in while fn ran; running out
// means heavy contention on one record, reported (store.ErrContention) rather than looping
// forever.
const maxRetries = 1000

// Store is the bbolt adapter. It is safe for concurrent use.
type Store struct {
	db       *bbolt.DB
	attempts int // of an optimistic update: maxRetries (tests lower it)
}

// optimistic is the store's one way to change a record. Each attempt takes a snapshot in a read
// transaction (read), applies the caller's change to it outside any transaction (change, which
// runs the caller's fn on a copy), then, in the write transaction, write checks that the record
// is still as read and writes it with its side writes; it reports lost, having written
// nothing, when another writer changed the record meanwhile, and the update starts over. After
// s.attempts lost attempts it fails with store.ErrContention.
func optimistic[S, T any](ctx context.Context, s *Store, what string, read func(*bbolt.Tx) (S, error),
	change func(S) (T, error), write func(tx *bbolt.Tx, snap S, v *T) (lost bool, err error)) (T, error) {
	var zero T
	for range s.attempts {
		var snap S
		err := s.view(ctx, func(tx *bbolt.Tx) (err error) {
			snap, err = read(tx)
			return err
		})
		if err != nil {
			return zero, err
		}
		v, err := change(snap)
		if err != nil {
			return zero, err
		}
		lost := false
		err = s.update(ctx, func(tx *bbolt.Tx) (err error) {
			lost, err = write(tx, snap, &v) // update may run this more than once
			return err
		})
		if err != nil {
			return zero, err
		}
		if !lost {
			return v, nil
		}
	}
	return zero, fmt.Errorf("bolt: update %s: %w", what, store.ErrContention)
}

// rawOf reads a record's stored bytes (a copy: they outlive the transaction); absent is
// store.ErrNotFound.
func rawOf(bucket, key []byte) func(*bbolt.Tx) ([]byte, error) {
	return func(tx *bbolt.Tx) ([]byte, error) {
		raw := tx.Bucket(bucket).Get(key)
		if raw == nil {
			return nil, store.ErrNotFound
		}
		return bytes.Clone(raw), nil
	}
}

// decode is a record's JSON decoded, or an error naming what it is.
func decode[T any](raw []byte, what string) (T, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("bolt: decode %s: %w", what, err)
	}
	return v, nil
}

// changed pairs a record as read with the caller's change of it.
type changed[T any] struct{ old, new T }

// Open opens (creating if needed) the database file at path. Only one process may hold the
// file: bbolt takes an exclusive lock, and Open gives up after a few seconds rather than hanging.
func Open(path string) (*Store, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 5 * time.Second})
	if errors.Is(err, bberrors.ErrTimeout) {
		return nil, fmt.Errorf("bolt: %s is in use by another process (stop the running server first)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		backfill := tx.Bucket(bucketSchedAt) == nil && tx.Bucket(bucketEmails) != nil
		for _, name := range allBuckets() {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		if backfill { // a database from before the index: index its scheduled emails once
			return indexScheduled(tx)
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("bolt: init %s: %w", path, err)
	}
	// A short batch window: enough to gather concurrent writers, too short for one caller to
	// notice.
	db.MaxBatchDelay = 2 * time.Millisecond
	return &Store{db: db, attempts: maxRetries}, nil
}

// Close releases the file.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("bolt: close: %w", err)
	}
	return nil
}

// view and update check the context once before starting: a bbolt transaction is short and
// cannot be interrupted halfway.
func (s *Store) view(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(fn)
}

// update runs fn in a write transaction through bbolt's Batch, which commits the writes of
// concurrent callers together with one fsync instead of one each (the embedded store's
// throughput limit). Batch may run fn more than once, so every fn must set any result it
// captures from scratch on each run.
func (s *Store) update(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Batch(fn)
}

// ---- key encoding ----

func u64(v int64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(v))
	return b
}

// timeKey encodes t in 12 bytes whose byte order is time order: Unix seconds with the sign bit
// flipped (so times before 1970 sort first), then nanoseconds. UnixNano alone would overflow
// outside 1678–2262.
func timeKey(t time.Time) []byte {
	b := make([]byte, 12)
	binary.BigEndian.PutUint64(b, uint64(t.Unix())^(1<<63))
	binary.BigEndian.PutUint32(b[8:], uint32(t.Nanosecond()))
	return b
}

func join(parts ...[]byte) []byte {
	return bytes.Join(parts, nil)
}

func teamKey(teamID int64, rest ...[]byte) []byte {
	return join(append([][]byte{u64(teamID)}, rest...)...)
}

func eventPrefix(emailID string) []byte {
	return append([]byte(emailID), 0)
}

func eventKey(emailID, eventID string) []byte {
	return append(eventPrefix(emailID), eventID...)
}

// ---- JSON helpers ----

func get[T any](b *bbolt.Bucket, key []byte) (T, error) {
	var v T
	raw := b.Get(key)
	if raw == nil {
		return v, store.ErrNotFound
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("bolt: decode %s: %w", key, err)
	}
	return v, nil
}

func put(b *bbolt.Bucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("bolt: encode: %w", err)
	}
	if err := b.Put(key, raw); err != nil {
		return fmt.Errorf("bolt: put: %w", err)
	}
	return nil
}

// ---- sequences and teams ----

// NextID increments the named counter inside one write transaction, so concurrent callers get
// distinct values.
func (s *Store) NextID(ctx context.Context, sequence string) (int64, error) {
	var id int64
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketSeq)
		var cur uint64
		if raw := b.Get([]byte(sequence)); raw != nil {
			cur = binary.BigEndian.Uint64(raw)
		}
		cur++
		id = int64(cur)
		return b.Put([]byte(sequence), u64(id))
	})
	if err != nil {
		return 0, fmt.Errorf("bolt: next id %q: %w", sequence, err)
	}
	return id, nil
}

// CreateTeam fails with ErrConflict when the id is taken.
func (s *Store) CreateTeam(ctx context.Context, t store.Team) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketTeams)
		if b.Get(u64(t.ID)) != nil {
			return fmt.Errorf("bolt: team %d: %w", t.ID, store.ErrConflict)
		}
		return put(b, u64(t.ID), t)
	})
}

func (s *Store) GetTeam(ctx context.Context, id int64) (store.Team, error) {
	var t store.Team
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		t, err = get[store.Team](tx.Bucket(bucketTeams), u64(id))
		return err
	})
	return t, err
}

// ListTeams returns every team ordered by id.
func (s *Store) ListTeams(ctx context.Context) ([]store.Team, error) {
	var out []store.Team
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketTeams).ForEach(func(k, v []byte) error {
			var t store.Team
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("bolt: decode team: %w", err)
			}
			out = append(out, t)
			return nil
		})
	})
	return out, err
}

// ---- API keys ----

func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketKeys)
		if b.Get([]byte(k.ID)) != nil {
			return fmt.Errorf("bolt: api key %s: %w", k.ID, store.ErrConflict)
		}
		if err := put(b, []byte(k.ID), k); err != nil {
			return err
		}
		return tx.Bucket(bucketKeysTeam).Put(teamKey(k.TeamID, []byte(k.ID)), nil)
	})
}

func (s *Store) GetAPIKey(ctx context.Context, id string) (store.APIKey, error) {
	var k store.APIKey
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		k, err = get[store.APIKey](tx.Bucket(bucketKeys), []byte(id))
		return err
	})
	return k, err
}

// ListAPIKeys returns the team's keys ordered by key id.
func (s *Store) ListAPIKeys(ctx context.Context, teamID int64) ([]store.APIKey, error) {
	var out []store.APIKey
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		keys := tx.Bucket(bucketKeys)
		prefix := u64(teamID)
		c := tx.Bucket(bucketKeysTeam).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			key, err := get[store.APIKey](keys, k[len(prefix):])
			if err != nil {
				return err
			}
			out = append(out, key)
		}
		return nil
	})
	return out, err
}

// DeleteAPIKey returns ErrNotFound when the key does not exist or belongs to another team.
func (s *Store) DeleteAPIKey(ctx context.Context, teamID int64, id string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketKeys)
		k, err := get[store.APIKey](b, []byte(id))
		if err != nil {
			return err
		}
		if k.TeamID != teamID {
			return store.ErrNotFound
		}
		if err := b.Delete([]byte(id)); err != nil {
			return err
		}
		return tx.Bucket(bucketKeysTeam).Delete(teamKey(teamID, []byte(id)))
	})
}

// ---- domains ----

// domainNameKey makes names unique across teams regardless of case: DNS names are
// case-insensitive, and a provider identity belongs to the whole account.
func domainNameKey(name string) []byte {
	return []byte(strings.ToLower(name))
}

func (s *Store) CreateDomain(ctx context.Context, d store.Domain) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		names := tx.Bucket(bucketDomName)
		doms := tx.Bucket(bucketDomains)
		nk := domainNameKey(d.Name)
		if names.Get(nk) != nil {
			return fmt.Errorf("bolt: domain %q: %w", d.Name, store.ErrConflict)
		}
		key := teamKey(d.TeamID, u64(d.ID))
		if doms.Get(key) != nil {
			return fmt.Errorf("bolt: domain id %d: %w", d.ID, store.ErrConflict)
		}
		if err := names.Put(nk, u64(d.ID)); err != nil {
			return err
		}
		return put(doms, key, d)
	})
}

func (s *Store) GetDomain(ctx context.Context, teamID, id int64) (store.Domain, error) {
	var d store.Domain
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		d, err = get[store.Domain](tx.Bucket(bucketDomains), teamKey(teamID, u64(id)))
		return err
	})
	return d, err
}

func (s *Store) ListDomains(ctx context.Context, teamID int64) ([]store.Domain, error) {
	var out []store.Domain
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		prefix := u64(teamID)
		c := tx.Bucket(bucketDomains).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var d store.Domain
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("bolt: decode domain: %w", err)
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// UpdateDomain is optimistic on the stored bytes. fn may rename the domain; the new name must
// be free.
func (s *Store) UpdateDomain(ctx context.Context, teamID, id int64, fn func(*store.Domain) error) (store.Domain, error) {
	key := teamKey(teamID, u64(id))
	c, err := optimistic(ctx, s, fmt.Sprintf("domain %d", id), rawOf(bucketDomains, key),
		func(raw []byte) (changed[store.Domain], error) {
			old, err := decode[store.Domain](raw, "domain")
			if err != nil {
				return changed[store.Domain]{}, err
			}
			d := old
			d.DNSRecords = append([]store.DNSRecord(nil), old.DNSRecords...)
			if err := fn(&d); err != nil {
				return changed[store.Domain]{}, err
			}
			d.ID, d.TeamID = id, teamID
			return changed[store.Domain]{old, d}, nil
		},
		func(tx *bbolt.Tx, raw []byte, c *changed[store.Domain]) (bool, error) {
			doms := tx.Bucket(bucketDomains)
			if !bytes.Equal(doms.Get(key), raw) {
				return true, nil
			}
			if !strings.EqualFold(c.old.Name, c.new.Name) {
				names := tx.Bucket(bucketDomName)
				nk := domainNameKey(c.new.Name)
				if names.Get(nk) != nil {
					return false, fmt.Errorf("bolt: domain %q: %w", c.new.Name, store.ErrConflict)
				}
				if err := names.Delete(domainNameKey(c.old.Name)); err != nil {
					return false, err
				}
				if err := names.Put(nk, u64(id)); err != nil {
					return false, err
				}
			}
			return false, put(doms, key, c.new)
		})
	return c.new, err
}

func (s *Store) DeleteDomain(ctx context.Context, teamID, id int64) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		doms := tx.Bucket(bucketDomains)
		key := teamKey(teamID, u64(id))
		d, err := get[store.Domain](doms, key)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketDomName).Delete(domainNameKey(d.Name)); err != nil {
			return err
		}
		return doms.Delete(key)
	})
}

// ---- templates ----

func (s *Store) CreateTemplate(ctx context.Context, t store.Template) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketTemplates)
		key := teamKey(t.TeamID, []byte(t.ID))
		if b.Get(key) != nil {
			return fmt.Errorf("bolt: template %s: %w", t.ID, store.ErrConflict)
		}
		return put(b, key, t)
	})
}

func (s *Store) GetTemplate(ctx context.Context, teamID int64, id string) (store.Template, error) {
	var t store.Template
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		t, err = get[store.Template](tx.Bucket(bucketTemplates), teamKey(teamID, []byte(id)))
		return err
	})
	return t, err
}

// ListTemplates sorts in memory: a team has few templates, so no time index is kept for them.
func (s *Store) ListTemplates(ctx context.Context, teamID int64) ([]store.Template, error) {
	var out []store.Template
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		prefix := u64(teamID)
		c := tx.Bucket(bucketTemplates).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var t store.Template
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("bolt: decode template: %w", err)
			}
			out = append(out, t)
		}
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID > out[j].ID
	})
	return out, err
}

// UpdateTemplate is optimistic on the stored bytes.
func (s *Store) UpdateTemplate(ctx context.Context, teamID int64, id string, fn func(*store.Template) error) (store.Template, error) {
	key := teamKey(teamID, []byte(id))
	return optimistic(ctx, s, "template "+id, rawOf(bucketTemplates, key),
		func(raw []byte) (store.Template, error) {
			t, err := decode[store.Template](raw, "template")
			if err != nil {
				return t, err
			}
			if err := fn(&t); err != nil {
				return t, err
			}
			t.ID, t.TeamID = id, teamID
			return t, nil
		},
		func(tx *bbolt.Tx, raw []byte, t *store.Template) (bool, error) {
			b := tx.Bucket(bucketTemplates)
			if !bytes.Equal(b.Get(key), raw) {
				return true, nil
			}
			return false, put(b, key, *t)
		})
}

func (s *Store) DeleteTemplate(ctx context.Context, teamID int64, id string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketTemplates)
		key := teamKey(teamID, []byte(id))
		if b.Get(key) == nil {
			return store.ErrNotFound
		}
		return b.Delete(key)
	})
}

// ---- emails ----

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
	if isPending(e.Status) {
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

func readEmail(tx *bbolt.Tx, id string) (store.Email, error) {
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

func deleteIndexes(tx *bbolt.Tx, entries []indexEntry) error {
	for _, ie := range entries {
		if err := tx.Bucket(ie.bucket).Delete(ie.key); err != nil {
			return fmt.Errorf("bolt: index %s: %w", ie.bucket, err)
		}
	}
	return nil
}

// CreateEmails writes all new emails in one transaction; an existing id is skipped with its
// events and its campaign counts, which is what makes a retried send exactly-once. Within one
// email, a second first event with an already used ID is ignored. A campaign email's Counted
// kinds (each once, however often listed) are added to its campaign's counters in the same
// transaction.
func (s *Store) CreateEmails(ctx context.Context, emails []store.Email, firstEvents []store.Event) error {
	byEmail := make(map[string][]store.Event)
	for _, ev := range firstEvents {
		byEmail[ev.EmailID] = append(byEmail[ev.EmailID], ev)
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		ems := tx.Bucket(bucketEmails)
		evs := tx.Bucket(bucketEvents)
		for _, e := range emails {
			if ems.Get([]byte(e.ID)) != nil {
				continue
			}
			e.Version = 1
			if err := writeEmail(tx, e); err != nil {
				return err
			}
			if err := putIndexes(tx, emailIndexes(e)); err != nil {
				return err
			}
			if err := countKinds(tx, e.TeamID, e.CampaignID, newKinds(nil, e.Counted)); err != nil {
				return err
			}
			for _, ev := range byEmail[e.ID] {
				key := eventKey(e.ID, ev.ID)
				if evs.Get(key) != nil {
					continue
				}
				if err := put(evs, key, ev); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func (s *Store) GetEmail(ctx context.Context, id string) (store.Email, error) {
	var e store.Email
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		e, err = readEmail(tx, id)
		return err
	})
	return e, err
}

func (s *Store) GetEmailDetail(ctx context.Context, id string) (store.Email, []store.Event, error) {
	var (
		e      store.Email
		events []store.Event
	)
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		if e, err = readEmail(tx, id); err != nil {
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
			e, err := readEmail(tx, r.id)
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
	type emailChange struct {
		new    store.Email
		events []store.Event
	}
	c, err := optimistic(ctx, s, "email "+id,
		func(tx *bbolt.Tx) (store.Email, error) { return readEmail(tx, id) },
		func(old store.Email) (emailChange, error) {
			e := cloneEmail(old)
			events, err := fn(&e)
			if err != nil {
				return emailChange{}, err
			}
			e.ID = id
			e.Version = old.Version + 1
			return emailChange{e, events}, nil
		},
		func(tx *bbolt.Tx, old store.Email, c *emailChange) (bool, error) {
			cur, err := get[store.Email](tx.Bucket(bucketEmails), []byte(id))
			if err != nil {
				return false, err
			}
			if cur.Version != old.Version {
				return true, nil
			}
			evs := tx.Bucket(bucketEvents)
			batch := make(map[string]bool, len(c.events))
			for _, ev := range c.events {
				if batch[ev.ID] || evs.Get(eventKey(id, ev.ID)) != nil {
					return false, fmt.Errorf("bolt: email %s event %s: %w", id, ev.ID, store.ErrDuplicateEvent)
				}
				batch[ev.ID] = true
			}
			if err := deleteIndexes(tx, emailIndexes(old)); err != nil {
				return false, err
			}
			if err := writeEmail(tx, c.new); err != nil {
				return false, err
			}
			if err := putIndexes(tx, emailIndexes(c.new)); err != nil {
				return false, err
			}
			if err := countKinds(tx, c.new.TeamID, c.new.CampaignID, newKinds(old.Counted, c.new.Counted)); err != nil {
				return false, err
			}
			for _, ev := range c.events {
				ev.EmailID = id
				if err := put(evs, eventKey(id, ev.ID), ev); err != nil {
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
		e, err = readEmail(tx, string(id))
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

// ---- idempotency ----

func idemKey(teamID int64, key string) []byte {
	return teamKey(teamID, []byte(key))
}

// ClaimIdempotency decides inside one write transaction, so exactly one of many concurrent
// claimers wins. Reading of the contract:
//   - a record whose ExpiresAt is not after c.Now is absent (overwritten by a new claim);
//   - a stale PENDING record is taken over by setting ClaimedAt only: Nonce, Fingerprint,
//     CreatedAt and ExpiresAt stay, so the emails derived from the nonce keep their ids and the
//     caller can still detect a different request body by comparing rec.Fingerprint;
//   - StaleAfter <= 0 disables takeover.
func (s *Store) ClaimIdempotency(ctx context.Context, c store.IdemClaim) (store.Idempotency, bool, error) {
	var (
		rec     store.Idempotency
		claimed bool
	)
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		rec, claimed = store.Idempotency{}, false // update may run this more than once
		b := tx.Bucket(bucketIdem)
		key := idemKey(c.TeamID, c.Key)
		cur, err := get[store.Idempotency](b, key)
		switch {
		case errors.Is(err, store.ErrNotFound) || (err == nil && !cur.ExpiresAt.After(c.Now)):
			rec = store.Idempotency{
				TeamID:      c.TeamID,
				Key:         c.Key,
				Fingerprint: c.Fingerprint,
				State:       store.IdemPending,
				Nonce:       c.Nonce,
				ClaimedAt:   c.Now,
				CreatedAt:   c.Now,
				ExpiresAt:   c.Now.Add(c.TTL),
			}
			claimed = true
			return put(b, key, rec)
		case err != nil:
			return err
		case cur.State == store.IdemPending && c.StaleAfter > 0 && cur.ClaimedAt.Add(c.StaleAfter).Before(c.Now):
			cur.ClaimedAt = c.Now
			rec, claimed = cur, true
			return put(b, key, rec)
		default:
			rec = cur
			return nil
		}
	})
	if err != nil {
		return store.Idempotency{}, false, err
	}
	return rec, claimed, nil
}

// CompleteIdempotency does not check expiry: it has no clock of the caller's, and the owner
// completes a record it claimed moments ago. ErrNotFound when the record is gone.
func (s *Store) CompleteIdempotency(ctx context.Context, teamID int64, key string, response []byte) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketIdem)
		k := idemKey(teamID, key)
		rec, err := get[store.Idempotency](b, k)
		if err != nil {
			return err
		}
		rec.State = store.IdemComplete
		rec.Response = bytes.Clone(response)
		return put(b, k, rec)
	})
}

// ReleaseIdempotency deletes the record only while it is PENDING: a completed response must stay
// replayable. Releasing an absent record is not an error (the release is a cleanup).
func (s *Store) ReleaseIdempotency(ctx context.Context, teamID int64, key string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketIdem)
		k := idemKey(teamID, key)
		rec, err := get[store.Idempotency](b, k)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if rec.State != store.IdemPending {
			return nil
		}
		return b.Delete(k)
	})
}

// ---- suppressions ----

func suppKey(teamID int64, email string) []byte {
	return teamKey(teamID, []byte(strings.ToLower(email)))
}

func suppTimeKey(sp store.Suppression) []byte {
	return teamKey(sp.TeamID, timeKey(sp.CreatedAt), []byte(sp.Email))
}

func (s *Store) PutSuppression(ctx context.Context, sp store.Suppression) error {
	sp.Email = strings.ToLower(sp.Email)
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketSupp)
		idx := tx.Bucket(bucketSuppTime)
		key := suppKey(sp.TeamID, sp.Email)
		old, err := get[store.Suppression](b, key)
		switch {
		case err == nil:
			if err := idx.Delete(suppTimeKey(old)); err != nil {
				return err
			}
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if err := idx.Put(suppTimeKey(sp), []byte(sp.Reason)); err != nil {
			return err
		}
		return put(b, key, sp)
	})
}

func (s *Store) GetSuppressions(ctx context.Context, teamID int64, emails []string) (map[string]store.Suppression, error) {
	out := make(map[string]store.Suppression)
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketSupp)
		for _, addr := range emails {
			sp, err := get[store.Suppression](b, suppKey(teamID, addr))
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			out[sp.Email] = sp
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListSuppressions walks the team's time index newest first; the reason is the index value, so
// filtering and counting decode nothing but the page.
func (s *Store) ListSuppressions(ctx context.Context, teamID int64, reason string, offset, limit int) ([]store.Suppression, int, error) {
	var (
		page  []store.Suppression
		total int
	)
	offset = max(offset, 0)
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketSupp)
		prefix := u64(teamID)
		c := tx.Bucket(bucketSuppTime).Cursor()
		var k, v []byte
		if end := prefixEnd(prefix); end == nil {
			k, v = c.Last()
		} else if k, v = c.Seek(end); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
			if reason != "" && string(v) != reason {
				continue
			}
			if total >= offset && (limit <= 0 || len(page) < limit) {
				addr := k[len(prefix)+12:]
				sp, err := get[store.Suppression](b, teamKey(teamID, addr))
				if err != nil {
					return fmt.Errorf("bolt: suppression in index: %w", err)
				}
				page = append(page, sp)
			}
			total++
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return page, total, nil
}

// DeleteSuppression returns ErrNotFound when the address is not suppressed.
func (s *Store) DeleteSuppression(ctx context.Context, teamID int64, email string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketSupp)
		key := suppKey(teamID, email)
		sp, err := get[store.Suppression](b, key)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketSuppTime).Delete(suppTimeKey(sp)); err != nil {
			return err
		}
		return b.Delete(key)
	})
}
