// Package deliver is the deliver flow: claim a QUEUED email with a conditional update (so no
// email is sent twice), check its domain and the suppression list, build the MIME message, send
// it through the mailer with backoff on throttling, and record SENT — or FAILED with the error
// after the last attempt. On AWS the send worker function runs it for each stream record; locally
// the Pool runs it in process.
package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/mail"
	"github.com/mailroom/mailroom/pkg/metric"
	"github.com/mailroom/mailroom/pkg/store"
)

// Store is what delivery needs from persistence.
type Store interface {
	store.Emails
	store.Domains
	store.Suppressions
	store.Campaigns
	store.Contacts
}

// Worker delivers emails.
type Worker struct {
	Store  Store
	Mailer mail.Mailer
	Log    *slog.Logger
	Now    func() time.Time
	// Metrics counts the emails sent and failed (nil: none).
	Metrics metric.Counter
	// Attempts is how many times a throttled or transient send is tried (default 5).
	Attempts int
	// Backoff is the wait before retry n (1-based); default exponential from 200 ms, jittered.
	Backoff func(n int) time.Duration
	// ConfigurationSet is the base SES configuration set. Tracking is a property of a set, so
	// the deployment has four: <base>, <base>-open, <base>-click and <base>-open-click, and each
	// message goes through the one matching its domain's openTracking and clickTracking.
	ConfigurationSet string
	// Pacer keeps sends within the account's rate across every worker (nil: unpaced).
	Pacer *Pacer
	// Exclusive, when set, says that this process alone delivers from the store (the local
	// server: the embedded store's file is locked to it) and that the mailer records its own
	// sends (mail.Recorder, the outbox). A plain send is then claimed in memory, not in the
	// store: the worker reads the email, sends it, and the mailer's events take it from
	// QUEUED to SENT, one store write per email instead of two. Anything else (a campaign
	// paused or deleted, a suppressed recipient, a failed send, pacing) takes the store claim.
	Exclusive *Claims
	// ReplyReference returns the Message-ID header a sent email went out with, for the
	// In-Reply-To of a reply (SES replaces Message-ID with <messageId@email.amazonses.com>);
	// nil means the one Mailroom sets, see MessageIDHeader.
	ReplyReference func(ref store.Email) string

	books bookCache // whether campaigns' contact books exist, for a while (bookGone)
}

// bookCheckFor is how long a worker trusts what it read of a contact book's existence: every
// email of a campaign would otherwise read its book, a large item (the double opt-in email)
// that all of them read on one partition. A book deleted meanwhile is seen within it.
const bookCheckFor = 30 * time.Second

// bookCache remembers, per book, whether it exists and when that was read.
type bookCache struct {
	mu sync.Mutex
	m  map[string]bookSeen
}

type bookSeen struct {
	gone bool
	at   time.Time
}

func bookKey(teamID int64, bookID string) string { return fmt.Sprintf("%d/%s", teamID, bookID) }

// forget drops what is known of a book, so that the next bookGone reads it.
func (b *bookCache) forget(teamID int64, bookID string) {
	b.mu.Lock()
	delete(b.m, bookKey(teamID, bookID))
	b.mu.Unlock()
}

// bookGone reports whether the campaign's contact book was deleted, read at most once every
// bookCheckFor per book.
func (w *Worker) bookGone(ctx context.Context, teamID int64, bookID string) (bool, error) {
	k, now := bookKey(teamID, bookID), w.Now()
	w.books.mu.Lock()
	seen, ok := w.books.m[k]
	w.books.mu.Unlock()
	if ok && now.Sub(seen.at) < bookCheckFor {
		return seen.gone, nil
	}
	_, err := w.Store.GetContactBook(ctx, teamID, bookID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, fmt.Errorf("get contact book: %w", err)
	}
	gone := errors.Is(err, store.ErrNotFound)
	w.books.mu.Lock()
	if w.books.m == nil || len(w.books.m) > 10000 {
		w.books.m = map[string]bookSeen{}
	}
	w.books.m[k] = bookSeen{gone: gone, at: now}
	w.books.mu.Unlock()
	return gone, nil
}

var (
	errSkip    = errors.New("not claimable")
	errSettled = errors.New("already settled by the provider's events")
)

// Deliver sends one email if it is still QUEUED (or its SENDING lease has expired); any other
// state means someone else has it or it is done, and Deliver returns nil. An error means the
// outcome could not be recorded and the caller should retry later.
func (w *Worker) Deliver(ctx context.Context, id string) error {
	if w.Exclusive == nil {
		return w.deliver(ctx, id)
	}
	for {
		if !w.Exclusive.take(id) {
			return nil // another worker of this process has it, and runs it again after
		}
		err := w.deliver(ctx, id)
		if again := w.Exclusive.drop(id); !again || err != nil {
			return err
		}
	}
}

func (w *Worker) deliver(ctx context.Context, id string) error {
	if r, ok := w.Mailer.(mail.Recorder); ok {
		if r.Pending(id) {
			// Sent; its events, on their way, settle it (pkg/ingest), whatever changed since.
			w.log().Debug("email sent already; its events settle it", "emailId", id)
			return nil
		}
		if w.Exclusive != nil && w.Pacer == nil {
			if sent, err := w.sendUnclaimed(ctx, id); sent || err != nil {
				return err
			}
		}
	}
	return w.deliverClaimed(ctx, id)
}

// Claims are the emails the workers of this process are delivering (Worker.Exclusive).
type Claims struct {
	mu  sync.Mutex
	ids map[string]bool // id → delivered again when done (it was dispatched meanwhile)
}

// NewClaims returns an empty set of claims.
func NewClaims() *Claims { return &Claims{ids: map[string]bool{}} }

// take claims id; when another worker has it, take asks that worker to deliver it once more
// when it is done (the dispatch may follow a change, such as a campaign's resume).
func (c *Claims) take(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.ids[id]; ok {
		c.ids[id] = true
		return false
	}
	c.ids[id] = false
	return true
}

// drop releases id and says whether it was dispatched again meanwhile.
func (c *Claims) drop(id string) (again bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	again = c.ids[id]
	delete(c.ids, id)
	return again
}

// sendUnclaimed is the plain case of an Exclusive worker: an email QUEUED, not held back, its
// campaign (if any) running and its contact subscribed, its domain verified, a recipient not
// suppressed: it is sent without a claim in the store, and the mailer's events make it SENT
// (no other process delivers, and this process's claim is in memory). sent is false when the
// email is not that case, or the send failed: the caller then takes the store claim and goes
// the usual way, which reads the email again.
func (w *Worker) sendUnclaimed(ctx context.Context, id string) (sent bool, err error) {
	now := w.Now().UTC()
	e, err := w.Store.GetEmail(ctx, id)
	if err != nil || e.Status != store.StatusQueued || e.Held || (e.NotBefore != nil && now.Before(*e.NotBefore)) {
		return false, nil
	}
	if _, ok := ctx.Deadline(); ok {
		return false, nil // an invocation's deadline: the store claim's release covers it
	}
	if e.CampaignID != "" {
		paused, status, _, err := w.campaignState(ctx, e)
		if err != nil || paused || status != "" {
			return false, nil
		}
	}
	msg, dom, why, err := w.prepare(ctx, e)
	if err != nil || why.reason != "" || !why.until.IsZero() {
		return false, nil
	}
	raw, err := mail.Build(msg)
	if err != nil {
		return false, nil
	}
	messageID, err := w.Mailer.Send(ctx, w.outgoing(e, msg, dom, raw))
	switch {
	case err == nil:
		// The mailer's events make it SENT (pkg/ingest), with this message id.
		w.log().Info("email sent; its events record it", "emailId", id, "teamId", e.TeamID, "messageId", messageID)
		return true, nil
	case ctx.Err() != nil:
		// Interrupted (shutdown): nothing was claimed, it is still QUEUED for the next start.
		w.log().Warn("send interrupted; email stays queued", "emailId", id, "err", err)
		return true, nil
	}
	return false, nil // the usual way retries it, and records FAILED after its attempts
}

// deliverClaimed delivers id under a claim in the store.
func (w *Worker) deliverClaimed(ctx context.Context, id string) error {
	now := w.Now().UTC()
	var dropStatus, dropWhy string
	held := false
	e, err := w.Store.UpdateEmail(ctx, id, func(e *store.Email) ([]store.Event, error) {
		held = false // this may run more than once
		if ours(e, now) {
			// Our own claim, committed by an attempt whose answer was lost (a retried
			// conditional write then finds the email changed, and the store runs this again):
			// the claim is ours, go on with it rather than wait out the lease.
			return nil, nil
		}
		if !email.Allowed(e.Status, store.StatusSending, email.ByWorker) {
			// Sent, settled, or claimed by another worker: a claim, however old, is never
			// taken over here; only the reconciler hands it back, once the lease and the
			// grace for SES's evidence have passed without any.
			return nil, errSkip
		}
		if e.NotBefore != nil && now.Before(*e.NotBefore) {
			return nil, errSkip // held back (throttled, paused): the reconciler hands it back
		}
		if e.Held {
			return nil, errSkip // its campaign is paused: the campaign releases it
		}
		dropStatus, dropWhy = "", "" // this may run more than once
		if e.CampaignID != "" {
			paused, status, why, err := w.campaignState(ctx, *e)
			switch {
			case err != nil:
				return nil, err
			case paused:
				// Held: the email waits QUEUED, out of the pending index (the reconciler does
				// not touch it), until a step of the resumed (or deleted) campaign releases it.
				if err := email.Move(e, store.StatusQueued, email.ByWorker, now); err != nil {
					return nil, err
				}
				e.Held, held = true, true
				return nil, nil
			}
			dropStatus, dropWhy = status, why
		}
		return nil, email.Move(e, store.StatusSending, email.ByWorker, now)
	})
	if errors.Is(err, errSkip) || errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("claim %s: %w", id, err)
	}
	if held {
		w.log().Info("campaign email held: the campaign is paused", "emailId", id)
		return w.recheckHeld(ctx, e)
	}
	log := w.log().With("emailId", id, "teamId", e.TeamID)
	log.Debug("email claimed", "recipients", len(e.To)+len(e.CC)+len(e.BCC), "campaignId", e.CampaignID, "attempt", e.Attempts)

	if dropStatus != "" {
		log.Info("campaign email not sent", "campaignId", e.CampaignID, "status", dropStatus, "reason", dropWhy)
		return w.finish(ctx, id, now, dropStatus, "", map[string]string{"error": dropWhy})
	}

	msg, dom, why, err := w.prepare(ctx, e)
	if err != nil {
		return w.release(ctx, id, now, err, nil)
	}
	if !why.until.IsZero() {
		log.Info("reply waits until the email it replies to is sent", "inReplyToId", e.InReplyToID, "until", why.until.Format(time.RFC3339))
		return w.release(ctx, id, now, nil, &why.until)
	}
	if why.reason != "" {
		status, data := store.StatusFailed, map[string]string{"error": why.reason}
		if why.suppression != "" {
			status, data["suppressionType"] = store.StatusSuppressed, why.suppression
		}
		log.Info("email not sent", "status", status, "reason", why.reason)
		return w.finish(ctx, id, now, status, "", data)
	}
	raw, err := mail.Build(msg)
	if err != nil {
		log.Error("build message", "err", err)
		return w.finish(ctx, id, now, store.StatusFailed, "", map[string]string{"error": "The message could not be built"})
	}
	out := w.outgoing(e, msg, dom, raw)
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < SendRoom {
		// Too close to the invocation's end to send and still record the outcome: a send the
		// function is killed after would be sent again. Back to QUEUED for the next run.
		log.Info("no time left to send and record; email released")
		return w.release(ctx, id, now, nil, nil)
	}
	// A campaign email that waited for its send slot is checked again before it goes: the
	// campaign may have been paused or deleted, or the contact unsubscribed, meanwhile.
	var changed campaignChange
	var recheck func(context.Context) error
	if e.CampaignID != "" {
		recheck = func(ctx context.Context) error {
			paused, status, why, err := w.campaignState(ctx, e)
			switch {
			case err != nil:
				return fmt.Errorf("%w: %w", errPacing, err)
			case paused || status != "":
				changed = campaignChange{paused: paused, status: status, why: why}
				return errCampaignChanged
			}
			return nil
		}
	}
	messageID, retryAt, err := w.send(ctx, log, out, recheck)
	if errors.Is(err, errCampaignChanged) {
		if changed.paused {
			log.Info("campaign email held: the campaign was paused while it waited for a send slot", "campaignId", e.CampaignID)
			return w.hold(ctx, id, now)
		}
		log.Info("campaign email not sent", "campaignId", e.CampaignID, "status", changed.status, "reason", changed.why)
		return w.finish(ctx, id, now, changed.status, "", map[string]string{"error": changed.why})
	}
	if !retryAt.IsZero() && err == nil {
		// Not now (throttled, no send slot in time, the account paused): back to QUEUED,
		// held until retryAt. Throttling never fails an email.
		log.Info("email waits for a send slot", "until", retryAt.Format(time.RFC3339))
		return w.release(ctx, id, now, nil, &retryAt)
	}
	if errors.Is(err, mail.ErrAmbiguous) {
		// SES may have accepted it: neither send again nor fail it. The claim stays; SES's
		// events settle the email (pkg/ingest), and only if none comes within the lease and
		// its grace does the reconciler hand it back to be sent.
		log.Warn("send outcome unknown; waiting for the provider's events", "err", err)
		return nil
	}
	if errors.Is(err, errStopping) {
		log.Info("stopping: email released before its send slot, sent after the next start")
		return w.release(ctx, id, now, nil, nil)
	}
	if err != nil && errors.Is(err, errPacing) {
		// The pacing counter or the account's quota could not be read, not the email's
		// fault: back to QUEUED, held briefly (a release without a wait would come straight
		// back through the stream and hammer what failed).
		retryAt := w.Now().UTC().Add(PacingRetry)
		log.Warn("no send slot (pacing failed); email released", "err", err, "until", retryAt.Format(time.RFC3339))
		return w.release(ctx, id, now, err, &retryAt)
	}
	if err != nil && ctx.Err() != nil {
		// Interrupted (shutdown), not the email's fault: back to QUEUED for the next worker.
		log.Warn("send interrupted; email released", "err", err)
		return w.release(ctx, id, now, err, nil)
	}
	if err != nil {
		log.Warn("send failed", "err", err)
		return w.finish(ctx, id, now, store.StatusFailed, "", map[string]string{"error": sendError(err)})
	}
	if _, ok := w.Mailer.(mail.Recorder); ok {
		// The mailer's own events make it SENT (pkg/ingest), with this message id.
		log.Info("email sent; its events record it", "messageId", messageID)
		return nil
	}
	log.Info("email sent", "messageId", messageID)
	return w.finish(ctx, id, now, store.StatusSent, messageID, map[string]string{"messageId": messageID})
}

// recheckHeld looks at the campaign again once the hold is written: a resume (or a delete)
// whose release ran between the worker's read of the campaign and its hold would have missed
// this email, so the worker releases it itself and delivers it (or cancels it) at once.
func (w *Worker) recheckHeld(ctx context.Context, e store.Email) error {
	c, err := w.Store.GetCampaignState(ctx, e.TeamID, e.CampaignID)
	if err == nil && c.Status == store.CampaignPaused {
		// Still paused: the resumed campaign's next step releases it, or, should its book have
		// gone meanwhile (after the housekeeping looked), this worker does, to settle it.
		w.books.forget(e.TeamID, c.ContactBookID) // read it now, and so does the claim below
		if gone, err := w.bookGone(ctx, e.TeamID, c.ContactBookID); err != nil || !gone {
			return err
		}
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("recheck the campaign of held email %s: %w", e.ID, err)
	}
	_, err = w.Store.UpdateEmail(ctx, e.ID, email.ReleaseHeld(w.Now().UTC()))
	if errors.Is(err, email.ErrNotHeld) {
		return nil // released already
	}
	if err != nil {
		return fmt.Errorf("release held email %s: %w", e.ID, err)
	}
	return w.deliverClaimed(ctx, e.ID) // not Deliver: this call holds its in-memory claim
}

// SendRoom is how much of the invocation must be left for a send to start: the send itself
// (a few hundred milliseconds) and the write of its outcome, with their retries.
const SendRoom = 5 * time.Second

// campaignState checks a campaign email against its campaign and its contact as they are now,
// at send time: a deleted campaign cancels it, a contact whose book was deleted is not mailed
// (the book's contacts are removed in the background, so the book is what says so), a paused
// campaign holds it, and a contact who unsubscribed (or was removed from the book) since the
// email was written is not mailed. A paused campaign's emails to a deleted book are settled,
// not held: the campaign cannot resume, and a hold would leave them QUEUED for ever.
func (w *Worker) campaignState(ctx context.Context, e store.Email) (held bool, status, why string, err error) {
	c, err := w.Store.GetCampaignState(ctx, e.TeamID, e.CampaignID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, store.StatusCancelled, "The campaign was deleted", nil
	case err != nil:
		return false, "", "", fmt.Errorf("get campaign: %w", err)
	}
	if e.ContactID != "" {
		gone, err := w.bookGone(ctx, e.TeamID, c.ContactBookID)
		switch {
		case err != nil:
			return false, "", "", err
		case gone:
			return false, store.StatusSuppressed, "The contact book was deleted", nil
		}
	}
	if c.Status == store.CampaignPaused {
		return true, "", "", nil
	}
	if e.ContactID == "" {
		return false, "", "", nil
	}
	ct, err := w.Store.GetContact(ctx, e.TeamID, c.ContactBookID, e.ContactID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, store.StatusSuppressed, "The contact was removed from the contact book", nil
	case err != nil:
		return false, "", "", fmt.Errorf("get contact: %w", err)
	case !ct.Subscribed:
		return false, store.StatusSuppressed, "The contact unsubscribed", nil
	}
	return false, "", "", nil
}

// MessageIDHeader is the Message-ID Mailroom gives an email: stable, so a reply can name it.
func MessageIDHeader(e store.Email) string {
	return "<" + e.ID + "@" + email.DomainOf(e.From) + ">"
}

// skip says why an email is not sent; for one whose every recipient is suppressed, also the
// kind of the suppression as webhooks name it (Bounce, Complaint or Manual).
type skip struct {
	reason, suppression string
	// until: not now, and not the email's fault: it waits, QUEUED, until then (a reply whose
	// parent SES has not sent yet, so that its Message-ID is not known).
	until time.Time
}

const reasonSuppressed = "Every recipient in to is on the suppression list"

// prepare checks the domain and suppressions and builds the message. A non-empty reason means
// the email must not be sent; an error means the check itself failed (retry later).
func (w *Worker) prepare(ctx context.Context, e store.Email) (mail.Message, store.Domain, skip, error) {
	msg, why, err := w.message(ctx, e)
	if err != nil || why.reason != "" || !why.until.IsZero() {
		return mail.Message{}, store.Domain{}, why, err
	}
	dom, err := w.Store.GetDomain(ctx, e.TeamID, e.DomainID)
	if errors.Is(err, store.ErrNotFound) {
		return mail.Message{}, store.Domain{}, skip{reason: "The sending domain no longer exists"}, nil
	}
	if err != nil {
		return mail.Message{}, store.Domain{}, skip{}, fmt.Errorf("get domain: %w", err)
	}
	if dom.Status != store.DomainSuccess {
		return mail.Message{}, store.Domain{}, skip{reason: "The sending domain is not verified"}, nil
	}
	return msg, dom, skip{}, nil
}

// outgoing is the built message of e for the mailer, through its domain's configuration set.
func (w *Worker) outgoing(e store.Email, msg mail.Message, dom store.Domain, raw []byte) mail.Outgoing {
	return mail.Outgoing{EmailID: e.ID, TeamID: e.TeamID, From: msg.From, Recipients: msg.Recipients(),
		To: msg.To, Raw: raw, ConfigurationSet: w.configurationSet(dom)}
}

// configurationSet picks the set matching the domain's tracking flags.
func (w *Worker) configurationSet(d store.Domain) string {
	if w.ConfigurationSet == "" {
		return ""
	}
	set := w.ConfigurationSet
	if d.OpenTracking {
		set += "-open"
	}
	if d.ClickTracking {
		set += "-click"
	}
	return set
}

// message checks suppressions and builds the message of e.
func (w *Worker) message(ctx context.Context, e store.Email) (mail.Message, skip, error) {
	all := append(append(append([]string{}, e.To...), e.CC...), e.BCC...)
	bare := make([]string, len(all))
	for i, a := range all {
		bare[i] = strings.ToLower(email.AddressOnly(a))
	}
	supp, err := w.Store.GetSuppressions(ctx, e.TeamID, bare)
	if err != nil {
		return mail.Message{}, skip{}, fmt.Errorf("get suppressions: %w", err)
	}
	keep := func(list []string) []string {
		var out []string
		for _, a := range list {
			if _, ok := supp[strings.ToLower(email.AddressOnly(a))]; !ok {
				out = append(out, a)
			}
		}
		return out
	}
	msg := mail.Message{
		EmailID: e.ID, From: e.From, To: keep(e.To), CC: keep(e.CC), BCC: keep(e.BCC),
		ReplyTo: e.ReplyTo, Subject: e.Subject,
	}
	if len(msg.To) == 0 {
		return mail.Message{}, skip{reason: reasonSuppressed, suppression: suppressionKind(supp, e.To)}, nil
	}
	if e.Content.HTML != nil {
		msg.HTML = *e.Content.HTML
	}
	if e.Content.Text != nil {
		msg.Text = *e.Content.Text
	}
	if msg.Text == "" && msg.HTML != "" && e.CampaignID != "" {
		// A campaign's email gets a text part made from its HTML, as upstream gives it one
		// (mail in HTML alone reads worse in some clients, and scores worse with spam
		// filters); it is made here, at each send, not stored.
		msg.Text = mail.TextFromHTML(msg.HTML)
	}
	for _, h := range e.Content.Headers {
		msg.Headers = append(msg.Headers, mail.Header{Name: h.Name, Value: h.Value})
	}
	for _, a := range e.Content.Attachments {
		data, err := email.DecodeAttachment(a.Content)
		if err != nil {
			return mail.Message{}, skip{reason: "An attachment could not be decoded"}, nil
		}
		msg.Attachments = append(msg.Attachments, mail.Attachment{Filename: a.Filename, Data: data})
	}
	msg.MessageID = MessageIDHeader(e)
	var until time.Time
	msg.InReplyTo, msg.References, until = w.thread(ctx, e.InReplyToID)
	if !until.IsZero() {
		return mail.Message{}, skip{until: until}, nil
	}
	return msg, skip{}, nil
}

// ReplyWait is how long a reply whose parent is queued or being sent waits before it is tried
// again (a scheduled parent: this long after its time).
const ReplyWait = 5 * time.Second

// ReplyRecheck is the longest a reply waits before it looks at its parent again.
const ReplyRecheck = time.Hour

// unsentYet reports whether e is not sent but still may be: queued (held by a paused campaign
// too), scheduled, or being sent.
func unsentYet(e store.Email) bool {
	switch e.Status {
	case store.StatusQueued, store.StatusScheduled, store.StatusSending:
		return true
	}
	return false
}

// maxThread is how many emails back a reply's References go.
const maxThread = 20

// thread is what a reply to the email id says of its thread: the Message-ID it replies to, and
// the ones before it, oldest first (RFC 5322 3.6.4: the parent's References, then the parent).
// The parent's own References are its custom References header, or else those of the email it
// replied to in turn, up to maxThread emails back. The thread stops at an email that was
// never sent (failed, cancelled, suppressed): nothing when id names one.
//
// An email of the thread not sent yet (a reply sent right after its parent, or to a scheduled
// one) has its Message-ID known in advance where Mailroom gives it (MessageIDHeader, the local
// outbox); through SES, which gives a message its Message-ID when it sends it
// (ReplyReference), the reply waits until then: until is when to try again.
func (w *Worker) thread(ctx context.Context, id string) (inReplyTo string, before []string, until time.Time) {
	for depth := 0; id != "" && depth < maxThread; depth++ {
		ref, err := w.Store.GetEmail(ctx, id)
		if err != nil {
			break
		}
		if ref.MessageID == "" {
			if !unsentYet(ref) {
				break
			}
			if w.ReplyReference != nil {
				now := w.Now().UTC()
				until = now.Add(ReplyWait)
				if ref.Status == store.StatusScheduled && ref.ScheduledAt != nil && ref.ScheduledAt.After(now) {
					// At most ReplyRecheck at a time: the parent may be cancelled, moved
					// earlier or sent now meanwhile.
					until = ref.ScheduledAt.UTC().Add(ReplyWait)
					if recheck := now.Add(ReplyRecheck); recheck.Before(until) {
						until = recheck
					}
				}
				return "", nil, until
			}
		}
		msgID := MessageIDHeader(ref)
		if w.ReplyReference != nil {
			msgID = w.ReplyReference(ref)
		}
		if depth == 0 {
			inReplyTo = msgID
		} else {
			before = append(before, msgID)
		}
		if custom := headerValue(ref.Content.Headers, "References"); custom != "" {
			ids := strings.Fields(custom)
			slices.Reverse(ids)
			before = append(before, ids...)
			break
		}
		if ref.InReplyToID == "" {
			// A parent that replied to a message Mailroom did not send, by its own
			// In-Reply-To: that id comes before it (RFC 5322 3.6.4, a parent without
			// References).
			if custom := strings.Fields(headerValue(ref.Content.Headers, "In-Reply-To")); len(custom) == 1 {
				before = append(before, custom[0])
			}
			break
		}
		id = ref.InReplyToID
	}
	slices.Reverse(before)
	return inReplyTo, before, time.Time{}
}

// headerValue is the value of the custom header name ("" when absent).
func headerValue(headers []store.Header, name string) string {
	for _, h := range headers {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// suppressionKind names why the addresses to are suppressed, as webhooks do: Bounce when one
// of them hard-bounced, else Complaint when one complained, else Manual.
func suppressionKind(supp map[string]store.Suppression, to []string) string {
	kind := "Manual"
	for _, a := range to {
		switch supp[strings.ToLower(email.AddressOnly(a))].Reason {
		case store.ReasonHardBounce:
			return "Bounce"
		case store.ReasonComplaint:
			kind = "Complaint"
		}
	}
	return kind
}

// send hands the message to the mailer, each attempt within the account's rate (Pacer). A
// throttled attempt is tried again in a later slot while the invocation has time; then, or
// when the account is paused, send returns the time to try again instead of an error. A
// rejection or an ambiguous answer is final; other errors are retried with backoff.
//
// recheck (nil: none) runs once a send slot was waited for RecheckAfterWait or longer, before
// the send; its error ends send with that error, unsent.
func (w *Worker) send(ctx context.Context, log *slog.Logger, out mail.Outgoing, recheck func(context.Context) error) (string, time.Time, error) {
	attempts := w.Attempts
	if attempts <= 0 {
		attempts = 5
	}
	by := w.sendBy(ctx) // once: a throttled send tries later slots until then, not for ever
	for n := 1; ; n++ {
		if w.Pacer != nil {
			actx, cancel := pacing(ctx)
			asked := time.Now()
			retryAt, err := w.Pacer.Acquire(actx, by)
			cancel()
			if err != nil && stopping(ctx) {
				return "", time.Time{}, errStopping
			}
			if err != nil {
				return "", time.Time{}, fmt.Errorf("%w: %w", errPacing, err)
			}
			if !retryAt.IsZero() {
				return "", retryAt, nil
			}
			if recheck != nil && time.Since(asked) >= RecheckAfterWait {
				if err := recheck(ctx); err != nil {
					return "", time.Time{}, err
				}
			}
		}
		id, err := w.Mailer.Send(ctx, out)
		switch {
		case err == nil:
			return id, time.Time{}, nil
		case errors.Is(err, mail.ErrRejected), errors.Is(err, mail.ErrAmbiguous):
			return "", time.Time{}, err // final; an ambiguous answer must not be sent again
		case errors.Is(err, mail.ErrPaused):
			until := w.Now().UTC().Add(PausedWait)
			if w.Pacer != nil {
				w.Pacer.Pause(until, err.Error())
			} else {
				log.Error("sending is paused for the account: email waits in QUEUED", "until", until.Format(time.RFC3339))
			}
			return "", until, nil
		case errors.Is(err, mail.ErrThrottled) && w.Pacer != nil:
			log.Warn("send throttled; next slot", "attempt", n)
			continue // Acquire stops at the invocation's deadline
		case n >= attempts && errors.Is(err, mail.ErrThrottled):
			return "", w.Now().UTC().Add(w.backoff(n) + time.Minute), nil
		case n >= attempts:
			return "", time.Time{}, err
		}
		wait := w.backoff(n)
		log.Warn("send retry", "attempt", n, "wait", wait.String(), "throttled", errors.Is(err, mail.ErrThrottled))
		select {
		case <-ctx.Done():
			return "", time.Time{}, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// errPacing marks a failure to take a send slot (the store), which is not the email's fault.
var errPacing = errors.New("pacing")

// RecheckAfterWait is how long a campaign email may wait for its send slot before its campaign
// and contact are read again (a slot that comes at once needs no second look).
var RecheckAfterWait = 100 * time.Millisecond

// errCampaignChanged: the campaign was paused or deleted, or the contact unsubscribed, while
// the email waited for its send slot (campaignChange says which).
var errCampaignChanged = errors.New("the campaign changed while the email waited")

type campaignChange struct {
	paused      bool
	status, why string
}

// hold puts a claimed campaign email back in QUEUED, held for its paused campaign (as a claim
// that finds the campaign paused does).
func (w *Worker) hold(ctx context.Context, id string, claimedAt time.Time) error {
	e, err := w.requeue(ctx, id, claimedAt, func(e *store.Email) { e.Held = true })
	if errors.Is(err, errSkip) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("hold %s: %w", id, err)
	}
	return w.recheckHeld(ctx, e)
}

// errStopping: the process is stopping (WithStop) while the send waited for its slot.
var errStopping = errors.New("stopping")

type stopKey struct{}

// WithStop makes the deliveries under ctx stop waiting for a send slot once stop is closed
// (the process is stopping): such an email goes back to QUEUED at once, for the next start,
// while a send already handed to the mailer finishes. Under a low SES_MAX_SEND_RATE a stop
// would otherwise wait for every worker's slot in turn.
func WithStop(ctx context.Context, stop <-chan struct{}) context.Context {
	return context.WithValue(ctx, stopKey{}, stop)
}

// stopping reports whether ctx's stop (WithStop) is closed.
func stopping(ctx context.Context) bool {
	stop, _ := ctx.Value(stopKey{}).(<-chan struct{})
	select {
	case <-stop:
		return stop != nil
	default:
		return false
	}
}

// pacing is ctx, ended too when its stop (WithStop) closes.
func pacing(ctx context.Context) (context.Context, context.CancelFunc) {
	stop, _ := ctx.Value(stopKey{}).(<-chan struct{})
	if stop == nil {
		return ctx, func() {}
	}
	c, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-stop:
			cancel()
		case <-c.Done():
		}
	}()
	return c, cancel
}

// PacingRetry is how long an email waits after its send slot could not be taken.
const PacingRetry = 30 * time.Second

// sendBy is the last moment a send may start: the invocation's deadline less the room to
// record its outcome, or a minute from now without a deadline (the local server).
func (w *Worker) sendBy(ctx context.Context) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl.Add(-SendRoom)
	}
	return w.Now().UTC().Add(time.Minute)
}

func sendError(err error) string {
	switch {
	case errors.Is(err, mail.ErrThrottled):
		return "The mail provider kept throttling the send"
	case errors.Is(err, mail.ErrRejected):
		return "The mail provider rejected the message"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "The send was interrupted"
	}
	return "The mail provider failed to send the message"
}

// ours reports whether e is still claimed by the worker that claimed it at claimedAt: after a
// lease expired and another worker took over, the first one must not overwrite the outcome.
func ours(e *store.Email, claimedAt time.Time) bool {
	return e.Status == store.StatusSending && e.ClaimedAt != nil && e.ClaimedAt.Equal(claimedAt)
}

// finish records the outcome with its event, if the claim is still this worker's.
func (w *Worker) finish(ctx context.Context, id string, claimedAt time.Time, status, messageID string, data map[string]string) error {
	ctx = context.WithoutCancel(ctx) // the outcome must be recorded even when shutting down
	raw, _ := json.Marshal(data)
	now := w.Now().UTC()
	var err error
	for n := 1; n <= 5; n++ {
		_, err = w.Store.UpdateEmail(ctx, id, func(e *store.Email) ([]store.Event, error) {
			if messageID != "" && e.MessageID == messageID {
				return nil, errSettled
			}
			if !ours(e, claimedAt) {
				return nil, errSkip
			}
			if err := email.Move(e, status, email.ByWorker, now); err != nil {
				return nil, err
			}
			if status == store.StatusSent && !slices.Contains(e.Counted, store.CountSent) {
				// The store counts it, once: the day's analytics, and its campaign's.
				e.Counted = append(e.Counted, store.CountSent)
			}
			e.MessageID = messageID
			return []store.Event{{ID: "1-" + status, EmailID: id, Status: status, CreatedAt: now, Data: raw}}, nil
		})
		if errors.Is(err, errSettled) {
			// The provider's events (the outbox's, when the store is busy) came first and
			// recorded the send with the same message id: nothing is left to record.
			w.log().Debug("outcome already recorded from the provider's events", "emailId", id, "status", status)
			return nil
		}
		if errors.Is(err, errSkip) {
			w.log().Warn("claim lost before the outcome was recorded", "emailId", id, "status", status)
			return nil
		}
		if err == nil {
			if name, ok := outcomeMetric[status]; ok {
				metric.Add(ctx, w.Metrics, name, 1)
			}
		}
		if err == nil || errors.Is(err, store.ErrDuplicateEvent) {
			return nil
		}
		time.Sleep(w.backoff(n))
	}
	return fmt.Errorf("record %s for %s: %w", status, id, err)
}

// outcomeMetric is the metric each recorded outcome counts in.
var outcomeMetric = map[string]string{store.StatusSent: metric.EmailsSent, store.StatusFailed: metric.EmailsFailed}

// release puts a claimed email back to QUEUED after a failure that was not the email's fault,
// held back until notBefore when it is set.
func (w *Worker) release(ctx context.Context, id string, claimedAt time.Time, cause error, notBefore *time.Time) error {
	_, err := w.requeue(ctx, id, claimedAt, func(e *store.Email) { e.NotBefore = notBefore })
	if err != nil && !errors.Is(err, errSkip) {
		return errors.Join(cause, err)
	}
	return cause
}

// requeue moves an email this worker claimed at claimedAt back to QUEUED, with set's change
// (errSkip: the claim is no longer this worker's). It writes even when ctx is done: a claim
// must not be left to run out.
func (w *Worker) requeue(ctx context.Context, id string, claimedAt time.Time, set func(*store.Email)) (store.Email, error) {
	return w.Store.UpdateEmail(context.WithoutCancel(ctx), id, func(e *store.Email) ([]store.Event, error) {
		if !ours(e, claimedAt) {
			return nil, errSkip
		}
		if err := email.Move(e, store.StatusQueued, email.ByWorker, w.Now().UTC()); err != nil {
			return nil, err
		}
		set(e)
		return nil, nil
	})
}

func (w *Worker) backoff(n int) time.Duration {
	if w.Backoff != nil {
		return w.Backoff(n)
	}
	d := 200 * time.Millisecond << (n - 1)
	return d/2 + time.Duration(rand.Int64N(int64(d)))
}

func (w *Worker) log() *slog.Logger {
	if w.Log != nil {
		return w.Log
	}
	return slog.New(slog.DiscardHandler)
}

// SESReplyReference is the Message-ID header an email sent through SES went out with: SES
// replaces Mailroom's own with <messageId@email.amazonses.com> in us-east-1 and
// <messageId@<region>.amazonses.com> elsewhere.
func SESReplyReference(region string) func(store.Email) string {
	host := "email.amazonses.com"
	if region != "" && region != "us-east-1" {
		host = region + ".amazonses.com"
	}
	return func(ref store.Email) string { return "<" + ref.MessageID + "@" + host + ">" }
}
