package api

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/campaign"
)

// TestSealedSessionsAcrossARotation: a session sealed by an instance that read the keyring
// after a rotation opens on one that read it before (which reads it again for the new key id),
// with the same CSRF token on both; a forged or altered session opens on neither.
func TestSealedSessionsAcrossARotation(t *testing.T) {
	old := campaign.Keyring{Current: "k1", Keys: map[string][]byte{"k1": []byte(strings.Repeat("a", 32))}}
	rotated := campaign.Keyring{Current: "k2", Keys: map[string][]byte{"k1": old.Keys["k1"], "k2": []byte(strings.Repeat("b", 32))}}
	var secret atomic.Pointer[campaign.Keyring] // what the secret store holds
	secret.Store(&old)
	load := func(context.Context) (campaign.Keyring, error) { return *secret.Load(), nil }
	now := time.Now()
	clock := func() time.Time { return now }
	ctx := context.Background()

	warm := &Console{Sealed: &campaign.Signer{Source: &campaign.KeySource{Load: load, Now: clock}}}
	before, err := warm.newSession(ctx, 1, "us_key_one") // reads the old ring
	if err != nil {
		t.Fatal(err)
	}
	secret.Store(&rotated)
	now = now.Add(time.Minute) // past ReloadEvery, within RefreshEvery: warm keeps the old ring
	fresh := &Console{Sealed: &campaign.Signer{Source: &campaign.KeySource{Load: load, Now: clock}}}
	after, err := fresh.newSession(ctx, 1, "us_key_two")
	if err != nil || !strings.HasPrefix(after, sealedVersion+"k2.") {
		t.Fatalf("a session sealed after the rotation: %q %v, want it under k2", after, err)
	}
	for _, c := range []*Console{warm, fresh} {
		for id, key := range map[string]string{before: "us_key_one", after: "us_key_two"} {
			if got, ok := c.sessionKey(ctx, id); !ok || got != key {
				t.Errorf("session %.12s… opened %q %v, want %q", id, got, ok, key)
			}
		}
	}
	if warm.csrfToken(ctx, after) == "" || warm.csrfToken(ctx, after) != fresh.csrfToken(ctx, after) {
		t.Error("the two instances derive different CSRF tokens for one session")
	}
	for _, forged := range []string{after[:len(after)-2] + "AA", sealedVersion + "k9." + after[len(sealedVersion)+3:], "s1.k2.", "random"} {
		if _, ok := fresh.sessionKey(ctx, forged); ok {
			t.Errorf("forged session %q opened", forged)
		}
	}
}
