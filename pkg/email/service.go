package email

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mailroom/mailroom/pkg/auth"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/metric"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/template"
)

// Store is what the email use cases need from persistence.
type Store interface {
	store.Emails
	store.Templates
	store.IdempotencyKeys
}

// Domains finds the team's domain of a From address (see domain.Directory).
type Domains interface {
	Lookup(ctx context.Context, teamID int64, name string) (store.Domain, error)
}

// Dispatcher hands newly queued emails to the deliver flow. On AWS the table's stream does
// that and the dispatcher does nothing; locally it feeds the in-process worker pool.
type Dispatcher interface {
	Dispatch(ctx context.Context, ids ...string)
}

// Idempotency timing (COMPAT.md).
const (
	IdempotencyTTL   = 24 * time.Hour
	IdempotencyStale = 60 * time.Second
)

// Service is the email use cases.
type Service struct {
	Store      Store
	Domains    Domains
	Dispatcher Dispatcher
	Scheduler  Scheduler
	Now        func() time.Time
	Log        *slog.Logger
	// Metrics counts the emails accepted (nil: none).
	Metrics metric.Counter
	// MaxScheduled caps a team's emails waiting in SCHEDULED (DefaultMaxScheduled when 0):
	// each holds an EventBridge Scheduler schedule of the deployment's account.
	MaxScheduled int
	// StartedAt, when set, is when this process started, and no other process writes the
	// store (the local server): an Idempotency-Key claim made before it belongs to a request
	// the last run never finished (it crashed), so it is stale at once, not after
	// IdempotencyStale.
	StartedAt time.Time
}

// DefaultMaxScheduled is a team's cap on scheduled emails unless configured: a thousand teams
// at the cap hold 10,000,000 schedules, EventBridge Scheduler's default quota per region.
const DefaultMaxScheduled = 10_000

// SendResult is what a send returns; Body is the exact JSON response (stored for replays).
type SendResult struct {
	IDs      []string
	Body     []byte
	Replayed bool
}

// ValidIdempotencyKey reports a key of 1 to MaxIdempotencyKey characters (not bytes).
func ValidIdempotencyKey(key string) bool {
	n := utf8.RuneCountInString(key)
	return n >= 1 && n <= MaxIdempotencyKey
}

// ErrIdempotencyKeyLength refuses an Idempotency-Key of no characters or more than
// MaxIdempotencyKey (characters, not bytes).
var ErrIdempotencyKeyLength = fault.Field("", "Invalid Idempotency-Key length")

// Send writes one email (batch=false, one request) or a batch, honouring an optional
// Idempotency-Key. Nothing is written unless every request is valid.
func (s *Service) Send(ctx context.Context, p auth.Principal, key string, reqs []Request, batch bool) (SendResult, error) {
	if key != "" && !ValidIdempotencyKey(key) {
		return SendResult{}, ErrIdempotencyKeyLength
	}
	now := s.Now().UTC()
	nonce, fresh := "", false
	if key != "" {
		if err := s.checkSenders(ctx, p, reqs, batch); err != nil {
			return SendResult{}, err
		}
		fp, err := fingerprint(reqs, batch)
		if err != nil {
			return SendResult{}, err
		}
		ours := newNonce()
		rec, claimed, err := s.Store.ClaimIdempotency(ctx, store.IdemClaim{
			TeamID: p.TeamID, Key: key, Fingerprint: fp, Nonce: ours, Now: now,
			TTL: IdempotencyTTL, StaleAfter: s.staleAfter(now),
		})
		if err != nil {
			return SendResult{}, fmt.Errorf("claim idempotency key: %w", err)
		}
		if rec.Fingerprint == fp && rec.State == store.IdemPending && rec.Nonce != ours {
			// The record is not marked complete: its outcome is the emails its nonce names.
			// When they all exist this is a replay, whoever holds the claim.
			if res, ok, err := s.written(ctx, rec.Nonce, len(reqs), batch); err != nil || ok {
				return res, err
			}
		}
		if !claimed || rec.Fingerprint != fp {
			// A stale claim taken over keeps its first fingerprint: a different payload may
			// not finish someone else's request.
			return replay(rec, fp)
		}
		nonce, fresh = rec.Nonce, rec.Nonce == ours
	}
	emails, events, err := s.prepare(ctx, p, reqs, batch, nonce, now)
	if err == nil && (key == "" || fresh) {
		// A claim taken over finishes a request that passed the cap already (its emails
		// may be counted): it is not checked again, so a retry never strands half a batch.
		err = s.checkScheduledCap(ctx, p.TeamID, emails)
		if err == nil {
			err = s.checkDailyQuota(ctx, p, len(emails), now)
		}
	}
	if err != nil {
		if fresh {
			// Nothing was written: the caller may retry with the same key at once. (A claim
			// taken over stays: the crashed request may have written some of its emails.)
			if rerr := s.Store.ReleaseIdempotency(context.WithoutCancel(ctx), p.TeamID, key); rerr != nil {
				err = errors.Join(err, fmt.Errorf("release idempotency key: %w", rerr))
			}
		}
		return SendResult{}, err
	}
	res, err := s.commit(ctx, emails, events, batch)
	if err != nil {
		// Some emails may exist (a batch spans several transactions). The claim stays PENDING:
		// a retry with the same key is told to wait, then takes the stale claim over, derives
		// the same ids and writes only what is missing — never a second batch.
		return SendResult{}, err
	}
	// The record stays PENDING: a retry finds the emails of its nonce (written) and replays
	// them, which saves a write per request.
	return res, nil
}

// checkScheduledCap refuses emails that would take the team past MaxScheduled. Requests at the
// same moment may together pass it by their own emails: it is fair use, not a quota to the unit.
func (s *Service) checkScheduledCap(ctx context.Context, teamID int64, emails []store.Email) error {
	n := 0
	for _, e := range emails {
		if e.Status == store.StatusScheduled {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	limit := s.MaxScheduled
	if limit <= 0 {
		limit = DefaultMaxScheduled
	}
	have, err := s.Store.ScheduledCount(ctx, teamID)
	if err != nil {
		return fmt.Errorf("scheduled count: %w", err)
	}
	if have+int64(n) > int64(limit) {
		return fault.New(fault.Forbidden, "scheduledAt: a team may have at most %d scheduled emails (it has %d): send or cancel some first", limit, have)
	}
	return nil
}

// checkDailyQuota refuses emails past the team's daily quota (auth.Principal.DailyEmailLimit).
func (s *Service) checkDailyQuota(ctx context.Context, p auth.Principal, n int, now time.Time) error {
	return CheckDailyQuota(ctx, s.Store, p.TeamID, p.DailyEmailLimit, n, now)
}

// CheckDailyQuota refuses n emails of the team past its daily quota of limit (0: none), with
// a RATE_LIMITED error that says when it resets: the emails it accepted since midnight UTC,
// counted by the store as a list count of the day. Like the scheduled cap, requests at the same
// instant may together pass it by their own emails.
func CheckDailyQuota(ctx context.Context, st store.Emails, teamID, limit int64, n int, now time.Time) error {
	if limit <= 0 {
		return nil
	}
	midnight := now.UTC().Truncate(24 * time.Hour)
	_, today, err := st.ListEmails(ctx, store.EmailFilter{TeamID: teamID, Start: &midnight, Limit: 1})
	if err != nil {
		return fmt.Errorf("daily quota: %w", err)
	}
	if int64(today)+int64(n) > limit {
		reset := midnight.Add(24 * time.Hour)
		var err *fault.Error
		if int64(today) >= limit {
			err = fault.New(fault.RateLimited, "Daily sending quota of %d emails reached (%d accepted today); it resets at %s",
				limit, today, reset.Format(time.RFC3339))
		} else {
			err = fault.New(fault.RateLimited, "Daily sending quota of %d emails: %d accepted today, so %d more would exceed it; it resets at %s",
				limit, today, n, reset.Format(time.RFC3339))
		}
		err.RetryAfter = reset.Sub(now)
		return err
	}
	return nil
}

// written reports whether every email of an idempotent request with this nonce exists, and
// then its response, replayed.
func (s *Service) written(ctx context.Context, nonce string, n int, batch bool) (SendResult, bool, error) {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = emailID(nonce, i)
		if _, err := s.Store.GetEmail(ctx, ids[i]); errors.Is(err, store.ErrNotFound) {
			return SendResult{}, false, nil
		} else if err != nil {
			return SendResult{}, false, fmt.Errorf("idempotent replay: %w", err)
		}
	}
	body, err := responseBody(ids, batch)
	if err != nil {
		return SendResult{}, false, err
	}
	return SendResult{IDs: ids, Body: body, Replayed: true}, true, nil
}

// KeyNonce is the nonce of an Idempotency-Key given to a request other than a send, claimed at
// the key's first use for IdempotencyTTL: a retry of that request derives the same ids from it,
// and the key used again after a day derives new ones. namespace keeps its keys apart from the
// sends' (and a header never holds the NUL that separates them).
func (s *Service) KeyNonce(ctx context.Context, teamID int64, namespace, key string) (string, error) {
	rec, _, err := s.Store.ClaimIdempotency(ctx, store.IdemClaim{TeamID: teamID, Key: "\x00" + namespace + "\x00" + key,
		Nonce: newNonce(), Now: s.Now().UTC(), TTL: IdempotencyTTL})
	if err != nil {
		return "", fmt.Errorf("claim idempotency key: %w", err)
	}
	return rec.Nonce, nil
}

// staleAfter is how old a PENDING claim is before a retry takes it over: IdempotencyStale, or
// less while this process is younger (StartedAt), so that only claims made before it started
// are stale then.
func (s *Service) staleAfter(now time.Time) time.Duration {
	if s.StartedAt.IsZero() {
		return IdempotencyStale
	}
	return max(min(IdempotencyStale, now.Sub(s.StartedAt)), time.Nanosecond)
}

func replay(rec store.Idempotency, fp string) (SendResult, error) {
	switch {
	case rec.Fingerprint != fp:
		return SendResult{}, fault.New(fault.Conflict, "Idempotency-Key already used with a different payload")
	case rec.State != store.IdemComplete:
		// In flight (or, after a takeover with the same payload, not possible here).
		return SendResult{}, fault.New(fault.Conflict, "Request with same Idempotency-Key is in progress. Retry later.")
	}
	return SendResult{Body: rec.Response, Replayed: true}, nil
}

// fingerprint is the SHA-256 of the canonical JSON of the normalised request(s).
func fingerprint(reqs []Request, batch bool) (string, error) {
	var v any = reqs
	if !batch {
		v = reqs[0]
	}
	b, err := json.Marshal(struct {
		Batch bool `json:"batch"`
		Body  any  `json:"body"`
	}{batch, v})
	if err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// errNotKeysDomain refuses a send from a domain other than the key's own.
var errNotKeysDomain = fault.New(fault.Forbidden, "from: this API key may only send from its own domain")

// sender is the domain of from, which must be one of the team's, verified, and the key's own
// when the key is restricted to one domain.
func (s *Service) sender(ctx context.Context, p auth.Principal, from string) (store.Domain, error) {
	name := DomainOf(from)
	dom, err := s.Domains.Lookup(ctx, p.TeamID, name)
	if errors.Is(err, store.ErrNotFound) {
		return store.Domain{}, fault.Field("from", "domain %s is not a domain of this team; add and verify it first", name)
	}
	if err != nil {
		return store.Domain{}, fmt.Errorf("domain lookup: %w", err)
	}
	if dom.Status != store.DomainSuccess {
		return store.Domain{}, fault.Field("from", "domain %s is not verified (status %s)", name, dom.Status)
	}
	if p.DomainID != 0 && dom.ID != p.DomainID {
		return store.Domain{}, errNotKeysDomain
	}
	return dom, nil
}

// checkSenders refuses, before an Idempotency-Key is looked at, a request that a key restricted
// to one domain may not make: one from another of the team's domains. A replay would otherwise
// answer it 200 with a teammate's email ids. Only the scope is checked here: a domain unknown or
// no longer verified is build's to refuse, after a replay of what was already accepted.
func (s *Service) checkSenders(ctx context.Context, p auth.Principal, reqs []Request, batch bool) error {
	if p.DomainID == 0 {
		return nil
	}
	var errs []error // a batch's every bad element is named
	for i, r := range reqs {
		dom, err := s.Domains.Lookup(ctx, p.TeamID, DomainOf(r.From))
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("domain lookup: %w", err)
		}
		if dom.ID != p.DomainID {
			err := errNotKeysDomain
			if !batch {
				return err
			}
			errs = append(errs, fault.Prefix(fmt.Sprintf("[%d].", i), err))
		}
	}
	return fault.Join(errs)
}

// Refuse is the answer to a batch some of whose elements were refused before the store was
// read (malformed: badAt[i] is element i's error, nil for a well-formed one): those errors
// with what the store says of the well-formed elements (their domain, template, the email they
// reply to), so that the answer names every bad element at once. It writes nothing.
func (s *Service) Refuse(ctx context.Context, p auth.Principal, reqs []Request, badAt []error) error {
	var errs []error
	now := s.Now().UTC()
	for i, err := range badAt {
		if err == nil { // well-formed: what the store says of it, as a single send's checks
			one := reqs[i : i+1]
			if err = s.checkSenders(ctx, p, one, false); err == nil {
				_, _, err = s.prepare(ctx, p, one, false, "", now)
			}
			if err == nil {
				continue
			}
			if _, ok := fault.As(err); !ok {
				return err // the store failed, not the element
			}
			// Named by its index. With a malformed element the 400s are the answer (all of
			// them), and another kind (a 403 of a domain-restricted key, a 413) only when
			// there is no 400; without one, a batch's 403 comes first (checkSenders).
			err = fault.Prefix(fmt.Sprintf("[%d].", i), err)
		}
		errs = append(errs, err)
	}
	invalid := slices.DeleteFunc(slices.Clone(errs), func(err error) bool {
		fe, _ := fault.As(err)
		return fe == nil || fe.Kind != fault.Invalid
	})
	if len(invalid) > 0 {
		return fault.Join(invalid)
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// prepare validates what needs the store (domains, templates, replies) and builds the emails
// with their first events; it writes nothing.
func (s *Service) prepare(ctx context.Context, p auth.Principal, reqs []Request, batch bool, nonce string, now time.Time) ([]store.Email, []store.Event, error) {
	emails := make([]store.Email, len(reqs))
	events := make([]store.Event, len(reqs))
	templates := map[string]store.Template{}
	budget := MaxRenderedBytes
	var errs []error // a batch's every bad element is named
	for i, r := range reqs {
		at := ""
		if batch {
			at = fmt.Sprintf("[%d].", i)
		}
		e, err := s.build(ctx, p, r, templates, now, &budget)
		if err != nil {
			if fe, ok := fault.As(err); !batch || !ok || fe.Kind != fault.Invalid {
				return nil, nil, fault.Prefix(at, err)
			}
			errs = append(errs, fault.Prefix(at, err))
			continue
		}
		e.ID = emailID(nonce, i)
		emails[i] = e
		events[i] = store.Event{ID: "0-" + e.Status, EmailID: e.ID, Status: e.Status, CreatedAt: now}
	}
	if err := fault.Join(errs); err != nil {
		return nil, nil, err
	}
	return emails, events, nil
}

// commit schedules and writes the emails and hands the queued ones to delivery.
func (s *Service) commit(ctx context.Context, emails []store.Email, events []store.Event, batch bool) (SendResult, error) {
	// Schedules first: the other order could leave an email SCHEDULED with no schedule for
	// ever. If writing the emails then fails, the claim stays PENDING and the retry writes the
	// same ids; should nobody retry, the schedule fires for an email that does not exist, is
	// retried by the scheduler and ends in its dead-letter queue, sending nothing.
	for _, e := range emails {
		if e.Status == store.StatusScheduled {
			if err := s.Scheduler.Put(ctx, scheduleFor(e, 0)); err != nil {
				return SendResult{}, fmt.Errorf("schedule %s: %w", e.ID, err)
			}
		}
	}
	if err := s.Store.CreateEmails(ctx, emails, events); err != nil {
		return SendResult{}, fmt.Errorf("create emails: %w", err)
	}
	metric.Add(ctx, s.Metrics, metric.EmailsAccepted, len(emails))
	ids := make([]string, len(emails))
	var queued []string
	for i, e := range emails {
		ids[i] = e.ID
		if e.Status == store.StatusQueued {
			queued = append(queued, e.ID)
		}
	}
	body, err := responseBody(ids, batch)
	if err != nil {
		return SendResult{}, err
	}
	s.dispatch(ctx, queued...)
	return SendResult{IDs: ids, Body: body}, nil
}

// responseBody is the JSON response of a send: {"emailId"} or, for a batch, {"data": [...]}.
func responseBody(ids []string, batch bool) ([]byte, error) {
	if !batch {
		return json.Marshal(map[string]string{"emailId": ids[0]})
	}
	items := make([]map[string]string, len(ids))
	for i, id := range ids {
		items[i] = map[string]string{"emailId": id}
	}
	return json.Marshal(map[string]any{"data": items})
}

// build resolves one request into an email: its domain, template and reply reference.
func (s *Service) build(ctx context.Context, p auth.Principal, r Request, templates map[string]store.Template, now time.Time, budget *int) (store.Email, error) {
	dom, err := s.sender(ctx, p, r.From)
	if err != nil {
		return store.Email{}, err
	}
	e := store.Email{
		TeamID: p.TeamID, DomainID: dom.ID, From: r.From, To: r.To, CC: r.CC, BCC: r.BCC,
		ReplyTo: r.ReplyTo, InReplyToID: r.InReplyToID, CreatedAt: now,
	}
	e.Content.Headers = r.Headers
	for _, a := range r.Attachments {
		e.Content.Attachments = append(e.Content.Attachments, store.Attachment{Filename: a.Filename, Content: a.Content})
	}
	if err := s.render(ctx, p.TeamID, r, &e, templates, budget); err != nil {
		return store.Email{}, err
	}
	if r.InReplyToID != "" {
		ref, err := s.Store.GetEmail(ctx, r.InReplyToID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && (ref.TeamID != p.TeamID || p.DomainID != 0 && ref.DomainID != p.DomainID)) {
			// A key restricted to a domain does not see the team's other domains' emails.
			return store.Email{}, fault.Field("inReplyToId", "email %s not found", r.InReplyToID)
		}
		if err != nil {
			return store.Email{}, fmt.Errorf("in-reply-to lookup: %w", err)
		}
	}
	if r.ScheduledAt != nil {
		if err := checkScheduledAt(*r.ScheduledAt, now, "leave it out to send now"); err != nil {
			return store.Email{}, err
		}
	}
	if r.ScheduledAt != nil {
		// Kept as given, as upstream keeps it (and as a reschedule does), even a time just
		// past, which sends now.
		t := scheduleSecond(*r.ScheduledAt)
		e.ScheduledAt = &t
		if r.ScheduledAt.After(now) {
			return e, Create(&e, store.StatusScheduled, now)
		}
	}
	return e, Create(&e, store.StatusQueued, now)
}

// render fills subject and content from the request and, when templateId is given, from the
// template: the caller's own subject, html and text win over the template's.
func (s *Service) render(ctx context.Context, teamID int64, r Request, e *store.Email, templates map[string]store.Template, budget *int) error {
	subject, html, text := deref(r.Subject), r.HTML, r.Text
	if r.TemplateID != "" {
		t, ok := templates[r.TemplateID]
		if !ok {
			var err error
			t, err = s.Store.GetTemplate(ctx, teamID, r.TemplateID)
			if errors.Is(err, store.ErrNotFound) {
				return fault.Field("templateId", "template %s not found", r.TemplateID)
			}
			if err != nil {
				return fmt.Errorf("get template: %w", err)
			}
			templates[r.TemplateID] = t
		}
		if r.Subject == nil {
			subject = t.Subject
		}
		if html == nil && t.HTML != "" {
			html = &t.HTML
		}
		if text == nil && t.Text != "" {
			text = &t.Text
		}
		// Bound the work before doing it: what the template renders to with these variables.
		if n := template.RenderedSize(subject, r.Variables, false); n > MaxSubjectBytes {
			return fault.Field("subject", "at most %d bytes after rendering (%d)", MaxSubjectBytes, n)
		}
		htmlLen, textLen := 0, 0
		if html != nil {
			htmlLen = template.RenderedSize(*html, r.Variables, true)
		}
		if text != nil {
			textLen = template.RenderedSize(*text, r.Variables, false)
		}
		size := r.sizeWith(len(subject), textLen, htmlLen)
		if size > MaxMessageBytes {
			return fault.New(fault.TooLarge, "message too large: at most %d MB after rendering the template", MaxMessageBytes>>20)
		}
		if *budget -= size; *budget < 0 {
			return fault.New(fault.TooLarge, "request too large: its emails render to more than %d MB in all", MaxRenderedBytes>>20)
		}
		var err error
		if subject, err = template.Render(subject, r.Variables, false); err != nil {
			return err
		}
		if html, err = renderPtr(html, r.Variables, true); err != nil {
			return err
		}
		if text, err = renderPtr(text, r.Variables, false); err != nil {
			return err
		}
		if strings.TrimSpace(subject) == "" {
			return fault.Field("subject", "is required: the template has none")
		}
		if strings.ContainsAny(subject, "\r\n") {
			return fault.Field("subject", "must not contain line breaks after rendering")
		}
		if template.HasControl(subject) {
			return fault.Field("subject", "must not contain control characters after rendering")
		}
		if html == nil && text == nil {
			return fault.Field("html", "html or text is required: the template has neither")
		}
	}
	e.Subject, e.Content.HTML, e.Content.Text = subject, html, text
	return nil
}

func renderPtr(p *string, vars map[string]string, escape bool) (*string, error) {
	if p == nil {
		return nil, nil
	}
	out, err := template.Render(*p, vars, escape)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// emailID returns a random id, or, under an idempotency nonce, the id of the i-th email of
// that request: a retry that takes over a crashed request's claim derives the same ids, and the
// store's create-if-absent keeps it exactly-once.
func emailID(nonce string, i int) string {
	var b [15]byte
	if nonce == "" {
		_, _ = rand.Read(b[:])
	} else {
		h := sha256.New()
		h.Write([]byte(nonce))
		_ = binary.Write(h, binary.BigEndian, int64(i))
		copy(b[:], h.Sum(nil))
	}
	return "em" + idEncoding.EncodeToString(b[:])
}

func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ListQuery is a parsed GET /emails query.
type ListQuery struct {
	Page, Limit int
	Start, End  *time.Time
	DomainIDs   []int64
}

// List returns one page of the team's emails, newest first, and the total matching.
func (s *Service) List(ctx context.Context, p auth.Principal, q ListQuery) ([]store.Email, int, error) {
	doms := q.DomainIDs
	if p.DomainID != 0 {
		// A key restricted to one domain sees that domain's emails only.
		if len(doms) > 0 && !contains(doms, p.DomainID) {
			return nil, 0, nil
		}
		doms = []int64{p.DomainID}
	}
	return s.Store.ListEmails(ctx, store.EmailFilter{
		TeamID: p.TeamID, Start: q.Start, End: q.End, DomainIDs: doms,
		Offset: (q.Page - 1) * q.Limit, Limit: q.Limit,
	})
}

func contains(list []int64, v int64) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// Get returns one email of the team with its history; another team's id is not found.
func (s *Service) Get(ctx context.Context, p auth.Principal, id string) (store.Email, []store.Event, error) {
	e, events, err := s.Store.GetEmailDetail(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !visible(p, e)) {
		return store.Email{}, nil, fault.NotFoundf("Email not found")
	}
	return e, events, err
}

func visible(p auth.Principal, e store.Email) bool {
	return e.TeamID == p.TeamID && (p.DomainID == 0 || p.DomainID == e.DomainID)
}
