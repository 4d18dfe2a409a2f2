package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mailroom/mailroom/pkg/store"
	bbolt "go.etcd.io/bbolt"
)

// domainNameKey makes names unique across teams regardless of case: DNS names are
// case-insensitive, and a provider identity belongs to the whole account.
func domainNameKey(name string) []byte {
	return []byte(strings.ToLower(name))
}

func (s *Store) CreateDomain(ctx context.Context, d store.Domain) error {
	return s.updateNow(ctx, func(tx *bbolt.Tx) error {
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
		if err := appendChange(tx, d.TeamID, store.Change{After: store.Record{Domain: &d}}); err != nil {
			return err
		}
		return put(doms, key, d)
	})
}

func (s *Store) DomainNameHeld(ctx context.Context, name string) (bool, error) {
	held := false
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		held = tx.Bucket(bucketDomName).Get(domainNameKey(name)) != nil
		return nil
	})
	return held, err
}

func (s *Store) GetDomain(ctx context.Context, teamID, id int64) (store.Domain, error) {
	var d store.Domain
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		var err error
		d, err = get[store.Domain](tx.Bucket(bucketDomains), teamKey(teamID, u64(id)))
		return err
	})
	return d, err
}

func (s *Store) ListDomains(ctx context.Context, teamID int64) ([]store.Domain, error) {
	var out []store.Domain
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
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
			if err := appendChange(tx, teamID, store.Change{Before: store.Record{Domain: &c.old}, After: store.Record{Domain: &c.new}}); err != nil {
				return false, err
			}
			return false, put(doms, key, c.new)
		})
	return c.new, err
}

func (s *Store) DeleteDomain(ctx context.Context, teamID, id int64) error {
	return s.updateNow(ctx, func(tx *bbolt.Tx) error {
		doms := tx.Bucket(bucketDomains)
		key := teamKey(teamID, u64(id))
		d, err := get[store.Domain](doms, key)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketDomName).Delete(domainNameKey(d.Name)); err != nil {
			return err
		}
		if err := appendChange(tx, teamID, store.Change{Before: store.Record{Domain: &d}}); err != nil {
			return err
		}
		return doms.Delete(key)
	})
}
