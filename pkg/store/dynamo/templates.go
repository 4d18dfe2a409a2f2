package dynamo

import (
	"context"
	"time"

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
	return newestFirst(ctx, st, templateKey(teamID, "").PK, templatePrefix, func(it templateItem) store.Template { return it.Template },
		func(t store.Template) (time.Time, string) { return t.CreatedAt, t.ID })
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
