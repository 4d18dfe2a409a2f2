// Package auth parses and checks API keys of the form us_<id>_<secret>: <id> is 10 characters of
// [0-9a-z] and names the stored key, <secret> is 32 hex characters (128 random bits) of which only
// a SHA-256 hash is stored. With that much entropy a fast hash and a constant-time compare are
// right; a slow KDF on every request would only cost latency.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
)

const (
	prefix    = "us_"
	idLen     = 10
	secretLen = 32
	idChars   = "0123456789abcdefghijklmnopqrstuvwxyz"
)

// Principal is who is calling: a team, through one key, with its permission and domain scope.
type Principal struct {
	TeamID     int64
	KeyID      string
	Permission store.Permission
	DomainID   int64 // 0: every domain of the team
	// RateLimit is the team's API requests per second: DefaultRateLimit (the server's
	// API_RATE_LIMIT), 0 for none.
	RateLimit int64
	// DailyEmailLimit caps the team's emails per UTC day (0: none).
	DailyEmailLimit int64
}

// DefaultRateLimit is a Principal's RateLimit when its team has no limit of its own.
const DefaultRateLimit = -1

// CanManage reports whether the key may do more than send and read emails.
func (p Principal) CanManage() bool { return p.Permission == store.PermissionFull }

// Parse splits a full key into its id and secret, checking the format.
func Parse(key string) (id, secret string, err error) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || len(rest) != idLen+1+secretLen || rest[idLen] != '_' {
		return "", "", errors.New("malformed key")
	}
	id, secret = rest[:idLen], rest[idLen+1:]
	if !IsKeyID(id) {
		return "", "", errors.New("malformed key")
	}
	// One spelling of a key: the lower-case hex it was issued in (an upper-case copy is not
	// the same key).
	if _, err := hex.DecodeString(secret); err != nil || strings.ToLower(secret) != secret {
		return "", "", errors.New("malformed key")
	}
	return id, secret, nil
}

// IsKeyID reports whether id has the form of a key's id.
func IsKeyID(id string) bool {
	if len(id) != idLen {
		return false
	}
	for _, c := range id {
		if !strings.ContainsRune(idChars, c) {
			return false
		}
	}
	return true
}

// Hash is the stored form of a secret.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(secret)))
	return hex.EncodeToString(sum[:])
}

// Generate makes a new random key and returns the full key and its id.
func Generate() (key, id string, err error) {
	b := make([]byte, idLen)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	idb := make([]byte, idLen)
	for i, v := range b {
		idb[i] = idChars[int(v)%len(idChars)]
	}
	s := make([]byte, secretLen/2)
	if _, err := rand.Read(s); err != nil {
		return "", "", err
	}
	id = string(idb)
	return prefix + id + "_" + hex.EncodeToString(s), id, nil
}

// Keys is what the authenticator needs from the store: the key, and its team's limits.
type Keys interface {
	GetAPIKey(ctx context.Context, id string) (store.APIKey, error)
	GetTeam(ctx context.Context, id int64) (store.Team, error)
}

// Authenticator checks bearer tokens against stored keys, caching each stored key for TTL so a
// warm Lambda does not read the table on every request. A revoked key therefore keeps working
// for at most TTL in processes that had it cached.
type Authenticator struct {
	keys Keys
	ttl  time.Duration
	now  func() time.Time

	mu    sync.Mutex
	cache map[string]cached
}

// cached holds a found key only: caching misses would let random ids grow the map without bound.
type cached struct {
	key     store.APIKey
	team    store.Team
	expires time.Time
}

// NewAuthenticator returns an Authenticator; ttl 0 disables the cache.
func NewAuthenticator(keys Keys, ttl time.Duration) *Authenticator {
	return &Authenticator{keys: keys, ttl: ttl, now: time.Now, cache: map[string]cached{}}
}

// Forget drops a key from the cache (after a local revoke).
func (a *Authenticator) Forget(id string) {
	a.mu.Lock()
	delete(a.cache, id)
	a.mu.Unlock()
}

// ForgetTeam drops a team's keys from the cache (after a local change of its limits, which
// the cache holds with each key).
func (a *Authenticator) ForgetTeam(teamID int64) {
	a.mu.Lock()
	for id, c := range a.cache {
		if c.key.TeamID == teamID {
			delete(a.cache, id)
		}
	}
	a.mu.Unlock()
}

// Authenticate checks an Authorization header value; a request an authorizer already
// authenticated (WithVerdict) gets that verdict without a look-up.
func (a *Authenticator) Authenticate(ctx context.Context, header string) (Principal, error) {
	if v, ok := verdictFrom(ctx); ok {
		return v.p, v.err
	}
	// The scheme is case-insensitive (RFC 9110 §11.1), and upstream takes whatever follows the
	// first space.
	scheme, token := strings.TrimSpace(header), ""
	if i := strings.IndexAny(scheme, " \t"); i >= 0 {
		scheme, token = scheme[:i], strings.TrimSpace(scheme[i+1:])
	}
	if scheme != "" && !strings.EqualFold(scheme, "Bearer") {
		return Principal{}, fault.New(fault.Unauthorized, "Authorization must be \"Bearer <API key>\"")
	}
	if token == "" {
		return Principal{}, fault.New(fault.Unauthorized, "Missing or empty Authorization bearer token")
	}
	invalid := fault.New(fault.Forbidden, "Invalid API token")
	id, secret, err := Parse(token)
	if err != nil {
		return Principal{}, invalid
	}
	c, found, err := a.lookup(ctx, id)
	if err != nil {
		return Principal{}, err
	}
	k := c.key
	if !found || subtle.ConstantTimeCompare([]byte(k.SecretHash), []byte(Hash(secret))) != 1 {
		return Principal{}, invalid
	}
	p := Principal{TeamID: k.TeamID, KeyID: k.ID, Permission: k.Permission, DomainID: k.DomainID,
		RateLimit: DefaultRateLimit, DailyEmailLimit: c.team.DailyEmailLimit}
	if c.team.APIRateLimit != nil {
		p.RateLimit = *c.team.APIRateLimit
	}
	return p, nil
}

// lookup finds a key and its team (a key whose team is gone is not found).
func (a *Authenticator) lookup(ctx context.Context, id string) (cached, bool, error) {
	now := a.now()
	if a.ttl > 0 {
		a.mu.Lock()
		c, ok := a.cache[id]
		a.mu.Unlock()
		if ok && now.Before(c.expires) {
			return c, true, nil
		}
	}
	k, err := a.keys.GetAPIKey(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return cached{}, false, nil
	}
	if err != nil {
		return cached{}, false, fmt.Errorf("get api key: %w", err)
	}
	t, err := a.keys.GetTeam(ctx, k.TeamID)
	if errors.Is(err, store.ErrNotFound) {
		return cached{}, false, nil
	}
	if err != nil {
		return cached{}, false, fmt.Errorf("get team: %w", err)
	}
	c := cached{key: k, team: t, expires: now.Add(a.ttl)}
	if a.ttl > 0 {
		a.mu.Lock()
		a.cache[id] = c
		a.mu.Unlock()
	}
	return c, true, nil
}
