package campaign

import (
	"crypto/rand"
	"errors"
)

// The sealed values keyed from the keyring (unsubscribe tokens, webhook secrets, the console's
// sessions on AWS) share one shape: a prefix naming the format and the key, then
// base64url(nonce ‖ AES-256-GCM ciphertext), the prefix authenticated with it.

// Errors of Open.
var (
	ErrNotSealed = errors.New("not a sealed value")             // not base64, or too short
	ErrForged    = errors.New("the sealed value does not open") // wrong key, or altered
)

// Seal seals plain under purpose's cipher of key (KeyAEAD), with a random nonce, after prefix.
func Seal(purpose string, key []byte, prefix string, plain []byte) (string, error) {
	g, err := KeyAEAD(purpose, key)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, g.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return prefix + b64.EncodeToString(g.Seal(nonce, nonce, plain, []byte(prefix))), nil
}

// Open returns what was sealed as prefix+body (by Seal, or a link's Token).
func Open(purpose string, key []byte, prefix, body string) ([]byte, error) {
	g, err := KeyAEAD(purpose, key)
	if err != nil {
		return nil, err
	}
	b, err := b64.DecodeString(body)
	if err != nil || len(b) < g.NonceSize() {
		return nil, ErrNotSealed
	}
	plain, err := g.Open(nil, b[:g.NonceSize()], b[g.NonceSize():], []byte(prefix))
	if err != nil {
		return nil, ErrForged
	}
	return plain, nil
}
