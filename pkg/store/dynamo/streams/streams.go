// Package streams reads a table's DynamoDB stream for the store (dynamo.StreamSource): the
// local server on the AWS backend and the tests, which apply the stream's counts themselves.
// The Lambda functions never read the stream (WebhookEvents is handed its records), so they do
// not link this package's client nor run its start-up.
package streams

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/mailroom/mailroom/pkg/store/dynamo"
)

// Source is the DynamoDB Streams client as a dynamo.StreamSource.
type Source struct{ client *dynamodbstreams.Client }

// New reads streams through client.
func New(client *dynamodbstreams.Client) Source { return Source{client: client} }

// Shards lists the stream's shard ids, every page of them.
func (s Source) Shards(ctx context.Context, arn string) ([]string, error) {
	var ids []string
	var start *string
	for {
		out, err := s.client.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: &arn, ExclusiveStartShardId: start})
		if err != nil {
			return nil, err
		}
		for _, sh := range out.StreamDescription.Shards {
			ids = append(ids, aws.ToString(sh.ShardId))
		}
		if start = out.StreamDescription.LastEvaluatedShardId; start == nil {
			return ids, nil
		}
	}
}

// Iterator starts shard at its oldest record, or after the record after.
func (s Source) Iterator(ctx context.Context, arn, shard, after string) (*string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: &arn, ShardId: &shard, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon}
	if after != "" {
		in.ShardIteratorType, in.SequenceNumber = stypes.ShardIteratorTypeAfterSequenceNumber, aws.String(after)
	}
	out, err := s.client.GetShardIterator(ctx, in)
	var trimmed *stypes.TrimmedDataAccessException
	if errors.As(err, &trimmed) {
		return nil, fmt.Errorf("%w: %w", dynamo.ErrStreamTrimmed, err)
	}
	if err != nil {
		return nil, err
	}
	return out.ShardIterator, nil
}

// Records reads a page of records as the store takes them.
func (s Source) Records(ctx context.Context, iter *string) ([]dynamo.StreamRecord, *string, error) {
	out, err := s.client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
	var expired *stypes.ExpiredIteratorException
	if errors.As(err, &expired) {
		return nil, nil, fmt.Errorf("%w: %w", dynamo.ErrIteratorExpired, err)
	}
	if err != nil {
		return nil, nil, err
	}
	recs := make([]dynamo.StreamRecord, 0, len(out.Records))
	for _, rec := range out.Records {
		if rec.Dynamodb == nil {
			continue
		}
		recs = append(recs, dynamo.StreamRecord{Seq: aws.ToString(rec.Dynamodb.SequenceNumber), ID: aws.ToString(rec.EventID),
			Keys: FromStream(rec.Dynamodb.Keys), Old: FromStream(rec.Dynamodb.OldImage), New: FromStream(rec.Dynamodb.NewImage),
			Remove: rec.EventName == stypes.OperationTypeRemove, At: aws.ToTime(rec.Dynamodb.ApproximateCreationDateTime)})
	}
	return recs, out.NextShardIterator, nil
}

// FromStream converts a stream image to the table's attribute values.
func FromStream(m map[string]stypes.AttributeValue) map[string]types.AttributeValue {
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
		return &types.AttributeValueMemberM{Value: FromStream(v.Value)}
	}
	return &types.AttributeValueMemberNULL{Value: true}
}
