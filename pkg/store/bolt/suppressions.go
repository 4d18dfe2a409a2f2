package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mailroom/mailroom/pkg/store"
	bbolt "go.etcd.io/bbolt"
)

func suppKey(teamID int64, email string) []byte {
	return teamKey(teamID, []byte(strings.ToLower(email)))
}

func suppTimeKey(sp store.Suppression) []byte {
	return teamKey(sp.TeamID, timeKey(sp.CreatedAt), []byte(sp.Email))
}

func (s *Store) PutSuppression(ctx context.Context, sp store.Suppression) error {
	sp.Email = strings.ToLower(sp.Email)
	return s.updateNow(ctx, func(tx *bbolt.Tx) error {
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
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
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
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketSupp)
		prefix := u64(teamID)
		c := tx.Bucket(bucketSuppTime).Cursor()
		k, v := lastWithPrefix(c, prefix)
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
	return s.updateNow(ctx, func(tx *bbolt.Tx) error {
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
