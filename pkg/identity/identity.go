// Package identity declares the port for sending identities (domains) at the mail provider.
// Adapters: pkg/identity/local (no DNS to check: verified at once) and pkg/identity/ses (SES v2
// email identities with BYODKIM).
package identity

import (
	"context"
	"errors"
)

// ErrTaken is the answer to registering a domain whose identity the provider's account already
// has under another owner (another team, another deployment, or made outside Mailroom): taking
// it over would let the caller send as that domain, and delete it from under its owner.
var ErrTaken = errors.New("identity: the domain is registered by another owner")

// Registration is what the provider needs to create a domain identity with our own DKIM key.
type Registration struct {
	Domain     string
	Region     string
	Selector   string
	PrivateKey string // base64 DER PKCS#1, no PEM armour (the SES BYODKIM format)
	MailFrom   string // custom MAIL FROM domain, e.g. mail.example.com
	// Owner names who registers it ("team-7"); the adapter records it with the identity.
	Owner string
}

// Status is the provider's view of a domain identity. Values use the domain status names of
// the API (NOT_STARTED, PENDING, SUCCESS, FAILED, TEMPORARY_FAILURE).
type Status struct {
	Status            string
	DKIMStatus        string
	SPFStatus         string // MAIL FROM status
	VerificationError string
}

// Identities manages domain identities at the provider.
type Identities interface {
	// Create registers the domain; creating one that exists under the same owner is not an
	// error, one that exists under another owner (or none recorded) is ErrTaken.
	Create(ctx context.Context, r Registration) (Status, error)
	Get(ctx context.Context, domain string) (Status, error)
	// Delete removes the owner's identity; deleting one that does not exist is not an error,
	// and one of another owner is left as it is (not an error either: the caller's domain is
	// gone from its side).
	Delete(ctx context.Context, domain, owner string) error
}
