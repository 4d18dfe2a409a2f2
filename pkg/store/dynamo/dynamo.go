// Package dynamo is the AWS adapter of the store port: every record of Mailroom in one DynamoDB
// table (see TableInput for its shape and keys.go for the item layout).
//
// The access patterns follow the architecture rules: request paths only GetItem and Query (the
// admin-only ListTeams too, through an index), uniqueness is a conditional write, updates are
// optimistic (a Version attribute checked by the write), and the list count comes from
// per-day counters maintained in the same transactions that create the emails.
package dynamo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mailroom/mailroom/pkg/store"
)

// Store implements store.Store on one DynamoDB table.
type Store struct {
	client    *dynamodb.Client
	table     string
	now       func() time.Time
	attempts  int           // of an optimistic update: maxUpdateAttempts (tests lower it)
	retention time.Duration // how long an email is kept; 0: for ever
	stream    *streamReader // set by ReadStream: the store applies its stream's counts itself
}

// SetRetention makes emails, their content and their events expire retention after the email
// was created: each item carries the TTL attribute, and reads ignore an expired email before
// DynamoDB has deleted it (it may take a few days). 0 keeps them for ever.
func (st *Store) SetRetention(retention time.Duration) { st.retention = retention }

// expiry is the TTL of the items of e (0: none), see store.ExpiresAt.
func (st *Store) expiry(e store.Email) int64 {
	if at := store.ExpiresAt(e, st.retention); !at.IsZero() {
		return at.Unix()
	}
	return 0
}

// expired reports whether e is past the retention.
func (st *Store) expired(e store.Email) bool { return store.Expired(e, st.retention, st.now()) }

var _ store.Store = (*Store)(nil)

// New returns a Store on an existing table (see EnsureTable).
func New(client *dynamodb.Client, table string) *Store {
	return &Store{client: client, table: table, now: time.Now, attempts: maxUpdateAttempts}
}

// maxUpdateAttempts bounds the optimistic retry loops: beyond it the contention on one item is
// pathological, and the caller gets a LostRaceError rather than a hang. With the capped
// exponential backoff below, 100 attempts span several seconds.
const maxUpdateAttempts = 100

// LostRaceError reports an optimistic update that kept losing to concurrent writers; it is a
// store.ErrContention (errors.Is).
type LostRaceError struct {
	Item     string
	Attempts int
}

func (e *LostRaceError) Error() string {
	return fmt.Sprintf("dynamo: %s changed concurrently %d times in a row", e.Item, e.Attempts)
}

// Unwrap makes the error a store.ErrContention.
func (e *LostRaceError) Unwrap() error { return store.ErrContention }

// putIfVersion writes item back if the stored one still has version: the write of an
// optimistic attempt that changes one item. errLost when it does not.
func (st *Store) putIfVersion(ctx context.Context, item map[string]types.AttributeValue, version int64, what string) error {
	err := st.putCond(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(st.table),
		Item:                      item,
		ConditionExpression:       aws.String("Version = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": avN(version)},
	})
	if conditionFailed(err) {
		return errLost
	}
	if err != nil {
		return fmt.Errorf("dynamo: update %s: %w", what, err)
	}
	return nil
}

// errLost is what an attempt of an optimistic update returns when its conditional write found
// the item changed since it read it.
var errLost = errors.New("dynamo: lost a race")

// optimistic is the store's one way to change an item: attempt reads it (consistently), runs the
// caller's change on a copy and writes it back conditioned on what it read, returning errLost
// when the condition failed; then, after a backoff, it is tried again, and after st.attempts
// tries the update fails with a LostRaceError (store.ErrContention).
func optimistic[T any](ctx context.Context, st *Store, what string, attempt func() (T, error)) (T, error) {
	var zero T
	for n := range st.attempts {
		if n > 0 {
			if err := backoff(ctx, n); err != nil {
				return zero, err
			}
		}
		v, err := attempt()
		switch {
		case err == nil:
			return v, nil
		case !errors.Is(err, errLost):
			return zero, err
		}
	}
	return zero, &LostRaceError{Item: what, Attempts: st.attempts}
}

// backoff sleeps before attempt n of a retry: full jitter over an exponential window capped at
// 50 ms, so that many writers of one item spread out instead of colliding again in lockstep.
func backoff(ctx context.Context, n int) error {
	window := min(time.Millisecond<<min(n, 6), 50*time.Millisecond)
	d := time.Duration(1 + rand.Int64N(int64(window)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// keys are the generic key attributes every item carries (index ones only when it is in the
// index: empty strings are omitted, which keeps the indexes sparse).
type keys struct {
	PK     string `dynamodbav:"PK"`
	SK     string `dynamodbav:"SK"`
	GSI1PK string `dynamodbav:"GSI1PK,omitempty"`
	GSI1SK string `dynamodbav:"GSI1SK,omitempty"`
	GSI2PK string `dynamodbav:"GSI2PK,omitempty"`
	GSI2SK string `dynamodbav:"GSI2SK,omitempty"`
	GSI3PK string `dynamodbav:"GSI3PK,omitempty"`
	GSI3SK string `dynamodbav:"GSI3SK,omitempty"`
	GSI4PK string `dynamodbav:"GSI4PK,omitempty"`
	GSI4SK string `dynamodbav:"GSI4SK,omitempty"`
	GSI5PK string `dynamodbav:"GSI5PK,omitempty"`
	GSI5SK string `dynamodbav:"GSI5SK,omitempty"`
}

func (k key) keys() keys { return keys{PK: k.PK, SK: k.SK} }

func (k key) av() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK: &types.AttributeValueMemberS{Value: k.PK},
		AttrSK: &types.AttributeValueMemberS{Value: k.SK},
	}
}

func avS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func avN(v int64) types.AttributeValue  { return &types.AttributeValueMemberN{Value: fmt.Sprint(v)} }

func marshal(v any) (map[string]types.AttributeValue, error) {
	m, err := attributevalue.MarshalMap(v)
	if err != nil {
		return nil, fmt.Errorf("dynamo: marshal %T: %w", v, err)
	}
	return m, nil
}

func unmarshal(m map[string]types.AttributeValue, v any) error {
	if err := attributevalue.UnmarshalMap(m, v); err != nil {
		return fmt.Errorf("dynamo: unmarshal %T: %w", v, err)
	}
	return nil
}

// conditionFailed reports a failed ConditionExpression of a single-item write.
func conditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// transactOnce writes items in one transaction, again while it is cancelled by conflicts or
// throttling alone, and answers failed (ErrConflict, ErrNotFound) when a condition of its own
// cancelled it; any other cancellation is an error of its own, not failed.
func (st *Store) transactOnce(ctx context.Context, items []types.TransactWriteItem, failed error) error {
	for attempt := 1; ; attempt++ {
		_, err := st.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		reasons, cancelled := cancelReasons(err)
		switch {
		case !cancelled:
			return err
		case slices.ContainsFunc(reasons, reasonIsCondition):
			return failed
		case !retryableCancel(reasons) || attempt == maxConflictAttempts:
			return err
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
}

// cancelReasons returns the per-action reasons of a cancelled transaction (aligned with its
// actions), or ok=false when err is something else.
func cancelReasons(err error) (reasons []types.CancellationReason, ok bool) {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil, false
	}
	return tce.CancellationReasons, true
}

func reasonIsCondition(r types.CancellationReason) bool {
	return aws.ToString(r.Code) == "ConditionalCheckFailed"
}

// get reads one item; a missing item is (nil, nil).
func (st *Store) get(ctx context.Context, k key, consistent bool) (map[string]types.AttributeValue, error) {
	out, err := st.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(st.table),
		Key:            k.av(),
		ConsistentRead: aws.Bool(consistent),
	})
	if err != nil {
		return nil, fmt.Errorf("dynamo: get %s/%s: %w", k.PK, k.SK, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// getInto reads one item into v; a missing item is store.ErrNotFound.
func (st *Store) getInto(ctx context.Context, k key, consistent bool, v any) error {
	item, err := st.get(ctx, k, consistent)
	if err != nil {
		return err
	}
	if item == nil {
		return store.ErrNotFound
	}
	return unmarshal(item, v)
}

// putNew writes an item that must not exist yet; an existing one is store.ErrConflict.
func (st *Store) putNew(ctx context.Context, item map[string]types.AttributeValue) error {
	err := st.putCond(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(st.table),
		Item:                item,
		ConditionExpression: aws.String("attribute_not_exists(PK)"),
	})
	if conditionFailed(err) {
		return store.ErrConflict
	}
	if err != nil {
		return fmt.Errorf("dynamo: put: %w", err)
	}
	return nil
}

// deleteExisting deletes an item that must exist (and match the extra condition, if any);
// otherwise store.ErrNotFound.
func (st *Store) deleteExisting(ctx context.Context, k key, cond string, values map[string]types.AttributeValue) error {
	expr := "attribute_exists(PK)"
	if cond != "" {
		expr += " AND " + cond
	}
	in := &dynamodb.DeleteItemInput{
		TableName:           aws.String(st.table),
		Key:                 k.av(),
		ConditionExpression: aws.String(expr),
	}
	if len(values) > 0 {
		in.ExpressionAttributeValues = values
	}
	_, err := st.client.DeleteItem(ctx, in)
	if conditionFailed(err) {
		return store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("dynamo: delete %s/%s: %w", k.PK, k.SK, err)
	}
	return nil
}

// query runs a Query to the end (or until max items, when max > 0) and returns the items.
func (st *Store) query(ctx context.Context, in *dynamodb.QueryInput, max int) ([]map[string]types.AttributeValue, error) {
	in.TableName = aws.String(st.table)
	var items []map[string]types.AttributeValue
	p := dynamodb.NewQueryPaginator(st.client, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("dynamo: query: %w", err)
		}
		items = append(items, out.Items...)
		if max > 0 && len(items) >= max {
			return items[:max], nil
		}
	}
	return items, nil
}

// queryConcurrency bounds the Queries of one call in flight (a list reads every shard).
const queryConcurrency = 8

// queryEach runs the Queries concurrently (each to the end, or up to max items) and returns
// their items in the order of ins.
func (st *Store) queryEach(ctx context.Context, ins []*dynamodb.QueryInput, max int) ([][]map[string]types.AttributeValue, error) {
	out := make([][]map[string]types.AttributeValue, len(ins))
	err := each(ctx, len(ins), func(ctx context.Context, i int) error {
		items, err := st.query(ctx, ins[i], max)
		out[i] = items
		return err
	})
	return out, err
}

// countEach sums Select=COUNT Queries run concurrently.
func (st *Store) countEach(ctx context.Context, ins []*dynamodb.QueryInput) (int, error) {
	counts := make([]int, len(ins))
	err := each(ctx, len(ins), func(ctx context.Context, i int) error {
		n, err := st.count(ctx, ins[i])
		counts[i] = n
		return err
	})
	total := 0
	for _, n := range counts {
		total += n
	}
	return total, err
}

// each runs fn(0..n-1), queryConcurrency at a time, and returns the first error (cancelling
// the rest).
func each(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, queryConcurrency)
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(ctx, i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// count runs a Select=COUNT Query to the end.
func (st *Store) count(ctx context.Context, in *dynamodb.QueryInput) (int, error) {
	in.TableName = aws.String(st.table)
	in.Select = types.SelectCount
	total := 0
	p := dynamodb.NewQueryPaginator(st.client, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("dynamo: count: %w", err)
		}
		total += int(out.Count)
	}
	return total, nil
}

// maxBatchWrite is the AWS limit of items per BatchWriteItem (moto accepts more).
const maxBatchWrite = 25

// batchWrite writes the requests 25 at a time, resubmitting unprocessed ones with a backoff.
func (st *Store) batchWrite(ctx context.Context, reqs []types.WriteRequest) error {
	for len(reqs) > 0 {
		batch := reqs[:min(maxBatchWrite, len(reqs))]
		reqs = reqs[len(batch):]
		for attempt := 0; len(batch) > 0; attempt++ {
			if attempt > 0 {
				if err := backoff(ctx, attempt); err != nil {
					return err
				}
			}
			out, err := st.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
				RequestItems: map[string][]types.WriteRequest{st.table: batch},
			})
			if err != nil {
				return fmt.Errorf("dynamo: batch write: %w", err)
			}
			batch = out.UnprocessedItems[st.table]
		}
	}
	return nil
}

// Sequences: one counter item per name, incremented atomically.

// Teams.

// API keys.

func asCCF(err error, target **types.ConditionalCheckFailedException) bool {
	return errors.As(err, target)
}

// batchGet reads the items of keys (duplicates allowed) with BatchGetItem, 100 keys a call,
// resubmitting unprocessed keys; a missing item is absent from the result.
func (st *Store) batchGet(ctx context.Context, ks []key, consistent bool) (map[key]map[string]types.AttributeValue, error) {
	out := map[key]map[string]types.AttributeValue{}
	seen := map[key]bool{}
	var pending []map[string]types.AttributeValue
	for _, k := range ks {
		if !seen[k] {
			seen[k] = true
			pending = append(pending, k.av())
		}
	}
	for len(pending) > 0 {
		batch := pending[:min(maxBatchGet, len(pending))]
		pending = pending[len(batch):]
		for attempt := 0; len(batch) > 0; attempt++ {
			if attempt > 0 {
				if err := backoff(ctx, attempt); err != nil {
					return nil, err
				}
			}
			res, err := st.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
				RequestItems: map[string]types.KeysAndAttributes{st.table: {Keys: batch, ConsistentRead: aws.Bool(consistent)}},
			})
			if err != nil {
				return nil, fmt.Errorf("dynamo: batch get: %w", err)
			}
			for _, m := range res.Responses[st.table] {
				out[keyOf(m)] = m
			}
			batch = res.UnprocessedKeys[st.table].Keys
		}
	}
	return out, nil
}

func keyOf(m map[string]types.AttributeValue) key {
	k := key{SK: skOf(m)}
	if v, ok := m[AttrPK].(*types.AttributeValueMemberS); ok {
		k.PK = v.Value
	}
	return k
}

// setAll builds an UpdateExpression that SETs every attribute of m but the primary key and
// the skipped ones (store-maintained counters), so that an optimistic update of a record never
// overwrites a counter that transactions ADD to concurrently. Values are named :a<n>.
func setAll(m map[string]types.AttributeValue, skip ...string) (string, map[string]string, map[string]types.AttributeValue) {
	names := make([]string, 0, len(m))
	for n := range m {
		if n != AttrPK && n != AttrSK && !slices.Contains(skip, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return clause("SET", " = ", "a", names, func(n string) types.AttributeValue { return m[n] })
}

// clause builds one clause of an UpdateExpression, "<action> #<p>0<op>:<p>0, #<p>1<op>:<p>1,
// …", for the attributes attrs, with their names and the values value gives them.
func clause(action, op, p string, attrs []string, value func(string) types.AttributeValue) (string, map[string]string, map[string]types.AttributeValue) {
	var b strings.Builder
	names, values := make(map[string]string, len(attrs)), make(map[string]types.AttributeValue, len(attrs))
	for i, a := range attrs {
		if i == 0 {
			b.WriteString(action + " ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "#%s%d%s:%s%d", p, i, op, p, i)
		names[fmt.Sprintf("#%s%d", p, i)] = a
		values[fmt.Sprintf(":%s%d", p, i)] = value(a)
	}
	return b.String(), names, values
}

func (k keys) key() key { return key{k.PK, k.SK} }

// newestFirst queries a partition's items whose sort key has prefix and returns their records
// newest first, then by id descending.
func newestFirst[I, T any](ctx context.Context, st *Store, pk, prefix string, record func(I) T, order func(T) (time.Time, string)) ([]T, error) {
	items, err := st.query(ctx, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("PK = :pk AND begins_with(SK, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": avS(pk), ":p": avS(prefix)},
	}, 0)
	if err != nil {
		return nil, err
	}
	out, err := decodeAll(items, record)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b T) int {
		at, aid := order(a)
		bt, bid := order(b)
		return cmp.Or(bt.Compare(at), strings.Compare(bid, aid))
	})
	return out, nil
}

// decodeAll unmarshals the items of a query into their item type and returns the records they
// carry.
func decodeAll[I, T any](items []map[string]types.AttributeValue, record func(I) T) ([]T, error) {
	out := make([]T, 0, len(items))
	for _, m := range items {
		var it I
		if err := unmarshal(m, &it); err != nil {
			return nil, err
		}
		out = append(out, record(it))
	}
	return out, nil
}
