package dynamo

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mailroom/mailroom/pkg/store"
)

type templateItem struct {
	keys
	store.Template
	Version int64
}

func (st *Store) CreateTemplate(ctx context.Context, t store.Template) error {
	m, err := marshal(templateItem{keys: templateKey(t.TeamID, t.ID).keys(), Template: t})
	if err != nil {
		return err
	}
	return st.putNew(ctx, m)
}

func (st *Store) GetTemplate(ctx context.Context, teamID int64, id string) (store.Template, error) {
	var it templateItem
	err := st.getInto(ctx, templateKey(teamID, id), false, &it)
	return it.Template, err
}

// ListTemplates returns the team's templates newest first (then by id, descending).
func (st *Store) ListTemplates(ctx context.Context, teamID int64) ([]store.Template, error) {
	items, err := st.query(ctx, &dynamodb.QueryInput{
		KeyConditionExpression: aws.String("PK = :pk AND begins_with(SK, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": avS(templateKey(teamID, "").PK), ":p": avS(templatePrefix),
		},
	}, 0)
	if err != nil {
		return nil, err
	}
	out, err := decodeAll(items, func(it templateItem) store.Template { return it.Template })
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b store.Template) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(b.ID, a.ID))
	})
	return out, nil
}

func (st *Store) UpdateTemplate(ctx context.Context, teamID int64, id string, fn func(*store.Template) error) (store.Template, error) {
	k := templateKey(teamID, id)
	return optimistic(ctx, st, "template "+id, func() (store.Template, error) {
		var old templateItem
		if err := st.getInto(ctx, k, true, &old); err != nil {
			return store.Template{}, err
		}
		t := old.Template
		if err := fn(&t); err != nil {
			return store.Template{}, err
		}
		t.ID, t.TeamID = id, teamID
		m, err := marshal(templateItem{keys: k.keys(), Template: t, Version: old.Version + 1})
		if err != nil {
			return store.Template{}, err
		}
		return t, st.putIfVersion(ctx, m, old.Version, "template")
	})
}

func (st *Store) DeleteTemplate(ctx context.Context, teamID int64, id string) error {
	return st.deleteExisting(ctx, templateKey(teamID, id), "", nil)
}
