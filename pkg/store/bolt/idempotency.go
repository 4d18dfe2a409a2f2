package bolt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
	bbolt "go.etcd.io/bbolt"
)

func idemKey(teamID int64, key string) []byte {
	return teamKey(teamID, []byte(key))
}

// ClaimIdempotency decides inside one write transaction, so exactly one of many concurrent
// claimers wins. Reading of the contract:
//   - a record whose ExpiresAt is not after c.Now is absent (overwritten by a new claim);
//   - a stale PENDING record is taken over, by a claim with its fingerprint only, by setting
//     ClaimedAt only: Nonce, Fingerprint, CreatedAt and ExpiresAt stay, so the emails derived
//     from the nonce keep their ids (another payload leaves the record as it is, so the first
//     request's own retry can still finish it);
//   - StaleAfter <= 0 disables takeover.
func (s *Store) ClaimIdempotency(ctx context.Context, c store.IdemClaim) (store.Idempotency, bool, error) {
	var (
		rec     store.Idempotency
		claimed bool
	)
	err := s.updateNow(ctx, func(tx *bbolt.Tx) error {
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
		case cur.State == store.IdemPending && c.StaleAfter > 0 && cur.ClaimedAt.Add(c.StaleAfter).Before(c.Now) &&
			cur.Fingerprint == c.Fingerprint:
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

// ReleaseIdempotency deletes the record only while it is PENDING: a completed response must stay
// replayable. Releasing an absent record is not an error (the release is a cleanup).
func (s *Store) ReleaseIdempotency(ctx context.Context, teamID int64, key string) error {
	return s.updateNow(ctx, func(tx *bbolt.Tx) error {
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

// idemScanStep bounds the records one ExpireIdempotency reads (their keys are in no time
// order): a day of keys is read over several runs, never in one long transaction.
const idemScanStep = 5000

// sweep is where ExpireIdempotency's next run goes on from.
type sweep struct {
	mu       sync.Mutex
	idemFrom []byte // nil: the start
}

// ExpireIdempotency reads up to idemScanStep records from where its previous run stopped (from
// the start again once it reached the end) for those past their ExpiresAt, and removes them
// (one transaction to read, one to remove: a record claimed again meanwhile is kept).
func (s *Store) ExpireIdempotency(ctx context.Context, limit int) (int, error) {
	s.sweep.mu.Lock()
	defer s.sweep.mu.Unlock()
	now := time.Now()
	var keys [][]byte
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketIdem).Cursor()
		k, v := c.First()
		if s.sweep.idemFrom != nil {
			k, v = c.Seek(s.sweep.idemFrom)
		}
		for read := 0; k != nil && read < idemScanStep && (limit <= 0 || len(keys) < limit); k, v = c.Next() {
			read++
			var rec struct{ ExpiresAt time.Time }
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("bolt: decode idempotency record: %w", err)
			}
			if !rec.ExpiresAt.After(now) {
				keys = append(keys, append([]byte(nil), k...))
			}
		}
		s.sweep.idemFrom = nil
		if k != nil {
			s.sweep.idemFrom = append([]byte(nil), k...)
		}
		return nil
	})
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	n := 0
	err = s.updateNow(ctx, func(tx *bbolt.Tx) error {
		n = 0 // the function may run more than once
		b := tx.Bucket(bucketIdem)
		for _, k := range keys {
			v := b.Get(k)
			if v == nil {
				continue
			}
			rec, err := decode[store.Idempotency](v, "idempotency record")
			if err != nil {
				return err
			}
			if rec.ExpiresAt.After(now) {
				continue // claimed again since
			}
			if err := b.Delete(k); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}
