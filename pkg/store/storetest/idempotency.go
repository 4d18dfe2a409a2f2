package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

const (
	idemTTL   = 24 * time.Hour
	idemStale = 60 * time.Second
)

func claim(t *testing.T, s store.Store, c store.IdemClaim) (store.Idempotency, bool) {
	t.Helper()
	if c.TTL == 0 {
		c.TTL = idemTTL
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = idemStale
	}
	rec, claimed, err := s.ClaimIdempotency(t.Context(), c)
	noErr(t, "ClaimIdempotency", err)
	return rec, claimed
}

func checkIdem(t *testing.T, what string, rec store.Idempotency, teamID int64, key, fingerprint, state, nonce string) {
	t.Helper()
	if rec.TeamID != teamID || rec.Key != key || rec.Fingerprint != fingerprint || rec.State != state || rec.Nonce != nonce {
		t.Fatalf("%s: record {team %d key %q fingerprint %q state %s nonce %q}, want {team %d key %q fingerprint %q state %s nonce %q}",
			what, rec.TeamID, rec.Key, rec.Fingerprint, rec.State, rec.Nonce, teamID, key, fingerprint, state, nonce)
	}
}

func testIdempotency(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, b := newTeam(t, s), newTeam(t, s)
	key := randID("idem-")
	at := now()

	rec, claimed := claim(t, s, store.IdemClaim{TeamID: a, Key: key, Fingerprint: "fp-1", Nonce: "nonce-1", Now: at})
	if !claimed {
		t.Fatal("first claim not claimed")
	}
	checkIdem(t, "first claim", rec, a, key, "fp-1", store.IdemPending, "nonce-1")
	if !rec.ClaimedAt.Equal(at) || !rec.ExpiresAt.Equal(at.Add(idemTTL)) {
		t.Fatalf("first claim: ClaimedAt %v ExpiresAt %v, want %v and %v", rec.ClaimedAt, rec.ExpiresAt, at, at.Add(idemTTL))
	}

	rec, claimed = claim(t, s, store.IdemClaim{TeamID: a, Key: key, Fingerprint: "fp-2", Nonce: "nonce-2", Now: at.Add(time.Second)})
	if claimed {
		t.Fatal("second claim of a pending key claimed it")
	}
	checkIdem(t, "second claim", rec, a, key, "fp-1", store.IdemPending, "nonce-1")

	// Keys are per team.
	rec, claimed = claim(t, s, store.IdemClaim{TeamID: b, Key: key, Fingerprint: "fp-b", Nonce: "nonce-b", Now: at})
	if !claimed {
		t.Fatal("another team's claim of the same key not claimed")
	}
	checkIdem(t, "other team's claim", rec, b, key, "fp-b", store.IdemPending, "nonce-b")

	// Release deletes a pending record; the next claim is a fresh one.
	released := randID("idem-")
	claim(t, s, store.IdemClaim{TeamID: a, Key: released, Fingerprint: "fp-1", Nonce: "nonce-r1", Now: at})
	noErr(t, "ReleaseIdempotency", s.ReleaseIdempotency(ctx, a, released))
	rec, claimed = claim(t, s, store.IdemClaim{TeamID: a, Key: released, Fingerprint: "fp-2", Nonce: "nonce-r2", Now: at.Add(time.Second)})
	if !claimed {
		t.Fatal("claim after release not claimed")
	}
	checkIdem(t, "claim after release", rec, a, released, "fp-2", store.IdemPending, "nonce-r2")
}

func testIdempotencyExpiryAndTakeover(t *testing.T, s store.Store) {
	team := newTeam(t, s)
	at := now()

	// A record that expired (ExpiresAt before Now) is absent.
	{
		key := randID("expired-")
		old := at.Add(-48 * time.Hour)
		claim(t, s, store.IdemClaim{TeamID: team, Key: key, Fingerprint: "fp-old", Nonce: "nonce-old", Now: old})
		rec, claimed := claim(t, s, store.IdemClaim{TeamID: team, Key: key, Fingerprint: "fp-new", Nonce: "nonce-new", Now: at})
		if !claimed {
			t.Fatal("claim of an expired record not claimed")
		}
		checkIdem(t, "claim over an expired record", rec, team, key, "fp-new", store.IdemPending, "nonce-new")
		if len(rec.Response) != 0 || !rec.ExpiresAt.Equal(at.Add(idemTTL)) {
			t.Fatalf("claim over an expired record kept response %q / ExpiresAt %v", rec.Response, rec.ExpiresAt)
		}
	}

	// A pending record claimed less than StaleAfter ago stays with its owner...
	key := randID("stale-")
	claim(t, s, store.IdemClaim{TeamID: team, Key: key, Fingerprint: "fp-1", Nonce: "nonce-1", Now: at.Add(-2 * time.Minute)})
	rec, claimed := claim(t, s, store.IdemClaim{TeamID: team, Key: key, Fingerprint: "fp-1", Nonce: "nonce-2", Now: at.Add(-2*time.Minute + idemStale/2)})
	if claimed {
		t.Fatal("a fresh pending claim was taken over")
	}
	checkIdem(t, "claim of a fresh pending record", rec, team, key, "fp-1", store.IdemPending, "nonce-1")
	// ...is not taken over by another payload even once stale (the record stays as it was, so
	// the first request's retry can still finish it)...
	rec, claimed = claim(t, s, store.IdemClaim{TeamID: team, Key: key, Fingerprint: "fp-other", Nonce: "nonce-x", Now: at.Add(-time.Second)})
	if claimed {
		t.Fatal("a stale claim was taken over by another payload")
	}
	checkIdem(t, "stale claim asked by another payload", rec, team, key, "fp-1", store.IdemPending, "nonce-1")
	if !rec.ClaimedAt.Equal(at.Add(-2 * time.Minute)) {
		t.Fatalf("another payload re-stamped the claim: ClaimedAt %v", rec.ClaimedAt)
	}
	// ...and is taken over once stale by the same request, keeping its nonce so the email ids
	// stay the same.
	rec, claimed = claim(t, s, store.IdemClaim{TeamID: team, Key: key, Fingerprint: "fp-1", Nonce: "nonce-3", Now: at})
	if !claimed {
		t.Fatal("a stale pending claim was not taken over")
	}
	checkIdem(t, "takeover", rec, team, key, "fp-1", store.IdemPending, "nonce-1")
	if !rec.ClaimedAt.Equal(at) {
		t.Fatalf("takeover: ClaimedAt %v, want %v", rec.ClaimedAt, at)
	}
	// The new owner holds it now: it is fresh again for others.
	rec, claimed = claim(t, s, store.IdemClaim{TeamID: team, Key: key, Fingerprint: "fp-1", Nonce: "nonce-4", Now: at.Add(time.Second)})
	if claimed {
		t.Fatal("a just taken-over record was taken over again")
	}
	checkIdem(t, "claim after takeover", rec, team, key, "fp-1", store.IdemPending, "nonce-1")
}

func testIdempotencyConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	key := randID("race-")
	at := now()
	recs := make([]store.Idempotency, workers)
	claimedBy := make([]bool, workers)
	errs := concurrently(workers, func(i int) error {
		var err error
		recs[i], claimedBy[i], err = s.ClaimIdempotency(ctx, store.IdemClaim{
			TeamID: team, Key: key, Fingerprint: "fp", Nonce: fmt.Sprintf("nonce-%d", i),
			Now: at, TTL: idemTTL, StaleAfter: idemStale,
		})
		return err
	})
	for _, err := range errs {
		noErr(t, "ClaimIdempotency", err)
	}
	winner := slices.Index(claimedBy, true)
	if winner < 0 || slices.Index(claimedBy[winner+1:], true) >= 0 {
		t.Fatalf("claims of one key by %d goroutines: claimed = %v, want exactly one", workers, claimedBy)
	}
	for i, rec := range recs {
		checkIdem(t, fmt.Sprintf("goroutine %d", i), rec, team, key, "fp", store.IdemPending, fmt.Sprintf("nonce-%d", winner))
	}
}

// testIdempotencyExpire: ExpireIdempotency removes records past their ExpiresAt (or none,
// where the database's TTL does it) and keeps a live one: its key still answers with its
// record afterwards.
func testIdempotencyExpire(t *testing.T, s store.Store) {
	team := newTeam(t, s)
	at := now()
	expired, live := randID("gone-"), randID("live-")
	claim(t, s, store.IdemClaim{TeamID: team, Key: expired, Fingerprint: "fp", Nonce: "n1", Now: at.Add(-48 * time.Hour)})
	claim(t, s, store.IdemClaim{TeamID: team, Key: live, Fingerprint: "fp", Nonce: "n2", Now: at})
	_, err := s.ExpireIdempotency(t.Context(), 0) // how many: the adapter's own test (0 where TTL does it)
	noErr(t, "ExpireIdempotency", err)
	rec, claimed := claim(t, s, store.IdemClaim{TeamID: team, Key: live, Fingerprint: "fp-other", Nonce: "n3", Now: at.Add(time.Second)})
	if claimed {
		t.Fatal("the live record was removed: its key was claimed anew")
	}
	checkIdem(t, "the live record after the sweep", rec, team, live, "fp", store.IdemPending, "n2")
	if rec, claimed := claim(t, s, store.IdemClaim{TeamID: team, Key: expired, Fingerprint: "fp-new", Nonce: "n4", Now: at}); !claimed || rec.Nonce != "n4" {
		t.Errorf("the expired key: claimed %v, nonce %s; want a new record", claimed, rec.Nonce)
	}
}
