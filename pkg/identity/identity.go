// Package identity declares the port for sending identities (domains) at the mail provider.
// Adapters: pkg/identity/local (no DNS to check: verified at once) and pkg/identity/ses (SES v2
// email identities with BYODKIM).
package identity

import "context"

// Registration is what the provider needs to create a domain identity with our own DKIM key.
type Registration struct {
	Domain     string
	Region     string
	Selector   string
	PrivateKey string // base64 DER PKCS#1, no PEM armour (the SES BYODKIM format)
	MailFrom   string // custom MAIL FROM domain, e.g. mail.example.com
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
	// Create registers the domain; creating one that exists is not an error.
	Create(ctx context.Context, r Registration) (Status, error)
	Get(ctx context.Context, domain string) (Status, error)
	// Delete removes the identity; deleting one that does not exist is not an error.
	Delete(ctx context.Context, domain string) error
}
