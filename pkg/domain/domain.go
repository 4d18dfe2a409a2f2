// Package domain manages a team's sending domains: registering them with the provider with our
// own DKIM key (BYODKIM), the DNS records the user publishes, verification, and the lookup the
// send path uses to check a From address.
package domain

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/publicsuffix"

	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/identity"
	"github.com/mailroom/mailroom/pkg/store"
)

// Store is what domains need from persistence.
type Store interface {
	store.Teams
	store.Domains
}

// DefaultRegion is used when a create request names none and the service sends from any
// region (locally); a deployment limited to its Regions takes the first of them.
const DefaultRegion = "us-east-1"

// Selector is the DKIM selector of every domain: one key per domain, so one name is enough.
const Selector = "mailroom"

var (
	// Compiled on first use, not at start: every Lambda function links this package, few
	// validate a domain, and the first one's repetition bounds make a large program.
	domainName = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?i)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`)
	})
	regionName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d$`) })
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
	// Regions, when set, are the only regions domains may be created in: the SES client of a
	// deployment works in its own region, and a domain's records must name that one.
	Regions []string
	// MaxDomains caps a team's domains (DefaultMaxDomains when 0): each is an identity in the
	// shared SES account, whose quota is 10,000 identities per region.
	MaxDomains int
}

// DefaultMaxDomains is a team's domain cap unless configured.
const DefaultMaxDomains = 100

// checkParents refuses a subdomain of a domain another team holds (own are the team's
// domains): SES lets a verified parent sign for its subdomains, so the subdomain's mail would be
// the other team's to send. The answer names no team.
func (s *Service) checkParents(ctx context.Context, own []store.Domain, name string) error {
	for parent := name; ; {
		_, rest, ok := strings.Cut(parent, ".")
		if !ok || !strings.Contains(rest, ".") {
			return nil // down to the registrable name's last label
		}
		parent = rest
		held, err := s.Store.DomainNameHeld(ctx, parent)
		if err != nil {
			return fmt.Errorf("domain name guard: %w", err)
		}
		if held && !slices.ContainsFunc(own, func(d store.Domain) bool { return d.Name == parent }) {
			return fault.New(fault.Conflict, "Domain %s is not available: a parent domain is registered already", name)
		}
	}
}

// checkCap refuses a domain past the team's cap (own are its domains). Two creates at the same
// moment may both pass it: the cap is fair use, not a quota to the unit.
func (s *Service) checkCap(own []store.Domain) error {
	limit := s.MaxDomains
	if limit <= 0 {
		limit = DefaultMaxDomains
	}
	if len(own) >= limit {
		return fault.New(fault.Forbidden, "A team may have at most %d domains: delete one first", limit)
	}
	return nil
}

// ClaimTTL is how long a domain may stay unverified: then the hourly check removes it (and its
// identity), so a name cannot be squatted by registering it and never verifying it.
const ClaimTTL = 72 * time.Hour

// Owner is the identity owner of a team's domains.
func Owner(teamID int64) string { return fmt.Sprintf("team-%d", teamID) }

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
// recommended and does not take part in verification, so it starts NOT_STARTED). Names are
// relative to the zone of the registrable domain, as upstream writes them: for a subdomain
// (Subdomain) the MAIL FROM and DKIM names end in it, and DMARC stays the organisation's.
func Records(region, publicKey, status, subdomain string) []store.DNSRecord {
	suffix := ""
	if subdomain != "" {
		suffix = "." + subdomain
	}
	return []store.DNSRecord{
		{Type: "MX", Name: "mail" + suffix, Value: "feedback-smtp." + region + ".amazonses.com", TTL: "Auto", Priority: "10", Status: status},
		{Type: "TXT", Name: Selector + "._domainkey" + suffix, Value: "p=" + publicKey, TTL: "Auto", Status: status},
		{Type: "TXT", Name: "mail" + suffix, Value: "v=spf1 include:amazonses.com ~all", TTL: "Auto", Status: status},
		{Type: "TXT", Name: "_dmarc", Value: "v=DMARC1; p=none;", TTL: "Auto", Status: store.DomainNotStarted, Recommended: true},
	}
}

// Subdomain is the part of name before its registrable domain (the public suffix and one
// label: "news" for news.example.co.uk), "" for a registrable domain itself.
func Subdomain(name string) string {
	base, err := publicsuffix.EffectiveTLDPlusOne(name)
	if err != nil || base == name {
		return ""
	}
	return strings.TrimSuffix(name, "."+base)
}

// Create validates the name and region, registers the domain at the provider and stores it.
func (s *Service) Create(ctx context.Context, teamID int64, name, region string) (store.Domain, error) {
	name = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(name), "."))
	if name == "" {
		return store.Domain{}, fault.Field("name", "is required")
	}
	if len(name) > 253 || !domainName().MatchString(name) {
		return store.Domain{}, fault.Field("name", "%q is not a valid domain name", name)
	}
	if suffix, _ := publicsuffix.PublicSuffix(name); suffix == name {
		// Every name under it belongs to someone else (co.uk, github.io): holding it would
		// refuse them all to every other team (a subdomain of a held domain is refused).
		return store.Domain{}, fault.Field("name", "%q is a public suffix, under which others register their names: register a domain of your own", name)
	}
	if region == "" {
		region = DefaultRegion
		if len(s.Regions) > 0 {
			region = s.Regions[0] // the deployment's own: a stack in eu-west-1 sends from there
		}
	}
	if !regionName().MatchString(region) {
		return store.Domain{}, fault.Field("region", "%q is not an AWS region", region)
	}
	if len(s.Regions) > 0 && !slices.Contains(s.Regions, region) {
		return store.Domain{}, fault.Field("region", "this deployment sends from %s only", strings.Join(s.Regions, ", "))
	}
	own, err := s.Store.ListDomains(ctx, teamID)
	if err != nil {
		return store.Domain{}, fmt.Errorf("list domains: %w", err)
	}
	if err := s.checkParents(ctx, own, name); err != nil {
		return store.Domain{}, err
	}
	if err := s.checkCap(own); err != nil {
		return store.Domain{}, err
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
		// The private key goes to the provider (which keeps it and signs with it) and is not
		// stored: in the table it would be copied into the stream, backups and exports.
		Selector: Selector, PublicKey: key.Public,
		IsVerifying: true, CreatedAt: now, UpdatedAt: now,
		Subdomain: Subdomain(name), DNSRecords: Records(region, key.Public, store.DomainPending, Subdomain(name)),
	}
	// The name is reserved first, by a conditional write unique across all teams: the
	// provider's identity belongs to the whole account, so registering it for a second team
	// would hand that team the first one's verified domain (and deleting it, take it away).
	if err := s.Store.CreateDomain(ctx, d); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return store.Domain{}, fault.New(fault.Conflict, "Domain %s is already registered", name)
		}
		return store.Domain{}, fmt.Errorf("store domain: %w", err)
	}
	st, err := s.Identities.Create(ctx, identity.Registration{
		Domain: name, Region: region, Selector: Selector, PrivateKey: key.Private, MailFrom: "mail." + name,
		Owner: Owner(teamID),
	})
	if err != nil {
		// Undo our own reservation so the name can be tried again.
		if derr := s.Store.DeleteDomain(context.WithoutCancel(ctx), teamID, id); derr != nil {
			err = errors.Join(err, derr)
		}
		if errors.Is(err, identity.ErrTaken) {
			// The same answer as a name another team holds: nothing about whose it is.
			return store.Domain{}, fault.New(fault.Conflict, "Domain %s is already registered", name)
		}
		return store.Domain{}, fmt.Errorf("register identity: %w", err)
	}
	d, err = s.Store.UpdateDomain(ctx, teamID, id, func(d *store.Domain) error {
		apply(d, st, now)
		return nil
	})
	if err != nil {
		return store.Domain{}, fmt.Errorf("store domain status: %w", err)
	}
	s.changed(teamID)
	return d, nil
}

// apply copies a provider status onto the domain and its records.
func apply(d *store.Domain, st identity.Status, now time.Time) {
	d.PrivateKey = "" // a key stored by an earlier version goes at the domain's next check
	d.Status = orDefault(st.Status, store.DomainPending)
	d.DKIMStatus = st.DKIMStatus
	d.SPFDetails = st.SPFStatus
	d.VerificationError = st.VerificationError
	d.IsVerifying = d.Status == store.DomainPending
	t := now
	d.LastCheckedTime = &t
	d.UpdatedAt = now
	d.Subdomain = Subdomain(d.Name) // also for a domain stored before the field was set
	d.DNSRecords = Records(d.Region, d.PublicKey, d.Status, d.Subdomain)
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

// List returns the team's domains, newest first as upstream lists them; a key restricted to
// one domain sees only that one.
func (s *Service) List(ctx context.Context, teamID, onlyID int64) ([]store.Domain, error) {
	all, err := s.Store.ListDomains(ctx, teamID)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(all, func(a, b store.Domain) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
	})
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
	return s.update(ctx, teamID, id, func(d *store.Domain) error {
		apply(d, st, s.Now().UTC())
		return nil
	})
}

// update changes one domain of the team and tells the caches.
func (s *Service) update(ctx context.Context, teamID, id int64, fn func(*store.Domain) error) (store.Domain, error) {
	d, err := s.Store.UpdateDomain(ctx, teamID, id, fn)
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
	if err := s.Identities.Delete(ctx, d.Name, Owner(teamID)); err != nil {
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

// Tracking is a PATCH of a domain's open and click tracking; nil leaves a flag as it is.
type Tracking struct {
	Click *bool
	Open  *bool
}

// SetTracking switches open and click tracking. On SES tracking is a property of the
// configuration set a message goes through; the deliver worker picks the set that matches the
// domain's flags (see deliver.Worker.ConfigurationSet), so the switch applies to the next send.
func (s *Service) SetTracking(ctx context.Context, teamID, id int64, t Tracking) (store.Domain, error) {
	if t.Click == nil && t.Open == nil {
		return store.Domain{}, fault.Field("body", "give clickTracking and/or openTracking (true or false)")
	}
	return s.update(ctx, teamID, id, func(d *store.Domain) error {
		if t.Click != nil {
			d.ClickTracking = *t.Click
		}
		if t.Open != nil {
			d.OpenTracking = *t.Open
		}
		d.UpdatedAt = s.Now().UTC()
		return nil
	})
}

// Teams lists every team (store.Store.ListTeams); the periodic check walks them.
type Teams interface {
	ListTeams(ctx context.Context) ([]store.Team, error)
}

// RefreshAll is the periodic check: it refreshes every domain's status from the provider, so a
// domain whose DNS records appear (or disappear) changes status without anyone calling verify;
// a domain still unverified ClaimTTL after its creation is removed.
// It goes on past a failing domain and returns how many it refreshed and the errors joined.
func (s *Service) RefreshAll(ctx context.Context, teams Teams) (int, error) {
	list, err := teams.ListTeams(ctx)
	if err != nil {
		return 0, fmt.Errorf("list teams: %w", err)
	}
	n := 0
	var errs []error
	for _, t := range list {
		domains, err := s.Store.ListDomains(ctx, t.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, d := range domains {
			if ctx.Err() != nil {
				return n, ctx.Err()
			}
			if d.Status != store.DomainSuccess && s.Now().Sub(d.CreatedAt) > ClaimTTL {
				// Never verified: the claim on the name expires.
				if _, err := s.Delete(ctx, t.ID, d.ID); err != nil {
					errs = append(errs, fmt.Errorf("expire unverified domain %s: %w", d.Name, err))
				}
				continue
			}
			if _, err := s.Verify(ctx, t.ID, d.ID); err != nil {
				errs = append(errs, fmt.Errorf("domain %s: %w", d.Name, err))
				continue
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}
