// Package local is the Identities adapter for the local run: there is no DNS to check and no
// provider to tell, so every domain is verified at once. The domain record itself (with its
// key and status) lives in the store; this adapter only remembers which domains it was told
// about, for inspection.
package local

import (
	"context"
	"slices"
	"sync"

	"github.com/mailroom/mailroom/pkg/identity"
)

// verified is what every domain reports locally.
var verified = identity.Status{Status: "SUCCESS", DKIMStatus: "SUCCESS", SPFStatus: "SUCCESS"}

// Identities is the local adapter. The zero value is not usable; call New.
type Identities struct {
	mu      sync.Mutex
	domains map[string]string // domain → owner
}

var _ identity.Identities = (*Identities)(nil)

// New returns an empty set of identities.
func New() *Identities {
	return &Identities{domains: map[string]string{}}
}

// Create remembers the domain and reports it verified.
func (l *Identities) Create(ctx context.Context, r identity.Registration) (identity.Status, error) {
	if err := ctx.Err(); err != nil {
		return identity.Status{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if owner, ok := l.domains[r.Domain]; ok && owner != r.Owner {
		return identity.Status{}, identity.ErrTaken
	}
	l.domains[r.Domain] = r.Owner
	return verified, nil
}

// Get reports every domain verified, including ones created before a restart (the set is in
// memory only; the store is the record of which domains exist).
func (l *Identities) Get(ctx context.Context, domain string) (identity.Status, error) {
	if err := ctx.Err(); err != nil {
		return identity.Status{}, err
	}
	return verified, nil
}

// Delete forgets the owner's domain.
func (l *Identities) Delete(ctx context.Context, domain, owner string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	if l.domains[domain] == owner {
		delete(l.domains, domain)
	}
	l.mu.Unlock()
	return nil
}

// Domains lists the domains created and not deleted since New, sorted.
func (l *Identities) Domains() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.domains))
	for d := range l.domains {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}
