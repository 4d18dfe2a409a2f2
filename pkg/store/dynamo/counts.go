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

// Counting from the table's stream.
//
// Every count the store keeps about emails (the list counts of a day, per team and domain; the
// analytics counts; a campaign's counters; a team's scheduled emails) follows from the email
// items alone: an email counts in its day when it is created, and a kind counts when it is added
// to the email's Counted. So the writes of an email carry no counter: a status change is one
// small conditional PutItem, and the counts are applied from the table's stream, many emails to
// one counter update (ApplyCounts, run by the WebhookEvents function on AWS and by the store's
// own stream reader wherever no Lambda reads the stream: ReadStream).
//
// Exactly once. Within a stream shard records arrive in order; ApplyCounts keeps, per shard, a
// marker item holding the sequence number of the last record it counted, and moves it forward
// in the same transaction as the counter updates, conditioned on the value it read. A record at
// or below the marker is skipped, so a retried batch, an overlapping one, or a second reader of
// the same shard counts nothing twice; and nothing is skipped, since the marker only moves past
// records whose counts it commits. The counts trail the writes by the stream's delay (about a
// second); the daily quota and the scheduled cap read them, and already allow that requests of
// the same instant pass together.
//
// Items written before this layout have their counts in the write itself: only email items
// carrying streamCountedAttribute are counted here, so no email counts twice across an upgrade
// (a write by an older version replaces the item without the attribute).

// streamCountedAttribute marks an email item whose counts the stream applies.
const streamCountedAttribute = "sc"

// StreamRecord is one record of the table's stream: its sequence number and the item's images
// (either may be nil: an insert has no old image, a delete no new one).
type StreamRecord struct {
	Seq      string
	Old, New map[string]types.AttributeValue
	// What the webhooks need besides (pkg/streamhooks); the counts read none of it.
	ID     string                          // the stream record's event id
	Keys   map[string]types.AttributeValue // the item's key
	Remove bool                            // a delete (TTL's included)
	At     time.Time                       // when the write was made (approximately)
}

// countMarkerKey is a stream shard's marker: the last record whose counts were applied.
func countMarkerKey(shardID string) key { return key{"COUNTS#" + shardID, "COUNTS"} }

// markerTTL keeps a marker past the stream's retention (24 h): a record older than that is
// never delivered again.
const markerTTL = 48 * time.Hour

// seqWidth pads sequence numbers (decimal strings of up to 40 digits) so that they compare as
// strings.
const seqWidth = 48

func padSeq(seq string) string {
	if len(seq) >= seqWidth {
		return seq
	}
	return strings.Repeat("0", seqWidth-len(seq)) + seq
}

// streamEmail decodes an email item image; ok is false for any other item, and for an email
// item whose counts were made by its writes (written before the stream counted them).
func streamEmail(m map[string]types.AttributeValue) (it emailItem, ok bool, err error) {
	if len(m) == 0 || skOf(m) != emailKey("").SK {
		return it, false, nil
	}
	if v, isBool := m[streamCountedAttribute].(*types.AttributeValueMemberBOOL); !isBool || !v.Value {
		return it, false, nil
	}
	// Only what counting needs: the content (and history) are skipped.
	head := make(map[string]types.AttributeValue, len(m))
	for k, v := range m {
		switch k {
		case "ev", "contentGz", NewEventsAttribute:
		default:
			head[k] = v
		}
	}
	if err := unmarshal(head, &it); err != nil {
		return it, false, err
	}
	return it, true, nil
}

// countsOf adds what one record counts to counts (in the counter shard given), and lists the
// counters it touched in first-touched order.
func countsOf(r StreamRecord, shard int, counts map[counter]int64, order *[]counter) error {
	neu, okNew, err := streamEmail(r.New)
	if err != nil || !okNew {
		return err // a delete counts nothing: counts outlive the emails
	}
	old, okOld, err := streamEmail(r.Old)
	if err != nil {
		return err
	}
	add := func(c counter, n int64) {
		if n == 0 {
			return
		}
		if _, seen := counts[c]; !seen {
			*order = append(*order, c)
		}
		counts[c] += n
	}
	e := neu.Email
	var before []string
	at := e.UpdatedAt
	if len(r.Old) == 0 {
		// Created: the email counts in the lists of its day.
		k := dayCounterKey(e.TeamID, day(e.CreatedAt), shard)
		add(counter{k, "n"}, 1)
		add(counter{k, domainCountAttr(e.DomainID)}, 1)
		at = e.CreatedAt
	} else if okOld {
		before = old.Counted
	} else {
		// The write before this one counted itself: from here on the stream counts, with
		// that write's Counted taken as counted.
		var legacy emailItem
		if err := unmarshal(r.Old, &legacy); err != nil {
			return err
		}
		before, old.ScheduleCounted = legacy.Counted, legacy.ScheduleCounted
	}
	added := newKinds(before, e.Counted)
	if e.CampaignID != "" {
		ck := campaignCountersKey(e.TeamID, e.CampaignID, shard%CampaignCounterShards)
		for _, kind := range added {
			add(counter{ck, kind}, 1)
		}
	}
	for _, c := range statsCounters(e, added, at, shard) {
		add(c, 1)
	}
	switch {
	case e.ScheduleCounted && !old.ScheduleCounted:
		add(counter{scheduledCounterKey(e.TeamID, shard), "n"}, 1)
	case !e.ScheduleCounted && old.ScheduleCounted:
		add(counter{scheduledCounterKey(e.TeamID, shard), "n"}, -1)
	}
	return nil
}

// counterShard spreads the counter updates of different stream shards over the counter
// shards (each count is read as the sum of every shard).
func counterShard(streamShard string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(streamShard))
	return int(h.Sum32() % WorkShards)
}

// maxCountActions leaves room for the marker in a transaction of 100 actions.
const maxCountActions = maxTransactActions - 1

// ApplyCounts applies the counts of a stream shard's records exactly once (see the comment at
// the top of this file): any of them may have been applied before, by this or by another
// reader. They are applied in the shard's order (a redelivery may hand them over in another).
// A record that cannot be decoded counts nothing and is passed over, so that it cannot hold
// up its shard: skipped lists their sequence numbers, for the caller to log.
func (st *Store) ApplyCounts(ctx context.Context, shardID string, records []StreamRecord) (skipped []string, err error) {
	shard := counterShard(shardID)
	mk := countMarkerKey(shardID)
	records = slices.Clone(records)
	slices.SortStableFunc(records, func(a, b StreamRecord) int { return strings.Compare(padSeq(a.Seq), padSeq(b.Seq)) })
	var decoded []recordCounts
	for _, r := range records {
		rc := recordCounts{seq: padSeq(r.Seq), counts: map[counter]int64{}}
		if err := countsOf(r, shard, rc.counts, &rc.order); err != nil {
			skipped = append(skipped, r.Seq)
			continue
		}
		decoded = append(decoded, rc)
	}
	for attempt := 0; ; attempt++ {
		if attempt >= maxConflictAttempts {
			return skipped, &LostRaceError{Item: "count marker " + shardID, Attempts: attempt}
		}
		last, err := st.markerSeq(ctx, mk)
		if err != nil {
			return skipped, err
		}
		var rest []recordCounts
		for _, r := range decoded {
			if r.seq > last {
				rest = append(rest, r)
			}
		}
		done, err := st.applyCountsFrom(ctx, mk, last, rest)
		if err != nil {
			return skipped, err
		}
		if done {
			return skipped, nil
		}
		if err := backoff(ctx, attempt); err != nil {
			return skipped, err
		}
	}
}

// markerSeq is the padded sequence number a shard's marker (mk) holds, read consistently; ""
// when there is none yet.
func (st *Store) markerSeq(ctx context.Context, mk key) (string, error) {
	m, err := st.get(ctx, mk, true)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	if v, ok := m["seq"].(*types.AttributeValueMemberS); ok {
		return v.Value, nil
	}
	return "", nil
}

// applyCountsFrom applies records (all after the marker's value last) in transactions of at
// most maxCountActions counter items, each moving the marker from the value the previous one
// set. done is false when the marker moved meanwhile (another reader): start again from it.
func (st *Store) applyCountsFrom(ctx context.Context, mk key, last string, records []recordCounts) (done bool, err error) {
	for len(records) > 0 {
		counts, order := map[counter]int64{}, []counter(nil)
		n := 0
		for ; n < len(records); n++ {
			merged := slices.Clone(order)
			for _, c := range records[n].order {
				if _, seen := counts[c]; !seen {
					merged = append(merged, c)
				}
			}
			if !fitsTransaction(merged) && n > 0 {
				break
			}
			for c, v := range records[n].counts {
				counts[c] += v
			}
			order = merged
		}
		next := records[n-1].seq
		records = records[n:]
		if len(order) == 0 {
			continue // nothing to count: the marker stays (later records are above it anyway)
		}
		actions := st.counterUpdates(counts, order)
		cond := "attribute_not_exists(PK)"
		vals := map[string]types.AttributeValue{":next": avS(next), ":ttl": avN(st.now().Add(markerTTL).Unix())}
		if last != "" {
			cond, vals[":last"] = "#seq = :last", avS(last)
		}
		actions = append(actions, types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(st.table), Key: mk.av(),
			UpdateExpression:          aws.String("SET #seq = :next, #ttl = :ttl"),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  map[string]string{"#seq": "seq", "#ttl": TTLAttribute},
			ExpressionAttributeValues: vals,
		}})
		_, err := st.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: actions})
		if reasons, ok := cancelReasons(err); ok {
			if retryableCancel(reasons) || reasonIsCondition(reasons[len(reasons)-1]) {
				return false, nil
			}
		}
		if err != nil {
			return false, fmt.Errorf("dynamo: apply counts: %w", err)
		}
		last = next
	}
	return true, nil
}

// recordCounts is what one stream record counts, and its padded sequence number.
type recordCounts struct {
	seq    string
	counts map[counter]int64
	order  []counter // counts' keys, in the order first touched
}

// fitsTransaction reports whether the counter updates of order fit one transaction: at most
// maxCountActions items, and at most maxCounterAttrs attributes of one item (an update
// expression is limited to 4 KB).
func fitsTransaction(order []counter) bool {
	attrs := map[key]int{}
	for _, c := range order {
		attrs[c.k]++
		if attrs[c.k] > maxCounterAttrs {
			return false
		}
	}
	return len(attrs) <= maxCountActions
}

// maxCounterAttrs keeps a counter update's expression ("ADD #c0 :c0, #c1 :c1, …") well
// under DynamoDB's 4 KB.
const maxCounterAttrs = 100

// counter is one number attribute of a counter item.
type counter struct {
	k    key
	attr string
}

// statsCounters are the analytics counters of the email's newly counted kinds, on the day of at.
func statsCounters(e store.Email, kinds []string, at time.Time, shard int) []counter {
	if at.IsZero() {
		at = time.Now()
	}
	k := statsKey(e.TeamID, day(at), shard)
	var out []counter
	for _, kind := range kinds {
		if slices.Contains(store.AnalyticsKinds, kind) {
			out = append(out, counter{k, statsAttr(kind, 0)}, counter{k, statsAttr(kind, e.DomainID)})
		}
	}
	return out
}

// newKinds returns the distinct kinds of now that were not in before, in order.
func newKinds(before, now []string) []string {
	var out []string
	for _, k := range now {
		if !slices.Contains(before, k) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// counterUpdates builds one Update per counter item, ADDing each attribute's count.
func (st *Store) counterUpdates(counts map[counter]int64, order []counter) []types.TransactWriteItem {
	var (
		keys  []key
		attrs = map[key][]string{}
	)
	for _, c := range order {
		if len(attrs[c.k]) == 0 {
			keys = append(keys, c.k)
		}
		attrs[c.k] = append(attrs[c.k], c.attr)
	}
	out := make([]types.TransactWriteItem, 0, len(keys))
	for _, k := range keys {
		expr, names, values := clause("ADD", " ", "c", attrs[k], func(a string) types.AttributeValue {
			return avN(counts[counter{k, a}])
		})
		out = append(out, types.TransactWriteItem{Update: &types.Update{
			TableName:                 aws.String(st.table),
			Key:                       k.av(),
			UpdateExpression:          aws.String(expr),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: values,
		}})
	}
	return out
}
