package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

func testTemplates(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, b := newTeam(t, s), newTeam(t, s)
	base := now()
	var tpls []store.Template
	for i := range 3 {
		created := base.Add(time.Duration(i-3) * time.Minute)
		tpl := store.Template{
			ID: randID("tpl-"), TeamID: a, Name: fmt.Sprintf("t%d", i),
			Subject: "Hi {{name}}", HTML: "<p>{{name}}</p>", Text: "{{name}}",
			CreatedAt: created, UpdatedAt: created,
		}
		noErr(t, "CreateTemplate", s.CreateTemplate(ctx, tpl))
		tpls = append(tpls, tpl)
	}
	got, err := s.GetTemplate(ctx, a, tpls[1].ID)
	noErr(t, "GetTemplate", err)
	checkTemplate(t, "GetTemplate", got, tpls[1])
	_, err = s.GetTemplate(ctx, b, tpls[1].ID)
	wantErr(t, "GetTemplate(other team)", err, store.ErrNotFound)

	list, err := s.ListTemplates(ctx, a)
	noErr(t, "ListTemplates", err)
	if len(list) != 3 || list[0].ID != tpls[2].ID || list[1].ID != tpls[1].ID || list[2].ID != tpls[0].ID {
		t.Fatalf("ListTemplates not newest first: got %d items", len(list))
	}
	list, err = s.ListTemplates(ctx, b)
	noErr(t, "ListTemplates(b)", err)
	if len(list) != 0 {
		t.Fatalf("ListTemplates(b) = %d items, want 0", len(list))
	}

	updatedAt := base.Add(time.Second)
	up, err := s.UpdateTemplate(ctx, a, tpls[0].ID, func(tpl *store.Template) error {
		tpl.Subject = "Bye {{name}}"
		tpl.UpdatedAt = updatedAt
		return nil
	})
	noErr(t, "UpdateTemplate", err)
	want := tpls[0]
	want.Subject, want.UpdatedAt = "Bye {{name}}", updatedAt
	checkTemplate(t, "UpdateTemplate result", up, want)
	got, err = s.GetTemplate(ctx, a, tpls[0].ID)
	noErr(t, "GetTemplate", err)
	checkTemplate(t, "GetTemplate after UpdateTemplate", got, want)
	_, err = s.UpdateTemplate(ctx, b, tpls[0].ID, func(*store.Template) error { return nil })
	wantErr(t, "UpdateTemplate(other team)", err, store.ErrNotFound)
	errBoom := errors.New("boom")
	_, err = s.UpdateTemplate(ctx, a, tpls[0].ID, func(tpl *store.Template) error {
		tpl.Subject = "lost"
		return errBoom
	})
	wantErr(t, "UpdateTemplate(fn fails)", err, errBoom)
	got, err = s.GetTemplate(ctx, a, tpls[0].ID)
	noErr(t, "GetTemplate", err)
	checkTemplate(t, "GetTemplate after a failed UpdateTemplate", got, want)

	// Deleting through another team must not delete.
	_ = s.DeleteTemplate(ctx, b, tpls[1].ID)
	_, err = s.GetTemplate(ctx, a, tpls[1].ID)
	noErr(t, "GetTemplate after a delete by another team", err)
	noErr(t, "DeleteTemplate", s.DeleteTemplate(ctx, a, tpls[1].ID))
	_, err = s.GetTemplate(ctx, a, tpls[1].ID)
	wantErr(t, "GetTemplate(deleted)", err, store.ErrNotFound)
	list, err = s.ListTemplates(ctx, a)
	noErr(t, "ListTemplates", err)
	if len(list) != 2 || list[0].ID != tpls[2].ID || list[1].ID != tpls[0].ID {
		t.Fatalf("ListTemplates after delete: got %d items", len(list))
	}
}
