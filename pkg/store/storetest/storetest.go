// Package storetest is the contract suite of the store port. Every adapter runs it from its own
// tests, so that the product code can rely on the guarantees of pkg/store whichever adapter is
// wired in:
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) }, storetest.Options{})
//	}
//
// Subtests run in parallel (one after the other with Options.Emulated) and each one creates its
// own teams (through NextID("team")) and random record ids, so they never collide even when
// newStore hands out one shared store.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

// Options adapts the suite to the environment an adapter is tested in.
type Options struct {
	// Emulated is set when the adapter runs against an emulator (moto_server) that can lose
	// concurrent atomic counter updates (UpdateItem ADD). The subtests that hammer counters
	// (NextID, the email list counts, the campaign counters) from many goroutines are then
	// skipped; everything else, conditional writes and optimistic concurrency included, still
	// runs.
	Emulated bool
	// WithAttempts returns the store limited to n attempts per optimistic update (sharing its
	// data): the contention case needs it, and every adapter must provide it.
	WithAttempts func(s store.Store, n int) store.Store
}

// Settler is a store whose counts (list counts, ScheduledCount, DailyStats, campaign
// counters) trail its writes, applied from a change stream: Settle returns once every write
// made before it is counted. The suite settles before it reads a count; a store without
// Settle counts within its writes.
type Settler interface {
	Settle(ctx context.Context) error
}

func settle(t *testing.T, s store.Store) {
	t.Helper()
	if x, ok := s.(Settler); ok {
		noErr(t, "Settle", x.Settle(t.Context()))
	}
}

// contract is one case of the suite.
type contract struct {
	name    string
	counter bool // hammers an atomic counter from many goroutines
	fn      func(t *testing.T, s store.Store)
}

// The contract of each group of the port (store.Teams, store.Domains, ...).
var (
	teams = []contract{
		{name: "Teams", fn: testTeams},
		{name: "NextID", fn: testNextID},
		{name: "NextIDConcurrent", counter: true, fn: testNextIDConcurrent},
		{name: "APIKeys", fn: testAPIKeys},
		{name: "UpdateTeam", fn: testUpdateTeam},
	}
	domains = []contract{
		{name: "Domains", fn: testDomains},
		{name: "DomainNameConcurrent", fn: testDomainNameConcurrent},
		{name: "UpdateDomainConcurrent", fn: testUpdateDomainConcurrent},
	}
	templates = []contract{{name: "Templates", fn: testTemplates}}
	emails    = []contract{
		{name: "Emails", fn: testEmails},
		{name: "CreateEmailsTwice", fn: testCreateEmailsTwice},
		{name: "CreateEmailsConcurrentSameID", fn: testCreateEmailsConcurrentSameID},
		{name: "CreateEmailsConcurrentCount", counter: true, fn: testCreateEmailsConcurrentCount},
		{name: "UpdateEmailConcurrent", fn: testUpdateEmailConcurrent},
		{name: "UpdateEmailAbort", fn: testUpdateEmailAbort},
		{name: "UpdateEmailDuplicateEvent", fn: testUpdateEmailDuplicateEvent},
		{name: "FindEmailByMessageID", fn: testFindEmailByMessageID},
		{name: "PendingEmails", fn: testPendingEmails},
		{name: "OverdueScheduled", fn: testOverdueScheduled},
		{name: "ScheduledCount", fn: testScheduledCount},
		{name: "DailyStats", fn: testDailyStats},
		{name: "ScheduledCountConcurrent", counter: true, fn: testScheduledCountConcurrent},
		{name: "HeldEmails", fn: testHeldEmails},
		{name: "Retention", fn: testRetention},
		{name: "LargeContent", fn: testLargeContent},
		{name: "ListEmails", fn: testListEmails},
	}
	idempotency = []contract{
		{name: "Idempotency", fn: testIdempotency},
		{name: "IdempotencyExpiryAndTakeover", fn: testIdempotencyExpiryAndTakeover},
		{name: "IdempotencyConcurrent", fn: testIdempotencyConcurrent},
		{name: "IdempotencyExpire", fn: testIdempotencyExpire},
	}
	suppressions = []contract{{name: "Suppressions", fn: testSuppressions}}
	contacts     = []contract{
		{name: "ContactBooks", fn: testContactBooks},
		{name: "PutContact", fn: testPutContact},
		{name: "PutContactConcurrent", fn: testPutContactConcurrent},
		{name: "PutContacts", fn: testPutContacts},
		{name: "ListContacts", fn: testListContacts},
		{name: "ContactsAfter", fn: testContactsAfter},
		{name: "UpdateContact", fn: testUpdateContact},
		{name: "DeleteContacts", fn: testDeleteContacts},
		{name: "DeleteContactBook", fn: testDeleteContactBook},
	}
	campaigns = []contract{
		{name: "Campaigns", fn: testCampaigns},
		{name: "UpdateCampaignConcurrent", fn: testUpdateCampaignConcurrent},
		{name: "CampaignCounters", fn: testCampaignCounters},
		{name: "CampaignCountersConcurrent", counter: true, fn: testCampaignCountersConcurrent},
	}
	pacing = []contract{
		{name: "SendSlots", fn: testSendSlots},
		{name: "SendSlotsConcurrent", counter: true, fn: testSendSlotsConcurrent},
		{name: "RequestRate", fn: testRequestRate},
		{name: "RequestRateConcurrent", counter: true, fn: testRequestRateConcurrent},
	}
	webhooks = []contract{
		{name: "Webhooks", fn: testWebhooks},
		{name: "WebhookCalls", fn: testWebhookCalls},
		{name: "WebhookCallRetention", fn: testWebhookCallRetention},
	}
)

// RunTeams and the Run functions after it run the contract of one group of the port; Run runs
// them all, and the contention case every adapter must pass.
func RunTeams(t *testing.T, newStore func(*testing.T) store.Store, opts Options) {
	run(t, newStore, opts, teams)
}

func RunDomains(t *testing.T, newStore func(*testing.T) store.Store, opts Options) {
	run(t, newStore, opts, domains)
}

func RunTemplates(t *testing.T, newStore func(*testing.T) store.Store, opts Options) {
	run(t, newStore, opts, templates)
}

func RunEmails(t *testing.T, newStore func(*testing.T) store.Store, opts Options) {
	run(t, newStore, opts, emails)
}

func RunIdempotency(t *testing.T, newStore func(*testing.T) store.Store, opts Options) {
	run(t, newStore, opts, idempotency)
}

func RunSuppressions(t *testing.T, newStore func(*testing.T) store.Store, opts Options) {
	run(t, newStore, opts, suppressions)
}

func RunContacts(t *testing.T, newStore func(*testing.T) store.Store, opts Options) {
	run(t, newStore, opts, contacts)
}

func RunCampaigns(t *testing.T, newStore func(*testing.T) store.Store, opts Options) {
	run(t, newStore, opts, campaigns)
}

func RunPacing(t *testing.T, newStore func(*testing.T) store.Store, opts Options) {
	run(t, newStore, opts, pacing)
}

func RunWebhooks(t *testing.T, newStore func(*testing.T) store.Store, opts Options) {
	run(t, newStore, opts, webhooks)
}

// Run runs the whole contract against the stores newStore returns. newStore is called once per
// subtest; a fresh store per call is best. A shared store works for every subtest but the limit
// check of PendingEmails, which assumes no pending email older than 1990 exists besides its own.
func Run(t *testing.T, newStore func(t *testing.T) store.Store, opts Options) {
	t.Helper()
	t.Run("ContentionExhausted", func(t *testing.T) {
		if opts.WithAttempts == nil {
			t.Fatal("storetest.Options.WithAttempts is required: the contention case runs on every adapter")
		}
		testContentionExhausted(t, newStore(t), opts.WithAttempts)
	})
	for _, g := range []struct {
		name string
		run  func(*testing.T, func(*testing.T) store.Store, Options)
	}{
		{"Teams", RunTeams}, {"Domains", RunDomains}, {"Templates", RunTemplates}, {"Emails", RunEmails},
		{"Idempotency", RunIdempotency}, {"Suppressions", RunSuppressions}, {"Contacts", RunContacts},
		{"Campaigns", RunCampaigns}, {"Pacing", RunPacing}, {"Webhooks", RunWebhooks},
	} {
		t.Run(g.name, func(t *testing.T) { g.run(t, newStore, opts) })
	}
}

func run(t *testing.T, newStore func(t *testing.T) store.Store, opts Options, tests []contract) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.counter && opts.Emulated {
				t.Skip("the emulator can lose concurrent UpdateItem ADDs; counters are checked against real DynamoDB and the embedded store")
			}
			// Against an emulator the subtests run one after the other: even the NextID calls
			// of newTeam could then collide and make two subtests share a team.
			if !opts.Emulated {
				t.Parallel()
			}
			tc.fn(t, newStore(t))
		})
	}
}

// ---- helpers ----

// workers is the goroutine count of the concurrency subtests: enough to provoke races, few
// enough for an emulator.
const workers = 24

func randID(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return prefix + hex.EncodeToString(b)
}

// now is truncated to milliseconds so adapters that store millisecond times compare equal.
func now() time.Time {
	return time.Now().UTC().Truncate(time.Millisecond)
}

func newTeam(t *testing.T, s store.Store) int64 {
	t.Helper()
	ctx := t.Context()
	id, err := s.NextID(ctx, "team")
	if err != nil {
		t.Fatalf("NextID(team): %v", err)
	}
	if err := s.CreateTeam(ctx, store.Team{ID: id, Name: fmt.Sprintf("team %d", id), CreatedAt: now()}); err != nil {
		t.Fatalf("CreateTeam(%d): %v", id, err)
	}
	return id
}

func newDomainID(t *testing.T, s store.Store) int64 {
	t.Helper()
	id, err := s.NextID(t.Context(), "domain")
	if err != nil {
		t.Fatalf("NextID(domain): %v", err)
	}
	return id
}

// concurrently runs fn(0..n-1) in n goroutines released together and returns their errors.
func concurrently(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

func ptr[T any](v T) *T { return &v }

func newEmail(teamID, domainID int64, created time.Time, status string) store.Email {
	return store.Email{
		ID:           randID("em-"),
		TeamID:       teamID,
		DomainID:     domainID,
		From:         "Sender <sender@example.com>",
		To:           []string{"to@example.net"},
		Subject:      "hello",
		Content:      store.Content{Text: ptr("hi"), HTML: ptr("<p>hi</p>")},
		Status:       status,
		LatestStatus: "QUEUED",
		CreatedAt:    created,
		UpdatedAt:    created,
	}
}

func firstEvent(e store.Email) store.Event {
	return store.Event{ID: "created", EmailID: e.ID, Status: e.Status, CreatedAt: e.CreatedAt}
}

func createEmails(t *testing.T, s store.Store, emails ...store.Email) {
	t.Helper()
	events := make([]store.Event, 0, len(emails))
	for _, e := range emails {
		events = append(events, firstEvent(e))
	}
	if err := s.CreateEmails(t.Context(), emails, events); err != nil {
		t.Fatalf("CreateEmails: %v", err)
	}
}

func getEmail(t *testing.T, s store.Store, id string) store.Email {
	t.Helper()
	e, err := s.GetEmail(t.Context(), id)
	if err != nil {
		t.Fatalf("GetEmail(%s): %v", id, err)
	}
	return e
}

func eventIDs(events []store.Event) []string {
	ids := make([]string, len(events))
	for i, ev := range events {
		ids[i] = ev.ID
	}
	return ids
}

func emailIDs(emails []store.Email) []string {
	ids := make([]string, len(emails))
	for i, e := range emails {
		ids[i] = e.ID
	}
	return ids
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func noErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
