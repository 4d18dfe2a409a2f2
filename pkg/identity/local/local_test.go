package local

import (
	"context"
	"slices"
	"testing"

	"github.com/mailroom/mailroom/pkg/identity"
	"github.com/mailroom/mailroom/pkg/identity/identitytest"
)

func TestContract(t *testing.T) {
	identitytest.Run(t, func(t *testing.T) identity.Identities { return New() })
}

func TestEverythingVerified(t *testing.T) {
	l := New()
	r := identitytest.Registration(t, "acme.example")
	st, err := l.Create(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	want := identity.Status{Status: "SUCCESS", DKIMStatus: "SUCCESS", SPFStatus: "SUCCESS"}
	if st != want {
		t.Errorf("Create = %+v", st)
	}
	if !slices.Equal(l.Domains(), []string{"acme.example"}) {
		t.Errorf("Domains = %v", l.Domains())
	}
	// After a restart the set is empty, and the domain (still in the store) stays verified.
	if st, err := New().Get(context.Background(), "acme.example"); err != nil || st != want {
		t.Errorf("Get after restart = %+v, %v", st, err)
	}
	if err := l.Delete(context.Background(), "acme.example", r.Owner); err != nil || len(l.Domains()) != 0 {
		t.Errorf("Delete: %v, Domains = %v", err, l.Domains())
	}
}
