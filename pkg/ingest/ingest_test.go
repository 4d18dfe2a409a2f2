package ingest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/sesevent"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/bolt"
)

const (
	sampleEmailID   = "cm2k8x1yz0001abcd" // X-Usesend-Email-ID of every sample in pkg/sesevent/testdata
	sampleMessageID = "010001929a6e6a3b-5c2e8c1d-7f43-4b8a-9a0e-1f2e3d4c5b6a-000000"
)

func newIngester(t *testing.T) (*Ingester, store.Store) {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Date(2024, 10, 14, 9, 12, 0, 0, time.UTC) // just before the samples' send
	text := "hi"
	e := store.Email{ID: sampleEmailID, TeamID: 1, DomainID: 1, From: "hello@acme.example",
		To: []string{"jane@example.com"}, Subject: "s", Content: store.Content{Text: &text},
		Status: store.StatusSent, LatestStatus: "SENT", MessageID: sampleMessageID, CreatedAt: now, UpdatedAt: now}
	if err := st.CreateEmails(context.Background(), []store.Email{e}, []store.Event{{ID: "0", EmailID: e.ID, Status: "QUEUED", CreatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	return &Ingester{Store: st, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now}, st
}

func sample(t *testing.T, name string) sesevent.Event {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "sesevent", "testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var env sesevent.Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	ev, err := sesevent.FromEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestEverySampleBecomesAHistoryEntry(t *testing.T) {
	cases := []struct {
		sample, status, latest, suppressed string
		dataHas                            string
	}{
		{"send", "", "SENT", "", ""}, // the worker already recorded SENT
		{"delivery", "DELIVERED", "DELIVERED", "", "smtpResponse"},
		{"bounce_permanent", "BOUNCED", "BOUNCED", store.ReasonHardBounce, "Permanent"},
		{"bounce_transient", "BOUNCED", "BOUNCED", "", "Transient"},
		{"complaint", "COMPLAINED", "COMPLAINED", store.ReasonComplaint, "complainedRecipients"},
		{"reject", "REJECTED", "REJECTED", "", "reason"},
		{"open", "OPENED", "OPENED", "", "userAgent"},
		{"click", "CLICKED", "CLICKED", "", "link"},
		{"rendering_failure", "RENDERING_FAILURE", "SENT", "", "errorMessage"},
		{"delivery_delay", "DELIVERY_DELAYED", "DELIVERY_DELAYED", "", "delayType"},
	}
	for _, c := range cases {
		t.Run(c.sample, func(t *testing.T) {
			in, st := newIngester(t)
			ev := sample(t, c.sample)
			for range 2 { // a redelivered event is recorded once
				if err := in.Publish(context.Background(), ev); err != nil {
					t.Fatal(err)
				}
			}
			e, evs, err := st.GetEmailDetail(context.Background(), sampleEmailID)
			if err != nil {
				t.Fatal(err)
			}
			if e.LatestStatus != c.latest {
				t.Errorf("latestStatus = %s, want %s", e.LatestStatus, c.latest)
			}
			want := 1
			if c.status != "" {
				want = 2
			}
			if len(evs) != want {
				t.Fatalf("%d events, want %d: %+v", len(evs), want, evs)
			}
			if c.status != "" {
				got := evs[1]
				if got.Status != c.status || !strings.Contains(string(got.Data), c.dataHas) || !got.CreatedAt.Equal(ev.Timestamp()) {
					t.Errorf("event = %s at %s data %s", got.Status, got.CreatedAt, got.Data)
				}
				if string(got.Data) != string(ev.Detail()) {
					t.Errorf("data is not SES's sub-object:\n%s\n%s", got.Data, ev.Detail())
				}
			}
			supp, err := st.GetSuppressions(context.Background(), 1, []string{"jane@example.com"})
			if err != nil {
				t.Fatal(err)
			}
			if s := supp["jane@example.com"]; s.Reason != c.suppressed {
				t.Errorf("suppression reason = %q, want %q", s.Reason, c.suppressed)
			}
		})
	}
}

func TestLowerRankDoesNotGoBack(t *testing.T) {
	in, st := newIngester(t)
	for _, name := range []string{"click", "open", "delivery"} {
		if err := in.Publish(context.Background(), sample(t, name)); err != nil {
			t.Fatal(err)
		}
	}
	e, evs, _ := st.GetEmailDetail(context.Background(), sampleEmailID)
	if e.LatestStatus != "CLICKED" || len(evs) != 4 {
		t.Errorf("latest %s with %d events, want CLICKED and every event kept", e.LatestStatus, len(evs))
	}
}

func TestFindsByMessageIDAndDropsUnknown(t *testing.T) {
	in, st := newIngester(t)
	ev := sample(t, "delivery")
	ev.Mail.Headers = nil // no X-Usesend-Email-ID: found by SES message id
	if err := in.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if e, _ := st.GetEmail(context.Background(), sampleEmailID); e.LatestStatus != "DELIVERED" {
		t.Errorf("latest = %s", e.LatestStatus)
	}
	ev.Mail.MessageID = "unknown"
	if err := in.Publish(context.Background(), ev); err != ErrUnknownEmail {
		t.Errorf("unknown email: %v", err)
	}
}

// TestSESEvidenceWins: a Send, Delivery, Bounce or Complaint event settles an email the worker
// left QUEUED, SENDING (it died after SES answered) or FAILED (an ambiguous error): SENT with
// SES's message id, claim cleared, counted sent once, one SENT entry in its history; FAILED no
// longer outranks what SES reports.
func TestSESEvidenceWins(t *testing.T) {
	for _, c := range []struct {
		name, status, event, wantLatest string
	}{
		{"failed, then delivered", store.StatusFailed, "delivery", "DELIVERED"},
		{"failed, then sent", store.StatusFailed, "send", "SENT"},
		{"sending (worker died), then delivered", store.StatusSending, "delivery", "DELIVERED"},
		{"sending, then sent", store.StatusSending, "send", "SENT"},
		{"queued, then bounced", store.StatusQueued, "bounce_permanent", "BOUNCED"},
		{"failed, then complained", store.StatusFailed, "complaint", "COMPLAINED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, st := newIngester(t)
			ctx := context.Background()
			claimed := time.Now().Add(-time.Hour)
			if _, err := st.UpdateEmail(ctx, sampleEmailID, func(e *store.Email) ([]store.Event, error) {
				e.Status, e.LatestStatus, e.MessageID, e.CampaignID = c.status, c.status, "", "cpx"
				if c.status == store.StatusSending {
					e.ClaimedAt = &claimed
				}
				return nil, nil
			}); err != nil {
				t.Fatal(err)
			}
			ev := sample(t, c.event)
			for range 2 { // a redelivered event changes nothing more
				if err := in.Publish(ctx, ev); err != nil {
					t.Fatal(err)
				}
			}
			// SES's Send event arriving after the email was settled adds no second SENT.
			if err := in.Publish(ctx, sample(t, "send")); err != nil {
				t.Fatal(err)
			}
			e, evs, err := st.GetEmailDetail(ctx, sampleEmailID)
			if err != nil {
				t.Fatal(err)
			}
			sent := 0
			for _, x := range evs {
				if x.Status == store.StatusSent {
					sent++
				}
			}
			if e.Status != store.StatusSent || e.MessageID != sampleMessageID || e.ClaimedAt != nil || sent != 1 {
				t.Errorf("status %s, message id %q, claim %v, %d SENT entries; want SENT, SES's id, none, 1",
					e.Status, e.MessageID, e.ClaimedAt, sent)
			}
			if c.wantLatest != "SENT" && e.LatestStatus != c.wantLatest {
				t.Errorf("latest %s, want %s", e.LatestStatus, c.wantLatest)
			}
			if n := strings.Count(strings.Join(e.Counted, ","), store.CountSent); n != 1 {
				t.Errorf("counted %v: sent %d times, want once", e.Counted, n)
			}
		})
	}
	// The worker records its SENT under the same id, so whichever comes second is a duplicate.
	if SentEventID != "1-"+store.StatusSent {
		t.Errorf("SentEventID %q is not the worker's SENT event id", SentEventID)
	}
}

// readCounter counts the store's email reads outside UpdateEmail.
type readCounter struct {
	store.Store
	gets int
}

func (r *readCounter) GetEmail(ctx context.Context, id string) (store.Email, error) {
	r.gets++
	return r.Store.GetEmail(ctx, id)
}

// TestOneReadPerEvent: an event that names its email and suppresses no one goes straight to
// the update (which reads the email itself); a bounce that suppresses reads the email first,
// for its team; an id that names no email falls back to the provider's message id.
func TestOneReadPerEvent(t *testing.T) {
	in, st := newIngester(t)
	rc := &readCounter{Store: st}
	in.Store = rc
	ctx := context.Background()
	if err := in.Publish(ctx, sample(t, "delivery")); err != nil {
		t.Fatal(err)
	}
	if rc.gets != 0 {
		t.Errorf("a delivery read the email %d times before its update, want 0", rc.gets)
	}
	if err := in.Publish(ctx, sample(t, "bounce_permanent")); err != nil {
		t.Fatal(err)
	}
	if rc.gets != 1 {
		t.Errorf("a hard bounce read the email %d times before its update, want 1 (its team's list)", rc.gets)
	}
	if list, _, err := st.ListSuppressions(ctx, 1, "", 0, 10); err != nil || len(list) == 0 {
		t.Errorf("the bounce suppressed nobody: %v, %v", list, err)
	}
	ev := sample(t, "open")
	for i, h := range ev.Mail.Headers {
		if strings.EqualFold(h.Name, sesevent.EmailIDHeader) {
			ev.Mail.Headers[i].Value = "em-not-here" // found by the SES message id instead
		}
	}
	if err := in.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if e, _ := st.GetEmail(ctx, sampleEmailID); e.LatestStatus == "" {
		t.Fatal("no status")
	}
	_, events, err := st.GetEmailDetail(ctx, sampleEmailID)
	if err != nil {
		t.Fatal(err)
	}
	opened := false
	for _, e := range events {
		opened = opened || e.Status == "OPENED"
	}
	if !opened {
		t.Errorf("the open event naming another id was not recorded by its message id: %v", events)
	}
}
