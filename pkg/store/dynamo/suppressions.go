package dynamo

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mailroom/mailroom/pkg/store"
)

// Suppressions: one item per (team, address), listed newest first through GSI1 (all) and GSI2
// (by reason).

type suppressionItem struct {
	keys
	store.Suppression
}

func (st *Store) PutSuppression(ctx context.Context, sp store.Suppression) error {
	sp.Email = strings.ToLower(sp.Email)
	it := suppressionItem{keys: suppressionKey(sp.TeamID, sp.Email).keys(), Suppression: sp}
	it.GSI1PK, it.GSI1SK = suppressionIndexKey(sp.TeamID), emailSort(sp.CreatedAt, sp.Email)
	it.GSI2PK, it.GSI2SK = suppressionReasonIndexKey(sp.TeamID, sp.Reason), it.GSI1SK
	m, err := marshal(it)
	if err != nil {
		return err
	}
	if _, err := st.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(st.table), Item: m}); err != nil {
		return fmt.Errorf("dynamo: put suppression: %w", err)
	}
	return nil
}

// maxBatchGet is the AWS limit of keys per BatchGetItem.
const maxBatchGet = 100

// GetSuppressions reads the addresses' items in batches of GetItems (batchGet).
func (st *Store) GetSuppressions(ctx context.Context, teamID int64, emails []string) (map[string]store.Suppression, error) {
	ks := make([]key, 0, len(emails))
	for _, e := range emails {
		ks = append(ks, suppressionKey(teamID, strings.ToLower(e)))
	}
	items, err := st.batchGet(ctx, ks, false)
	if err != nil {
		return nil, err
	}
	out := make(map[string]store.Suppression, len(items))
	for _, m := range items {
		var it suppressionItem
		if err := unmarshal(m, &it); err != nil {
			return nil, err
		}
		out[it.Email] = it.Suppression
	}
	return out, nil
}

// ListSuppressions reads offset+limit items newest first and counts the matching ones with a
// Select=COUNT Query of the same index partition.
func (st *Store) ListSuppressions(ctx context.Context, teamID int64, reason string, offset, limit int) ([]store.Suppression, int, error) {
	ix, pk := IndexGSI1, suppressionIndexKey(teamID)
	cond := "GSI1PK = :pk"
	if reason != "" {
		ix, pk, cond = IndexGSI2, suppressionReasonIndexKey(teamID, reason), "GSI2PK = :pk"
	}
	in := func() *dynamodb.QueryInput {
		return &dynamodb.QueryInput{
			IndexName:                 aws.String(ix),
			KeyConditionExpression:    aws.String(cond),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": avS(pk)},
			ScanIndexForward:          aws.Bool(false),
		}
	}
	total, err := st.count(ctx, in())
	if err != nil {
		return nil, 0, err
	}
	offset = max(offset, 0)
	if limit <= 0 || offset >= total {
		return []store.Suppression{}, total, nil
	}
	q := in()
	q.Limit = aws.Int32(int32(min(offset+limit, 1000)))
	items, err := st.query(ctx, q, offset+limit)
	if err != nil {
		return nil, 0, err
	}
	out := []store.Suppression{}
	for _, m := range items[min(offset, len(items)):] {
		var it suppressionItem
		if err := unmarshal(m, &it); err != nil {
			return nil, 0, err
		}
		out = append(out, it.Suppression)
	}
	return out, total, nil
}

func (st *Store) DeleteSuppression(ctx context.Context, teamID int64, email string) error {
	return st.deleteExisting(ctx, suppressionKey(teamID, email), "", nil)
}
