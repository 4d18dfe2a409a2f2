package email

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/auth"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/bolt"
)

// flakyStore fails the first CreateEmails after writing half of the batch, as a batch that
// spans several DynamoDB transactions can.
type flakyStore struct {
	*bolt.Store
	failed bool
}

func (f *flakyStore) CreateEmails(ctx context.Context, emails []store.Email, events []store.Event) error {
	if !f.failed {
		f.failed = true
		half := len(emails) / 2
		if err := f.Store.CreateEmails(ctx, emails[:half], events[:half]); err != nil {
			return err
		}
		return errors.New("transaction failed")
	}
	return f.Store.CreateEmails(ctx, emails, events)
}

type oneDomain struct{}

func (oneDomain) Lookup(context.Context, int64, string) (store.Domain, error) {
	return store.Domain{ID: 1, TeamID: 1, Name: "example.com", Status: store.DomainSuccess}, nil
}

func TestFailedWriteKeepsTheClaimAndRetryCompletesTheSameBatch(t *testing.T) {
	b, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now().UTC()
	svc := &Service{Store: &flakyStore{Store: b}, Domains: oneDomain{}, Now: func() time.Time { return now }}
	reqs, err := DecodeBatch([]byte(`[{"to":"a@example.org","from":"x@example.com","subject":"1","text":"t"},
		{"to":"b@example.org","from":"x@example.com","subject":"2","text":"t"}]`))
	if err != nil {
		t.Fatal(err)
	}
	p := auth.Principal{TeamID: 1}
	if _, err := svc.Send(context.Background(), p, "k", reqs, true); err == nil {
		t.Fatal("the failing write reported success")
	}
	// Right away the claim is still in flight: no second batch can start.
	_, err = svc.Send(context.Background(), p, "k", reqs, true)
	if fe, ok := fault.As(err); !ok || fe.Kind != fault.Conflict {
		t.Fatalf("immediate retry: %v, want 409 in progress", err)
	}
	// After the stale window the retry takes the claim over and finishes the same batch.
	now = now.Add(IdempotencyStale + time.Second)
	res, err := svc.Send(context.Background(), p, "k", reqs, true)
	if err != nil {
		t.Fatal(err)
	}
	if res.IDs[0] != emailID(mustNonce(t, b), 0) {
		t.Error("the retry did not reuse the first attempt's ids")
	}
	_, count, err := b.ListEmails(context.Background(), store.EmailFilter{TeamID: 1, Limit: 10})
	if err != nil || count != 2 {
		t.Fatalf("count = %d (%v), want exactly the one batch of 2", count, err)
	}
}

func mustNonce(t *testing.T, b *bolt.Store) string {
	rec, _, err := b.ClaimIdempotency(context.Background(), store.IdemClaim{TeamID: 1, Key: "k", Now: time.Now(), TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return rec.Nonce
}
