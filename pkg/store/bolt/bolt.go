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
	bucketHeld      = []byte("emails_held")                // team|campaign id|0x00|time|email id → "" (held only)
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
	bucketSchedCnt  = []byte("scheduled_counts")           // team → uint64 (ScheduledCount)
	bucketStats     = []byte("daily_stats")                // team|day|domain (0: the team)|kind → uint64
	bucketWebhooks  = []byte("webhooks")                   // team|webhook id → Webhook
	bucketCalls     = []byte("webhook_calls")              // webhook id|0x00|call id → WebhookCall
	bucketCallsDue  = []byte("webhook_calls_due")          // next attempt (unix ns)|webhook id|0x00|call id → "" (PENDING only)
	bucketFeed      = []byte("feed")                       // sequence → email id|0x00|event id (FeedAfter)
)

func allBuckets() [][]byte {
	return [][]byte{
		bucketSeq, bucketTeams, bucketKeys, bucketKeysTeam, bucketDomains, bucketDomName,
		bucketTemplates, bucketEmails, bucketContent, bucketEvents, bucketEmTime, bucketEmDomTime,
		bucketMsgID, bucketPending, bucketSchedAt, bucketHeld, bucketIdem, bucketSupp, bucketSuppTime, bucketBooks,
		bucketBooksDel, bucketContacts, bucketContactID, bucketCampaigns, bucketCampTime,
		bucketCampCount, bucketSchedCnt, bucketStats, bucketWebhooks, bucketCalls, bucketCallsDue, bucketFeed,
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
	commits  *committer // every write transaction (commit.go)
	attempts int        // of an optimistic update: maxRetries (tests lower it)
	slots    *slots     // shared by the copies WithAttempts makes
	requests *requests  // likewise
	sweep    *sweep     // likewise
	// retention is how long an email is kept (0: for ever): an older one is not read, listed
	// or counted, and ExpireEmails deletes it.
	retention time.Duration
	// wal is CreateEmails' write-ahead log (wal.go).
	wal *wal
	// Replayed is how many emails Open wrote from the log of a process that ended without
	// closing the store (accepted, but not yet in bbolt).
	Replayed int
}

// SetRetention sets how long emails are kept (0: for ever).
func (s *Store) SetRetention(retention time.Duration) { s.retention = retention }

func (s *Store) expired(e store.Email) bool { return store.Expired(e, s.retention, time.Now()) }

// optimistic is the store's one way to change a record. Each attempt takes a snapshot in a read
// transaction (read), applies the caller's change to it outside any transaction (change, which
// runs the caller's fn on a copy), then, in the write transaction, write checks that the record
// is still as read and writes it with its side writes; it reports lost, having written
// nothing, when another writer changed the record meanwhile, and the update starts over. After
// s.attempts lost attempts it fails with store.ErrContention. It does not wait for the log
// (wal.go): a caller whose record the log writes settles first.
func optimistic[S, T any](ctx context.Context, s *Store, what string, read func(*bbolt.Tx) (S, error),
	change func(S) (T, error), write func(tx *bbolt.Tx, snap S, v *T) (lost bool, err error)) (T, error) {
	var zero T
	for range s.attempts {
		var snap S
		err := s.viewNow(ctx, func(tx *bbolt.Tx) (err error) {
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
		err = s.updateNow(ctx, func(tx *bbolt.Tx) (err error) {
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
		if err := checkFormat(tx); err != nil {
			return err
		}
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
	if errors.Is(err, ErrNewerFormat) {
		_ = db.Close()
		return nil, fmt.Errorf("bolt: %s: %w", path, err)
	}
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("bolt: init %s: %w", path, err)
	}
	commits := newCommitter(db)
	w, n, err := openWAL(path+walExt, db, commits)
	if err != nil {
		commits.close()
		_ = db.Close()
		return nil, err
	}
	return &Store{db: db, commits: commits, attempts: maxRetries, slots: &slots{}, requests: &requests{}, sweep: &sweep{}, wal: w, Replayed: n}, nil
}

// Format is the version of the database's layout this code writes and reads. Open records it
// in a database that has none (or an older one) and refuses one a later Mailroom wrote: its
// records, or its write-ahead log, may mean what this code does not know, and reading them as
// if they did not would lose emails silently. Raise it with a change older code would misread.
const Format = 1

// ErrNewerFormat: the database was written by a later Mailroom (a downgrade).
var ErrNewerFormat = errors.New("the data folder was written by a newer Mailroom")

var formatKey = []byte("\x00format") // in bucketSeq, beside the sequence counters

// checkFormat refuses a database of a later format, and records this one's.
func checkFormat(tx *bbolt.Tx) error {
	b, err := tx.CreateBucketIfNotExists(bucketSeq)
	if err != nil {
		return err
	}
	if v := b.Get(formatKey); len(v) == 8 {
		if f := binary.BigEndian.Uint64(v); f > Format {
			return fmt.Errorf("%w (its format is %d, this one reads up to %d): run that version, or a later one", ErrNewerFormat, f, Format)
		}
	}
	return b.Put(formatKey, u64(Format))
}

// YieldTo makes the writes of logged emails into bbolt yield to foreground work, as delivery
// does (deliver.Pool.YieldTo): while busy reports true, they are held for up to applyHold and
// written in larger transactions, fewer pages and syncs for the same emails.
func (s *Store) YieldTo(busy func() bool) { s.wal.busy.Store(&busy) }

// Close writes what the log holds into bbolt and releases the file.
func (s *Store) Close() error {
	err := s.wal.close() // through the committer: closed after it
	s.commits.close()
	if err != nil {
		_ = s.db.Close()
		return err
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("bolt: close: %w", err)
	}
	return nil
}

// view and update check the context once before starting: a bbolt transaction is short and
// cannot be interrupted halfway. Both first wait until the emails logged before them are in
// bbolt (wal.go); viewNow and updateNow do not, and are only for the records the log never
// writes.
func (s *Store) view(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	if err := s.wal.settle(ctx); err != nil {
		return err
	}
	return s.viewNow(ctx, fn)
}

func (s *Store) viewNow(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(fn)
}

// update runs fn in a write transaction shared with the writes of concurrent callers (commit.go),
// one commit for all instead of one each (the embedded store's throughput limit). fn may run
// more than once, so every fn must set any result it captures from scratch on each run.
func (s *Store) update(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	if err := s.wal.settle(ctx); err != nil {
		return err
	}
	return s.updateNow(ctx, fn)
}

func (s *Store) updateNow(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.commits.update(fn)
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
