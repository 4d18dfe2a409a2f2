// Package team is the administration of teams and their API keys: what the admin CLI does and
// what the local server does at start to make sure a newcomer has a key.
package team

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mailroom/mailroom/pkg/auth"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
)

// Store is what administration needs from persistence.
type Store interface {
	store.Teams
	store.Domains
}

// Admin is the team and key use cases.
type Admin struct {
	Store Store
	Now   func() time.Time
}

// CreateTeam makes a new team.
func (a *Admin) CreateTeam(ctx context.Context, name string) (store.Team, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return store.Team{}, errors.New("team name is required")
	}
	id, err := a.Store.NextID(ctx, "team")
	if err != nil {
		return store.Team{}, fmt.Errorf("team id: %w", err)
	}
	t := store.Team{ID: id, Name: name, CreatedAt: a.Now().UTC()}
	if err := a.Store.CreateTeam(ctx, t); err != nil {
		return store.Team{}, fmt.Errorf("create team: %w", err)
	}
	return t, nil
}

// MaxKeyName is the longest key name, in characters.
const MaxKeyName = 100

// KeyRequest describes a key to create.
type KeyRequest struct {
	TeamID     int64
	Name       string
	Permission store.Permission // FULL unless set
	DomainID   int64
}

// CreateKey makes a key and returns the full key: it is shown once and stored only hashed.
func (a *Admin) CreateKey(ctx context.Context, r KeyRequest) (string, store.APIKey, error) {
	if r.Permission == "" {
		r.Permission = store.PermissionFull
	}
	if r.Permission != store.PermissionFull && r.Permission != store.PermissionSending {
		return "", store.APIKey{}, fault.Field("permission", "must be FULL or SENDING")
	}
	if n := utf8.RuneCountInString(r.Name); n > MaxKeyName {
		return "", store.APIKey{}, fault.Field("name", "at most %d characters, not %d", MaxKeyName, n)
	}
	if _, err := a.Store.GetTeam(ctx, r.TeamID); err != nil {
		return "", store.APIKey{}, fmt.Errorf("team %d: %w", r.TeamID, err)
	}
	if r.DomainID != 0 {
		if _, err := a.Store.GetDomain(ctx, r.TeamID, r.DomainID); err != nil {
			return "", store.APIKey{}, fmt.Errorf("domain %d of team %d (see its domains with GET /api/v1/domains): %w", r.DomainID, r.TeamID, err)
		}
	}
	for range 5 { // a key id collision is astronomically rare; retry it anyway
		full, id, err := auth.Generate()
		if err != nil {
			return "", store.APIKey{}, err
		}
		k, err := a.store(ctx, r, full, id)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		return full, k, err
	}
	return "", store.APIKey{}, errors.New("could not allocate a key id")
}

func (a *Admin) store(ctx context.Context, r KeyRequest, full, id string) (store.APIKey, error) {
	_, secret, err := auth.Parse(full)
	if err != nil {
		return store.APIKey{}, err
	}
	k := store.APIKey{ID: id, TeamID: r.TeamID, Name: r.Name, SecretHash: auth.Hash(secret),
		Permission: r.Permission, DomainID: r.DomainID, CreatedAt: a.Now().UTC()}
	if err := a.Store.CreateAPIKey(ctx, k); err != nil {
		return store.APIKey{}, err
	}
	return k, nil
}

// RevokeKey deletes a key of the team.
func (a *Admin) RevokeKey(ctx context.Context, teamID int64, id string) error {
	if err := a.Store.DeleteAPIKey(ctx, teamID, id); errors.Is(err, store.ErrNotFound) {
		return notFound{fmt.Sprintf("team %d has no key %s (mailroom-admin key list -team %d)", teamID, id, teamID)}
	} else if err != nil {
		return fmt.Errorf("key %s of team %d: %w", id, teamID, err)
	}
	return nil
}

// Bootstrap makes sure a team exists and can be used. With key set (BOOTSTRAP_API_KEY) it makes
// sure a team holds that FULL key, creating the team and key when missing. Without key, it
// creates a first team and key only when there is no team at all, and returns the new key
// ("" when nothing was created).
func (a *Admin) Bootstrap(ctx context.Context, key string) (created string, teamID int64, err error) {
	if key != "" {
		id, secret, err := auth.Parse(key)
		if err != nil {
			return "", 0, fmt.Errorf("BOOTSTRAP_API_KEY must look like us_<10 [0-9a-z]>_<32 hex>")
		}
		existing, err := a.Store.GetAPIKey(ctx, id)
		if err == nil {
			if existing.SecretHash != auth.Hash(secret) {
				return "", 0, fmt.Errorf("BOOTSTRAP_API_KEY: key id %s exists with another secret", id)
			}
			return "", existing.TeamID, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return "", 0, err
		}
		t, err := a.firstTeam(ctx)
		if err != nil {
			return "", 0, err
		}
		_, err = a.store(ctx, KeyRequest{TeamID: t.ID, Name: "bootstrap", Permission: store.PermissionFull}, key, id)
		return "", t.ID, err
	}
	teams, err := a.Store.ListTeams(ctx)
	if err != nil {
		return "", 0, err
	}
	if len(teams) > 0 {
		return "", teams[0].ID, nil
	}
	t, err := a.CreateTeam(ctx, "Default team")
	if err != nil {
		return "", 0, err
	}
	full, _, err := a.CreateKey(ctx, KeyRequest{TeamID: t.ID, Name: "default"})
	return full, t.ID, err
}

// firstTeam returns the oldest team, creating one when there is none.
func (a *Admin) firstTeam(ctx context.Context) (store.Team, error) {
	teams, err := a.Store.ListTeams(ctx)
	if err != nil {
		return store.Team{}, err
	}
	if len(teams) > 0 {
		return teams[0], nil
	}
	return a.CreateTeam(ctx, "Default team")
}

// notFound is store.ErrNotFound with a message for people.
type notFound struct{ msg string }

func (e notFound) Error() string { return e.msg }
func (e notFound) Unwrap() error { return store.ErrNotFound }
