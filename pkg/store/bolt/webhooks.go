package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"
	"time"

	"go.etcd.io/bbolt"

	"github.com/mailroom/mailroom/pkg/store"
)

func (s *Store) CreateWebhook(ctx context.Context, w store.Webhook) error {
	w.Version = 1
	return s.updateNow(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketWebhooks)
		k := teamKey(w.TeamID, []byte(w.ID))
		if b.Get(k) != nil {
			return store.ErrConflict
		}
		return put(b, k, w)
	})
}

func (s *Store) GetWebhook(ctx context.Context, teamID int64, id string) (store.Webhook, error) {
	var w store.Webhook
	err := s.viewNow(ctx, func(tx *bbolt.Tx) (err error) {
		w, err = get[store.Webhook](tx.Bucket(bucketWebhooks), teamKey(teamID, []byte(id)))
		return err
	})
	return w, err
}

// ListWebhooks returns the team's webhooks newest first (then by id, descending).
func (s *Store) ListWebhooks(ctx context.Context, teamID int64) ([]store.Webhook, error) {
	var out []store.Webhook
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		prefix := teamKey(teamID)
		c := tx.Bucket(bucketWebhooks).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			w, err := decode[store.Webhook](v, "webhook")
			if err != nil {
				return err
			}
			out = append(out, w)
		}
		return nil
	})
	slices.SortStableFunc(out, func(a, b store.Webhook) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return compareStrings(b.ID, a.ID)
	})
	return out, err
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s *Store) UpdateWebhook(ctx context.Context, teamID int64, id string, fn func(*store.Webhook) error) (store.Webhook, error) {
	key := teamKey(teamID, []byte(id))
	return optimistic(ctx, s, "webhook "+id, rawOf(bucketWebhooks, key),
		func(raw []byte) (store.Webhook, error) {
			w, err := decode[store.Webhook](raw, "webhook")
			if err != nil {
				return w, err
			}
			old := w
			if err := fn(&w); err != nil {
				return w, err
			}
			w.ID, w.TeamID, w.CreatedAt, w.Version = id, teamID, old.CreatedAt, old.Version+1
			return w, nil
		},
		func(tx *bbolt.Tx, raw []byte, w *store.Webhook) (bool, error) {
			b := tx.Bucket(bucketWebhooks)
			if !bytes.Equal(b.Get(key), raw) {
				return true, nil
			}
			return false, put(b, key, *w)
		})
}

func (s *Store) DeleteWebhook(ctx context.Context, teamID int64, id string) error {
	return s.updateNow(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketWebhooks)
		k := teamKey(teamID, []byte(id))
		if b.Get(k) == nil {
			return store.ErrNotFound
		}
		return b.Delete(k)
	})
}

func callKey(webhookID, id string) []byte { return join([]byte(webhookID), []byte{0}, []byte(id)) }

// dueKey is a PENDING call's entry in the due bucket.
func dueKey(c store.WebhookCall) []byte {
	return join(u64(c.NextAttemptAt.UnixNano()), callKey(c.WebhookID, c.ID))
}

func pendingDue(c store.WebhookCall) bool {
	return c.Status == store.CallPending && c.NextAttemptAt != nil
}

func (s *Store) CreateWebhookCalls(ctx context.Context, calls []store.WebhookCall) ([]store.WebhookCall, error) {
	var created []store.WebhookCall
	err := s.updateNow(ctx, func(tx *bbolt.Tx) error {
		created = created[:0]
		b := tx.Bucket(bucketCalls)
		for _, c := range calls {
			k := callKey(c.WebhookID, c.ID)
			if b.Get(k) != nil {
				continue
			}
			c.Version = 1
			if err := put(b, k, c); err != nil {
				return err
			}
			if pendingDue(c) {
				if err := tx.Bucket(bucketCallsDue).Put(dueKey(c), nil); err != nil {
					return err
				}
			}
			created = append(created, c)
		}
		return nil
	})
	return created, err
}

func (s *Store) GetWebhookCall(ctx context.Context, webhookID, id string) (store.WebhookCall, error) {
	var c store.WebhookCall
	err := s.viewNow(ctx, func(tx *bbolt.Tx) (err error) {
		c, err = get[store.WebhookCall](tx.Bucket(bucketCalls), callKey(webhookID, id))
		if err == nil && store.CallExpired(c, s.retention, time.Now()) {
			return store.ErrNotFound // past its retention, not removed yet
		}
		return err
	})
	return c, err
}

// ListWebhookCalls walks the webhook's calls backwards from before.
func (s *Store) ListWebhookCalls(ctx context.Context, webhookID string, limit int, before string) ([]store.WebhookCall, error) {
	var out []store.WebhookCall
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		prefix := callKey(webhookID, "")
		c := tx.Bucket(bucketCalls).Cursor()
		from := join([]byte(webhookID), []byte{1}) // past the webhook's last call
		if before != "" {
			from = callKey(webhookID, before)
		}
		k, v := c.Seek(from)
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && (limit <= 0 || len(out) < limit); k, v = c.Prev() {
			call, err := decode[store.WebhookCall](v, "webhook call")
			if err != nil {
				return err
			}
			if store.CallExpired(call, s.retention, time.Now()) {
				continue // past its retention, not removed yet
			}
			out = append(out, call)
		}
		return nil
	})
	return out, err
}

func (s *Store) UpdateWebhookCall(ctx context.Context, webhookID, id string, fn func(*store.WebhookCall) error) (store.WebhookCall, error) {
	key := callKey(webhookID, id)
	return optimistic(ctx, s, "webhook call "+id, rawOf(bucketCalls, key),
		func(raw []byte) (store.WebhookCall, error) {
			c, err := decode[store.WebhookCall](raw, "webhook call")
			if err != nil {
				return c, err
			}
			old := c
			if err := fn(&c); err != nil {
				return c, err
			}
			c.ID, c.WebhookID, c.TeamID, c.CreatedAt, c.Version = id, webhookID, old.TeamID, old.CreatedAt, old.Version+1
			return c, nil
		},
		func(tx *bbolt.Tx, raw []byte, c *store.WebhookCall) (bool, error) {
			b := tx.Bucket(bucketCalls)
			if !bytes.Equal(b.Get(key), raw) {
				return true, nil
			}
			old, err := decode[store.WebhookCall](raw, "webhook call")
			if err != nil {
				return false, err
			}
			due := tx.Bucket(bucketCallsDue)
			if pendingDue(old) {
				if err := due.Delete(dueKey(old)); err != nil {
					return false, err
				}
			}
			if pendingDue(*c) {
				if err := due.Put(dueKey(*c), nil); err != nil {
					return false, err
				}
			}
			return false, put(b, key, *c)
		})
}

// HoldWebhookCalls holds the calls in one transaction: a commit per call had the writes of
// other webhooks queue behind a failing webhook's backlog.
func (s *Store) HoldWebhookCalls(ctx context.Context, webhookID string, ids []string, until time.Time) error {
	return s.updateNow(ctx, func(tx *bbolt.Tx) error {
		b, due := tx.Bucket(bucketCalls), tx.Bucket(bucketCallsDue)
		for _, id := range ids {
			key := callKey(webhookID, id)
			raw := b.Get(key)
			if raw == nil {
				continue
			}
			c, err := decode[store.WebhookCall](raw, "webhook call")
			if err != nil {
				return err
			}
			was := dueKey(c)
			if !c.HoldUntil(until) {
				continue
			}
			if err := due.Delete(was); err != nil {
				return err
			}
			c.Version++
			if err := due.Put(dueKey(c), nil); err != nil {
				return err
			}
			if err := put(b, key, c); err != nil {
				return err
			}
		}
		return nil
	})
}

// DueWebhookCalls walks the due bucket from the earliest.
func (s *Store) DueWebhookCalls(ctx context.Context, t time.Time, limit int) ([][2]string, error) {
	return s.DueWebhookCallsSkipping(ctx, t, limit, nil)
}

// DueWebhookCallsSkipping is DueWebhookCalls without the calls of the webhooks skip names (nil:
// none), which do not count toward limit: the local runner leaves out the webhooks it is
// serving already (hooks.Pool).
func (s *Store) DueWebhookCallsSkipping(ctx context.Context, t time.Time, limit int, skip func(webhookID string) bool) ([][2]string, error) {
	var out [][2]string
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketCallsDue).Cursor()
		until := t.UnixNano()
		for k, _ := c.First(); k != nil && (limit <= 0 || len(out) < limit); k, _ = c.Next() {
			if len(k) < 8 || int64(binary.BigEndian.Uint64(k[:8])) > until {
				break
			}
			wh, id, ok := bytes.Cut(k[8:], []byte{0})
			if !ok || skip != nil && skip(string(wh)) {
				continue
			}
			out = append(out, [2]string{string(wh), string(id)})
		}
		return nil
	})
	return out, err
}

// ExpireWebhookCalls walks each webhook's calls oldest first (their ids sort by time) up to the
// first one still kept, and every call of a webhook that no longer exists, then removes those
// (and their entries in the due bucket), 500 to a transaction.
func (s *Store) ExpireWebhookCalls(ctx context.Context, limit int) (int, error) {
	now := time.Now()
	var keys [][]byte
	err := s.viewNow(ctx, func(tx *bbolt.Tx) error {
		hooks := tx.Bucket(bucketWebhooks)
		c := tx.Bucket(bucketCalls).Cursor()
		var webhook []byte
		gone := false
		for k, v := c.First(); k != nil && (limit <= 0 || len(keys) < limit); {
			wh, _, ok := bytes.Cut(k, []byte{0})
			if !ok {
				k, v = c.Next()
				continue
			}
			call, err := decode[store.WebhookCall](v, "webhook call")
			if err != nil {
				return err
			}
			if !bytes.Equal(wh, webhook) { // the first (oldest) call of the next webhook
				webhook = append(webhook[:0], wh...)
				gone = hooks.Get(teamKey(call.TeamID, wh)) == nil
			}
			if !gone && !store.CallExpired(call, s.retention, now) {
				// This webhook's later calls are newer: on to the next webhook.
				k, v = c.Seek(join(wh, []byte{1}))
				continue
			}
			keys = append(keys, append([]byte(nil), k...))
			k, v = c.Next()
		}
		return nil
	})
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	n := 0
	for start := 0; start < len(keys); start += 500 {
		chunk := keys[start:min(start+500, len(keys))]
		removed := 0
		err := s.updateNow(ctx, func(tx *bbolt.Tx) error {
			removed = 0 // the function may run more than once
			b, due := tx.Bucket(bucketCalls), tx.Bucket(bucketCallsDue)
			for _, k := range chunk {
				v := b.Get(k)
				if v == nil {
					continue
				}
				call, err := decode[store.WebhookCall](v, "webhook call")
				if err != nil {
					return err
				}
				if pendingDue(call) {
					if err := due.Delete(dueKey(call)); err != nil {
						return err
					}
				}
				if err := b.Delete(k); err != nil {
					return err
				}
				removed++
			}
			return nil
		})
		if err != nil {
			return n, err
		}
		n += removed
	}
	return n, nil
}
