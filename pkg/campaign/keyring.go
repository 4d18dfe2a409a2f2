package campaign

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Keyring holds the unsubscribe keys: Current signs new links, and every key in Keys checks
// them, so a rotation (a new current key, the old ones kept) leaves the links already
// delivered working. The secret's text is either a single key (the string itself: what
// Mailroom generated before key ids, and what DATA_DIR/unsubscribe.key holds locally) or
// the JSON object {"current":"<id>","keys":{"<id>":"<key>",...}} that RotateKeyring writes.
type Keyring struct {
	Current string            // the id of the key that signs; "" for a single key
	Keys    map[string][]byte // by id
}

// Limits of a keyring: what is checked on every link, and what fits a token.
const (
	MaxKeys      = 10
	MinKeyLength = 32
)

// keyID matches a key's id in a keyring, compiled at its first use (every function links this
// package; most never check a link).
var keyID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,16}$`) })

// SingleKey is the keyring of one key without an id (its links are the "2." tokens).
func SingleKey(secret string) Keyring {
	if secret == "" {
		return Keyring{}
	}
	return Keyring{Keys: map[string][]byte{"": []byte(secret)}}
}

// ParseKeyring reads a secret's text (see Keyring). A single key is taken as it is, whatever
// its length (links made with it are in mailboxes); keys of a keyring have at least 32
// characters. The error names what is wrong, never a key nor anything that could be one.
func ParseKeyring(text string) (Keyring, error) {
	if !strings.HasPrefix(strings.TrimSpace(text), "{") {
		if strings.TrimSpace(text) == "" {
			return Keyring{}, errors.New("unsubscribe secret: empty")
		}
		return SingleKey(text), nil
	}
	var doc struct {
		Current string            `json:"current"`
		Keys    map[string]string `json:"keys"`
	}
	if err := json.Unmarshal([]byte(text), &doc); err != nil {
		return Keyring{}, errors.New(`unsubscribe secret: not a key nor {"current":"<id>","keys":{...}}`)
	}
	if len(doc.Keys) == 0 || len(doc.Keys) > MaxKeys {
		return Keyring{}, fmt.Errorf("unsubscribe secret: %d keys, want 1 to %d", len(doc.Keys), MaxKeys)
	}
	k := Keyring{Current: doc.Current, Keys: map[string][]byte{}}
	for id, v := range doc.Keys {
		if id != "" && !keyID().MatchString(id) {
			return Keyring{}, fmt.Errorf("unsubscribe secret: a key id of %d characters: want 1 to 16 letters, digits, - or _", len(id))
		}
		if len(v) < MinKeyLength {
			return Keyring{}, fmt.Errorf("unsubscribe secret: a key of %d characters, want at least %d", len(v), MinKeyLength)
		}
		k.Keys[id] = []byte(v)
	}
	if _, ok := k.Keys[k.Current]; !ok {
		return Keyring{}, errors.New("unsubscribe secret: the current key id is not one of keys")
	}
	return k, nil
}

// Empty: no key, so nothing can be signed or checked.
func (k Keyring) Empty() bool { return len(k.Keys) == 0 }

// String describes the keyring without its keys (what fmt and logs show).
func (k Keyring) String() string {
	return fmt.Sprintf("keyring(current %q, %d keys)", k.Current, len(k.Keys))
}

// LogValue keeps the keys out of structured logs.
func (k Keyring) LogValue() slog.Value { return slog.StringValue(k.String()) }

// Text is the secret's text for the keyring (a single key stays a plain string).
func (k Keyring) Text() string {
	if k.Current == "" && len(k.Keys) == 1 {
		return string(k.Keys[""])
	}
	doc := struct {
		Current string            `json:"current"`
		Keys    map[string]string `json:"keys"`
	}{Current: k.Current, Keys: map[string]string{}}
	for id, v := range k.Keys {
		doc.Keys[id] = string(v)
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

// RotateKeyring adds a new random key and makes it the current one. The oldest keys beyond
// MaxKeys are dropped (a single key without an id is kept as id "0"); the links they signed
// stop working then. It returns the new key's id.
func RotateKeyring(text string) (string, string, error) {
	k, err := ParseKeyring(text)
	if err != nil {
		return "", "", err
	}
	if legacy, ok := k.Keys[""]; ok && len(k.Keys) == 1 {
		k.Keys = map[string][]byte{"0": legacy}
	}
	ids := slices.Sorted(maps.Keys(k.Keys))
	next := 1
	for _, id := range ids {
		if n, err := strconv.Atoi(id); err == nil && n >= next {
			next = n + 1
		}
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", "", err
	}
	id := fmt.Sprint(next)
	if !keyID().MatchString(id) {
		return "", "", errors.New("unsubscribe secret: no key id left after the highest one; renumber the keys")
	}
	k.Keys[id] = []byte(hex.EncodeToString(raw[:]))
	k.Current = id
	for len(k.Keys) > MaxKeys {
		delete(k.Keys, k.oldest())
	}
	return k.Text(), id, nil
}

// oldest is the key to drop first: one whose id is not a number, else the lowest number;
// never the current key.
func (k Keyring) oldest() string {
	best, bestN := "", -1
	for _, id := range slices.Sorted(maps.Keys(k.Keys)) {
		if id == k.Current {
			continue
		}
		n, err := strconv.Atoi(id)
		if err != nil {
			return id
		}
		if bestN < 0 || n < bestN {
			best, bestN = id, n
		}
	}
	return best
}

// KeySource reads the keyring from where it is kept (on AWS, Secrets Manager): at its first use
// in the process, again when it is RefreshEvery old (so a warm function follows a rotation,
// and stops accepting a key removed from the secret), and at once when a link names a key the
// ring lacks, a key rotated in since, though at most once per ReloadEvery so that made-up key
// ids cannot make callers flood the secret store. A failed read keeps the ring read before.
type KeySource struct {
	Load func(context.Context) (Keyring, error)
	Now  func() time.Time

	mu     sync.Mutex
	ring   Keyring
	loaded time.Time // of the ring; zero before the first read
}

// How old the ring may get, and how soon after a read an unknown key id reads it again.
const (
	RefreshEvery = 5 * time.Minute
	ReloadEvery  = 5 * time.Second
)

func (r *KeySource) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Ring returns the keyring, reading it if it never was or is RefreshEvery old. A read that
// fails is an error before the first success, and the ring read before after it.
func (r *KeySource) Ring(ctx context.Context) (Keyring, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if !r.loaded.IsZero() && now.Sub(r.loaded) < RefreshEvery {
		return r.ring, nil
	}
	if err := r.read(ctx, now); err != nil && r.loaded.IsZero() {
		return Keyring{}, err
	}
	return r.ring, nil
}

// read loads the ring (the caller holds mu).
func (r *KeySource) read(ctx context.Context, now time.Time) error {
	ring, err := r.Load(ctx)
	if err != nil {
		return err
	}
	r.ring, r.loaded = ring, now
	return nil
}

// Set makes ring the one read now: a process that rotated the keyring itself uses the new
// key at once.
func (r *KeySource) Set(ring Keyring) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ring, r.loaded = ring, r.now()
}

// cached is the ring read so far (empty before the first Ring).
func (r *KeySource) cached() Keyring {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ring
}

// key returns the key of id, reading the ring again if it does not have it and the last read
// is ReloadEvery old. An error is a failed read, not an unknown key.
func (r *KeySource) key(ctx context.Context, id string) ([]byte, bool, error) {
	if _, err := r.Ring(ctx); err != nil {
		return nil, false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := r.ring.Keys[id]; ok {
		return k, true, nil
	}
	now := r.now()
	if now.Sub(r.loaded) < ReloadEvery {
		return nil, false, nil
	}
	if err := r.read(ctx, now); err != nil {
		return nil, false, err
	}
	k, ok := r.ring.Keys[id]
	return k, ok, nil
}

// KeyringFile returns the keyring kept in the file at path, after making one random key there
// when the file is missing or too short to hold a key (32 hex characters at least). The
// local server keeps its keyring in DATA_DIR/unsubscribe.key, and the sam local set-up its own
// under .sam-local, so that links signed in one run still work in the next.
func KeyringFile(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 32 {
		return strings.TrimSpace(string(b)), nil
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	key := hex.EncodeToString(raw[:])
	return key, os.WriteFile(path, []byte(key), 0o600)
}
