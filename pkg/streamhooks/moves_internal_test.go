package streamhooks

import (
	"context"
	"strings"
	"testing"

	"github.com/mailroom/mailroom/pkg/hooks"
	"github.com/mailroom/mailroom/pkg/store"
)

// movedStore answers Moved for the contact ids in moved (an EmailReader too).
type movedStore struct {
	hooks.EmailReader
	moved map[string]bool
}

func (m movedStore) Moved(_ context.Context, c store.Contact) (bool, error) {
	return m.moved[c.ID], nil
}

// webhooksOf lists team 1's one webhook, which wants contact events; team 2 has none.
type webhooksOf struct{ hooks.Store }

func (webhooksOf) ListWebhooks(_ context.Context, team int64) ([]store.Webhook, error) {
	if team != 1 {
		return nil, nil
	}
	return []store.Webhook{{ID: "wh", TeamID: 1, Status: store.WebhookActive, EventTypes: []string{"contact.deleted", "contact.updated"}}}, nil
}

// TestDropMoves: the contact.deleted of a contact that moved to another address is left out,
// and so is one no webhook wants (it is not read); a real deletion and every other event stay,
// in order.
func TestDropMoves(t *testing.T) {
	evs := []hooks.Event{
		{Type: "contact.deleted", TeamID: 1, Data: hooks.ContactData{ID: "ct-moved", Email: "old@example.org"}},
		{Type: "contact.updated", TeamID: 1, Data: hooks.ContactData{ID: "ct-moved", Email: "new@example.org"}},
		{Type: "contact.deleted", TeamID: 1, Data: hooks.ContactData{ID: "ct-gone", Email: "gone@example.org"}},
		{Type: "domain.updated", TeamID: 1},
		{Type: "contact.deleted", TeamID: 2, Data: hooks.ContactData{ID: "ct-other", Email: "x@example.org"}},
	}
	h := &hooks.Service{Store: webhooksOf{}}
	got, err := dropMoves(context.Background(), h, movedStore{moved: map[string]bool{"ct-moved": true}}, evs)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range got {
		types = append(types, ev.Type)
	}
	if want := "contact.updated contact.deleted domain.updated"; strings.Join(types, " ") != want {
		t.Errorf("kept %q, want %q", strings.Join(types, " "), want)
	}
}
