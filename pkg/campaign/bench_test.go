package campaign

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/bolt"
)

// The fan-out's costs, apart: personalising one contact's email (Render, the signed unsubscribe
// link, the store.Email), and a whole batch step on the embedded store (read contacts, check
// suppressions, write emails). `make bench` runs them; for a profile:
//
//	go test -run '^$' -bench BenchmarkStep -benchtime 3x -cpuprofile cpu.out ./pkg/campaign

const (
	benchSubject = "Hello {{firstName}}, news for {{company,fallback=friend}}"
	benchHTML    = `<p>Dear {{firstName}} {{lastName}} at {{company,fallback=friend}},</p>` +
		`<p>This is the monthly newsletter. It has a few paragraphs of text so the message has a ` +
		`realistic size, and a link to <a href="https://example.com/news">the news</a>.</p>` +
		`<p>Kind regards,<br>The team</p>` +
		`<p style="font-size:small"><a href="{{usesend_unsubscribe_url}}">Unsubscribe</a></p>`
)

func benchContact(i int) store.Contact {
	c := store.Contact{
		ID: fmt.Sprintf("ct%024d", i), TeamID: 1, BookID: "cbbench", Email: fmt.Sprintf("reader%07d@bench.example.org", i),
		FirstName: "Reader" + strconv.Itoa(i), LastName: "Bench", Subscribed: true,
	}
	if i%3 != 0 {
		c.Properties = map[string]string{"company": "Company " + strconv.Itoa(i%97)}
	}
	return c
}

func benchCampaign() store.Campaign {
	return store.Campaign{
		ID: "cpbench", TeamID: 1, DomainID: 1, Name: "bench", From: `"Bench" <bench@example.com>`,
		Subject: benchSubject, ContactBookID: "cbbench", HTML: benchHTML, Status: store.CampaignRunning,
		BatchSize: 10000, Counters: map[string]int64{},
	}
}

func benchService(st Store) *Service {
	return &Service{
		Store: st, Now: time.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Signer: Signer{Keys: SingleKey("0123456789abcdef0123456789abcdef"), BaseURL: "http://127.0.0.1:3000"},
	}
}

// BenchmarkRender is the placeholder substitution of subject and HTML for one contact.
func BenchmarkRender(b *testing.B) {
	values := vars(benchContact(1), "http://127.0.0.1:3000/unsubscribe/token", nil)
	b.ReportAllocs()
	for b.Loop() {
		_ = Render(benchSubject, values, false)
		_ = Render(benchHTML, values, true)
	}
}

// BenchmarkEmail is everything a step does per contact before the store write: the signed
// unsubscribe link, the values, the rendered subject and HTML, the headers.
func BenchmarkEmail(b *testing.B) {
	s := benchService(nil)
	c := benchCampaign()
	contacts := make([]store.Contact, 1000)
	for i := range contacts {
		contacts[i] = benchContact(i)
	}
	now := time.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = s.email(c, contacts[i%len(contacts)], nil, now)
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "emails/s")
}

// BenchmarkStep is one batch step of 10,000 contacts on the embedded (bbolt) store: reading
// the contacts after the cursor, checking suppressions, personalising and writing the emails
// with their first event and counters. Delivery is not included (no dispatcher).
func BenchmarkStep(b *testing.B) {
	const perStep = 10000
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	now := time.Now().UTC()
	if err := st.CreateDomain(ctx, store.Domain{ID: 1, TeamID: 1, Name: "example.com", Region: "us-east-1",
		Status: store.DomainSuccess, CreatedAt: now, UpdatedAt: now}); err != nil {
		b.Fatal(err)
	}
	if err := st.CreateContactBook(ctx, store.ContactBook{ID: "cbbench", TeamID: 1, Name: "bench", CreatedAt: now, UpdatedAt: now}); err != nil {
		b.Fatal(err)
	}
	// Each iteration sends the next perStep contacts: make enough of them, concurrently so the
	// store's batched commits make this quick.
	n := perStep * max(1, b.N)
	if n > 200000 {
		b.Fatalf("b.N %d too large for the setup; use -benchtime Nx with N ≤ 20", b.N)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	const writers = 64
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += writers {
				ct := benchContact(i)
				_, err := st.PutContact(ctx, 1, "cbbench", ct.Email, ct.ID, func(c *store.Contact, _ bool) error {
					id := c.ID
					*c = ct
					if id != "" {
						c.ID = id
					}
					c.CreatedAt, c.UpdatedAt = now, now
					return nil
				})
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	c := benchCampaign()
	c.BatchSize = perStep
	c.CreatedAt, c.UpdatedAt = now, now
	if err := st.CreateCampaign(ctx, c); err != nil {
		b.Fatal(err)
	}
	s := benchService(st)

	b.ResetTimer()
	for i := range b.N {
		next, _, err := s.Step(ctx, 1, c.ID, i)
		if err != nil {
			b.Fatal(err)
		}
		if next != i+1 {
			b.Fatalf("step %d ran as %d", i, next)
		}
	}
	b.StopTimer()
	got, err := st.GetCampaign(ctx, 1, c.ID)
	if err != nil {
		b.Fatal(err)
	}
	if want := int64(perStep * b.N); got.Counters[store.CountTotal] != want {
		b.Fatalf("total %d, want %d", got.Counters[store.CountTotal], want)
	}
	b.ReportMetric(float64(perStep*b.N)/b.Elapsed().Seconds(), "emails/s")
}
