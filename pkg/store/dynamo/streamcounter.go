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
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// streamReader reads the table's stream itself and applies its counts: what the WebhookEvents
// function does on AWS, for a process where no Lambda function reads the stream (the local
// server on the AWS backend, and tests against an emulator). It can run next to the function,
// or next to another reader: ApplyCounts counts each record once whoever applies it.
type streamReader struct {
	client *dynamodbstreams.Client

	mu      sync.Mutex
	arn     string
	shard   map[string]*shardPos
	skipped []string // records not decodable, for RunStream to log
	after   func(context.Context, []StreamRecord) error
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

// shardPos is where reading a shard goes on from.
type shardPos struct {
	iter   *string
	last   string // sequence number of the last record read
	closed bool   // read to the end of a closed shard
}

// ReadStream makes the store read its table's stream for the counts (Settle, RunStream),
// through client.
func (st *Store) ReadStream(client *dynamodbstreams.Client) {
	st.stream = &streamReader{client: client, shard: map[string]*shardPos{}}
}

// AfterCounts hands every batch of records read, once its counts are applied, to fn (the local
// server's webhooks, pkg/streamhooks, as the WebhookEvents function does on AWS). When fn
// fails, the batch is read again at the next drain: its counts are not applied twice, and fn
// must make the same work of the same records.
func (st *Store) AfterCounts(fn func(context.Context, []StreamRecord) error) {
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
	var shards []stypes.Shard
	var start *string
	for {
		out, err := r.client.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: &r.arn, ExclusiveStartShardId: start})
		if err != nil {
			return 0, fmt.Errorf("dynamo: describe stream: %w", err)
		}
		shards = append(shards, out.StreamDescription.Shards...)
		start = out.StreamDescription.LastEvaluatedShardId
		if start == nil {
			break
		}
	}
	listed := map[string]bool{}
	for _, sh := range shards {
		listed[aws.ToString(sh.ShardId)] = true
	}
	for id := range r.shard {
		if !listed[id] { // past the stream's retention
			delete(r.shard, id)
		}
	}
	total := 0
	for _, sh := range shards {
		id := aws.ToString(sh.ShardId)
		pos := r.shard[id]
		if pos == nil {
			pos = &shardPos{}
			r.shard[id] = pos
		}
		for pages := 0; !pos.closed && pages < maxPages; pages++ {
			if pos.iter == nil {
				in := &dynamodbstreams.GetShardIteratorInput{StreamArn: &r.arn, ShardId: sh.ShardId, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon}
				if pos.last != "" {
					in.ShardIteratorType, in.SequenceNumber = stypes.ShardIteratorTypeAfterSequenceNumber, aws.String(pos.last)
				}
				it, err := r.client.GetShardIterator(ctx, in)
				var trimmed *stypes.TrimmedDataAccessException
				if errors.As(err, &trimmed) && pos.last != "" {
					// The last record read is past the retention (the process slept a day):
					// from the oldest there is (the markers skip what was counted).
					pos.last = ""
					continue
				}
				if err != nil {
					return total, fmt.Errorf("dynamo: stream shard iterator: %w", err)
				}
				pos.iter = it.ShardIterator
			}
			out, err := r.client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: pos.iter})
			var expired *stypes.ExpiredIteratorException
			if errors.As(err, &expired) {
				pos.iter = nil
				continue
			}
			if err != nil {
				return total, fmt.Errorf("dynamo: stream records: %w", err)
			}
			recs := make([]StreamRecord, 0, len(out.Records))
			for _, rec := range out.Records {
				if rec.Dynamodb == nil {
					continue
				}
				recs = append(recs, StreamRecord{Seq: aws.ToString(rec.Dynamodb.SequenceNumber), ID: aws.ToString(rec.EventID),
					Keys: fromStream(rec.Dynamodb.Keys), Old: fromStream(rec.Dynamodb.OldImage), New: fromStream(rec.Dynamodb.NewImage),
					Remove: rec.EventName == stypes.OperationTypeRemove, At: aws.ToTime(rec.Dynamodb.ApproximateCreationDateTime)})
			}
			for len(recs) > 0 { // in batches of the function's size
				n := min(len(recs), StreamBatch)
				skipped, err := st.ApplyCounts(ctx, id, recs[:n])
				r.skipped = append(r.skipped, skipped...)
				if err != nil {
					return total, err
				}
				if r.after != nil {
					if err := r.after(ctx, recs[:n]); err != nil {
						pos.iter = nil // from after the last batch done, next time
						return total, err
					}
				}
				pos.last = recs[n-1].Seq
				total += n
				recs = recs[n:]
			}
			pos.iter = out.NextShardIterator
			if pos.iter == nil {
				pos.closed = true
			}
			if len(out.Records) == 0 {
				break // the end of an open shard, for now
			}
		}
	}
	return total, nil
}

// fromStream converts a stream image to the table's attribute values.
func fromStream(m map[string]stypes.AttributeValue) map[string]types.AttributeValue {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]types.AttributeValue, len(m))
	for k, v := range m {
		out[k] = fromStreamAV(v)
	}
	return out
}

func fromStreamAV(v stypes.AttributeValue) types.AttributeValue {
	switch v := v.(type) {
	case *stypes.AttributeValueMemberS:
		return &types.AttributeValueMemberS{Value: v.Value}
	case *stypes.AttributeValueMemberN:
		return &types.AttributeValueMemberN{Value: v.Value}
	case *stypes.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: v.Value}
	case *stypes.AttributeValueMemberBOOL:
		return &types.AttributeValueMemberBOOL{Value: v.Value}
	case *stypes.AttributeValueMemberNULL:
		return &types.AttributeValueMemberNULL{Value: v.Value}
	case *stypes.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: v.Value}
	case *stypes.AttributeValueMemberNS:
		return &types.AttributeValueMemberNS{Value: v.Value}
	case *stypes.AttributeValueMemberBS:
		return &types.AttributeValueMemberBS{Value: v.Value}
	case *stypes.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(v.Value))
		for i, x := range v.Value {
			l[i] = fromStreamAV(x)
		}
		return &types.AttributeValueMemberL{Value: l}
	case *stypes.AttributeValueMemberM:
		return &types.AttributeValueMemberM{Value: fromStream(v.Value)}
	}
	return &types.AttributeValueMemberNULL{Value: true}
}
