// Package pacing sends 2,000 emails through 8 concurrent workers, each with its own Pacer (as
// separate Lambda instances have), against an SES stand-in that admits 20 messages/s and
// answers the rest with 429 TooManyRequestsException. The workers share only the store's
// per-second send counter and read the rate from the stand-in's GetAccount.
//
// `make bench-pacing` runs it and prints its summary line.
package pacing

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/mailroom/mailroom/pkg/deliver"
	"github.com/mailroom/mailroom/pkg/housekeeping"
	mailses "github.com/mailroom/mailroom/pkg/mail/ses"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/bolt"
	"github.com/mailroom/mailroom/test/sesstandin"
)

const (
	emails  = 2000
	workers = 8
	rate    = 20
)

// queue hands email ids to the workers.
type queue chan string

func (q queue) Dispatch(_ context.Context, ids ...string) {
	for _, id := range ids {
		q <- id
	}
}

func TestPacingKeepsToTheAccountRate(t *testing.T) {
	ses := sesstandin.Start(rate)
	defer ses.Close()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	ids := seed(t, st)

	client := sesv2.New(sesv2.Options{Region: "us-east-1", BaseEndpoint: aws.String(ses.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}, mailses.NoRetries)
	log := slog.New(slog.DiscardHandler)
	q := make(queue, emails)
	for _, id := range ids {
		q <- id
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range workers {
		// Each worker is its own instance: its own Pacer, its own view of the account.
		w := &deliver.Worker{Store: st, Mailer: mailses.NewWithAPI(client, ""), Log: log, Now: time.Now,
			Pacer: &deliver.Pacer{Slots: st, Account: mailses.Account{Client: client}, Log: log}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case id := <-q:
					ictx, cancel := context.WithTimeout(ctx, 30*time.Second) // an invocation
					if err := w.Deliver(ictx, id); err != nil {
						t.Errorf("deliver %s: %v", id, err)
					}
					cancel()
				}
			}
		}()
	}
	// The reconciler hands back emails held for a later slot once their time has come.
	rq := &housekeeping.Requeue{Store: st, Now: time.Now, Log: log, Dispatcher: q}
	deadline := time.Now().Add(4 * emails / rate * time.Second)
	for {
		time.Sleep(500 * time.Millisecond)
		if _, err := rq.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if n := ses.Stats().Total; n >= emails || time.Now().After(deadline) {
			break
		}
	}
	close(stop)
	wg.Wait()

	stats := ses.Stats()
	sent, failed := 0, 0
	for _, id := range ids {
		e, err := st.GetEmail(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch e.Status {
		case store.StatusSent:
			sent++
		case store.StatusFailed:
			failed++
		}
		if n := stats.Accepted[id]; n != 1 {
			t.Errorf("%s: accepted %d times by SES, want once (%s)", id, n, e.Status)
		}
	}
	achieved := float64(stats.Total-1) / stats.Span.Seconds()
	pct := 100 * achieved / rate
	fmt.Printf("pacing: achieved %.1f/s of allowed %d/s (%.0f%%), SENT %d, FAILED %d\n", achieved, rate, pct, sent, failed)
	t.Logf("%d workers, %d emails in %v; SES answered 429 %d times", workers, stats.Total, stats.Span.Round(time.Millisecond), stats.Refused)
	if sent != emails || failed != 0 {
		t.Errorf("SENT %d, FAILED %d; want %d, 0", sent, failed, emails)
	}
	if pct < 90 || achieved > rate*1.02 {
		t.Errorf("achieved %.1f/s of %d/s: want at least 90%% and not above the rate", achieved, rate)
	}
}

func seed(t *testing.T, st *bolt.Store) []string {
	ctx := context.Background()
	if err := st.CreateDomain(ctx, store.Domain{ID: 1, TeamID: 1, Name: "example.com", Status: store.DomainSuccess}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	text := "hello"
	var ids []string
	var list []store.Email
	for i := range emails {
		id := fmt.Sprintf("em%05d", i)
		ids = append(ids, id)
		list = append(list, store.Email{ID: id, TeamID: 1, DomainID: 1, From: "news@example.com",
			To: []string{fmt.Sprintf("r%05d@example.org", i)}, Subject: "s", Content: store.Content{Text: &text},
			Status: store.StatusQueued, LatestStatus: store.StatusQueued, CreatedAt: now, UpdatedAt: now})
	}
	if err := st.CreateEmails(ctx, list, nil); err != nil {
		t.Fatal(err)
	}
	return ids
}
