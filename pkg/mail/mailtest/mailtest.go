// Package mailtest is the contract every mail.Mailer adapter must keep, run by each adapter's
// tests (the outbox directly, SES against moto).
package mailtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/mail"
)

// Inspect returns the raw message the adapter delivered for an email (by our email id and the
// provider message id Send returned), or nil when it holds none. An adapter that cannot be
// inspected passes a nil Inspect and the delivery checks are skipped.
type Inspect func(t *testing.T, emailID, messageID string) []byte

// Sender is the From address the suite uses; adapters that need a verified sender (SES)
// must allow it (its domain is sender.example).
const Sender = "Mailroom Test <hello@sender.example>"

// Run checks the Mailer contract. newMailer is called once per subtest.
func Run(t *testing.T, newMailer func(t *testing.T) (mail.Mailer, Inspect)) {
	t.Run("ReturnsMessageID", func(t *testing.T) {
		m, _ := newMailer(t)
		id, err := m.Send(context.Background(), outgoing(t, "mt-id-1"))
		if err != nil {
			t.Fatalf("Send: %v", err)
		}
		if id == "" {
			t.Fatal("Send returned an empty message id")
		}
	})

	t.Run("RawReachesAdapterUnchanged", func(t *testing.T) {
		m, inspect := newMailer(t)
		if inspect == nil {
			t.Skip("adapter cannot be inspected")
		}
		out := outgoing(t, "mt-raw-1")
		id, err := m.Send(context.Background(), out)
		if err != nil {
			t.Fatalf("Send: %v", err)
		}
		got := inspect(t, out.EmailID, id)
		if !bytes.Equal(got, out.Raw) {
			t.Errorf("delivered message differs from the raw message sent:\n got %q\nwant %q", got, out.Raw)
		}
	})

	t.Run("DistinctIDsForDistinctSends", func(t *testing.T) {
		m, inspect := newMailer(t)
		const n = 8
		ids := make([]string, n)
		outs := make([]mail.Outgoing, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			outs[i] = outgoing(t, fmt.Sprintf("mt-many-%d", i))
			wg.Add(1)
			go func() {
				defer wg.Done()
				ids[i], errs[i] = m.Send(context.Background(), outs[i])
			}()
		}
		wg.Wait()
		seen := map[string]bool{}
		for i, id := range ids {
			if errs[i] != nil {
				t.Fatalf("Send %d: %v", i, errs[i])
			}
			if seen[id] {
				t.Errorf("message id %q returned twice", id)
			}
			seen[id] = true
			if inspect != nil {
				if got := inspect(t, outs[i].EmailID, id); !bytes.Equal(got, outs[i].Raw) {
					t.Errorf("send %d: delivered message is not its own", i)
				}
			}
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		m, inspect := newMailer(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		out := outgoing(t, "mt-cancel-1")
		id, err := m.Send(ctx, out)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Send with a cancelled context = %q, %v; want context.Canceled", id, err)
		}
		if inspect != nil {
			if got := inspect(t, out.EmailID, id); got != nil {
				t.Error("a send with a cancelled context delivered a message")
			}
		}
	})

	t.Run("ExpiredDeadline", func(t *testing.T) {
		m, _ := newMailer(t)
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		if _, err := m.Send(ctx, outgoing(t, "mt-deadline-1")); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Send past its deadline: %v; want context.DeadlineExceeded", err)
		}
	})
}

// outgoing builds a real message with mail.Build. The email id is made unique per test so
// that adapters sharing one backend do not see each other's messages.
func outgoing(t *testing.T, emailID string) mail.Outgoing {
	t.Helper()
	emailID = fmt.Sprintf("%s-%d", emailID, time.Now().UnixNano())
	msg := mail.Message{
		EmailID: emailID,
		From:    Sender,
		To:      []string{"success@simulator.amazonses.com"},
		CC:      []string{"cc@example.com"},
		BCC:     []string{"bcc@example.com"},
		Subject: "Contract test " + emailID,
		Text:    "Hello from the mailer contract suite.",
		HTML:    "<p>Hello from the <b>mailer</b> contract suite.</p>",
		Attachments: []mail.Attachment{
			{Filename: "note.txt", Data: []byte("attached " + emailID)},
		},
	}
	raw, err := mail.Build(msg)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return mail.Outgoing{
		EmailID:    emailID,
		TeamID:     1,
		From:       msg.From,
		Recipients: msg.Recipients(),
		To:         msg.To,
		Raw:        raw,
	}
}
