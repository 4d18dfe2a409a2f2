package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

func testTeams(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, b := newTeam(t, s), newTeam(t, s)
	if a == b {
		t.Fatalf("two teams got id %d", a)
	}
	team, err := s.GetTeam(ctx, a)
	noErr(t, "GetTeam", err)
	if team.ID != a || team.Name != fmt.Sprintf("team %d", a) || team.CreatedAt.IsZero() {
		t.Fatalf("GetTeam(%d) = %+v", a, team)
	}
	_, err = s.GetTeam(ctx, 1<<60)
	wantErr(t, "GetTeam(unknown)", err, store.ErrNotFound)

	teams, err := s.ListTeams(ctx)
	noErr(t, "ListTeams", err)
	var seen int
	for _, tm := range teams {
		if tm.ID == a || tm.ID == b {
			seen++
		}
	}
	if seen != 2 {
		t.Fatalf("ListTeams has %d of the 2 teams created: %+v", seen, teams)
	}
}

func testNextID(t *testing.T, s store.Store) {
	ctx := t.Context()
	seqA, seqB := randID("seq-a-"), randID("seq-b-")
	for want := int64(1); want <= 3; want++ {
		got, err := s.NextID(ctx, seqA)
		noErr(t, "NextID", err)
		if got != want {
			t.Fatalf("NextID(%s) = %d, want %d", seqA, got, want)
		}
	}
	got, err := s.NextID(ctx, seqB)
	noErr(t, "NextID", err)
	if got != 1 {
		t.Fatalf("NextID of a second sequence = %d, want 1 (sequences are independent)", got)
	}
	got, err = s.NextID(ctx, seqA)
	noErr(t, "NextID", err)
	if got != 4 {
		t.Fatalf("NextID(%s) after another sequence = %d, want 4", seqA, got)
	}
}

func testNextIDConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	seq := randID("seq-")
	const each = 2
	ids := make([][]int64, workers)
	errs := concurrently(workers, func(i int) error {
		for range each {
			id, err := s.NextID(ctx, seq)
			if err != nil {
				return err
			}
			ids[i] = append(ids[i], id)
		}
		return nil
	})
	seen := make(map[int64]bool)
	for i, err := range errs {
		noErr(t, "NextID", err)
		for _, id := range ids[i] {
			if seen[id] {
				t.Fatalf("NextID handed out %d twice", id)
			}
			seen[id] = true
		}
	}
	for id := int64(1); id <= workers*each; id++ {
		if !seen[id] {
			t.Fatalf("NextID skipped %d (got %d distinct ids)", id, len(seen))
		}
	}
}

func testAPIKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, b := newTeam(t, s), newTeam(t, s)
	created := now()
	k1 := store.APIKey{ID: randID("k1"), TeamID: a, Name: "full", SecretHash: "aa", Permission: store.PermissionFull, CreatedAt: created}
	k2 := store.APIKey{ID: randID("k2"), TeamID: a, Name: "sending", SecretHash: "bb", Permission: store.PermissionSending, DomainID: 7, CreatedAt: created}
	k3 := store.APIKey{ID: randID("k3"), TeamID: b, Name: "other", SecretHash: "cc", Permission: store.PermissionFull, CreatedAt: created}
	for _, k := range []store.APIKey{k1, k2, k3} {
		noErr(t, "CreateAPIKey", s.CreateAPIKey(ctx, k))
	}
	dup := k1
	dup.TeamID, dup.SecretHash = b, "dd"
	wantErr(t, "CreateAPIKey(duplicate id)", s.CreateAPIKey(ctx, dup), store.ErrConflict)

	got, err := s.GetAPIKey(ctx, k2.ID)
	noErr(t, "GetAPIKey", err)
	checkAPIKey(t, "GetAPIKey", got, k2)
	got, err = s.GetAPIKey(ctx, k1.ID)
	noErr(t, "GetAPIKey", err)
	checkAPIKey(t, "GetAPIKey after a refused duplicate", got, k1)
	_, err = s.GetAPIKey(ctx, randID("nokey"))
	wantErr(t, "GetAPIKey(unknown)", err, store.ErrNotFound)

	listIDs := func(team int64) []string {
		t.Helper()
		keys, err := s.ListAPIKeys(ctx, team)
		noErr(t, "ListAPIKeys", err)
		ids := make([]string, len(keys))
		for i, k := range keys {
			if k.TeamID != team {
				t.Fatalf("ListAPIKeys(%d) returned a key of team %d", team, k.TeamID)
			}
			ids[i] = k.ID
		}
		slices.Sort(ids)
		return ids
	}
	want := []string{k1.ID, k2.ID}
	slices.Sort(want)
	if got := listIDs(a); !equalStrings(got, want) {
		t.Fatalf("ListAPIKeys(a) = %v, want %v", got, want)
	}
	if got := listIDs(b); !equalStrings(got, []string{k3.ID}) {
		t.Fatalf("ListAPIKeys(b) = %v, want [%s]", got, k3.ID)
	}

	// Deleting through another team must not delete (the error, if any, is the adapter's).
	_ = s.DeleteAPIKey(ctx, b, k1.ID)
	_, err = s.GetAPIKey(ctx, k1.ID)
	noErr(t, "GetAPIKey after a delete by another team", err)

	noErr(t, "DeleteAPIKey", s.DeleteAPIKey(ctx, a, k1.ID))
	_, err = s.GetAPIKey(ctx, k1.ID)
	wantErr(t, "GetAPIKey(deleted)", err, store.ErrNotFound)
	if got := listIDs(a); !equalStrings(got, []string{k2.ID}) {
		t.Fatalf("ListAPIKeys(a) after delete = %v, want [%s]", got, k2.ID)
	}
}

// testUpdateTeam: a team's limits are set and cleared; its id and creation time stay; an
// unknown team is not found.
func testUpdateTeam(t *testing.T, s store.Store) {
	ctx := t.Context()
	id := newTeam(t, s)
	before, err := s.GetTeam(ctx, id)
	noErr(t, "GetTeam", err)
	if before.APIRateLimit != nil || before.DailyEmailLimit != 0 {
		t.Fatalf("a new team has limits %v, %d", before.APIRateLimit, before.DailyEmailLimit)
	}
	twenty := int64(20)
	_, err = s.UpdateTeam(ctx, id, func(tm *store.Team) error {
		tm.APIRateLimit, tm.DailyEmailLimit = &twenty, 5000
		tm.ID, tm.CreatedAt = 999, time.Time{}
		return nil
	})
	noErr(t, "UpdateTeam", err)
	got, err := s.GetTeam(ctx, id)
	noErr(t, "GetTeam", err)
	if got.APIRateLimit == nil || *got.APIRateLimit != 20 || got.DailyEmailLimit != 5000 || got.ID != id ||
		!got.CreatedAt.Equal(before.CreatedAt) || got.Name != before.Name {
		t.Fatalf("after UpdateTeam: %+v (limit %v), was %+v", got, got.APIRateLimit, before)
	}
	zero := int64(0)
	_, err = s.UpdateTeam(ctx, id, func(tm *store.Team) error { tm.APIRateLimit = &zero; return nil })
	noErr(t, "UpdateTeam", err)
	if got, _ := s.GetTeam(ctx, id); got.APIRateLimit == nil || *got.APIRateLimit != 0 {
		t.Fatalf("an unlimited team (0) reads back as %v", got.APIRateLimit)
	}
	_, err = s.UpdateTeam(ctx, id, func(tm *store.Team) error { tm.APIRateLimit = nil; return nil })
	noErr(t, "UpdateTeam", err)
	if got, _ := s.GetTeam(ctx, id); got.APIRateLimit != nil {
		t.Fatalf("a cleared limit reads back as %v", *got.APIRateLimit)
	}
	_, err = s.UpdateTeam(ctx, id+1_000_000, func(*store.Team) error { return nil })
	wantErr(t, "UpdateTeam(unknown)", err, store.ErrNotFound)
}
