package auth

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
)

type keys struct {
	m     map[string]store.APIKey
	teams map[int64]store.Team // nil: every team exists, without limits
	calls atomic.Int32
}

func (k *keys) GetAPIKey(_ context.Context, id string) (store.APIKey, error) {
	k.calls.Add(1)
	v, ok := k.m[id]
	if !ok {
		return store.APIKey{}, store.ErrNotFound
	}
	return v, nil
}

func (k *keys) GetTeam(_ context.Context, id int64) (store.Team, error) {
	if k.teams != nil {
		if t, ok := k.teams[id]; ok {
			return t, nil
		}
		return store.Team{}, store.ErrNotFound
	}
	return store.Team{ID: id}, nil
}

func TestGenerateParse(t *testing.T) {
	full, id, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	gotID, secret, err := Parse(full)
	if err != nil || gotID != id || len(secret) != 32 || !strings.HasPrefix(full, "us_"+id+"_") {
		t.Fatalf("Parse(%q) = %q %q %v", full, gotID, secret, err)
	}
	for _, bad := range []string{"", "us_", "nounderscore", "us_ABCDEFGHIJ_0123456789abcdef0123456789abcdef",
		"us_abcdefghij_0123456789abcdef0123456789abcdeg", "us_abcdefghij-0123456789abcdef0123456789abcdef",
		"us_abcdefghij_0123456789abcdef0123456789abcde"} {
		if _, _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	full, id, _ := Generate()
	_, secret, _ := Parse(full)
	k := &keys{m: map[string]store.APIKey{id: {ID: id, TeamID: 7, SecretHash: Hash(secret), Permission: store.PermissionSending, DomainID: 3}}}
	a := NewAuthenticator(k, time.Minute)
	p, err := a.Authenticate(context.Background(), "Bearer "+full)
	if err != nil || p.TeamID != 7 || p.CanManage() || p.DomainID != 3 {
		t.Fatalf("Authenticate = %+v, %v", p, err)
	}
	if _, err := a.Authenticate(context.Background(), "Bearer "+full); err != nil {
		t.Fatal(err)
	}
	if n := k.calls.Load(); n != 1 {
		t.Errorf("store reads = %d, want 1 (cached)", n)
	}
	// The scheme is case-insensitive and may be followed by spaces or a tab.
	for _, h := range []string{"bearer " + full, "BEARER  " + full, "Bearer\t" + full, " Bearer " + full + " "} {
		if p, err := a.Authenticate(context.Background(), h); err != nil || p.TeamID != 7 {
			t.Errorf("Authenticate(%q) = %+v, %v", h, p, err)
		}
	}
	wrongSecret := full[:len(full)-1] + map[bool]string{true: "0", false: "1"}[full[len(full)-1] != '0']
	cases := map[string]fault.Kind{
		"":                               fault.Unauthorized,
		"Bearer ":                        fault.Unauthorized,
		"Basic abc":                      fault.Unauthorized,
		full:                             fault.Unauthorized, // no scheme
		"Bearer":                         fault.Unauthorized,
		"Bearer nounderscore":            fault.Forbidden,
		"Bearer " + wrongSecret:          fault.Forbidden,
		"Bearer us_zzzzzzzzzz_" + secret: fault.Forbidden,
	}
	for h, want := range cases {
		_, err := a.Authenticate(context.Background(), h)
		fe, ok := fault.As(err)
		if !ok || fe.Kind != want {
			t.Errorf("Authenticate(%q) = %v, want kind %d", h, err, want)
		}
	}
}

// TestTeamLimits: the principal carries its team's limits (the server's default rate when the
// team has none), through an authorizer's verdict too, and a key whose team is gone is invalid.
func TestTeamLimits(t *testing.T) {
	full, id, _ := Generate()
	_, secret, _ := Parse(full)
	five := int64(5)
	k := &keys{m: map[string]store.APIKey{id: {ID: id, TeamID: 7, SecretHash: Hash(secret), Permission: store.PermissionFull}},
		teams: map[int64]store.Team{7: {ID: 7, APIRateLimit: &five, DailyEmailLimit: 1000}}}
	ctx := context.Background()
	p, err := NewAuthenticator(k, 0).Authenticate(ctx, "Bearer "+full)
	if err != nil || p.RateLimit != 5 || p.DailyEmailLimit != 1000 {
		t.Fatalf("Authenticate = %+v, %v", p, err)
	}
	c, err := VerdictContext(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := NewAuthenticator(k, 0).Authenticate(WithVerdict(ctx, c), ""); err != nil || got != p {
		t.Fatalf("through the verdict: %+v, %v; want %+v", got, err, p)
	}
	delete(c, ctxRateLimit) // a verdict cached before limits existed
	delete(c, ctxDailyLimit)
	if got, _ := NewAuthenticator(k, 0).Authenticate(WithVerdict(ctx, c), ""); got.RateLimit != DefaultRateLimit || got.DailyEmailLimit != 0 {
		t.Errorf("a verdict without limits: %+v", got)
	}
	k.teams[7] = store.Team{ID: 7}
	if p, _ := NewAuthenticator(k, 0).Authenticate(ctx, "Bearer "+full); p.RateLimit != DefaultRateLimit {
		t.Errorf("a team without a limit: rate %d, want the default", p.RateLimit)
	}
	delete(k.teams, 7)
	if _, err := NewAuthenticator(k, 0).Authenticate(ctx, "Bearer "+full); err == nil {
		t.Error("a key of a deleted team authenticated")
	}
}
