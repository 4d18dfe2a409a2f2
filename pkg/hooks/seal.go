package hooks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mailroom/mailroom/pkg/campaign"
)

// Sealer keeps webhook secrets out of the table in clear: each is sealed with AES-256-GCM under
// a key derived from the deployment's keyring (the unsubscribe secret, in Secrets Manager on
// AWS), so a table dump alone reveals none. A sealed secret names the key that sealed it;
// Service.Attempt seals it again under the current key when that changed, so a secret outlives
// the ten keys a keyring keeps.
type Sealer struct {
	Ring func(context.Context) (campaign.Keyring, error)
}

const sealVersion = "1."

// sealPurpose keys the webhook secrets' cipher (campaign.KeyAEAD).
const sealPurpose = "mailroom webhook secret v1"

// Seal seals a secret under the ring's current key: "1.<key id>.<nonce and ciphertext>".
func (s Sealer) Seal(ctx context.Context, secret string) (string, error) {
	ring, err := s.Ring(ctx)
	if err != nil {
		return "", err
	}
	key, ok := ring.Keys[ring.Current]
	if !ok {
		return "", errors.New("hooks: no key to seal webhook secrets with")
	}
	return campaign.Seal(sealPurpose, key, sealVersion+ring.Current+".", []byte(secret))
}

// Current reports whether sealed was sealed under the ring's current key.
func (s Sealer) Current(ctx context.Context, sealed string) bool {
	ring, err := s.Ring(ctx)
	return err == nil && strings.HasPrefix(sealed, sealVersion+ring.Current+".")
}

// Open returns the secret of a sealed one.
func (s Sealer) Open(ctx context.Context, sealed string) (string, error) {
	rest, ok := strings.CutPrefix(sealed, sealVersion)
	id, body, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return "", errors.New("hooks: not a sealed webhook secret")
	}
	ring, err := s.Ring(ctx)
	if err != nil {
		return "", err
	}
	key, ok := ring.Keys[id]
	if !ok && id == "" {
		key, ok = ring.Keys["0"] // a single key becomes key 0 at the first rotation
	}
	if !ok {
		return "", fmt.Errorf("hooks: the key that sealed a webhook secret is no longer in the keyring")
	}
	plain, err := campaign.Open(sealPurpose, key, sealVersion+id+".", body)
	switch {
	case errors.Is(err, campaign.ErrNotSealed):
		return "", errors.New("hooks: not a sealed webhook secret")
	case err != nil:
		return "", errors.New("hooks: a webhook secret does not open")
	}
	return string(plain), nil
}
