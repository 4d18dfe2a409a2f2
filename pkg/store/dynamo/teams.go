package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mailroom/mailroom/pkg/store"
)

func (st *Store) NextID(ctx context.Context, sequence string) (int64, error) {
	out, err := st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(st.table),
		Key:                       sequenceKey(sequence).av(),
		UpdateExpression:          aws.String("ADD #n :one"),
		ExpressionAttributeNames:  map[string]string{"#n": "n"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": avN(1)},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, fmt.Errorf("dynamo: next id of %s: %w", sequence, err)
	}
	var v struct {
		N int64 `dynamodbav:"n"`
	}
	if err := unmarshal(out.Attributes, &v); err != nil {
		return 0, err
	}
	return v.N, nil
}

type teamItem struct {
	keys
	store.Team
}

func (st *Store) CreateTeam(ctx context.Context, t store.Team) error {
	k, ix := teamKey(t.ID), teamListKey(t.ID)
	it := teamItem{keys: k.keys(), Team: t}
	it.GSI1PK, it.GSI1SK = ix.PK, ix.SK
	m, err := marshal(it)
	if err != nil {
		return err
	}
	return st.putNew(ctx, m)
}

func (st *Store) GetTeam(ctx context.Context, id int64) (store.Team, error) {
	var it teamItem
	if err := st.getInto(ctx, teamKey(id), false, &it); err != nil {
		return store.Team{}, err
	}
	return it.Team, nil
}

// UpdateTeam implements store.Teams: read, apply, put back while the team exists.
func (st *Store) UpdateTeam(ctx context.Context, id int64, fn func(*store.Team) error) (store.Team, error) {
	var it teamItem
	if err := st.getInto(ctx, teamKey(id), true, &it); err != nil {
		return store.Team{}, err
	}
	old := it.Team
	if err := fn(&it.Team); err != nil {
		return store.Team{}, err
	}
	it.ID, it.CreatedAt = old.ID, old.CreatedAt
	m, err := marshal(it)
	if err != nil {
		return store.Team{}, err
	}
	err = st.putCond(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(st.table), Item: m, ConditionExpression: aws.String("attribute_exists(PK)"),
	})
	if conditionFailed(err) {
		return store.Team{}, fmt.Errorf("dynamo: team %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Team{}, fmt.Errorf("dynamo: update team: %w", err)
	}
	return it.Team, nil
}

// ListTeams queries the one GSI1 partition of teams (admin only), in id order.
func (st *Store) ListTeams(ctx context.Context) ([]store.Team, error) {
	items, err := st.query(ctx, &dynamodb.QueryInput{
		IndexName:                 aws.String(IndexGSI1),
		KeyConditionExpression:    aws.String("GSI1PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": avS("TEAMS")},
	}, 0)
	if err != nil {
		return nil, err
	}
	return decodeAll(items, func(it teamItem) store.Team { return it.Team })
}

type apiKeyItem struct {
	keys
	store.APIKey
}

func (st *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	ix := apiKeyTeamIndexKey(k.TeamID, k.ID)
	it := apiKeyItem{keys: apiKeyKey(k.ID).keys(), APIKey: k}
	it.GSI1PK, it.GSI1SK = ix.PK, ix.SK
	m, err := marshal(it)
	if err != nil {
		return err
	}
	return st.putNew(ctx, m)
}

// GetAPIKey is on the path of every request: one GetItem.
func (st *Store) GetAPIKey(ctx context.Context, id string) (store.APIKey, error) {
	var it apiKeyItem
	if err := st.getInto(ctx, apiKeyKey(id), false, &it); err != nil {
		return store.APIKey{}, err
	}
	return it.APIKey, nil
}

func (st *Store) ListAPIKeys(ctx context.Context, teamID int64) ([]store.APIKey, error) {
	items, err := st.query(ctx, &dynamodb.QueryInput{
		IndexName:                 aws.String(IndexGSI1),
		KeyConditionExpression:    aws.String("GSI1PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": avS(apiKeyTeamIndexKey(teamID, "").PK)},
	}, 0)
	if err != nil {
		return nil, err
	}
	return decodeAll(items, func(it apiKeyItem) store.APIKey { return it.APIKey })
}

// DeleteAPIKey deletes the key only if it belongs to the team; another team's key is not found.
func (st *Store) DeleteAPIKey(ctx context.Context, teamID int64, id string) error {
	return st.deleteExisting(ctx, apiKeyKey(id), "TeamID = :t", map[string]types.AttributeValue{":t": avN(teamID)})
}
