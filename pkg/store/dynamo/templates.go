package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mailroom/mailroom/pkg/store"
)

// templateItem is the template record. Its HTML and Text are kept gzip'd (HTMLGz, TextGz) when
// longer than compressAbove, as a campaign's are: an item holds at most 400 KB, and a template
// may take 512 KB of each. An item written before holds them as they are.
type templateItem struct {
	keys
	store.Template
	Version int64
	HTMLGz  []byte `dynamodbav:"htmlZ,omitempty"`
	TextGz  []byte `dynamodbav:"textZ,omitempty"`
}

func templateAttrs(t store.Template, version int64) (map[string]types.AttributeValue, error) {
	it := templateItem{keys: templateKey(t.TeamID, t.ID).keys(), Template: t, Version: version}
	if err := gzipLong(gzField{&it.HTML, &it.HTMLGz}, gzField{&it.Text, &it.TextGz}); err != nil {
		return nil, err
	}
	return marshal(it)
}

// inflate restores the item's gzip'd bodies.
func (it *templateItem) inflate() error {
	if err := gunzipLong(gzField{&it.HTML, &it.HTMLGz}, gzField{&it.Text, &it.TextGz}); err != nil {
		return fmt.Errorf("dynamo: template %s: %w", it.ID, err)
	}
	return nil
}

func (st *Store) CreateTemplate(ctx context.Context, t store.Template) error {
	m, err := templateAttrs(t, 0)
	if err != nil {
		return err
	}
	return st.putNew(ctx, m)
}

func (st *Store) GetTemplate(ctx context.Context, teamID int64, id string) (store.Template, error) {
	var it templateItem
	if err := st.getInto(ctx, templateKey(teamID, id), false, &it); err != nil {
		return store.Template{}, err
	}
	err := it.inflate()
	return it.Template, err
}

// ListTemplates returns the team's templates newest first (then by id, descending).
func (st *Store) ListTemplates(ctx context.Context, teamID int64) ([]store.Template, error) {
	var bad error
	out, err := newestFirst(ctx, st, templateKey(teamID, "").PK, templatePrefix, func(it templateItem) store.Template {
		if err := it.inflate(); err != nil && bad == nil {
			bad = err
		}
		return it.Template
	}, func(t store.Template) (time.Time, string) { return t.CreatedAt, t.ID })
	if err == nil {
		err = bad
	}
	return out, err
}

func (st *Store) UpdateTemplate(ctx context.Context, teamID int64, id string, fn func(*store.Template) error) (store.Template, error) {
	k := templateKey(teamID, id)
	return optimistic(ctx, st, "template "+id, func() (store.Template, error) {
		var old templateItem
		if err := st.getInto(ctx, k, true, &old); err != nil {
			return store.Template{}, err
		}
		if err := old.inflate(); err != nil {
			return store.Template{}, err
		}
		t := old.Template
		if err := fn(&t); err != nil {
			return store.Template{}, err
		}
		t.ID, t.TeamID = id, teamID
		m, err := templateAttrs(t, old.Version+1)
		if err != nil {
			return store.Template{}, err
		}
		return t, st.putIfVersion(ctx, m, old.Version, "template")
	})
}

func (st *Store) DeleteTemplate(ctx context.Context, teamID int64, id string) error {
	return st.deleteExisting(ctx, templateKey(teamID, id), "", nil)
}
