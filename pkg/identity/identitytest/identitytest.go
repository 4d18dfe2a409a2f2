// Package identitytest is the contract every identity.Identities adapter must keep, run by each
// adapter's tests (local directly, SES against moto).
package identitytest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/identity"
)

// Statuses are the values every status field may take.
var Statuses = []string{"NOT_STARTED", "PENDING", "SUCCESS", "FAILED", "TEMPORARY_FAILURE"}

var seq atomic.Int64

// Domain returns a domain name unique to this process and test, so that adapters sharing one
// backend do not collide.
func Domain(t *testing.T) string {
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 30 {
		name = name[len(name)-30:]
	}
	name = strings.Trim(name, "-")
	return fmt.Sprintf("%s-%d-%d.example", name, time.Now().UnixNano()%1e9, seq.Add(1))
}

// Registration returns a registration for domain with a fresh RSA 2048 key in the SES BYODKIM
// format (base64 DER PKCS#1).
func Registration(t *testing.T, domain string) identity.Registration {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	return identity.Registration{
		Domain:     domain,
		Region:     "us-east-1",
		Selector:   "mailroom1",
		PrivateKey: base64.StdEncoding.EncodeToString(x509.MarshalPKCS1PrivateKey(key)),
		MailFrom:   "mail." + domain,
		Owner:      "team-1",
	}
}

func checkStatus(t *testing.T, what string, st identity.Status) {
	t.Helper()
	for name, v := range map[string]string{"Status": st.Status, "DKIMStatus": st.DKIMStatus, "SPFStatus": st.SPFStatus} {
		if !slices.Contains(Statuses, v) {
			t.Errorf("%s: %s = %q, want one of %v", what, name, v, Statuses)
		}
	}
}

// Run checks the Identities contract. newIdentities is called once per subtest.
func Run(t *testing.T, newIdentities func(t *testing.T) identity.Identities) {
	ctx := context.Background()

	t.Run("CreateGetDelete", func(t *testing.T) {
		ids := newIdentities(t)
		r := Registration(t, Domain(t))
		st, err := ids.Create(ctx, r)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		checkStatus(t, "Create", st)
		got, err := ids.Get(ctx, r.Domain)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		checkStatus(t, "Get", got)
		if got.DKIMStatus != st.DKIMStatus {
			t.Errorf("DKIM status changed between Create (%s) and Get (%s)", st.DKIMStatus, got.DKIMStatus)
		}
		if err := ids.Delete(ctx, r.Domain, r.Owner); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	})

	t.Run("CreateTwice", func(t *testing.T) {
		ids := newIdentities(t)
		r := Registration(t, Domain(t))
		first, err := ids.Create(ctx, r)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		second, err := ids.Create(ctx, r)
		if err != nil {
			t.Fatalf("second Create: %v", err)
		}
		if first != second {
			t.Errorf("second Create = %+v, first %+v", second, first)
		}
	})

	t.Run("AnotherOwnersIdentity", func(t *testing.T) {
		// A domain registered by one owner is not handed to another (ErrTaken), and another's
		// delete leaves it; its own owner still has it and deletes it, after which the other
		// may register it.
		ids := newIdentities(t)
		r := Registration(t, Domain(t))
		if _, err := ids.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		other := r
		other.Owner = "team-2"
		if _, err := ids.Create(ctx, other); !errors.Is(err, identity.ErrTaken) {
			t.Fatalf("Create by another owner: %v, want ErrTaken", err)
		}
		if err := ids.Delete(ctx, r.Domain, other.Owner); err != nil {
			t.Fatalf("Delete by another owner: %v, want nil (left alone)", err)
		}
		if _, err := ids.Create(ctx, other); !errors.Is(err, identity.ErrTaken) {
			t.Fatalf("after another owner's delete, Create by it: %v, want ErrTaken (still the first owner's)", err)
		}
		if _, err := ids.Create(ctx, r); err != nil {
			t.Fatalf("the owner's Create again: %v", err)
		}
		if err := ids.Delete(ctx, r.Domain, r.Owner); err != nil {
			t.Fatal(err)
		}
		if _, err := ids.Create(ctx, other); err != nil {
			t.Fatalf("Create by another owner once deleted: %v", err)
		}
	})

	t.Run("CreateWithoutMailFrom", func(t *testing.T) {
		ids := newIdentities(t)
		r := Registration(t, Domain(t))
		r.MailFrom = ""
		st, err := ids.Create(ctx, r)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		checkStatus(t, "Create", st)
	})

	t.Run("DeleteIsIdempotent", func(t *testing.T) {
		ids := newIdentities(t)
		r := Registration(t, Domain(t))
		if err := ids.Delete(ctx, r.Domain, r.Owner); err != nil {
			t.Errorf("Delete of an unknown domain: %v", err)
		}
		if _, err := ids.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if err := ids.Delete(ctx, r.Domain, r.Owner); err != nil {
				t.Errorf("Delete #%d: %v", i+1, err)
			}
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		ids := newIdentities(t)
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for range 6 {
			r := Registration(t, Domain(t))
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := ids.Create(ctx, r); err != nil {
					errs <- err
					return
				}
				if _, err := ids.Get(ctx, r.Domain); err != nil {
					errs <- err
					return
				}
				errs <- ids.Delete(ctx, r.Domain, r.Owner)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		ids := newIdentities(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		r := Registration(t, Domain(t))
		if _, err := ids.Create(cctx, r); !errors.Is(err, context.Canceled) {
			t.Errorf("Create: %v, want context.Canceled", err)
		}
		if _, err := ids.Get(cctx, r.Domain); !errors.Is(err, context.Canceled) {
			t.Errorf("Get: %v, want context.Canceled", err)
		}
		if err := ids.Delete(cctx, r.Domain, r.Owner); !errors.Is(err, context.Canceled) {
			t.Errorf("Delete: %v, want context.Canceled", err)
		}
	})
}
