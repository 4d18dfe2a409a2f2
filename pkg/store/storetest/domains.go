package storetest

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

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
	for n, want := range map[string]bool{name: true, strings.ToUpper("c." + name): true, "x." + name: false} {
		held, err := s.DomainNameHeld(ctx, n)
		noErr(t, "DomainNameHeld", err)
		if held != want {
			t.Errorf("DomainNameHeld(%s) = %v, want %v", n, held, want)
		}
	}
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
