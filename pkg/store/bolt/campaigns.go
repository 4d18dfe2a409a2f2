package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	bbolt "go.etcd.io/bbolt"

	"github.com/mailroom/mailroom/pkg/store"
)

// Campaigns. The record holds everything but the counters, which are one 8-byte key each
// (team|campaign|0x00|kind → uint64): an email event then adds to a counter without decoding and
// re-encoding the campaign and its HTML, and UpdateCampaign's optimistic check on the record's
// bytes is never upset by counting. The time index value carries what ListCampaigns filters on,
// so a list decodes nothing but its page.

func campaignKey(teamID int64, id string) []byte {
	return teamKey(teamID, []byte(id))
}

func counterPrefix(teamID int64, id string) []byte {
	return teamKey(teamID, []byte(id), []byte{0})
}

func campaignTimeKey(c store.Campaign) []byte {
	return teamKey(c.TeamID, timeKey(c.CreatedAt), []byte(c.ID))
}

// campaignRef is the value of the time index: the filterable fields, search ones lower-cased.
type campaignRef struct {
	Status  string `json:"s"`
	Name    string `json:"n"`
	Subject string `json:"j"`
	Domain  int64  `json:"d,omitempty"` // 0 in entries written before it was indexed
}

func campaignRefOf(c store.Campaign) campaignRef {
	return campaignRef{Status: c.Status, Name: strings.ToLower(c.Name), Subject: strings.ToLower(c.Subject), Domain: c.DomainID}
}

// writeCampaign stores the record without counters and its index entry.
func writeCampaign(tx *bbolt.Tx, c store.Campaign) error {
	c.Counters = nil
	if err := put(tx.Bucket(bucketCampaigns), campaignKey(c.TeamID, c.ID), c); err != nil {
		return err
	}
	return put(tx.Bucket(bucketCampTime), campaignTimeKey(c), campaignRefOf(c))
}

// readCounters returns the campaign's counters, nil when none was ever incremented.
func readCounters(tx *bbolt.Tx, teamID int64, id string) map[string]int64 {
	var out map[string]int64
	prefix := counterPrefix(teamID, id)
	c := tx.Bucket(bucketCampCount).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if out == nil {
			out = make(map[string]int64)
		}
		out[string(k[len(prefix):])] = int64(binary.BigEndian.Uint64(v))
	}
	return out
}

func readCampaign(tx *bbolt.Tx, teamID int64, id string) (store.Campaign, error) {
	c, err := get[store.Campaign](tx.Bucket(bucketCampaigns), campaignKey(teamID, id))
	if err != nil {
		return c, err
	}
	c.Counters = readCounters(tx, teamID, id)
	return c, nil
}

// newKinds returns the kinds in cur that are not in old, each once, in cur's order.
func newKinds(old, cur []string) []string {
	var out []string
	for _, k := range cur {
		if k != "" && !slices.Contains(old, k) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// countKinds adds 1 to each of the campaign's counters of kinds, inside the caller's email
// write. No campaign id, or a campaign that no longer exists, counts nothing: the email write
// goes on (a deleted campaign's late events are not an error).
func countKinds(tx *bbolt.Tx, teamID int64, campaignID string, kinds []string) error {
	if campaignID == "" || len(kinds) == 0 {
		return nil
	}
	if tx.Bucket(bucketCampaigns).Get(campaignKey(teamID, campaignID)) == nil {
		return nil
	}
	b := tx.Bucket(bucketCampCount)
	prefix := counterPrefix(teamID, campaignID)
	for _, kind := range kinds {
		key := append(bytes.Clone(prefix), kind...)
		var n uint64
		if v := b.Get(key); v != nil {
			n = binary.BigEndian.Uint64(v)
		}
		if err := b.Put(key, u64(int64(n+1))); err != nil {
			return fmt.Errorf("bolt: campaign counter: %w", err)
		}
	}
	return nil
}

// CreateCampaign fails with ErrConflict when the id is taken. The caller's Counters are not
// stored: a new campaign has counted nothing.
func (s *Store) CreateCampaign(ctx context.Context, c store.Campaign) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketCampaigns).Get(campaignKey(c.TeamID, c.ID)) != nil {
			return fmt.Errorf("bolt: campaign %s: %w", c.ID, store.ErrConflict)
		}
		return writeCampaign(tx, c)
	})
}

func (s *Store) GetCampaign(ctx context.Context, teamID int64, id string) (store.Campaign, error) {
	var c store.Campaign
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		c, err = readCampaign(tx, teamID, id)
		return err
	})
	return c, err
}

// GetCampaignState reads the campaign's record only, which the log (wal.go) never writes: a
// delivery checks it for each campaign email and does not wait for the fan-out's emails.
func (s *Store) GetCampaignState(ctx context.Context, teamID int64, id string) (store.Campaign, error) {
	var c store.Campaign
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		var err error
		c, err = get[store.Campaign](tx.Bucket(bucketCampaigns), campaignKey(teamID, id))
		return err
	})
	c.Counters = nil
	return c, err
}

// ListCampaigns walks the team's time index newest first, filtering on the index values.
func (s *Store) ListCampaigns(ctx context.Context, teamID int64, f store.CampaignFilter) ([]store.Campaign, int, error) {
	var (
		page  []store.Campaign
		total int
	)
	offset := max(f.Offset, 0)
	search := strings.ToLower(f.Search)
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		page, total = nil, 0
		prefix := u64(teamID)
		c := tx.Bucket(bucketCampTime).Cursor()
		k, v := lastWithPrefix(c, prefix)
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
			var ref campaignRef
			if err := json.Unmarshal(v, &ref); err != nil {
				return fmt.Errorf("bolt: decode campaign index: %w", err)
			}
			if f.Status != "" && ref.Status != f.Status {
				continue
			}
			if search != "" && !strings.Contains(ref.Name, search) && !strings.Contains(ref.Subject, search) {
				continue
			}
			if f.DomainID != 0 && ref.Domain != f.DomainID {
				if ref.Domain != 0 {
					continue
				}
				cp, err := readCampaign(tx, teamID, string(k[len(prefix)+12:])) // an entry from before
				if err != nil {
					return fmt.Errorf("bolt: campaign in index: %w", err)
				}
				if cp.DomainID != f.DomainID {
					continue
				}
			}
			if total >= offset && (f.Limit <= 0 || len(page) < f.Limit) {
				id := string(k[len(prefix)+12:])
				cp, err := readCampaign(tx, teamID, id)
				if err != nil {
					return fmt.Errorf("bolt: campaign %s in index: %w", id, err)
				}
				page = append(page, cp)
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

// UpdateCampaign is optimistic on the record's bytes, which counting never changes. fn's changes
// to Counters are dropped; the result carries the counters as they stand at the write.
func (s *Store) UpdateCampaign(ctx context.Context, teamID int64, id string, fn func(*store.Campaign) error) (store.Campaign, error) {
	key := campaignKey(teamID, id)
	type snapshot struct {
		raw      []byte
		counters map[string]int64
	}
	if err := s.wal.settle(ctx); err != nil { // the counters
		return store.Campaign{}, err
	}
	c, err := optimistic(ctx, s, "campaign "+id,
		func(tx *bbolt.Tx) (snapshot, error) {
			raw, err := rawOf(bucketCampaigns, key)(tx)
			return snapshot{raw, readCounters(tx, teamID, id)}, err
		},
		func(snap snapshot) (changed[store.Campaign], error) {
			old, err := decode[store.Campaign](snap.raw, "campaign")
			if err != nil {
				return changed[store.Campaign]{}, err
			}
			c := old
			c.ReplyTo = slices.Clone(old.ReplyTo)
			c.CC = slices.Clone(old.CC)
			c.BCC = slices.Clone(old.BCC)
			if old.ScheduledAt != nil {
				at := *old.ScheduledAt
				c.ScheduledAt = &at
			}
			c.Counters = snap.counters
			if err := fn(&c); err != nil {
				return changed[store.Campaign]{}, err
			}
			c.ID, c.TeamID = id, teamID
			return changed[store.Campaign]{old, c}, nil
		},
		func(tx *bbolt.Tx, snap snapshot, c *changed[store.Campaign]) (bool, error) {
			if !bytes.Equal(tx.Bucket(bucketCampaigns).Get(key), snap.raw) {
				return true, nil
			}
			if err := tx.Bucket(bucketCampTime).Delete(campaignTimeKey(c.old)); err != nil {
				return false, err
			}
			if err := writeCampaign(tx, c.new); err != nil {
				return false, err
			}
			if c.old.Status != c.new.Status {
				before, after := c.old, c.new
				before.Counters, after.Counters = nil, nil
				if err := appendChange(tx, teamID, store.Change{Before: store.Record{Campaign: &before}, After: store.Record{Campaign: &after}}); err != nil {
					return false, err
				}
			}
			c.new.Counters = readCounters(tx, teamID, id)
			return false, nil
		})
	return c.new, err
}

// DeleteCampaign removes the record, its index entry and its counters. The campaign's emails
// stay (they are the team's sent mail); their later events count nothing.
func (s *Store) DeleteCampaign(ctx context.Context, teamID int64, id string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		camps := tx.Bucket(bucketCampaigns)
		key := campaignKey(teamID, id)
		c, err := get[store.Campaign](camps, key)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketCampTime).Delete(campaignTimeKey(c)); err != nil {
			return err
		}
		counters := tx.Bucket(bucketCampCount)
		prefix := counterPrefix(teamID, id)
		var keys [][]byte
		cur := counters.Cursor()
		for k, _ := cur.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = cur.Next() {
			keys = append(keys, bytes.Clone(k))
		}
		for _, k := range keys {
			if err := counters.Delete(k); err != nil {
				return err
			}
		}
		return camps.Delete(key)
	})
}
