package dynamo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// slotShardRate is the most sends one slot item counts per second: a single item (one
// partition) takes at most 1,000 writes/s, and failed conditional writes cost capacity too.
const slotShardRate = 500

// sendSlotKey is one shard of the send counter of one second.
func sendSlotKey(second int64, shard int) key {
	return key{fmt.Sprintf("PACE#%d#%d", second, shard), "PACE"}
}

// TakeSendSlots implements store.Pacing with one small item per second (and shard, above
// slotShardRate sends/s): a conditional ADD of n that succeeds while the count stays within
// the shard's share of limit. When fewer than n are left, the refusal returns the count and
// the rest is asked for once more. The item expires by TTL a day later. One write per worker
// batch of sends, whichever worker or Lambda instance makes it.
func (st *Store) TakeSendSlots(ctx context.Context, second time.Time, limit, n int) (int, int, error) {
	if limit <= 0 {
		return 0, 0, nil
	}
	// The shards share limit exactly: the first limit%shards take one more than the others.
	shards := (limit + slotShardRate - 1) / slotShardRate
	shard := rand.IntN(shards)
	per, offset := limit/shards, shard*(limit/shards)+min(shard, limit%shards)
	if shard < limit%shards {
		per++
	}
	want := min(max(n, 1), per)
	for attempt := 0; attempt < 3 && want > 0; attempt++ {
		out, err := st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                aws.String(st.table),
			Key:                      sendSlotKey(second.Unix(), shard).av(),
			UpdateExpression:         aws.String("ADD #n :k SET #ttl = if_not_exists(#ttl, :ttl)"),
			ConditionExpression:      aws.String("attribute_not_exists(#n) OR #n <= :room"),
			ExpressionAttributeNames: map[string]string{"#n": "N", "#ttl": TTLAttribute},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":k": avN(int64(want)), ":room": avN(int64(per - want)), ":ttl": avN(second.Add(24 * time.Hour).Unix()),
			},
			ReturnValues:                        types.ReturnValueUpdatedNew,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var ccf *types.ConditionalCheckFailedException
		if asCCF(err, &ccf) {
			count, err := slotCount(ccf.Item)
			if err != nil {
				return 0, 0, err
			}
			want = min(want, per-count)
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("dynamo: take send slots: %w", err)
		}
		count, err := slotCount(out.Attributes)
		if err != nil {
			return 0, 0, err
		}
		return offset + count - want + 1, want, nil
	}
	return 0, 0, nil
}

func slotCount(m map[string]types.AttributeValue) (int, error) {
	n, _ := m["N"].(*types.AttributeValueMemberN)
	if n == nil {
		return 0, fmt.Errorf("dynamo: send slots: no count")
	}
	c, err := strconv.Atoi(n.Value)
	if err != nil {
		return 0, fmt.Errorf("dynamo: send slots: %w", err)
	}
	return c, nil
}

// rateKey is one team's request counter of one second.
func rateKey(teamID, second int64) key {
	return key{fmt.Sprintf("RATE#%d#%d", teamID, second), "RATE"}
}

// TakeRequest implements store.RateLimits with one small item per team and second: a
// conditional ADD that succeeds while the count is under limit, expiring by TTL an hour later.
// One item takes about 1,000 writes/s, so a team's limit is good to about that rate.
func (st *Store) TakeRequest(ctx context.Context, teamID int64, second time.Time, limit int64) (int64, bool, error) {
	out, err := st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(st.table),
		Key:                      rateKey(teamID, second.Unix()).av(),
		UpdateExpression:         aws.String("ADD #n :one SET #ttl = if_not_exists(#ttl, :ttl)"),
		ConditionExpression:      aws.String("attribute_not_exists(#n) OR #n < :limit"),
		ExpressionAttributeNames: map[string]string{"#n": "N", "#ttl": TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": avN(1), ":limit": avN(limit), ":ttl": avN(second.Add(time.Hour).Unix()),
		},
		ReturnValues: types.ReturnValueUpdatedNew,
	})
	var ccf *types.ConditionalCheckFailedException
	if asCCF(err, &ccf) {
		return limit, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("dynamo: take request: %w", err)
	}
	n, err := slotCount(out.Attributes)
	return int64(n), err == nil, err
}
