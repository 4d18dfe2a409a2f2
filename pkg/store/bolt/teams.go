package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/mailroom/mailroom/pkg/store"
	bbolt "go.etcd.io/bbolt"
)

// NextID increments the named counter inside one write transaction, so concurrent callers get
// distinct values.
func (s *Store) NextID(ctx context.Context, sequence string) (int64, error) {
	var id int64
	err := s.updateNow(ctx, func(tx *bbolt.Tx) error {
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
	return s.updateNow(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketTeams)
		if b.Get(u64(t.ID)) != nil {
			return fmt.Errorf("bolt: team %d: %w", t.ID, store.ErrConflict)
		}
		return put(b, u64(t.ID), t)
	})
}

func (s *Store) GetTeam(ctx context.Context, id int64) (store.Team, error) {
	var t store.Team
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		var err error
		t, err = get[store.Team](tx.Bucket(bucketTeams), u64(id))
		return err
	})
	return t, err
}

// ListTeams returns every team ordered by id.
func (s *Store) ListTeams(ctx context.Context) ([]store.Team, error) {
	var out []store.Team
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
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

func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	return s.updateNow(ctx, func(tx *bbolt.Tx) error {
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
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		var err error
		k, err = get[store.APIKey](tx.Bucket(bucketKeys), []byte(id))
		return err
	})
	return k, err
}

// ListAPIKeys returns the team's keys ordered by key id.
func (s *Store) ListAPIKeys(ctx context.Context, teamID int64) ([]store.APIKey, error) {
	var out []store.APIKey
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
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
	return s.updateNow(ctx, func(tx *bbolt.Tx) error {
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

// UpdateTeam implements store.Teams.
func (s *Store) UpdateTeam(ctx context.Context, id int64, fn func(*store.Team) error) (store.Team, error) {
	var t store.Team
	err := s.updateNow(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketTeams)
		old, err := get[store.Team](b, u64(id))
		if err != nil {
			return err
		}
		t = old
		if err := fn(&t); err != nil {
			return err
		}
		t.ID, t.CreatedAt = old.ID, old.CreatedAt
		return put(b, u64(id), t)
	})
	return t, err
}
