package dynamo

import (
	"bytes"
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mailroom/mailroom/pkg/store"
)

// A write whose answer is lost (a 500, a reset connection, a timeout) may still have been
// applied, and the SDK sends it again. A conditional write then fails its condition against
// itself: a create finds the item it made, an optimistic update finds the version it wrote.
// Taken as a conflict, that turns a success into an error (a bootstrap that stops, a 409), or,
// worse, into a second application of the change when the caller re-reads and retries it.
//
// Transactions are safe: the SDK gives each a ClientRequestToken, and DynamoDB answers a repeat
// within ten minutes with the first outcome. Single-item conditional writes go through putCond
// and updateCond. These stamp the item with a write id, random per call and the same in the
// SDK's retries of it, and ask for the stored item when the condition fails. A stored item
// that holds this call's write id and values was written by this call: the write succeeded.
// Another call writing the same values (two workers adding 1 to one counter) has another write
// id, and its conflict stays a conflict.

// attrWrite is the attribute holding the id of the write that last put or updated the item.
const attrWrite = "W"

// stamp gives m a new write id.
func stamp(m map[string]types.AttributeValue) {
	m[attrWrite] = &types.AttributeValueMemberS{Value: strconv.FormatUint(rand.Uint64(), 36)}
}

// maxItemBytes is DynamoDB's limit on an item's size (names and values): a put past it fails
// with a ValidationException, answered as ErrTooLarge before it is sent.
const maxItemBytes = 400 << 10

// putCond is PutItem for a conditional put, stamped (see above): a failed condition whose
// stored item is in.Item is the success of an earlier try of this call.
func (st *Store) putCond(ctx context.Context, in *dynamodb.PutItemInput) error {
	stamp(in.Item)
	if n := itemSize(in.Item); n > maxItemBytes {
		return fmt.Errorf("dynamo: %d bytes: %w", n, store.ErrTooLarge)
	}
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	_, err := st.client.PutItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if asCCF(err, &ccf) && len(ccf.Item) == len(in.Item) && holds(ccf.Item, in.Item) {
		return nil
	}
	return err
}

// updateCond is UpdateItem for a conditional update that SETs the attributes of set, stamped
// by the caller before it built the expression (see above): a failed condition whose stored
// item holds every one of them is the success of an earlier try of this call, answered with
// the stored item.
func (st *Store) updateCond(ctx context.Context, in *dynamodb.UpdateItemInput, set map[string]types.AttributeValue) (*dynamodb.UpdateItemOutput, error) {
	if set[attrWrite] == nil {
		return nil, fmt.Errorf("dynamo: a conditional update without a write id")
	}
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	out, err := st.client.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if asCCF(err, &ccf) && len(ccf.Item) > 0 && holds(ccf.Item, set) {
		return &dynamodb.UpdateItemOutput{Attributes: ccf.Item}, nil
	}
	return out, err
}

// holds reports whether stored has every attribute of want, each with an equal value.
func holds(stored, want map[string]types.AttributeValue) bool {
	for name, w := range want {
		s, ok := stored[name]
		if !ok || !sameValue(s, w) {
			return false
		}
	}
	return true
}

// sameValue compares two attribute values as DynamoDB does: numbers by value (it stores them
// normalized), sets as sets, lists in order, maps by name.
func sameValue(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		return ok && sameNumber(a.Value, b.Value)
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(a.Value, b.Value)
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberNULL:
		b, ok := b.(*types.AttributeValueMemberNULL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberL:
		b, ok := b.(*types.AttributeValueMemberL)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		for i := range a.Value {
			if !sameValue(a.Value[i], b.Value[i]) {
				return false
			}
		}
		return true
	case *types.AttributeValueMemberM:
		b, ok := b.(*types.AttributeValueMemberM)
		return ok && len(a.Value) == len(b.Value) && holds(a.Value, b.Value)
	case *types.AttributeValueMemberSS:
		b, ok := b.(*types.AttributeValueMemberSS)
		return ok && sameSet(a.Value, b.Value, func(x, y string) bool { return x == y })
	case *types.AttributeValueMemberNS:
		b, ok := b.(*types.AttributeValueMemberNS)
		return ok && sameSet(a.Value, b.Value, sameNumber)
	case *types.AttributeValueMemberBS:
		b, ok := b.(*types.AttributeValueMemberBS)
		return ok && sameSet(a.Value, b.Value, func(x, y []byte) bool { return bytes.Equal(x, y) })
	}
	return false
}

// sameNumber compares two DynamoDB numbers (decimal strings) exactly.
func sameNumber(a, b string) bool {
	if a == b {
		return true
	}
	x, okx := new(big.Rat).SetString(a)
	y, oky := new(big.Rat).SetString(b)
	return okx && oky && x.Cmp(y) == 0
}

// sameSet reports whether a and b (sets: no duplicates) have the same members in any order.
func sameSet[T any](a, b []T, eq func(x, y T) bool) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			if eq(x, y) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
