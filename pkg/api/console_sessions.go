package api

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/mailroom/mailroom/pkg/campaign"
)

// The console's sessions. A local server keeps them in memory: the browser holds a random id.
// A console served by many processes (a Lambda function's instances, behind API Gateway) has
// no memory they share, so there the browser holds the session itself, sealed: the API key
// and the session's end, encrypted and authenticated (AES-256-GCM) under a key derived from
// the deployment's keyring, which every instance reads. Either way the key is authenticated
// again on every request, so a revoked key ends its sessions (at once here; on AWS within the
// functions' key cache, AUTH_CACHE_TTL); a sealed session's sign-out clears the browser's
// cookie, and a copy of the cookie otherwise works until the session expires.

// sealedVersion starts every sealed session: "s1.<key id>.<nonce and ciphertext>".
const sealedVersion = "s1."

// sealedSession is what a sealed session holds.
type sealedSession struct {
	Key     string `json:"k"`
	Expires int64  `json:"e"` // Unix seconds
}

// sessionPurpose keys the sessions' cipher (campaign.KeyAEAD).
const sessionPurpose = "mailroom console session v1"

// newSession starts a session for key, a key of team, and returns the cookie's value.
func (c *Console) newSession(ctx context.Context, team int64, key string) (string, error) {
	now := time.Now()
	if c.Sealed == nil {
		var b [24]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		c.mu.Lock()
		defer c.mu.Unlock()
		// Ended sessions go here, not only when their cookie comes back. Past the team's cap
		// its oldest session goes, past the whole cap the oldest of all (refusing instead
		// would let one key lock every other out): a team signing in again and again ends
		// only its own sessions, unless TeamSessions times the teams exceeds MaxSessions.
		oldest, oldestOfTeam, ofTeam := "", "", 0
		for sid, s := range c.sessions {
			if now.After(s.expires) {
				delete(c.sessions, sid)
				continue
			}
			if oldest == "" || s.expires.Before(c.sessions[oldest].expires) {
				oldest = sid
			}
			if s.team == team {
				ofTeam++
				if oldestOfTeam == "" || s.expires.Before(c.sessions[oldestOfTeam].expires) {
					oldestOfTeam = sid
				}
			}
		}
		switch {
		case ofTeam >= max(c.TeamSessions, 1):
			delete(c.sessions, oldestOfTeam)
		case len(c.sessions) >= max(c.MaxSessions, 1):
			delete(c.sessions, oldest)
		}
		c.sessions[id] = consoleSession{team: team, key: key, expires: now.Add(sessionTTL)}
		return id, nil
	}
	ring, err := c.Sealed.Ring(ctx)
	if err != nil {
		return "", err
	}
	secret, ok := ring.Keys[ring.Current]
	if !ok {
		return "", errors.New("console: no key to seal sessions with")
	}
	plain, err := json.Marshal(sealedSession{Key: key, Expires: now.Add(sessionTTL).Unix()})
	if err != nil {
		return "", err
	}
	return campaign.Seal(sessionPurpose, secret, sealedVersion+ring.Current+".", plain)
}

// sessionKey is the API key of the session id names, while it lasts.
func (c *Console) sessionKey(ctx context.Context, id string) (string, bool) {
	if c.Sealed == nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		s, ok := c.sessions[id]
		if ok && time.Now().After(s.expires) {
			delete(c.sessions, id)
			return "", false
		}
		return s.key, ok
	}
	secret, ok := c.sealingKey(ctx, id)
	if !ok {
		return "", false
	}
	cut := strings.LastIndexByte(id, '.') + 1
	plain, err := campaign.Open(sessionPurpose, secret, id[:cut], id[cut:])
	if err != nil {
		return "", false
	}
	var s sealedSession
	if json.Unmarshal(plain, &s) != nil || s.Key == "" || time.Now().After(time.Unix(s.Expires, 0)) {
		return "", false
	}
	return s.Key, true
}

// sealingKey is the keyring's key a sealed session names (ok false for a value not shaped as
// one, or a key no longer in the ring).
func (c *Console) sealingKey(ctx context.Context, id string) ([]byte, bool) {
	rest, ok := strings.CutPrefix(id, sealedVersion)
	kid, _, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return nil, false
	}
	// A key rotated in since this process read the ring is read again (as for links).
	secret, ok, err := c.Sealed.Key(ctx, kid)
	return secret, ok && err == nil
}

// endSession forgets a session kept in memory (a sealed one ends with its cookie).
func (c *Console) endSession(id string) {
	if c.Sealed == nil {
		c.mu.Lock()
		delete(c.sessions, id)
		c.mu.Unlock()
	}
}

// csrfToken is the token a session's forms carry: an HMAC of its id, under this process's
// secret, or for a sealed session under a key derived from the keyring's key that sealed it
// (which every instance holds).
func (c *Console) csrfToken(ctx context.Context, id string) string {
	secret := c.secret
	if c.Sealed != nil {
		k, ok := c.sealingKey(ctx, id)
		if !ok {
			return ""
		}
		sum := sha256.Sum256(append([]byte("mailroom console csrf v1\x00"), k...))
		secret = sum[:]
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil))
}
