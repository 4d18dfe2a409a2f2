package domain

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/identity"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/bolt"
)

// pendingIdentities never verifies a domain, and remembers which exist.
type pendingIdentities struct {
	mu     sync.Mutex
	owners map[string]string
}

func (p *pendingIdentities) Create(_ context.Context, r identity.Registration) (identity.Status, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if o, ok := p.owners[r.Domain]; ok && o != r.Owner {
		return identity.Status{}, identity.ErrTaken
	}
	p.owners[r.Domain] = r.Owner
	return identity.Status{Status: "PENDING", DKIMStatus: "PENDING", SPFStatus: "PENDING"}, nil
}

func (p *pendingIdentities) Get(_ context.Context, domain string) (identity.Status, error) {
	return identity.Status{Status: "PENDING", DKIMStatus: "PENDING", SPFStatus: "PENDING"}, nil
}

func (p *pendingIdentities) Delete(_ context.Context, domain, owner string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.owners[domain] == owner {
		delete(p.owners, domain)
	}
	return nil
}

func newService(t *testing.T) (*Service, *bolt.Store, *pendingIdentities, *time.Time) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	for _, id := range []int64{1, 2} {
		if err := st.CreateTeam(context.Background(), store.Team{ID: id, Name: "t", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC()
	ids := &pendingIdentities{owners: map[string]string{}}
	return &Service{Store: st, Identities: ids, Now: func() time.Time { return now }, KeyBits: 1024}, st, ids, &now
}

// TestASubdomainOfAnotherTeamsDomainIsRefused: SES lets a verified parent sign for its
// subdomains, so a team may not register a subdomain of another team's domain (409, naming no
// team); a subdomain of its own domain is fine.
func TestASubdomainOfAnotherTeamsDomainIsRefused(t *testing.T) {
	s, _, _, _ := newService(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, 1, "example.com", ""); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mail.example.com", "a.b.example.com"} {
		_, err := s.Create(ctx, 2, name, "")
		if fe, ok := fault.As(err); !ok || fe.Kind != fault.Conflict {
			t.Errorf("team 2 registers %s under team 1's example.com: %v, want 409", name, err)
		}
	}
	if _, err := s.Create(ctx, 1, "mail.example.com", ""); err != nil {
		t.Errorf("team 1 registers a subdomain of its own domain: %v", err)
	}
	if _, err := s.Create(ctx, 2, "example.org", ""); err != nil {
		t.Errorf("an unrelated domain: %v", err)
	}
}

// A public suffix would hold every name under it: it is refused, and a name under it is fine.
func TestAPublicSuffixIsRefused(t *testing.T) {
	s, _, _, _ := newService(t)
	ctx := context.Background()
	for _, name := range []string{"co.uk", "github.io", "s3.amazonaws.com"} {
		_, err := s.Create(ctx, 1, name, "")
		if fe, ok := fault.As(err); !ok || fe.Kind != fault.Invalid || !strings.Contains(fe.Message, "public suffix") {
			t.Errorf("%s: %v, want a 400 saying it is a public suffix", name, err)
		}
	}
	for _, name := range []string{"shop.co.uk", "me.github.io"} {
		if _, err := s.Create(ctx, 2, name, ""); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestAnUnverifiedClaimExpires: a domain still unverified ClaimTTL after its creation is
// removed by the hourly check, identity and all, so the name is free again; a younger one
// stays.
func TestAnUnverifiedClaimExpires(t *testing.T) {
	s, st, ids, now := newService(t)
	ctx := context.Background()
	old, err := s.Create(ctx, 1, "squatted.example", "")
	if err != nil {
		t.Fatal(err)
	}
	*now = now.Add(ClaimTTL - time.Hour)
	young, err := s.Create(ctx, 1, "young.example", "")
	if err != nil {
		t.Fatal(err)
	}
	*now = now.Add(2 * time.Hour)
	if _, err := s.RefreshAll(ctx, st); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetDomain(ctx, 1, old.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the expired claim: %v, want it removed", err)
	}
	if _, ok := ids.owners["squatted.example"]; ok {
		t.Error("the expired claim's identity is still there")
	}
	if _, err := st.GetDomain(ctx, 1, young.ID); err != nil {
		t.Errorf("the younger claim: %v, want it kept", err)
	}
	if _, err := s.Create(ctx, 2, "squatted.example", ""); err != nil {
		t.Errorf("the name after expiry: %v, want it free", err)
	}
}

// TestADomainPastTheCapIsRefused: a team's domains are capped (each is an identity of the
// shared SES account); another team is not held back by it.
func TestADomainPastTheCapIsRefused(t *testing.T) {
	s, _, _, _ := newService(t)
	s.MaxDomains = 2
	ctx := context.Background()
	for _, name := range []string{"one.example", "two.example"} {
		if _, err := s.Create(ctx, 1, name, ""); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.Create(ctx, 1, "three.example", "")
	if fe, ok := fault.As(err); !ok || fe.Kind != fault.Forbidden {
		t.Fatalf("a third domain over a cap of 2: %v, want 403", err)
	}
	if _, err := s.Create(ctx, 2, "three.example", ""); err != nil {
		t.Errorf("another team's first domain: %v", err)
	}
}

// TestThePrivateKeyIsNotStored: the DKIM private key goes to the provider and is not kept in
// the store (where the table's stream and backups would copy it); a key an earlier version
// stored is cleared at the domain's next check.
func TestThePrivateKeyIsNotStored(t *testing.T) {
	s, st, _, _ := newService(t)
	ctx := context.Background()
	d, err := s.Create(ctx, 1, "keys.example", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.GetDomain(ctx, 1, d.ID)
	if err != nil || got.PrivateKey != "" || got.PublicKey == "" {
		t.Fatalf("stored domain: private key %d bytes, public %d, %v; want the public key only", len(got.PrivateKey), len(got.PublicKey), err)
	}
	if _, err := st.UpdateDomain(ctx, 1, d.ID, func(x *store.Domain) error { x.PrivateKey = "MIIEowIB-old"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RefreshAll(ctx, st); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetDomain(ctx, 1, d.ID); got.PrivateKey != "" {
		t.Error("an earlier version's stored key is still there after the check")
	}
}

// TestSubdomainRecords: a subdomain's records are named in the zone of its registrable domain
// (mail.news, mailroom._domainkey.news), as upstream names them, and the domain says which
// subdomain it is; a registrable domain's are the bare names. They stay so after a check (Verify).
func TestSubdomainRecords(t *testing.T) {
	svc, _, _, _ := newService(t)
	ctx := context.Background()
	for _, tc := range []struct{ name, sub, mail, dkim string }{
		{"news.example.co.uk", "news", "mail.news", Selector + "._domainkey.news"},
		{"a.b.example.com", "a.b", "mail.a.b", Selector + "._domainkey.a.b"},
		{"example.org", "", "mail", Selector + "._domainkey"},
	} {
		d, err := svc.Create(ctx, 1, tc.name, "us-east-1")
		if err != nil {
			t.Fatalf("Create(%s): %v", tc.name, err)
		}
		checked, err := svc.Verify(ctx, 1, d.ID)
		if err != nil {
			t.Fatalf("Verify(%s): %v", tc.name, err)
		}
		for _, got := range []store.Domain{d, checked} {
			if got.Subdomain != tc.sub {
				t.Errorf("%s: subdomain %q, want %q", tc.name, got.Subdomain, tc.sub)
			}
			names := map[string][]string{}
			for _, r := range got.DNSRecords {
				names[r.Type] = append(names[r.Type], r.Name)
			}
			if mx := names["MX"]; len(mx) != 1 || mx[0] != tc.mail {
				t.Errorf("%s: MX %v, want %s", tc.name, mx, tc.mail)
			}
			if txt := strings.Join(names["TXT"], " "); txt != tc.dkim+" "+tc.mail+" _dmarc" {
				t.Errorf("%s: TXT %s, want %s %s _dmarc", tc.name, txt, tc.dkim, tc.mail)
			}
		}
	}
}

// TestListNewestFirst: domains are listed newest first, as upstream lists them.
func TestListNewestFirst(t *testing.T) {
	svc, _, _, now := newService(t)
	ctx := context.Background()
	var want []int64
	for _, name := range []string{"first.example", "second.example", "third.example"} {
		d, err := svc.Create(ctx, 1, name, "us-east-1")
		if err != nil {
			t.Fatal(err)
		}
		want = append([]int64{d.ID}, want...)
		*now = now.Add(time.Minute)
	}
	list, err := svc.List(ctx, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, d := range list {
		got = append(got, d.ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List: ids %v, want %v (newest first)", got, want)
	}
}

// TestDefaultRegionIsTheDeployments: a domain created without a region is in the region the
// deployment sends from, not us-east-1 (which a stack elsewhere refuses).
func TestDefaultRegionIsTheDeployments(t *testing.T) {
	svc, _, _, _ := newService(t)
	ctx := context.Background()
	d, err := svc.Create(ctx, 1, "any.example", "")
	if err != nil || d.Region != DefaultRegion {
		t.Fatalf("any region: %s, %v; want %s", d.Region, err, DefaultRegion)
	}
	svc.Regions = []string{"eu-west-1"}
	d, err = svc.Create(ctx, 1, "eu.example", "")
	if err != nil || d.Region != "eu-west-1" {
		t.Fatalf("a deployment in eu-west-1: %s, %v; want eu-west-1", d.Region, err)
	}
}
