package storetest

import (
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

func testSuppressions(t *testing.T, s store.Store) {
	ctx := t.Context()
	team, other := newTeam(t, s), newTeam(t, s)
	at := now()
	put := func(addr, reason string, minutes int) {
		t.Helper()
		noErr(t, "PutSuppression", s.PutSuppression(ctx, store.Suppression{
			TeamID: team, Email: addr, Reason: reason, EmailID: "em-" + reason,
			CreatedAt: at.Add(time.Duration(minutes) * time.Minute),
		}))
	}
	put("Bob@Example.com", store.ReasonHardBounce, 1)
	put("carol@example.com", store.ReasonComplaint, 2)
	put("dave@example.com", store.ReasonManual, 3)
	put("erin@example.com", store.ReasonHardBounce, 4)
	put("BOB@example.com", store.ReasonComplaint, 5) // replaces bob's

	got, err := s.GetSuppressions(ctx, team, []string{"bob@EXAMPLE.com", "nobody@example.com", "carol@example.com"})
	noErr(t, "GetSuppressions", err)
	if len(got) != 2 {
		t.Fatalf("GetSuppressions = %v, want bob and carol", got)
	}
	bob, ok := got["bob@example.com"]
	if !ok || bob.Email != "bob@example.com" || bob.Reason != store.ReasonComplaint || bob.TeamID != team ||
		bob.EmailID != "em-"+store.ReasonComplaint || !bob.CreatedAt.Equal(at.Add(5*time.Minute)) {
		t.Fatalf("GetSuppressions[bob@example.com] = %+v (present %v), want the replacing COMPLAINT", bob, ok)
	}
	if c := got["carol@example.com"]; c.Reason != store.ReasonComplaint {
		t.Fatalf("GetSuppressions[carol@example.com] = %+v", c)
	}
	got, err = s.GetSuppressions(ctx, other, []string{"bob@example.com", "carol@example.com"})
	noErr(t, "GetSuppressions(other team)", err)
	if len(got) != 0 {
		t.Fatalf("another team sees suppressions %v", got)
	}

	emails := func(list []store.Suppression) []string {
		out := make([]string, len(list))
		for i, sp := range list {
			out[i] = sp.Email
		}
		return out
	}
	cases := []struct {
		reason        string
		offset, limit int
		want          []string
		total         int
	}{
		{"", 0, 10, []string{"bob@example.com", "erin@example.com", "dave@example.com", "carol@example.com"}, 4},
		{"", 1, 2, []string{"erin@example.com", "dave@example.com"}, 4},
		{"", 3, 2, []string{"carol@example.com"}, 4},
		{"", 4, 2, nil, 4},
		{store.ReasonHardBounce, 0, 10, []string{"erin@example.com"}, 1},
		{store.ReasonComplaint, 0, 10, []string{"bob@example.com", "carol@example.com"}, 2},
		{store.ReasonComplaint, 1, 1, []string{"carol@example.com"}, 2},
		{store.ReasonManual, 0, 10, []string{"dave@example.com"}, 1},
	}
	for _, tc := range cases {
		list, total, err := s.ListSuppressions(ctx, team, tc.reason, tc.offset, tc.limit)
		noErr(t, "ListSuppressions", err)
		if got := emails(list); total != tc.total || !equalStrings(got, tc.want) {
			t.Fatalf("ListSuppressions(%q, %d, %d) = %v (total %d), want %v (total %d)",
				tc.reason, tc.offset, tc.limit, got, total, tc.want, tc.total)
		}
	}
	list, total, err := s.ListSuppressions(ctx, other, "", 0, 10)
	noErr(t, "ListSuppressions(other team)", err)
	if total != 0 || len(list) != 0 {
		t.Fatalf("another team lists %d suppressions (total %d)", len(list), total)
	}

	noErr(t, "DeleteSuppression", s.DeleteSuppression(ctx, team, "bob@example.com"))
	got, err = s.GetSuppressions(ctx, team, []string{"bob@example.com"})
	noErr(t, "GetSuppressions", err)
	if len(got) != 0 {
		t.Fatalf("deleted suppression still returned: %v", got)
	}
	list, total, err = s.ListSuppressions(ctx, team, "", 0, 10)
	noErr(t, "ListSuppressions", err)
	if want := []string{"erin@example.com", "dave@example.com", "carol@example.com"}; total != 3 || !equalStrings(emails(list), want) {
		t.Fatalf("after delete: %v (total %d), want %v (total 3)", emails(list), total, want)
	}
}
