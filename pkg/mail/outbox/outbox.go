// Package outbox is the local Mailer: it writes each message as a real .eml file and then plays
// the part of SES, publishing the events SES would publish (honouring the SES mailbox simulator
// addresses), so that the local run exercises the same event handling as AWS.
package outbox

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/mail"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	mailport "github.com/mailroom/mailroom/pkg/mail"
	"github.com/mailroom/mailroom/pkg/sesevent"
)

// Sink receives the events the outbox produces; in the local server it is the same handler
// the SES events function runs on AWS.
type Sink interface {
	Publish(ctx context.Context, e sesevent.Event) error
}

// ErrClosed is returned by Send after Close.
var ErrClosed = errors.New("outbox: closed")

// Defaults for the options.
const (
	DefaultDelay    = 50 * time.Millisecond
	DefaultAttempts = 3
	DefaultBackoff  = 100 * time.Millisecond
)

// Option configures an Outbox.
type Option func(*Outbox)

// WithDelay sets how long after Send the events are published. The delay lets the caller record
// SENT (which it does after Send returns) before DELIVERED arrives, as with SES.
func WithDelay(d time.Duration) Option { return func(o *Outbox) { o.delay = d } }

// WithRetry sets how many times a failing Publish is tried and the first pause between tries
// (doubled each time).
func WithRetry(attempts int, backoff time.Duration) Option {
	return func(o *Outbox) {
		if attempts > 0 {
			o.attempts = attempts
		}
		o.backoff = backoff
	}
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *Outbox) { o.log = l } }

// Outbox is a mailer.Mailer writing to a directory. It is safe for concurrent use.
type Outbox struct {
	dir      string
	sink     Sink
	delay    time.Duration
	attempts int
	backoff  time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	pending []job
	closed  bool
	wake    chan struct{}
	ctx     context.Context // the publishing goroutine's; cancelled when Close gives up
	cancel  context.CancelFunc
	done    chan struct{}
}

var _ mailport.Mailer = (*Outbox)(nil)

// job is one sent message whose events are still to be published.
type job struct {
	at        time.Time
	sentAt    time.Time
	messageID string
	out       mailport.Outgoing
}

// New creates dir if needed and starts the goroutine that publishes events to sink. Call Close
// to flush and stop it.
func New(dir string, sink Sink, opts ...Option) (*Outbox, error) {
	if sink == nil {
		return nil, errors.New("outbox: nil sink")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("outbox: create %s: %w", dir, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := &Outbox{
		dir:      dir,
		sink:     sink,
		delay:    DefaultDelay,
		attempts: DefaultAttempts,
		backoff:  DefaultBackoff,
		log:      slog.Default(),
		wake:     make(chan struct{}, 1),
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
	}
	for _, opt := range opts {
		opt(o)
	}
	if err := o.loadSpool(); err != nil {
		return nil, err
	}
	go o.run()
	return o, nil
}

// spoolName is where Close keeps the events it could not publish in time; New publishes them.
const spoolName = ".pending-events.json"

// spooled is a job kept across a restart; the message itself is re-read from its .eml file.
type spooled struct {
	EmailID    string    `json:"emailId"`
	TeamID     int64     `json:"teamId"`
	MessageID  string    `json:"messageId"`
	SentAt     time.Time `json:"sentAt"`
	From       string    `json:"from"`
	To         []string  `json:"to"`
	Recipients []string  `json:"recipients"`
}

// spool writes jobs to the spool file so their events are published after the next start:
// dropping them would leave those emails SENT for ever.
func (o *Outbox) spool(jobs []job) error {
	list := make([]spooled, 0, len(jobs))
	for _, j := range jobs {
		list = append(list, spooled{EmailID: j.out.EmailID, TeamID: j.out.TeamID, MessageID: j.messageID,
			SentAt: j.sentAt, From: j.out.From, To: j.out.To, Recipients: j.out.Recipients})
	}
	b, err := json.Marshal(list)
	if err != nil {
		return err
	}
	tmp := filepath.Join(o.dir, spoolName+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(o.dir, spoolName))
}

// loadSpool queues the jobs a previous Close spooled and removes the spool file.
func (o *Outbox) loadSpool() error {
	path := filepath.Join(o.dir, spoolName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("outbox: read spool: %w", err)
	}
	var list []spooled
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("outbox: decode spool: %w", err)
	}
	now := time.Now()
	for _, sp := range list {
		raw, err := os.ReadFile(o.Path(sp.EmailID))
		if err != nil {
			o.log.Warn("outbox spool: message file missing", "emailId", sp.EmailID)
			continue
		}
		o.pending = append(o.pending, job{at: now.Add(o.delay), sentAt: sp.SentAt, messageID: sp.MessageID,
			out: mailport.Outgoing{EmailID: sp.EmailID, TeamID: sp.TeamID, From: sp.From, To: sp.To,
				Recipients: sp.Recipients, Raw: raw}})
	}
	if len(list) > 0 {
		o.log.Info("outbox: publishing events spooled at the last shutdown", "messages", len(list))
	}
	return os.Remove(path)
}

// Path returns the file a message with this email id is written to.
func (o *Outbox) Path(emailID string) string {
	return filepath.Join(o.dir, emailID+".eml")
}

// Send writes m.Raw to <dir>/<EmailID>.eml (atomically: a reader never sees half a message) and
// queues its events. A second send of the same email id replaces the file.
func (o *Outbox) Send(ctx context.Context, m mailport.Outgoing) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if !validEmailID(m.EmailID) {
		return "", fmt.Errorf("outbox: email id %q is not usable as a file name: %w", m.EmailID, mailport.ErrRejected)
	}
	o.mu.Lock()
	closed := o.closed
	o.mu.Unlock()
	if closed {
		return "", ErrClosed
	}

	tmp, err := os.CreateTemp(o.dir, "."+m.EmailID+"-*.tmp")
	if err != nil {
		return "", fmt.Errorf("outbox: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	if _, err := tmp.Write(m.Raw); err != nil {
		tmp.Close()
		return "", fmt.Errorf("outbox: write: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", fmt.Errorf("outbox: sync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("outbox: close: %w", err)
	}
	// Cancellation before the rename leaves nothing behind, as if Send had not been called.
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), o.Path(m.EmailID)); err != nil {
		return "", fmt.Errorf("outbox: rename: %w", err)
	}

	messageID, err := newMessageID()
	if err != nil {
		return "", fmt.Errorf("outbox: %w", err)
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		// The file is written: the message is "sent" even though its events are not.
		o.log.Warn("outbox closed during send; no events", "emailId", m.EmailID)
		return messageID, nil
	}
	o.pending = append(o.pending, job{at: now.Add(o.delay), sentAt: now, messageID: messageID, out: m})
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return messageID, nil
}

// Close publishes the events still pending and stops the goroutine. When ctx ends first the rest
// are spooled to the directory for the next New and ctx's error is returned. Close may be called more than once.
func (o *Outbox) Close(ctx context.Context) error {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	select {
	case <-o.done:
		return nil
	case <-ctx.Done():
		o.cancel()
		<-o.done
		return ctx.Err()
	}
}

func (o *Outbox) run() {
	defer close(o.done)
	defer o.cancel()
	for {
		o.mu.Lock()
		if len(o.pending) == 0 {
			closed := o.closed
			o.mu.Unlock()
			if closed {
				return
			}
			select {
			case <-o.wake:
			case <-o.ctx.Done():
				return
			}
			continue
		}
		j := o.pending[0]
		o.pending = o.pending[1:]
		o.mu.Unlock()

		if !sleep(o.ctx, time.Until(j.at)) {
			o.drop(j)
			return
		}
		for _, e := range simulate(j, time.Now()) {
			if !o.publish(e) {
				o.drop(j)
				return
			}
		}
	}
}

// drop spools the events Close could not wait for (j and everything still queued); they are
// published after the next start. Only if the spool cannot be written are they lost (logged).
func (o *Outbox) drop(j job) {
	o.mu.Lock()
	jobs := append([]job{j}, o.pending...)
	o.pending = nil
	o.mu.Unlock()
	if err := o.spool(jobs); err != nil {
		o.log.Error("outbox closing: events dropped", "messagesDropped", len(jobs), "err", err)
		return
	}
	o.log.Warn("outbox closing: events spooled for the next start", "messages", len(jobs))
}

// publish hands e to the sink, retrying with backoff; it returns false when the outbox is being
// torn down.
func (o *Outbox) publish(e sesevent.Event) bool {
	backoff := o.backoff
	for attempt := 1; ; attempt++ {
		err := o.sink.Publish(o.ctx, e)
		if err == nil {
			o.log.Debug("outbox event published", "emailId", e.EmailID(), "eventType", e.EventType,
				"recipients", e.Recipients())
			return true
		}
		if o.ctx.Err() != nil {
			return false
		}
		if attempt >= o.attempts {
			o.log.Error("outbox event not published", "emailId", e.EmailID(), "eventType", e.EventType,
				"attempts", attempt, "error", err)
			return true
		}
		o.log.Warn("outbox event publish failed; retrying", "emailId", e.EmailID(), "eventType", e.EventType,
			"attempt", attempt, "error", err)
		if !sleep(o.ctx, backoff) {
			return false
		}
		backoff *= 2
	}
}

// sleep waits d or until ctx ends; it reports whether the full wait happened.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// The SES mailbox simulator addresses (a +label before the @ is allowed, as with SES).
const (
	simulatorDomain    = "simulator.amazonses.com"
	simSuccess         = "success"
	simBounce          = "bounce"
	simOOTO            = "ooto"
	simComplaint       = "complaint"
	simSuppressionList = "suppressionlist"
)

// simulate returns the events SES would publish for j, per recipient, in order.
func simulate(j job, now time.Time) []sesevent.Event {
	base := sesevent.Mail{
		Timestamp:   j.sentAt.UTC(),
		Source:      j.out.From,
		MessageID:   j.messageID,
		Destination: addresses(j.out.Recipients),
		Tags: map[string][]string{
			"ses:operation":   {"SendEmail"},
			"ses:from-domain": {domainOf(address(j.out.From))},
		},
	}
	base.Headers, base.CommonHeaders = headers(j.out.Raw)
	now = now.UTC()
	processing := now.Sub(j.sentAt).Milliseconds()

	var out []sesevent.Event
	for _, rcpt := range base.Destination {
		delivery := sesevent.Event{EventType: sesevent.TypeDelivery, Mail: base, Delivery: &sesevent.Delivery{
			Timestamp:            now,
			ProcessingTimeMillis: processing,
			Recipients:           []string{rcpt},
			SMTPResponse:         "250 2.6.0 Message received",
			ReportingMTA:         "outbox.local",
		}}
		switch simulatorMailbox(rcpt) {
		case simBounce:
			out = append(out, bounce(base, rcpt, now, sesevent.BounceSubTypeGeneral,
				"smtp; 550 5.1.1 user unknown"))
		case simSuppressionList:
			out = append(out, bounce(base, rcpt, now, sesevent.BounceSubTypeOnAccountSuppressionList,
				"Amazon SES did not send the message to this address because it is on the suppression list for your account."))
		case simComplaint:
			out = append(out, delivery, sesevent.Event{EventType: sesevent.TypeComplaint, Mail: base,
				Complaint: &sesevent.Complaint{
					ComplainedRecipients:  []sesevent.Recipient{{EmailAddress: rcpt}},
					Timestamp:             now,
					FeedbackID:            j.messageID + "-complaint",
					UserAgent:             "Amazon SES Mailbox Simulator",
					ComplaintFeedbackType: "abuse",
					ArrivalDate:           now.Format(time.RFC3339Nano),
				}})
		default: // success, ooto (SES also sends an auto-reply, which is no event) and real addresses
			out = append(out, delivery)
		}
	}
	return out
}

func bounce(base sesevent.Mail, rcpt string, now time.Time, subType, diagnostic string) sesevent.Event {
	return sesevent.Event{EventType: sesevent.TypeBounce, Mail: base, Bounce: &sesevent.Bounce{
		BounceType:    sesevent.BounceTypePermanent,
		BounceSubType: subType,
		BouncedRecipients: []sesevent.BouncedRecipient{{
			EmailAddress: rcpt, Action: "failed", Status: "5.1.1", DiagnosticCode: diagnostic,
		}},
		Timestamp:    now,
		FeedbackID:   base.MessageID + "-bounce",
		ReportingMTA: "dns; outbox.local",
	}}
}

// simulatorMailbox returns the simulator mailbox an address targets ("" for other addresses).
func simulatorMailbox(addr string) string {
	local, domain, ok := strings.Cut(strings.ToLower(addr), "@")
	if !ok || domain != simulatorDomain {
		return ""
	}
	local, _, _ = strings.Cut(local, "+")
	return local
}

// address returns the bare address of "Name <a@b>" or "a@b".
func address(s string) string {
	if a, err := mail.ParseAddress(s); err == nil {
		return a.Address
	}
	return strings.TrimSpace(s)
}

func addresses(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		out = append(out, address(s))
	}
	return out
}

func domainOf(addr string) string {
	if at := strings.LastIndexByte(addr, '@'); at >= 0 {
		return addr[at+1:]
	}
	return ""
}

// headers returns the header fields of raw in order, values as written (SES echoes them
// undecoded), and the common headers SES extracts (decoded).
func headers(raw []byte) ([]sesevent.Header, *sesevent.CommonHeaders) {
	r := textproto.NewReader(bufio.NewReader(io.LimitReader(bytes.NewReader(raw), 1<<20)))
	var hs []sesevent.Header
	for {
		line, err := r.ReadContinuedLine()
		if line == "" || err != nil {
			break
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		hs = append(hs, sesevent.Header{Name: strings.TrimSpace(name), Value: strings.TrimSpace(value)})
	}
	common := &sesevent.CommonHeaders{}
	dec := new(mime.WordDecoder)
	for _, h := range hs {
		switch strings.ToLower(h.Name) {
		case "from":
			common.From = decodedList(dec, h.Value)
		case "to":
			common.To = decodedList(dec, h.Value)
		case "cc":
			common.Cc = decodedList(dec, h.Value)
		case "reply-to":
			common.ReplyTo = decodedList(dec, h.Value)
		case "message-id":
			common.MessageID = h.Value
		case "date":
			common.Date = h.Value
		case "subject":
			if s, err := dec.DecodeHeader(h.Value); err == nil {
				common.Subject = s
			} else {
				common.Subject = h.Value
			}
		}
	}
	return hs, common
}

func decodedList(dec *mime.WordDecoder, v string) []string {
	list, err := (&mail.AddressParser{WordDecoder: dec}).ParseList(v)
	if err != nil {
		return []string{v}
	}
	out := make([]string, 0, len(list))
	for _, a := range list {
		if a.Name != "" {
			out = append(out, a.Name+" <"+a.Address+">")
		} else {
			out = append(out, a.Address)
		}
	}
	return out
}

// validEmailID accepts ids that are a plain file name.
func validEmailID(id string) bool {
	if id == "" || id == "." || id == ".." || len(id) > 200 {
		return false
	}
	for _, c := range id {
		ok := c == '-' || c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !ok {
			return false
		}
	}
	return true
}

// newMessageID makes an id in the shape of an SES message id.
func newMessageID() (string, error) {
	var r [16]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("message id: %w", err)
	}
	h := hex.EncodeToString(r[:])
	return fmt.Sprintf("0100%012x-%s-%s-%s-%s-%s-000000",
		time.Now().UnixMilli(), h[0:8], h[8:12], h[12:16], h[16:20], h[20:32]), nil
}
