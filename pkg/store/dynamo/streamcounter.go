package dynamo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// streamReader reads the table's stream itself and applies its counts: what the WebhookEvents
// function does on AWS, for a process where no Lambda function reads the stream (the local
// server on the AWS backend, and tests against an emulator). It can run next to the function,
// or next to another reader: ApplyCounts counts each record once whoever applies it.
type streamReader struct {
	source StreamSource

	mu      sync.Mutex
	arn     string
	shard   map[string]*shardPos
	skipped []string // records not decodable, for RunStream to log
	after   func(context.Context, []StreamRecord) (bool, error)
}

// takeSkipped returns the records passed over since the last call.
func (r *streamReader) takeSkipped() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.skipped
	r.skipped = nil
	return s
}

// maxPages bounds the pages one drain reads of a shard, so that a shard written without
// pause does not keep it (and the reader's lock) for ever.
const maxPages = 20

// StreamBatch is the most records ApplyCounts is handed at once: the batch size of the
// WebhookEvents function's event source mapping (template.yaml; a test compares them).
const StreamBatch = 100

// StreamSource is the table's stream as the store reads it: streams.Source wraps the DynamoDB
// Streams client in it. It is an interface of this package, not that client, so that the Lambda
// functions, which never read the stream themselves (WebhookEvents is handed its records), do
// not link the client nor run its start-up.
type StreamSource interface {
	// Shards lists the ids of the stream's shards.
	Shards(ctx context.Context, arn string) ([]string, error)
	// Iterator starts a shard at its oldest record (after == "") or after the record with that
	// sequence number: ErrStreamTrimmed when that record is past the stream's retention.
	Iterator(ctx context.Context, arn, shard, after string) (*string, error)
	// Records reads a page from iter: its records and the next iterator (nil at the end of a
	// closed shard); ErrIteratorExpired when iter is too old.
	Records(ctx context.Context, iter *string) ([]StreamRecord, *string, error)
}

// The errors a StreamSource says what to do by.
var (
	ErrStreamTrimmed   = errors.New("dynamo: stream record past the retention")
	ErrIteratorExpired = errors.New("dynamo: stream iterator expired")
)

// shardPos is where reading a shard goes on from.
type shardPos struct {
	iter   *string
	last   string    // sequence number of the last record read
	closed bool      // read to the end of a closed shard
	probed time.Time // when a silent shard was last looked at again (stale)
}

// probeEvery is how often a shard that reads nothing is looked at again from its last record
// with a fresh iterator (stale).
const probeEvery = 5 * time.Second

// ReadStream makes the store read its table's stream for the counts (Settle, RunStream),
// through source (streams.New).
func (st *Store) ReadStream(source StreamSource) {
	st.stream = &streamReader{source: source, shard: map[string]*shardPos{}}
}

// AfterCounts hands every batch of records read, once its counts are applied, to fn (the local
// server's webhooks, pkg/streamhooks, as the WebhookEvents function does on AWS), which reports
// whether it made work of them. When fn fails, the batch is read again at the next drain: its
// counts are not applied twice, and fn must make the same work of the same records.
//
// A restart reads the stream again from its oldest record (the reader keeps its place in
// memory): each shard's hooks marker, moved past every batch fn made work of, keeps fn from
// being handed again what it made work of before, so that a webhook made since gets none of
// those events. (A crash between fn's work and the marker hands that batch again: fn's work is
// the same, by its ids.)
func (st *Store) AfterCounts(fn func(context.Context, []StreamRecord) (bool, error)) {
	if st.stream != nil {
		st.stream.mu.Lock()
		st.stream.after = fn
		st.stream.mu.Unlock()
	}
}

// Settle reads the table's stream to its current end and applies the counts of what it read,
// so that every write made before the call (and already in the stream, which on DynamoDB is
// a matter of milliseconds) is counted. Without ReadStream it does nothing (the WebhookEvents
// function applies them).
func (st *Store) Settle(ctx context.Context) error {
	if st.stream == nil {
		return nil
	}
	for {
		n, err := st.stream.drain(ctx, st)
		if err != nil || n == 0 {
			return err
		}
	}
}

// RunStream settles every interval until ctx ends, logging what it counted and any failure
// (the next round retries from where the failed one stopped).
func (st *Store) RunStream(ctx context.Context, every time.Duration, log *slog.Logger) {
	if st.stream == nil {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n, err := st.stream.drain(ctx, st)
		switch {
		case err != nil && ctx.Err() == nil:
			log.WarnContext(ctx, "stream counts not applied; trying again", "err", err.Error())
		case n > 0:
			log.DebugContext(ctx, "stream counts applied", "records", n)
		}
		if skipped := st.stream.takeSkipped(); len(skipped) > 0 {
			log.WarnContext(ctx, "stream records not counted: not decodable", "sequenceNumbers", skipped)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// stale reports whether the iterator followed in a silent shard sees no more of it: a fresh
// one from the last record read finds records. moto restores a copy of the table when a
// transaction fails (a duplicate domain's 409), and its stream shard is then another object
// with the same id, which the old iterator never reads. A fresh iterator finds exactly the
// records after the last one read, so taking it is right whatever made the old one silent;
// the look costs two calls a silent shard every probeEvery (on AWS only the local server reads
// the stream so: the functions' event source mappings read it for them).
func (r *streamReader) stale(ctx context.Context, shard string, pos *shardPos) bool {
	if time.Since(pos.probed) < probeEvery {
		return false
	}
	pos.probed = time.Now()
	it, err := r.source.Iterator(ctx, r.arn, shard, pos.last)
	if err != nil {
		return false
	}
	recs, _, err := r.source.Records(ctx, it)
	return err == nil && len(recs) > 0
}

// drain reads every shard to its end, applying each page of records; it returns the number of
// records read.
func (r *streamReader) drain(ctx context.Context, st *Store) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.arn == "" {
		out, err := st.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(st.table)})
		if err != nil {
			return 0, fmt.Errorf("dynamo: describe table for its stream: %w", err)
		}
		r.arn = aws.ToString(out.Table.LatestStreamArn)
		if r.arn == "" {
			return 0, fmt.Errorf("dynamo: table %s has no stream", st.table)
		}
	}
	shards, err := r.source.Shards(ctx, r.arn)
	if err != nil {
		return 0, fmt.Errorf("dynamo: describe stream: %w", err)
	}
	listed := map[string]bool{}
	for _, id := range shards {
		listed[id] = true
	}
	for id := range r.shard {
		if !listed[id] { // past the stream's retention
			delete(r.shard, id)
		}
	}
	total := 0
	for _, id := range shards {
		pos := r.shard[id]
		if pos == nil {
			pos = &shardPos{}
			r.shard[id] = pos
		}
		for pages := 0; !pos.closed && pages < maxPages; pages++ {
			if pos.iter == nil {
				it, err := r.source.Iterator(ctx, r.arn, id, pos.last)
				if errors.Is(err, ErrStreamTrimmed) && pos.last != "" {
					// The last record read is past the retention (the process slept a day):
					// from the oldest there is (the markers skip what was counted).
					pos.last = ""
					continue
				}
				if err != nil {
					return total, fmt.Errorf("dynamo: stream shard iterator: %w", err)
				}
				pos.iter = it
			}
			recs, next, err := r.source.Records(ctx, pos.iter)
			if errors.Is(err, ErrIteratorExpired) {
				pos.iter = nil
				continue
			}
			if err != nil {
				return total, fmt.Errorf("dynamo: stream records: %w", err)
			}
			read := len(recs)
			for len(recs) > 0 { // in batches of the function's size
				n := min(len(recs), StreamBatch)
				skipped, err := st.ApplyCounts(ctx, id, recs[:n])
				r.skipped = append(r.skipped, skipped...)
				if err != nil {
					return total, err
				}
				if r.after != nil {
					if err := r.handOn(ctx, st, id, recs[:n]); err != nil {
						pos.iter = nil // from after the last batch done, next time
						return total, err
					}
				}
				pos.last = recs[n-1].Seq
				total += n
				recs = recs[n:]
			}
			pos.iter = next
			if pos.iter == nil {
				pos.closed = true
			}
			if read == 0 {
				if r.stale(ctx, id, pos) {
					pos.iter = nil // read from after the last record, with a new iterator
					continue
				}
				break // the end of an open shard, for now
			}
		}
	}
	return total, nil
}

// hooksMarkerKey is a stream shard's hooks marker (AfterCounts): the last record of the last
// batch the reader's fn made work of.
func hooksMarkerKey(shardID string) key { return key{"HOOKS#" + shardID, "HOOKS"} }

// handOn hands the records of a batch past the shard's hooks marker to fn, and moves the marker
// past the batch when fn made work of it (a batch of counters and markers makes none, so the
// marker's own writes, which the stream brings back, end there).
func (r *streamReader) handOn(ctx context.Context, st *Store, shardID string, recs []StreamRecord) error {
	mk := hooksMarkerKey(shardID)
	last, err := st.markerSeq(ctx, mk)
	if err != nil {
		return err
	}
	var fresh []StreamRecord
	for _, rec := range recs {
		if padSeq(rec.Seq) > last {
			fresh = append(fresh, rec)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	worked, err := r.after(ctx, fresh)
	if err != nil || !worked {
		return err
	}
	next := ""
	for _, rec := range fresh { // the highest: a batch is read in order, but nothing relies on it
		next = max(next, padSeq(rec.Seq))
	}
	_, err = st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(st.table), Key: mk.av(),
		UpdateExpression:          aws.String("SET #seq = :next, #ttl = :ttl"),
		ConditionExpression:       aws.String("attribute_not_exists(#seq) OR #seq < :next"),
		ExpressionAttributeNames:  map[string]string{"#seq": "seq", "#ttl": TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{":next": avS(next), ":ttl": avN(st.now().Add(markerTTL).Unix())},
	})
	if conditionFailed(err) {
		return nil // another reader moved it further
	}
	if err != nil {
		return fmt.Errorf("dynamo: move the hooks marker: %w", err)
	}
	return nil
}
