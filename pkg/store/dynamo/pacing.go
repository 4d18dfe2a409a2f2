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

// TakeSendSlot implements store.Pacing with one small item per second (and shard, above
// slotShardRate sends/s): a conditional ADD that succeeds while the count is under the
// shard's share of limit. The item expires by TTL a day later. One write per send, whichever
// worker or Lambda instance makes it.
func (st *Store) TakeSendSlot(ctx context.Context, second time.Time, limit int) (int, bool, error) {
	shards := (limit + slotShardRate - 1) / slotShardRate
	per := (limit + shards - 1) / shards
	shard := rand.IntN(shards)
	out, err := st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(st.table),
		Key:                      sendSlotKey(second.Unix(), shard).av(),
		UpdateExpression:         aws.String("ADD #n :one SET #ttl = if_not_exists(#ttl, :ttl)"),
		ConditionExpression:      aws.String("attribute_not_exists(#n) OR #n < :per"),
		ExpressionAttributeNames: map[string]string{"#n": "N", "#ttl": TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": avN(1), ":per": avN(int64(per)), ":ttl": avN(second.Add(24 * time.Hour).Unix()),
		},
		ReturnValues: types.ReturnValueUpdatedNew,
	})
	if conditionFailed(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("dynamo: take send slot: %w", err)
	}
	n, _ := out.Attributes["N"].(*types.AttributeValueMemberN)
	if n == nil {
		return 0, false, fmt.Errorf("dynamo: take send slot: no count returned")
	}
	pos, err := strconv.Atoi(n.Value)
	if err != nil {
		return 0, false, fmt.Errorf("dynamo: take send slot: %w", err)
	}
	return shard*per + pos, true, nil
}
