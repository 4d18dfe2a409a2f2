package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mailroom/mailroom/pkg/store"
)

// idemItem is an idempotency record. The times are also kept as integer nanoseconds because
// condition expressions compare them, and as TTLAttribute (epoch seconds) so that DynamoDB
// eventually deletes expired records; until it does, reads and conditions treat them as absent.
type idemItem struct {
	keys
	store.Idempotency
	ClaimedAtNs int64 `dynamodbav:"claimedAtNs"`
	ExpiresAtNs int64 `dynamodbav:"expiresAtNs"`
	TTL         int64 `dynamodbav:"ttl"`
}

func newIdemItem(rec store.Idempotency) idemItem {
	return idemItem{
		keys:        idempotencyKey(rec.TeamID, rec.Key).keys(),
		Idempotency: rec,
		ClaimedAtNs: rec.ClaimedAt.UnixNano(),
		ExpiresAtNs: rec.ExpiresAt.UnixNano(),
		TTL:         rec.ExpiresAt.Unix(),
	}
}

// ClaimIdempotency is one conditional PutItem when the key is new or expired; a failed
// condition returns the existing record in the same call. Only the takeover of a stale PENDING
// record costs a second call: an UpdateItem that sets ClaimedAt only, keeping Nonce, Fingerprint,
// CreatedAt and ExpiresAt (the email ids of the crashed request derive from the nonce, so the
// retry finds those same emails; the caller compares rec.Fingerprint to detect another body).
// StaleAfter <= 0 disables takeover, as in the embedded adapter.
func (st *Store) ClaimIdempotency(ctx context.Context, c store.IdemClaim) (store.Idempotency, bool, error) {
	now := c.Now
	rec := store.Idempotency{
		TeamID: c.TeamID, Key: c.Key, Fingerprint: c.Fingerprint, State: store.IdemPending,
		Nonce: c.Nonce, ClaimedAt: now, CreatedAt: now, ExpiresAt: now.Add(c.TTL),
	}
	k := idempotencyKey(c.TeamID, c.Key)
	type claimed struct {
		rec store.Idempotency
		ok  bool
	}
	got, err := optimistic(ctx, st, "idempotency key", func() (claimed, error) {
		m, err := marshal(newIdemItem(rec))
		if err != nil {
			return claimed{}, err
		}
		_, err = st.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                           aws.String(st.table),
			Item:                                m,
			ConditionExpression:                 aws.String("attribute_not_exists(PK) OR expiresAtNs <= :now"),
			ExpressionAttributeValues:           map[string]types.AttributeValue{":now": avN(now.UnixNano())},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err == nil {
			return claimed{rec, true}, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !asCCF(err, &ccf) {
			return claimed{}, fmt.Errorf("dynamo: claim idempotency: %w", err)
		}
		var old idemItem
		if err := unmarshal(ccf.Item, &old); err != nil {
			return claimed{}, err
		}
		if old.State == store.IdemPending && old.Nonce == c.Nonce && c.Nonce != "" {
			// This call's own claim, written by an earlier try whose answer was lost.
			return claimed{old.Idempotency, true}, nil
		}
		// Only the same request (fingerprint) may take a stale claim over: another payload
		// would re-stamp it and keep the first request's retry waiting for ever.
		stale := old.State == store.IdemPending && c.StaleAfter > 0 &&
			old.ClaimedAtNs < now.Add(-c.StaleAfter).UnixNano() && old.Fingerprint == c.Fingerprint
		if !stale {
			return claimed{old.Idempotency, false}, nil
		}
		out, err := st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                aws.String(st.table),
			Key:                      k.av(),
			UpdateExpression:         aws.String("SET ClaimedAt = :at, claimedAtNs = :now"),
			ConditionExpression:      aws.String("#st = :pending AND claimedAtNs = :old AND expiresAtNs > :now AND Fingerprint = :fp"),
			ExpressionAttributeNames: map[string]string{"#st": "State"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":at": avS(now.Format(time.RFC3339Nano)), ":now": avN(now.UnixNano()),
				":pending": avS(store.IdemPending), ":old": avN(old.ClaimedAtNs), ":fp": avS(c.Fingerprint),
			},
			ReturnValues:                        types.ReturnValueAllNew,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err == nil {
			var cur idemItem
			if err := unmarshal(out.Attributes, &cur); err != nil {
				return claimed{}, err
			}
			return claimed{cur.Idempotency, true}, nil
		}
		if !asCCF(err, &ccf) {
			return claimed{}, fmt.Errorf("dynamo: take over idempotency: %w", err)
		}
		if len(ccf.Item) > 0 {
			var cur idemItem
			if err := unmarshal(ccf.Item, &cur); err != nil {
				return claimed{}, err
			}
			if cur.State == store.IdemPending && cur.ClaimedAtNs == now.UnixNano() && cur.Fingerprint == c.Fingerprint {
				// This call's own takeover, written by an earlier try whose answer was lost.
				return claimed{cur.Idempotency, true}, nil
			}
			if cur.ExpiresAtNs > now.UnixNano() {
				// Someone else took it over (or completed it) first.
				return claimed{cur.Idempotency, false}, nil
			}
		}
		return claimed{}, errLost // released or expired in between: try to create it again
	})
	return got.rec, got.ok, err
}

// ReleaseIdempotency deletes the record only while it is PENDING: a completed response stays.
// Releasing a record that is gone or complete is not an error: the release is a cleanup.
func (st *Store) ReleaseIdempotency(ctx context.Context, teamID int64, key string) error {
	_, err := st.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(st.table),
		Key:                       idempotencyKey(teamID, key).av(),
		ConditionExpression:       aws.String("#st = :pending"),
		ExpressionAttributeNames:  map[string]string{"#st": "State"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pending": avS(store.IdemPending)},
	})
	if conditionFailed(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dynamo: release idempotency: %w", err)
	}
	return nil
}

// responseAV keeps an empty response distinguishable from none: DynamoDB rejects empty binary
// values in expressions, so nil is stored as NULL.
func responseAV(b []byte) types.AttributeValue {
	if b == nil {
		return &types.AttributeValueMemberNULL{Value: true}
	}
	return &types.AttributeValueMemberB{Value: b}
}

// ExpireIdempotency removes nothing: DynamoDB's TTL deletes expired records, and
// ClaimIdempotency takes one that is due but not deleted yet as absent.
func (st *Store) ExpireIdempotency(context.Context, int) (int, error) { return 0, nil }
