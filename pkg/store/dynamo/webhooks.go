package dynamo

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mailroom/mailroom/pkg/store"
)

// Webhooks live in their team's partition (WEBHOOK#<id>), each call in its webhook's
// (CALL#<call id>, so a Query of the partition backwards is the delivery log newest first),
// and a PENDING call is in the work index under WHDUE#<shard>, sorted by its next attempt.

const (
	webhookPrefix = "WEBHOOK#"
	callPrefix    = "CALL#"
)

func webhookKey(teamID int64, id string) key {
	return key{fmt.Sprintf("TEAM#%d", teamID), webhookPrefix + id}
}

func callKey(webhookID, id string) key { return key{webhookPrefix + webhookID, callPrefix + id} }

// dueIndexKey is a due call's work-index partition, one of WorkShards by its id.
func dueIndexKey(callID string) string {
	h := fnv.New32a()
	h.Write([]byte(callID))
	return fmt.Sprintf("WHDUE#%02d", int(h.Sum32()%WorkShards))
}

const dueTimeFmt = "2006-01-02T15:04:05.000000000Z"

type webhookItem struct {
	keys
	store.Webhook
}

type callItem struct {
	keys
	store.WebhookCall
}

func (st *Store) CreateWebhook(ctx context.Context, w store.Webhook) error {
	w.Version = 1
	m, err := marshal(webhookItem{keys: webhookKey(w.TeamID, w.ID).keys(), Webhook: w})
	if err != nil {
		return err
	}
	return st.putNew(ctx, m)
}

func (st *Store) GetWebhook(ctx context.Context, teamID int64, id string) (store.Webhook, error) {
	var it webhookItem
	err := st.getInto(ctx, webhookKey(teamID, id), true, &it)
	return it.Webhook, err
}

// ListWebhooks returns the team's webhooks newest first (then by id, descending).
func (st *Store) ListWebhooks(ctx context.Context, teamID int64) ([]store.Webhook, error) {
	return newestFirst(ctx, st, webhookKey(teamID, "").PK, webhookPrefix, func(it webhookItem) store.Webhook { return it.Webhook },
		func(w store.Webhook) (time.Time, string) { return w.CreatedAt, w.ID })
}

func (st *Store) UpdateWebhook(ctx context.Context, teamID int64, id string, fn func(*store.Webhook) error) (store.Webhook, error) {
	k := webhookKey(teamID, id)
	return optimistic(ctx, st, "webhook "+id, func() (store.Webhook, error) {
		var old webhookItem
		if err := st.getInto(ctx, k, true, &old); err != nil {
			return store.Webhook{}, err
		}
		w := old.Webhook
		w.EventTypes, w.DomainIDs = append([]string(nil), w.EventTypes...), append([]int64(nil), w.DomainIDs...)
		if err := fn(&w); err != nil {
			return store.Webhook{}, err
		}
		w.ID, w.TeamID, w.CreatedAt, w.Version = id, teamID, old.CreatedAt, old.Version+1
		m, err := marshal(webhookItem{keys: k.keys(), Webhook: w})
		if err != nil {
			return store.Webhook{}, err
		}
		return w, st.putIfVersion(ctx, m, old.Version, "webhook")
	})
}

func (st *Store) DeleteWebhook(ctx context.Context, teamID int64, id string) error {
	return st.deleteExisting(ctx, webhookKey(teamID, id), "", nil)
}

// callAttrs is a call's item, in the due index while PENDING, expiring (TTL) the store's
// retention after it was made: its payload carries an email's recipients and subject.
func (st *Store) callAttrs(c store.WebhookCall) (map[string]types.AttributeValue, error) {
	it := callItem{keys: callKey(c.WebhookID, c.ID).keys(), WebhookCall: c}
	if c.Status == store.CallPending && c.NextAttemptAt != nil {
		it.GSI4PK = dueIndexKey(c.ID)
		it.GSI4SK = c.NextAttemptAt.UTC().Format(dueTimeFmt) + "#" + c.WebhookID + "#" + c.ID
	}
	m, err := marshal(it)
	if err == nil && st.retention > 0 {
		m[TTLAttribute] = avN(c.CreatedAt.Add(st.retention).Unix())
	}
	return m, err
}

// ExpireWebhookCalls removes nothing: DynamoDB's TTL deletes a call once its retention has
// passed (a deleted webhook's calls with them), and reads pass over one that is due but not
// deleted yet.
func (st *Store) ExpireWebhookCalls(context.Context, int) (int, error) { return 0, nil }

// CreateWebhookCalls puts each call that does not exist (a conditional put each).
func (st *Store) CreateWebhookCalls(ctx context.Context, calls []store.WebhookCall) ([]store.WebhookCall, error) {
	var created []store.WebhookCall
	for _, c := range calls {
		c.Version = 1
		m, err := st.callAttrs(c)
		if err != nil {
			return created, err
		}
		switch err := st.putNew(ctx, m); {
		case err == nil:
			created = append(created, c)
		case err != store.ErrConflict:
			return created, err
		}
	}
	return created, nil
}

func (st *Store) GetWebhookCall(ctx context.Context, webhookID, id string) (store.WebhookCall, error) {
	var it callItem
	err := st.getInto(ctx, callKey(webhookID, id), true, &it)
	if err == nil && store.CallExpired(it.WebhookCall, st.retention, st.now()) {
		return store.WebhookCall{}, store.ErrNotFound // TTL deletes it within days
	}
	return it.WebhookCall, err
}

// ListWebhookCalls queries the webhook's partition backwards from before.
func (st *Store) ListWebhookCalls(ctx context.Context, webhookID string, limit int, before string) ([]store.WebhookCall, error) {
	k := callKey(webhookID, "")
	in := &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("PK = :pk AND begins_with(SK, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": avS(k.PK), ":p": avS(callPrefix)},
		ScanIndexForward:          aws.Bool(false),
	}
	if before != "" { // the partition holds the webhook's calls only
		in.KeyConditionExpression = aws.String("PK = :pk AND SK < :before")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":pk": avS(k.PK), ":before": avS(callPrefix + before)}
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(min(limit, 1000)))
	}
	items, err := st.query(ctx, in, limit)
	if err != nil {
		return nil, err
	}
	calls, err := decodeAll(items, func(it callItem) store.WebhookCall { return it.WebhookCall })
	now := st.now()
	return slices.DeleteFunc(calls, func(c store.WebhookCall) bool { return store.CallExpired(c, st.retention, now) }), err
}

// errNotHeld ends a hold's update of a call it leaves as it is.
var errNotHeld = errors.New("dynamo: call not held")

// HoldWebhookCalls holds the calls one by one, each a conditional update of its own item (no
// write takes many items but a transaction, twice the cost).
func (st *Store) HoldWebhookCalls(ctx context.Context, webhookID string, ids []string, until time.Time) error {
	for _, id := range ids {
		_, err := st.UpdateWebhookCall(ctx, webhookID, id, func(c *store.WebhookCall) error {
			if !c.HoldUntil(until) {
				return errNotHeld
			}
			return nil
		})
		if err != nil && !errors.Is(err, errNotHeld) && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("dynamo: hold webhook call %s: %w", id, err)
		}
	}
	return nil
}

func (st *Store) UpdateWebhookCall(ctx context.Context, webhookID, id string, fn func(*store.WebhookCall) error) (store.WebhookCall, error) {
	k := callKey(webhookID, id)
	return optimistic(ctx, st, "webhook call "+id, func() (store.WebhookCall, error) {
		var old callItem
		if err := st.getInto(ctx, k, true, &old); err != nil {
			return store.WebhookCall{}, err
		}
		c := old.WebhookCall
		if err := fn(&c); err != nil {
			return store.WebhookCall{}, err
		}
		c.ID, c.WebhookID, c.TeamID, c.CreatedAt, c.Version = id, webhookID, old.TeamID, old.CreatedAt, old.Version+1
		m, err := st.callAttrs(c)
		if err != nil {
			return store.WebhookCall{}, err
		}
		return c, st.putIfVersion(ctx, m, old.Version, "webhook call")
	})
}

// DueWebhookCalls reads every shard of the due index up to t and merges them.
func (st *Store) DueWebhookCalls(ctx context.Context, t time.Time, limit int) ([][2]string, error) {
	ins := make([]*dynamodb.QueryInput, WorkShards)
	for s := range WorkShards {
		ins[s] = &dynamodb.QueryInput{
			IndexName:              aws.String(IndexGSI4),
			KeyConditionExpression: aws.String("GSI4PK = :pk AND GSI4SK <= :t"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": avS(fmt.Sprintf("WHDUE#%02d", s)), ":t": avS(t.UTC().Format(dueTimeFmt) + "#\uffff"),
			},
			ProjectionExpression: aws.String("GSI4SK"),
		}
		if limit > 0 {
			ins[s].Limit = aws.Int32(int32(min(limit, 1000)))
		}
	}
	pages, err := st.queryEach(ctx, ins, limit)
	if err != nil {
		return nil, err
	}
	var sks []string
	for _, items := range pages {
		for _, it := range items {
			if sk, ok := it["GSI4SK"].(*types.AttributeValueMemberS); ok {
				sks = append(sks, sk.Value)
			}
		}
	}
	return dueRefs(sks, limit), nil
}

// dueRefs sorts due-index sort keys (next attempt, webhook id, call id) and returns the first
// limit as webhook and call ids.
func dueRefs(sks []string, limit int) [][2]string {
	slices.Sort(sks)
	if limit > 0 && len(sks) > limit {
		sks = sks[:limit]
	}
	out := make([][2]string, 0, len(sks))
	for _, sk := range sks {
		parts := strings.SplitN(sk, "#", 3)
		if len(parts) == 3 {
			out = append(out, [2]string{parts[1], parts[2]})
		}
	}
	return out
}
