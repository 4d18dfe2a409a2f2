package dynamo_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/mailroom/mailroom/pkg/awstest"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/dynamo"
)

// loseAnswers is a transport that, for the operations armed, lets moto apply the request and
// then drops the answer as a reset connection would: the write is done, the SDK sees an error
// and sends the request again. That happened to this project's CI on a bootstrap.
type loseAnswers struct {
	mu    sync.Mutex
	armed map[string]int // operation ("PutItem") -> answers still to lose
	lost  int
}

func (l *loseAnswers) arm(op string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed[op]++
}

func (l *loseAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	motoMu.Lock()
	resp, err := http.DefaultTransport.RoundTrip(r)
	motoMu.Unlock()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.armed[op] > 0 && resp.StatusCode == 200 {
		l.armed[op]--
		l.lost++
		resp.Body.Close()
		return nil, fmt.Errorf("read tcp: connection reset by peer")
	}
	return resp, nil
}

// storeOver is a store on a table of its own whose client goes through transport.
func storeOver(t *testing.T, transport http.RoundTripper) *dynamo.Store {
	t.Helper()
	client := dynamodb.NewFromConfig(awstest.Shared(t).Config(t), func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: transport}
	})
	return dynamo.New(client, newTable(t, client))
}

// TestLostAnswerOfAnAppliedWrite: a conditional write whose answer was lost and which the SDK
// sent again is the caller's success, applied once, not a conflict or a second application.
func TestLostAnswerOfAnAppliedWrite(t *testing.T) {
	lossy := &loseAnswers{armed: map[string]int{}}
	s := storeOver(t, lossy)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Millisecond)

	// A create (attribute_not_exists): the bootstrap's team and key.
	lossy.arm("PutItem")
	if err := s.CreateTeam(ctx, store.Team{ID: 1, Name: "Default team", CreatedAt: now}); err != nil {
		t.Fatalf("CreateTeam after a lost answer: %v", err)
	}
	lossy.arm("PutItem")
	if err := s.CreateAPIKey(ctx, store.APIKey{ID: "k1", TeamID: 1, Name: "bootstrap", SecretHash: "h", Permission: store.PermissionFull, CreatedAt: now}); err != nil {
		t.Fatalf("CreateAPIKey after a lost answer: %v", err)
	}
	// A create of an existing item is still a conflict.
	if err := s.CreateTeam(ctx, store.Team{ID: 1, Name: "Another", CreatedAt: now}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CreateTeam of an existing team: %v", err)
	}

	// An optimistic update (Version = :v): the change is applied once.
	if err := s.CreateTemplate(ctx, store.Template{ID: "t1", TeamID: 1, Name: "n", Subject: "s", HTML: "h", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	lossy.arm("PutItem")
	tpl, err := s.UpdateTemplate(ctx, 1, "t1", func(tp *store.Template) error { calls++; tp.Name += "+"; return nil })
	if err != nil || tpl.Name != "n+" || calls != 1 {
		t.Fatalf("UpdateTemplate after a lost answer: %q, change run %d times, %v", tpl.Name, calls, err)
	}
	if got, _ := s.GetTemplate(ctx, 1, "t1"); got.Name != "n+" {
		t.Fatalf("stored template name %q", got.Name)
	}

	// An email's status change.
	if err := s.CreateEmails(ctx, []store.Email{email(1, 1, "e1", now)}, nil); err != nil {
		t.Fatal(err)
	}
	calls = 0
	lossy.arm("PutItem")
	e, err := s.UpdateEmail(ctx, "e1", func(e *store.Email) ([]store.Event, error) {
		calls++
		if e.Status != store.StatusQueued {
			return nil, fmt.Errorf("status %s, the change was applied before", e.Status)
		}
		e.Status, e.LatestStatus = store.StatusSent, store.StatusSent
		return nil, nil
	})
	if err != nil || e.Status != store.StatusSent || calls != 1 {
		t.Fatalf("UpdateEmail after a lost answer: %v, change run %d times, %v", e.Status, calls, err)
	}

	// A contact book's update (UpdateItem, Version = :v).
	if err := s.CreateContactBook(ctx, store.ContactBook{ID: "b1", TeamID: 1, Name: "b", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	calls = 0
	lossy.arm("UpdateItem")
	b, err := s.UpdateContactBook(ctx, 1, "b1", func(b *store.ContactBook) error { calls++; b.Name += "+"; return nil })
	if err != nil || b.Name != "b+" || calls != 1 {
		t.Fatalf("UpdateContactBook after a lost answer: %q, change run %d times, %v", b.Name, calls, err)
	}

	// An idempotency claim: the request holds its own claim, not "in progress".
	claim := store.IdemClaim{TeamID: 1, Key: "k", Fingerprint: "f", Nonce: "n1", Now: now, TTL: 24 * time.Hour, StaleAfter: time.Minute}
	lossy.arm("PutItem")
	if rec, ok, err := s.ClaimIdempotency(ctx, claim); err != nil || !ok || rec.Nonce != "n1" {
		t.Fatalf("ClaimIdempotency after a lost answer: claimed %v, %+v, %v", ok, rec, err)
	}
	// Another request with that key still finds it taken.
	other := claim
	other.Nonce = "n2"
	if _, ok, err := s.ClaimIdempotency(ctx, other); err != nil || ok {
		t.Fatalf("a second request claimed the key: %v %v", ok, err)
	}
	// A stale claim's takeover (UpdateItem) whose answer is lost.
	other.Now = now.Add(2 * time.Minute)
	lossy.arm("UpdateItem")
	if _, ok, err := s.ClaimIdempotency(ctx, other); err != nil || !ok {
		t.Fatalf("takeover after a lost answer: claimed %v, %v", ok, err)
	}

	if lossy.lost != 7 {
		t.Fatalf("%d answers lost, want 7: the test did not exercise every write", lossy.lost)
	}
}

// refusePuts is a transport that fails PutItem calls (before they reach moto) while armed, as
// a DynamoDB that keeps failing a write does; everything else goes through. With only set,
// it fails the puts whose body holds it and holds the others until their request is cancelled.
type refusePuts struct {
	mu    sync.Mutex
	armed bool
	only  string
	n     int
}

func (f *refusePuts) set(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = on
}

func (f *refusePuts) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	refuse := f.armed && r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.PutItem"
	only := f.only
	f.mu.Unlock()
	if refuse && only != "" {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte(only)) {
			<-r.Context().Done() // held until the put is cut off
			return nil, r.Context().Err()
		}
	}
	if refuse {
		f.mu.Lock()
		f.n++
		f.mu.Unlock()
		return nil, fmt.Errorf("dial tcp: connection refused")
	}
	motoMu.Lock()
	defer motoMu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// TestAFailedCreateLeavesNoListEntry: an email whose put fails (the request answers an error)
// leaves no list entry behind, which the list would count (and page over) as an email; an
// email that exists keeps its entry when a retry's put fails.
func TestAFailedCreateLeavesNoListEntry(t *testing.T) {
	refuse := &refusePuts{}
	s := storeOver(t, refuse)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Millisecond)
	count := func() int {
		t.Helper()
		list, n, err := s.ListEmails(ctx, store.EmailFilter{TeamID: 1, Limit: 50})
		if err != nil || n != len(list) {
			t.Fatalf("list: %d emails, count %d, %v", len(list), n, err)
		}
		return n
	}
	if err := s.CreateEmails(ctx, []store.Email{email(1, 1, "kept", now)}, nil); err != nil {
		t.Fatal(err)
	}
	refuse.set(true)
	if err := s.CreateEmails(ctx, []store.Email{email(1, 1, "failed", now)}, nil); err == nil {
		t.Fatal("CreateEmails succeeded with every put refused")
	}
	if err := s.CreateEmails(ctx, []store.Email{email(1, 1, "kept", now)}, nil); err == nil {
		t.Fatal("a retried CreateEmails succeeded with every put refused")
	}
	// A batch where one put fails and cuts the others off: none of their entries stays.
	refuse.mu.Lock()
	refuse.only = "EMAIL#b3"
	refuse.mu.Unlock()
	batch := []store.Email{email(1, 1, "b1", now), email(1, 1, "b2", now), email(1, 1, "b3", now), email(1, 1, "b4", now)}
	if err := s.CreateEmails(ctx, batch, nil); err == nil {
		t.Fatal("a batch succeeded with one put refused")
	}
	refuse.set(false)
	if refuse.n == 0 {
		t.Fatal("no put was refused")
	}
	if n := count(); n != 1 {
		t.Errorf("the list counts %d emails after failed creates, want the 1 that exists", n)
	}
	if _, err := s.GetEmail(ctx, "kept"); err != nil {
		t.Errorf("the existing email: %v", err)
	}
}
