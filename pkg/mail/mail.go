// Package mail declares the mailer port: it turns an email into an RFC 5322 message (Build)
// and hands the raw bytes to a Mailer. Adapters: pkg/mail/outbox (writes .eml files and plays the
// SES mailbox simulator) and pkg/mail/ses (SES v2 SendEmail with raw content).
package mail

import (
	"context"
	"errors"
	netmail "net/mail"
)

// AddressOnly is the bare address of an address that may carry a display name ("Jürgen
// <j@x.test>" → "j@x.test"); one that does not parse is returned as it is.
func AddressOnly(s string) string {
	if a, err := netmail.ParseAddress(s); err == nil {
		return a.Address
	}
	return s
}

// ErrThrottled marks a send refused for rate reasons; the caller retries with backoff.
var ErrThrottled = errors.New("mail: throttled")

// ErrRejected marks a message the provider will never accept (bad address, message rejected);
// retrying is pointless.
var ErrRejected = errors.New("mail: rejected")

// ErrAmbiguous marks a send whose outcome is unknown: the provider may have accepted the
// message (a timeout, a dropped connection, a 5xx). Sending again could send it twice; the
// caller waits for the provider's own evidence instead (its events).
var ErrAmbiguous = errors.New("mail: outcome unknown")

// ErrPaused marks a send refused because the account may not send now: its sending is paused
// (by its owner or by the provider's review) or it is suspended. The message is not at fault;
// every email waits and is tried again later.
var ErrPaused = errors.New("mail: sending paused")

// Quota is the provider account's sending limits, as the provider reports them.
type Quota struct {
	MaxSendRate     float64 // messages per second
	Max24HourSend   float64 // messages per rolling 24 hours
	SentLast24Hours float64
	SendingEnabled  bool
}

// Account reads the account's sending limits (the SES adapter: GetAccount).
type Account interface {
	Quota(ctx context.Context) (Quota, error)
}

// Attachment is a decoded attachment.
type Attachment struct {
	Filename string
	Data     []byte
}

// Header is one custom header.
type Header struct {
	Name  string
	Value string
}

// Message is everything needed to build and send one email.
type Message struct {
	EmailID     string // goes out as X-Usesend-Email-ID
	From        string
	To          []string
	CC          []string
	BCC         []string // envelope only, never a header
	ReplyTo     []string
	Subject     string
	HTML        string
	Text        string
	Headers     []Header
	Attachments []Attachment
	InReplyTo   string // Message-ID of the email replied to, with angle brackets
	// References are the thread's Message-IDs before InReplyTo, oldest first, each with angle
	// brackets: the References header is these and InReplyTo (RFC 5322 3.6.4).
	References []string
	MessageID  string // Message-ID header to set, with angle brackets; empty: generated
}

// Recipients returns every envelope recipient: to, cc and bcc.
func (m Message) Recipients() []string {
	out := make([]string, 0, len(m.To)+len(m.CC)+len(m.BCC))
	out = append(out, m.To...)
	out = append(out, m.CC...)
	return append(out, m.BCC...)
}

// Outgoing is a built message ready for a Mailer.
type Outgoing struct {
	EmailID    string
	TeamID     int64
	From       string
	Recipients []string // envelope: to, cc, bcc
	To         []string // the to addresses alone (the simulator looks at them)
	Raw        []byte   // RFC 5322 bytes
	// ConfigurationSet overrides the mailer's default SES configuration set for this message
	// (the set decides open and click tracking).
	ConfigurationSet string
}

// Mailer sends a built message and returns the provider's message id.
type Mailer interface {
	Send(ctx context.Context, m Outgoing) (messageID string, err error)
}

// Recorder is a Mailer whose own events record every send it accepts: once Send returns, the
// message's events are on disk and reach the ingester, which makes the email SENT from them,
// even across a crash (the local outbox). The worker then leaves SENT to those events instead
// of writing it too: one store write less per email. SES is not one: its events may be lost
// or late, so the worker records SENT itself.
type Recorder interface {
	Mailer
	// Pending reports whether the email was sent and its events are not all recorded yet.
	// Such an email is settled by those events: it must not be sent again, or given any
	// other outcome, meanwhile.
	Pending(emailID string) bool
}
