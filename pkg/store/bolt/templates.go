package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/mailroom/mailroom/pkg/store"
	bbolt "go.etcd.io/bbolt"
)

func (s *Store) CreateTemplate(ctx context.Context, t store.Template) error {
	return s.updateNow(ctx, func(tx *bbolt.Tx) error {
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
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		var err error
		t, err = get[store.Template](tx.Bucket(bucketTemplates), teamKey(teamID, []byte(id)))
		return err
	})
	return t, err
}

// ListTemplates sorts in memory: a team has few templates, so no time index is kept for them.
func (s *Store) ListTemplates(ctx context.Context, teamID int64) ([]store.Template, error) {
	var out []store.Template
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
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
	return s.updateNow(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketTemplates)
		key := teamKey(teamID, []byte(id))
		if b.Get(key) == nil {
			return store.ErrNotFound
		}
		return b.Delete(key)
	})
}
