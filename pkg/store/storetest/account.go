package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

func newDomain(t *testing.T, s store.Store, teamID int64, name string) store.Domain {
	t.Helper()
	created := now()
	return store.Domain{
		ID:         newDomainID(t, s),
		TeamID:     teamID,
		Name:       name,
		Region:     "us-east-1",
		Status:     store.DomainPending,
		Selector:   "mailroom",
		PublicKey:  "MIIBIjAN",
		PrivateKey: "MIIEowIB",
		DNSRecords: []store.DNSRecord{
			{Type: "TXT", Name: "mailroom._domainkey", Value: "p=MIIBIjAN", TTL: "Auto", Status: store.DomainNotStarted},
			{Type: "MX", Name: "mail", Value: "feedback-smtp.us-east-1.amazonses.com", TTL: "Auto", Status: store.DomainNotStarted, Priority: "10", Recommended: true},
		},
		OpenTracking:    true,
		DKIMStatus:      store.DomainNotStarted,
		LastCheckedTime: ptr(created.Add(-time.Minute)),
		CreatedAt:       created,
		UpdatedAt:       created,
	}
}

func testDomains(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, b := newTeam(t, s), newTeam(t, s)
	name := randID("d") + ".example.com"

	d1 := newDomain(t, s, a, name)
	noErr(t, "CreateDomain", s.CreateDomain(ctx, d1))
	again := newDomain(t, s, a, name)
	wantErr(t, "CreateDomain(same name, same team)", s.CreateDomain(ctx, again), store.ErrConflict)
	taken := newDomain(t, s, b, strings.ToUpper(name))
	wantErr(t, "CreateDomain(same name, other team)", s.CreateDomain(ctx, taken), store.ErrConflict)
	other := newDomain(t, s, b, "c."+name)
	noErr(t, "CreateDomain(other team)", s.CreateDomain(ctx, other))
	d2 := newDomain(t, s, a, "b."+name)
	noErr(t, "CreateDomain", s.CreateDomain(ctx, d2))

	got, err := s.GetDomain(ctx, a, d1.ID)
	noErr(t, "GetDomain", err)
	checkDomain(t, "GetDomain", got, d1)
	_, err = s.GetDomain(ctx, b, d1.ID)
	wantErr(t, "GetDomain(other team's id)", err, store.ErrNotFound)
	_, err = s.GetDomain(ctx, a, again.ID)
	wantErr(t, "GetDomain(refused duplicate)", err, store.ErrNotFound)

	list, err := s.ListDomains(ctx, a)
	noErr(t, "ListDomains", err)
	if len(list) != 2 || list[0].ID != d1.ID || list[1].ID != d2.ID {
		t.Fatalf("ListDomains(a) = %v, want ids [%d %d] in id order", domainIDs(list), d1.ID, d2.ID)
	}
	checkDomain(t, "ListDomains[0]", list[0], d1)
	list, err = s.ListDomains(ctx, b)
	noErr(t, "ListDomains", err)
	if len(list) != 1 || list[0].ID != other.ID {
		t.Fatalf("ListDomains(b) = %v, want [%d]", domainIDs(list), other.ID)
	}

	// UpdateDomain: applied, returned, persisted; scoped to the team; an fn error writes nothing.
	checked := now()
	updated, err := s.UpdateDomain(ctx, a, d1.ID, func(d *store.Domain) error {
		d.Status = store.DomainSuccess
		d.DNSRecords[0].Status = store.DomainSuccess
		d.LastCheckedTime = &checked
		return nil
	})
	noErr(t, "UpdateDomain", err)
	want := d1
	want.Status = store.DomainSuccess
	want.DNSRecords = slices.Clone(d1.DNSRecords)
	want.DNSRecords[0].Status = store.DomainSuccess
	want.LastCheckedTime = &checked
	checkDomain(t, "UpdateDomain result", updated, want)
	got, err = s.GetDomain(ctx, a, d1.ID)
	noErr(t, "GetDomain", err)
	checkDomain(t, "GetDomain after UpdateDomain", got, want)

	errBoom := errors.New("boom")
	_, err = s.UpdateDomain(ctx, a, d1.ID, func(d *store.Domain) error {
		d.Status = store.DomainFailed
		return errBoom
	})
	wantErr(t, "UpdateDomain(fn fails)", err, errBoom)
	got, err = s.GetDomain(ctx, a, d1.ID)
	noErr(t, "GetDomain", err)
	checkDomain(t, "GetDomain after a failed UpdateDomain", got, want)
	_, err = s.UpdateDomain(ctx, b, d1.ID, func(d *store.Domain) error { return nil })
	wantErr(t, "UpdateDomain(other team's id)", err, store.ErrNotFound)

	// Delete frees the name.
	noErr(t, "DeleteDomain", s.DeleteDomain(ctx, a, d1.ID))
	_, err = s.GetDomain(ctx, a, d1.ID)
	wantErr(t, "GetDomain(deleted)", err, store.ErrNotFound)
	reborn := newDomain(t, s, a, name)
	noErr(t, "CreateDomain(name of a deleted domain)", s.CreateDomain(ctx, reborn))
	list, err = s.ListDomains(ctx, a)
	noErr(t, "ListDomains", err)
	if ids := domainIDs(list); len(ids) != 2 || !slices.Contains(ids, reborn.ID) || !slices.Contains(ids, d2.ID) {
		t.Fatalf("ListDomains(a) after delete and re-create = %v, want %d and %d", ids, d2.ID, reborn.ID)
	}
}

func domainIDs(ds []store.Domain) []int64 {
	ids := make([]int64, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return ids
}

func testDomainNameConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	name := randID("race") + ".example.com"
	domains := make([]store.Domain, workers)
	for i := range domains {
		domains[i] = newDomain(t, s, team, name)
	}
	errs := concurrently(workers, func(i int) error { return s.CreateDomain(ctx, domains[i]) })
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("CreateDomain of one name succeeded twice (goroutines %d and %d)", winner, i)
			}
			winner = i
		case errors.Is(err, store.ErrConflict):
		default:
			t.Fatalf("CreateDomain: %v, want nil or ErrConflict", err)
		}
	}
	if winner < 0 {
		t.Fatal("no concurrent CreateDomain succeeded")
	}
	list, err := s.ListDomains(ctx, team)
	noErr(t, "ListDomains", err)
	if len(list) != 1 || list[0].ID != domains[winner].ID {
		t.Fatalf("ListDomains = %v, want only the winner %d", domainIDs(list), domains[winner].ID)
	}
}

func testUpdateDomainConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	d := newDomain(t, s, team, randID("upd")+".example.com")
	d.DNSRecords = nil
	noErr(t, "CreateDomain", s.CreateDomain(ctx, d))
	errs := concurrently(workers, func(i int) error {
		_, err := s.UpdateDomain(ctx, team, d.ID, func(d *store.Domain) error {
			d.DNSRecords = append(d.DNSRecords, store.DNSRecord{Type: "TXT", Name: strconv.Itoa(i)})
			n, _ := strconv.Atoi(d.ErrorMessage)
			d.ErrorMessage = strconv.Itoa(n + 1)
			return nil
		})
		return err
	})
	for _, err := range errs {
		noErr(t, "UpdateDomain", err)
	}
	got, err := s.GetDomain(ctx, team, d.ID)
	noErr(t, "GetDomain", err)
	if got.ErrorMessage != strconv.Itoa(workers) {
		t.Fatalf("counter after %d concurrent UpdateDomain = %s: updates were lost", workers, got.ErrorMessage)
	}
	seen := make(map[string]bool)
	for _, r := range got.DNSRecords {
		seen[r.Name] = true
	}
	if len(got.DNSRecords) != workers || len(seen) != workers {
		t.Fatalf("%d records (%d distinct) after %d concurrent appends", len(got.DNSRecords), len(seen), workers)
	}
}

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
