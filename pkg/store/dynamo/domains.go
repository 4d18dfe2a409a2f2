package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mailroom/mailroom/pkg/store"
)

// Domains: the item under the team plus a name guard item written in the same transaction, so
// that a duplicate name is a failed condition and never a read-then-write race.

type domainItem struct {
	keys
	store.Domain
	Version int64
}

func (st *Store) domainPut(it domainItem, cond string, values map[string]types.AttributeValue) (*types.Put, error) {
	m, err := marshal(it)
	if err != nil {
		return nil, err
	}
	p := &types.Put{TableName: aws.String(st.table), Item: m, ConditionExpression: aws.String(cond)}
	if len(values) > 0 {
		p.ExpressionAttributeValues = values
	}
	return p, nil
}

func (st *Store) guardPut(teamID int64, name string) *types.Put {
	return &types.Put{
		TableName:           aws.String(st.table),
		Item:                domainNameKey(name).av(),
		ConditionExpression: aws.String("attribute_not_exists(PK)"),
	}
}

func (st *Store) CreateDomain(ctx context.Context, d store.Domain) error {
	put, err := st.domainPut(domainItem{keys: domainKey(d.TeamID, d.ID).keys(), Domain: d}, "attribute_not_exists(PK)", nil)
	if err != nil {
		return err
	}
	err = st.transactOnce(ctx, []types.TransactWriteItem{{Put: put}, {Put: st.guardPut(d.TeamID, d.Name)}}, store.ErrConflict)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("dynamo: create domain: %w", err)
	}
	return err
}

func (st *Store) getDomain(ctx context.Context, teamID, id int64, consistent bool) (domainItem, error) {
	var it domainItem
	err := st.getInto(ctx, domainKey(teamID, id), consistent, &it)
	return it, err
}

// GetDomain reads the domain; what would refuse an email (gone, not verified) is read again,
// strongly consistent: a domain just made or verified may not be in an eventually consistent
// read yet, and a send refused on it would end FAILED.
func (st *Store) GetDomain(ctx context.Context, teamID, id int64) (store.Domain, error) {
	it, err := st.getDomain(ctx, teamID, id, false)
	if errors.Is(err, store.ErrNotFound) || err == nil && it.Status != store.DomainSuccess {
		it, err = st.getDomain(ctx, teamID, id, true)
	}
	return it.Domain, err
}

func (st *Store) ListDomains(ctx context.Context, teamID int64) ([]store.Domain, error) {
	items, err := st.query(ctx, &dynamodb.QueryInput{
		KeyConditionExpression: aws.String("PK = :pk AND begins_with(SK, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": avS(domainKey(teamID, 0).PK), ":p": avS(domainPrefix),
		},
	}, 0)
	if err != nil {
		return nil, err
	}
	return decodeAll(items, func(it domainItem) store.Domain { return it.Domain })
}

// UpdateDomain writes back with the condition Version = the version read, and re-reads on a
// lost race. A renamed domain moves its name guard in the same transaction.
func (st *Store) UpdateDomain(ctx context.Context, teamID, id int64, fn func(*store.Domain) error) (store.Domain, error) {
	return optimistic(ctx, st, fmt.Sprintf("domain %d", id), func() (store.Domain, error) {
		old, err := st.getDomain(ctx, teamID, id, true)
		if err != nil {
			return store.Domain{}, err
		}
		d := old.Domain
		if err := fn(&d); err != nil {
			return store.Domain{}, err
		}
		d.ID, d.TeamID = id, teamID
		put, err := st.domainPut(domainItem{keys: old.keys, Domain: d, Version: old.Version + 1},
			"Version = :v", map[string]types.AttributeValue{":v": avN(old.Version)})
		if err != nil {
			return store.Domain{}, err
		}
		if strings.EqualFold(d.Name, old.Name) {
			// The usual case (status, tracking flags): one conditional PutItem.
			return d, st.putIfVersion(ctx, put.Item, old.Version, "domain")
		}
		actions := []types.TransactWriteItem{{Put: put}}
		{
			actions = append(actions,
				types.TransactWriteItem{Put: st.guardPut(teamID, d.Name)},
				types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(st.table), Key: domainNameKey(old.Name).av()}},
			)
		}
		_, err = st.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: actions})
		if reasons, ok := cancelReasons(err); ok {
			if len(reasons) > 1 && reasonIsCondition(reasons[1]) {
				return store.Domain{}, store.ErrConflict
			}
			return store.Domain{}, errLost
		}
		if err != nil {
			return store.Domain{}, fmt.Errorf("dynamo: update domain: %w", err)
		}
		return d, nil
	})
}

// DomainNameHeld is one strongly consistent GetItem of the name guard.
func (st *Store) DomainNameHeld(ctx context.Context, name string) (bool, error) {
	m, err := st.get(ctx, domainNameKey(name), true)
	return m != nil, err
}

// DeleteDomain removes the domain and its name guard together.
func (st *Store) DeleteDomain(ctx context.Context, teamID, id int64) error {
	old, err := st.getDomain(ctx, teamID, id, true)
	if err != nil {
		return err
	}
	err = st.transactOnce(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{
			TableName: aws.String(st.table), Key: domainKey(teamID, id).av(),
			ConditionExpression: aws.String("attribute_exists(PK)"),
		}},
		{Delete: &types.Delete{TableName: aws.String(st.table), Key: domainNameKey(old.Name).av()}},
	}, store.ErrNotFound)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("dynamo: delete domain: %w", err)
	}
	return err
}

// Templates: one item each under the team, with a Version for optimistic updates.
