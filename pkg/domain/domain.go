// Package domain manages a team's sending domains: registering them with the provider with our
// own DKIM key (BYODKIM), the DNS records the user publishes, verification, and the lookup the
// send path uses to check a From address.
package domain

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/identity"
	"github.com/mailroom/mailroom/pkg/store"
)

// Store is what domains need from persistence.
type Store interface {
	NextID(ctx context.Context, sequence string) (int64, error)
	CreateDomain(ctx context.Context, d store.Domain) error
	GetDomain(ctx context.Context, teamID, id int64) (store.Domain, error)
	ListDomains(ctx context.Context, teamID int64) ([]store.Domain, error)
	UpdateDomain(ctx context.Context, teamID, id int64, fn func(*store.Domain) error) (store.Domain, error)
	DeleteDomain(ctx context.Context, teamID, id int64) error
}

// DefaultRegion is used when a create request names none.
const DefaultRegion = "us-east-1"

// Selector is the DKIM selector of every domain: one key per domain, so one name is enough.
const Selector = "mailroom"

var (
	domainName = regexp.MustCompile(`^(?i)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`)
	regionName = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d$`)
)

// Service is the domain use cases.
type Service struct {
	Store      Store
	Identities identity.Identities
	Now        func() time.Time
	// KeyBits is the RSA size of new DKIM keys (2048 unless set; tests use less for speed).
	KeyBits int
	// OnChange is told of every change so caches (the Directory) can drop the team's entry.
	OnChange func(teamID int64)
}

// Key is a freshly generated DKIM key pair in the forms DNS and SES want.
type Key struct {
	Public  string // base64 DER SubjectPublicKeyInfo: the p= of the DKIM TXT record
	Private string // base64 DER PKCS#1: SES BYODKIM's DomainSigningPrivateKey
}

// NewKey generates an RSA DKIM key pair.
func NewKey(bits int) (Key, error) {
	if bits == 0 {
		bits = 2048
	}
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		return Key{}, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return Key{}, err
	}
	return Key{
		Public:  base64.StdEncoding.EncodeToString(pub),
		Private: base64.StdEncoding.EncodeToString(x509.MarshalPKCS1PrivateKey(k)),
	}, nil
}

// Records returns the DNS records for a domain, all with the given status (DMARC is only
// recommended and does not take part in verification, so it starts NOT_STARTED).
func Records(region, publicKey, status string) []store.DNSRecord {
	return []store.DNSRecord{
		{Type: "MX", Name: "mail", Value: "feedback-smtp." + region + ".amazonses.com", TTL: "Auto", Priority: "10", Status: status},
		{Type: "TXT", Name: Selector + "._domainkey", Value: "p=" + publicKey, TTL: "Auto", Status: status},
		{Type: "TXT", Name: "mail", Value: "v=spf1 include:amazonses.com ~all", TTL: "Auto", Status: status},
		{Type: "TXT", Name: "_dmarc", Value: "v=DMARC1; p=none;", TTL: "Auto", Status: store.DomainNotStarted, Recommended: true},
	}
}

// Create validates the name and region, registers the domain at the provider and stores it.
func (s *Service) Create(ctx context.Context, teamID int64, name, region string) (store.Domain, error) {
	name = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(name), "."))
	if name == "" {
		return store.Domain{}, fault.Field("name", "is required")
	}
	if len(name) > 253 || !domainName.MatchString(name) {
		return store.Domain{}, fault.Field("name", "%q is not a valid domain name", name)
	}
	if region == "" {
		region = DefaultRegion
	}
	if !regionName.MatchString(region) {
		return store.Domain{}, fault.Field("region", "%q is not an AWS region", region)
	}
	// A name taken in this team is refused before a key is made or the provider is called.
	existing, err := s.Store.ListDomains(ctx, teamID)
	if err != nil {
		return store.Domain{}, fmt.Errorf("list domains: %w", err)
	}
	for _, d := range existing {
		if d.Name == name {
			return store.Domain{}, fault.New(fault.Conflict, "Domain %s already exists", name)
		}
	}
	key, err := NewKey(s.KeyBits)
	if err != nil {
		return store.Domain{}, fmt.Errorf("dkim key: %w", err)
	}
	id, err := s.Store.NextID(ctx, "domain")
	if err != nil {
		return store.Domain{}, fmt.Errorf("domain id: %w", err)
	}
	now := s.Now().UTC()
	d := store.Domain{
		ID: id, TeamID: teamID, Name: name, Region: region, Status: store.DomainPending,
		Selector: Selector, PublicKey: key.Public, PrivateKey: key.Private,
		IsVerifying: true, CreatedAt: now, UpdatedAt: now,
	}
	st, err := s.Identities.Create(ctx, identity.Registration{
		Domain: name, Region: region, Selector: Selector, PrivateKey: key.Private, MailFrom: "mail." + name,
	})
	if err != nil {
		return store.Domain{}, fmt.Errorf("register identity: %w", err)
	}
	apply(&d, st, now)
	// The unique name is enforced again here by a conditional write: two concurrent creates
	// may both pass the check above, only one is stored.
	if err := s.Store.CreateDomain(ctx, d); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return store.Domain{}, fault.New(fault.Conflict, "Domain %s already exists", name)
		}
		return store.Domain{}, fmt.Errorf("store domain: %w", err)
	}
	s.changed(teamID)
	return d, nil
}

// apply copies a provider status onto the domain and its records.
func apply(d *store.Domain, st identity.Status, now time.Time) {
	d.Status = orDefault(st.Status, store.DomainPending)
	d.DKIMStatus = st.DKIMStatus
	d.SPFDetails = st.SPFStatus
	d.VerificationError = st.VerificationError
	d.IsVerifying = d.Status == store.DomainPending
	t := now
	d.LastCheckedTime = &t
	d.UpdatedAt = now
	d.DNSRecords = Records(d.Region, d.PublicKey, d.Status)
	if st.DKIMStatus != "" {
		d.DNSRecords[1].Status = st.DKIMStatus
	}
	if st.SPFStatus != "" {
		d.DNSRecords[0].Status = st.SPFStatus
		d.DNSRecords[2].Status = st.SPFStatus
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (s *Service) changed(teamID int64) {
	if s.OnChange != nil {
		s.OnChange(teamID)
	}
}

// List returns the team's domains; a key restricted to one domain sees only that one.
func (s *Service) List(ctx context.Context, teamID, onlyID int64) ([]store.Domain, error) {
	all, err := s.Store.ListDomains(ctx, teamID)
	if err != nil {
		return nil, err
	}
	if onlyID == 0 {
		return all, nil
	}
	out := all[:0]
	for _, d := range all {
		if d.ID == onlyID {
			out = append(out, d)
		}
	}
	return out, nil
}

// Get reads one domain of the team.
func (s *Service) Get(ctx context.Context, teamID, id int64) (store.Domain, error) {
	d, err := s.Store.GetDomain(ctx, teamID, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Domain{}, fault.NotFoundf("Domain not found")
	}
	return d, err
}

// Verify asks the provider for the current status and stores it.
func (s *Service) Verify(ctx context.Context, teamID, id int64) (store.Domain, error) {
	d, err := s.Get(ctx, teamID, id)
	if err != nil {
		return store.Domain{}, err
	}
	st, err := s.Identities.Get(ctx, d.Name)
	if err != nil {
		return store.Domain{}, fmt.Errorf("identity status: %w", err)
	}
	d, err = s.Store.UpdateDomain(ctx, teamID, id, func(d *store.Domain) error {
		apply(d, st, s.Now().UTC())
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return store.Domain{}, fault.NotFoundf("Domain not found")
	}
	if err != nil {
		return store.Domain{}, err
	}
	s.changed(teamID)
	return d, nil
}

// Delete removes the identity at the provider, then the domain.
func (s *Service) Delete(ctx context.Context, teamID, id int64) (store.Domain, error) {
	d, err := s.Get(ctx, teamID, id)
	if err != nil {
		return store.Domain{}, err
	}
	if err := s.Identities.Delete(ctx, d.Name); err != nil {
		return store.Domain{}, fmt.Errorf("delete identity: %w", err)
	}
	if err := s.Store.DeleteDomain(ctx, teamID, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return store.Domain{}, fault.NotFoundf("Domain not found")
		}
		return store.Domain{}, err
	}
	s.changed(teamID)
	return d, nil
}

// Lister is what the Directory reads.
type Lister interface {
	ListDomains(ctx context.Context, teamID int64) ([]store.Domain, error)
}

// Directory answers "which domain of this team is this From address on" for the send path,
// caching each team's domain list for TTL so a send costs no read. A cached miss is re-read at
// most once per second (as is a cached domain not yet verified), so a domain just created or
// verified elsewhere is seen at once. The deliver worker
// re-checks the domain before sending, so a stale entry can never send from a deleted domain.
type Directory struct {
	Domains Lister
	TTL     time.Duration
	Now     func() time.Time

	mu    sync.Mutex
	teams map[int64]dirEntry
}

type dirEntry struct {
	domains []store.Domain
	loaded  time.Time
}

// Forget drops the team's cached list.
func (d *Directory) Forget(teamID int64) {
	d.mu.Lock()
	delete(d.teams, teamID)
	d.mu.Unlock()
}

// Lookup returns the team's domain called name (lower case), or ErrNotFound.
func (d *Directory) Lookup(ctx context.Context, teamID int64, name string) (store.Domain, error) {
	now := d.Now()
	d.mu.Lock()
	e, ok := d.teams[teamID]
	d.mu.Unlock()
	fresh := ok && now.Sub(e.loaded) < d.TTL
	if fresh {
		dom, found := find(e.domains, name)
		if found && dom.Status == store.DomainSuccess {
			return dom, nil
		}
		// Missing or not yet verified: worth one re-read, at most once a second.
		if now.Sub(e.loaded) < time.Second {
			if found {
				return dom, nil
			}
			return store.Domain{}, store.ErrNotFound
		}
	}
	list, err := d.Domains.ListDomains(ctx, teamID)
	if err != nil {
		return store.Domain{}, err
	}
	d.mu.Lock()
	if d.teams == nil {
		d.teams = map[int64]dirEntry{}
	}
	d.teams[teamID] = dirEntry{domains: list, loaded: now}
	d.mu.Unlock()
	if dom, found := find(list, name); found {
		return dom, nil
	}
	return store.Domain{}, store.ErrNotFound
}

func find(list []store.Domain, name string) (store.Domain, bool) {
	for _, d := range list {
		if d.Name == name {
			return d, true
		}
	}
	return store.Domain{}, false
}
