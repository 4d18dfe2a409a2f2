// Package hooks runs Mailroom's outbound webhooks: their management (create, change, rotate a
// secret, test, the delivery log and its replay), turning events into calls for the webhooks
// that want them, and the calls' attempts with their retries and the auto-disable rule. The
// wire format is pkg/webhook's.
package hooks

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/jsonout"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/webhook"
)

// Store is what the service reads and writes.
type Store interface {
	store.Webhooks
	GetDomain(ctx context.Context, teamID, id int64) (store.Domain, error)
}

// Service is the webhooks' use cases.
type Service struct {
	Store  Store
	Sealer Sealer
	Policy webhook.Policy
	Client *http.Client // Policy.Client() unless set
	Now    func() time.Time
	Log    *slog.Logger
	// MaxPerTeam caps a team's webhooks (DefaultMaxPerTeam when 0).
	MaxPerTeam int

	clientOnce sync.Once
}

// DefaultMaxPerTeam is a team's webhook cap unless configured.
const DefaultMaxPerTeam = 20

// SecretOverlap is how long a rotated-out secret keeps signing calls, next to the new one.
const SecretOverlap = 24 * time.Hour

func (s *Service) now() time.Time { return s.Now().UTC() }

func (s *Service) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

func (s *Service) client() *http.Client {
	s.clientOnce.Do(func() {
		if s.Client == nil {
			s.Client = s.Policy.Client()
		}
	})
	return s.Client
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewWebhookID makes a webhook id.
func NewWebhookID() string {
	var b [15]byte
	_, _ = rand.Read(b[:])
	return "wh_" + strings.ToLower(idEncoding.EncodeToString(b[:]))
}

// CallID is the id of the call of an event to a webhook: its time in hex milliseconds (so ids
// sort in event order) and a hash of the webhook and the event's key (so the same event makes
// the same call).
func CallID(webhookID string, at time.Time, eventKey string) string {
	h := sha256.Sum256([]byte(webhookID + "\x00" + eventKey))
	return fmt.Sprintf("whc_%012x%s", at.UnixMilli(), hex.EncodeToString(h[:10]))
}

// IsCallID reports whether s has the shape of a CallID.
func IsCallID(s string) bool {
	rest, ok := strings.CutPrefix(s, "whc_")
	if !ok || len(rest) != 32 {
		return false
	}
	for _, c := range rest { // lower-case hex, as CallID writes it
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Fields are what a create or a change sets (nil: not given).
type Fields struct {
	URL         *string
	EventTypes  *[]string
	DomainIDs   *[]int64
	Description *string
	Status      *string // ACTIVE or PAUSED (PATCH only)
}

// canonical is f with its URL as it goes on the wire (webhook.CanonicalURL): what is stored,
// shown and called.
func (f Fields) canonical() Fields {
	if f.URL != nil {
		u := webhook.CanonicalURL(*f.URL)
		f.URL = &u
	}
	return f
}

// validate checks the fields; unknown event types are named.
func (s *Service) validate(ctx context.Context, teamID int64, f Fields) error {
	if f.URL != nil {
		if err := s.Policy.Check(ctx, *f.URL); err != nil {
			return fault.Field("url", "%s", strings.TrimPrefix(err.Error(), "url: "))
		}
	}
	if f.EventTypes != nil {
		if bad := webhook.UnknownTypes(*f.EventTypes); len(bad) > 0 {
			quoted := make([]string, len(bad))
			for i, b := range bad {
				quoted[i] = strconv.Quote(b) // an empty one is seen too
			}
			return fault.Field("eventTypes", "unknown event types %s", strings.Join(quoted, ", "))
		}
		if len(*f.EventTypes) > len(webhook.EventTypes) {
			return fault.Field("eventTypes", "at most %d", len(webhook.EventTypes))
		}
	}
	if f.DomainIDs != nil {
		if len(*f.DomainIDs) > 100 {
			return fault.Field("domainIds", "at most 100")
		}
		for _, id := range slices.Compact(slices.Sorted(slices.Values(*f.DomainIDs))) {
			if _, err := s.Store.GetDomain(ctx, teamID, id); errors.Is(err, store.ErrNotFound) {
				return fault.Field("domainIds", "%d is not a domain of this team", id)
			} else if err != nil {
				return err
			}
		}
	}
	if f.Description != nil && len(*f.Description) > 500 {
		return fault.Field("description", "at most 500 characters")
	}
	if f.Status != nil && *f.Status != store.WebhookActive && *f.Status != store.WebhookPaused {
		return fault.Field("status", "must be ACTIVE or PAUSED")
	}
	return nil
}

func apply(w *store.Webhook, f Fields) {
	if f.URL != nil {
		w.URL = *f.URL
	}
	if f.EventTypes != nil {
		w.EventTypes = slices.Compact(slices.Sorted(slices.Values(*f.EventTypes)))
	}
	if f.DomainIDs != nil {
		w.DomainIDs = slices.Compact(slices.Sorted(slices.Values(*f.DomainIDs)))
	}
	if f.Description != nil {
		w.Description = *f.Description
	}
}

// Create makes a webhook and returns it with its secret (shown only here).
func (s *Service) Create(ctx context.Context, teamID int64, f Fields) (store.Webhook, string, error) {
	if f.URL == nil {
		return store.Webhook{}, "", fault.Field("url", "is required")
	}
	f = f.canonical()
	if err := s.validate(ctx, teamID, f); err != nil {
		return store.Webhook{}, "", err
	}
	own, err := s.Store.ListWebhooks(ctx, teamID)
	if err != nil {
		return store.Webhook{}, "", err
	}
	limit := s.MaxPerTeam
	if limit <= 0 {
		limit = DefaultMaxPerTeam
	}
	if len(own) >= limit {
		return store.Webhook{}, "", fault.New(fault.Forbidden, "A team may have at most %d webhooks: delete one first", limit)
	}
	secret, sealed, err := s.newSecret(ctx)
	if err != nil {
		return store.Webhook{}, "", err
	}
	now := s.now()
	w := store.Webhook{ID: NewWebhookID(), TeamID: teamID, Status: store.WebhookActive, SecretSealed: sealed,
		CreatedAt: now, UpdatedAt: now}
	apply(&w, f)
	if err := s.Store.CreateWebhook(ctx, w); err != nil {
		return store.Webhook{}, "", err
	}
	return w, secret, nil
}

var errNotFound = fault.NotFoundf("Webhook not found")

func notFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound
	}
	return err
}

// Get returns one of the team's webhooks.
func (s *Service) Get(ctx context.Context, teamID int64, id string) (store.Webhook, error) {
	w, err := s.Store.GetWebhook(ctx, teamID, id)
	return w, notFound(err)
}

// List returns the team's webhooks, newest first.
func (s *Service) List(ctx context.Context, teamID int64) ([]store.Webhook, error) {
	return s.Store.ListWebhooks(ctx, teamID)
}

// Update changes a webhook. Setting it ACTIVE again (after a pause or an auto-disable) clears
// its failure count.
func (s *Service) Update(ctx context.Context, teamID int64, id string, f Fields) (store.Webhook, error) {
	f = f.canonical()
	if err := s.validate(ctx, teamID, f); err != nil {
		return store.Webhook{}, err
	}
	w, err := s.Store.UpdateWebhook(ctx, teamID, id, func(w *store.Webhook) error {
		apply(w, f)
		if f.Status != nil {
			if *f.Status == store.WebhookActive {
				w.Failures, w.FailingSince = 0, nil
			}
			w.Status = *f.Status
		}
		w.UpdatedAt = s.now()
		return nil
	})
	return w, notFound(err)
}

// Delete removes a webhook; its calls still due end at their next attempt.
func (s *Service) Delete(ctx context.Context, teamID int64, id string) error {
	return notFound(s.Store.DeleteWebhook(ctx, teamID, id))
}

// newSecret makes a secret and seals it.
func (s *Service) newSecret(ctx context.Context) (secret, sealed string, err error) {
	if secret, err = webhook.NewSecret(); err != nil {
		return "", "", err
	}
	sealed, err = s.Sealer.Seal(ctx, secret)
	return secret, sealed, err
}

// RotateSecret gives a webhook a new secret and returns it; the old one keeps signing calls,
// next to the new, for SecretOverlap.
func (s *Service) RotateSecret(ctx context.Context, teamID int64, id string) (store.Webhook, string, error) {
	secret, sealed, err := s.newSecret(ctx)
	if err != nil {
		return store.Webhook{}, "", err
	}
	w, err := s.Store.UpdateWebhook(ctx, teamID, id, func(w *store.Webhook) error {
		until := s.now().Add(SecretOverlap)
		w.PreviousSealed, w.PreviousUntil = w.SecretSealed, &until
		w.SecretSealed, w.UpdatedAt = sealed, s.now()
		return nil
	})
	if err != nil {
		return store.Webhook{}, "", notFound(err)
	}
	return w, secret, nil
}

// Event is something that happened, for the webhooks that want it.
type Event struct {
	TeamID   int64
	DomainID int64 // 0: concerns no domain (contacts, campaigns without one)
	Type     string
	At       time.Time
	Key      string // unique to the event: two deliveries of it have the same key
	Data     any    // the envelope's data
}

// wants reports whether a webhook is to be called for an event: an active webhook's type and
// domain filters pass it. An event the feed or the stream hands over just after the webhook's
// creation is delivered, even if it happened a little before.
func wants(w store.Webhook, ev Event) bool {
	if w.Status != store.WebhookActive {
		return false
	}
	if len(w.EventTypes) > 0 && !slices.Contains(w.EventTypes, ev.Type) {
		return false
	}
	if len(w.DomainIDs) > 0 && ev.DomainID != 0 && !slices.Contains(w.DomainIDs, ev.DomainID) {
		return false
	}
	return true
}

// MaxCallData is the most event data a webhook call carries (a DynamoDB item is at most 400 KB).
const MaxCallData = 256 << 10

// teamHooks is the team's webhooks, read once for all the calls that share byTeam.
func (s *Service) teamHooks(ctx context.Context, byTeam map[int64][]store.Webhook, teamID int64) ([]store.Webhook, error) {
	if hooks, ok := byTeam[teamID]; ok {
		return hooks, nil
	}
	hooks, err := s.Store.ListWebhooks(ctx, teamID)
	if err != nil {
		return nil, err
	}
	byTeam[teamID] = hooks
	return hooks, nil
}

// wanted reports whether a webhook of the event's team wants it, reading the team's webhooks
// once for all the calls that share byTeam.
func (s *Service) wanted(ctx context.Context, byTeam map[int64][]store.Webhook, ev Event) (bool, error) {
	hooks, err := s.teamHooks(ctx, byTeam, ev.TeamID)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(hooks, func(w store.Webhook) bool { return wants(w, ev) }), nil
}

// Publish makes the calls of events for the webhooks that want them (a call once, however
// often an event is published) and returns the calls it made, due at once. It does not attempt
// them: the caller does (Attempt), or the runner that works through due calls (RunDue).
func (s *Service) Publish(ctx context.Context, events []Event) ([]store.WebhookCall, error) {
	return s.publish(ctx, events, map[int64][]store.Webhook{})
}

// publish is Publish with the webhooks of the teams read so far (byTeam).
func (s *Service) publish(ctx context.Context, events []Event, byTeam map[int64][]store.Webhook) ([]store.WebhookCall, error) {
	var calls []store.WebhookCall
	now := s.now()
	for _, ev := range events {
		hooks, err := s.teamHooks(ctx, byTeam, ev.TeamID)
		if err != nil {
			return nil, err
		}
		data, err := jsonout.Marshal(ev.Data) // < > & as they are: a receiver reads JSON, not HTML
		if err != nil {
			return nil, fmt.Errorf("hooks: event data: %w", err)
		}
		if len(data) > MaxCallData {
			// A call must fit one DynamoDB item with its envelope; one that could not would fail
			// its whole batch of stream records, again and again. The API's bounds keep every
			// event far below this: it is a guard, said in the log, not a path.
			s.log().Error("webhook event too large to deliver; no call made", "type", ev.Type, "teamId", ev.TeamID, "bytes", len(data))
			continue
		}
		for _, w := range hooks {
			if !wants(w, ev) {
				continue
			}
			at := now.Add(time.Duration(len(calls))) // due in event order: 1 ns apart
			calls = append(calls, store.WebhookCall{ID: CallID(w.ID, ev.At, ev.Type+"\x00"+ev.Key), WebhookID: w.ID,
				TeamID: ev.TeamID, Type: ev.Type, Data: data, EventAt: ev.At.UTC(), Status: store.CallPending,
				NextAttemptAt: &at, CreatedAt: now, UpdatedAt: now})
		}
	}
	if len(calls) == 0 {
		return nil, nil
	}
	return s.Store.CreateWebhookCalls(ctx, calls)
}

// claimMargin is how much longer than an attempt a claim on it lasts.
const claimMargin = 5 * time.Second

// errDone ends an attempt that has nothing to do (the call is settled, or not due yet).
var errDone = errors.New("nothing to attempt")

// Attempt makes the next attempt of a due call and records it: delivered, due again later, or
// given up after the retries (FAILED). The webhook counts its calls that failed in a row and
// is AUTO_DISABLED after webhook.DisableAfter of them over webhook.DisableSpan. A call of a
// webhook that is gone, paused or disabled is given up.
func (s *Service) Attempt(ctx context.Context, webhookID, callID string) (store.WebhookCall, error) {
	c, err := s.attemptCall(ctx, webhookID, callID, false, false)
	if errors.Is(err, errNotDue) {
		return c, nil // another runner is on it, or it is due later: as it stands
	}
	return c, err
}

// errNotDue ends an attempt of a call that is not due: another runner claimed it (and is
// posting it now), or it waits for a later time. The caller made no attempt, so it learns
// nothing about the receiver from it.
var errNotDue = errors.New("the call is not due")

// errLeft ends a fresh call's attempt that the runner is left to make: its webhook has older
// calls waiting for a retry, which it must not overtake.
var errLeft = errors.New("left to the runner, behind older calls")

// attemptCall is Attempt; with held, a call of a webhook that is failing (RetryAt ahead) is
// held until RetryAt instead of being posted: the runner's way, so that a failing receiver
// costs one attempt per retry, not one per call, and its backlog leaves the due calls of
// others in front. (A test or a replay is posted at once.) A fresh call (one just made, not
// the runner's) of a webhook whose retry is set at all, past or not, is not posted either
// (errLeft): the calls held for that retry are due before it, and only the runner, which takes
// a webhook's calls in the order they are due, posts them first; its success ends the retry.
func (s *Service) attemptCall(ctx context.Context, webhookID, callID string, held, fresh bool) (store.WebhookCall, error) {
	c, err := s.Store.GetWebhookCall(ctx, webhookID, callID)
	if err != nil {
		return c, err
	}
	now := s.now()
	if c.Status != store.CallPending || c.NextAttemptAt == nil {
		return c, nil
	}
	if c.NextAttemptAt.After(now) {
		return c, errNotDue
	}
	w, err := s.Store.GetWebhook(ctx, c.TeamID, webhookID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && w.Status != store.WebhookActive) {
		why := "the webhook was deleted"
		if err == nil {
			why = "the webhook is " + strings.ToLower(strings.ReplaceAll(w.Status, "_", " "))
		}
		return s.Store.UpdateWebhookCall(ctx, webhookID, callID, func(c *store.WebhookCall) error {
			if c.Status != store.CallPending {
				return errDone
			}
			c.Status, c.NextAttemptAt, c.LastError, c.UpdatedAt = store.CallFailed, nil, why, now
			return nil
		})
	}
	if err != nil {
		return c, err
	}
	if held && w.RetryAt != nil && (w.RetryAt.After(now) || c.NextAttemptAt.Before(*w.RetryAt)) {
		// Held until the retry; and after its time too, while it has not succeeded, a call
		// due before it (one the runner did not reach during the hold, in a backlog) goes
		// behind it, with the calls held before: at one due time, calls go in the order they
		// were made (their ids), the failed one first.
		return s.hold(ctx, webhookID, callID, *w.RetryAt)
	}
	if fresh && w.RetryAt != nil {
		// The runner's, after the older calls: moved to the retry's time when it was made
		// before it, so that the runner, which takes them in the order they are due, does not
		// post it first.
		c, err := s.hold(ctx, webhookID, callID, *w.RetryAt)
		if err != nil {
			return c, err
		}
		return c, errLeft
	}
	secret, err := s.Sealer.Open(ctx, w.SecretSealed)
	if err != nil {
		return c, err
	}
	// Claim the attempt: its next attempt moves past this one's end, conditionally, so that
	// another runner finding the call due (the retries function, a test or a replay next to
	// the local runner) does not post it too. A runner that dies holding the claim leaves the
	// call due again once the claim runs out: at least once, never twice at the same time.
	// The claim counts the attempt, so that a post its runner died making (a crash, a
	// function's timeout) is followed by one that says it is a retry (attempt 2,
	// X-UseSend-Retry: true), not by a second "first" delivery.
	// The body is made before the claim, which would count an attempt never made; the claim
	// holds only if no attempt was counted since the call was read.
	attempt := c.Attempts + 1
	body, err := webhook.Body(c.ID, c.Type, c.EventAt, c.TeamID, c.Data, attempt)
	if err != nil {
		return c, err
	}
	claim := now.Add(webhook.Timeout + claimMargin)
	c, err = s.Store.UpdateWebhookCall(ctx, webhookID, callID, func(c *store.WebhookCall) error {
		if c.Status != store.CallPending || c.NextAttemptAt == nil || c.NextAttemptAt.After(now) || c.Attempts != attempt-1 {
			return errDone
		}
		c.NextAttemptAt, c.Attempts = &claim, attempt
		return nil
	})
	if errors.Is(err, errDone) { // claimed by another runner since it was read, or settled
		c, err := s.Store.GetWebhookCall(ctx, webhookID, callID)
		if err == nil && c.Status == store.CallPending {
			return c, errNotDue
		}
		return c, err
	}
	if err != nil {
		return c, err
	}
	// A post under way finishes (within webhook.Timeout) and is recorded even when the runner
	// is told to stop (a graceful shutdown): cut off, its receiver, which may have it already,
	// would get it again as a retry.
	ctx = context.WithoutCancel(ctx)
	res := webhook.Post(ctx, s.client(), w.URL, secret, s.previousSecret(ctx, w, now), now, body, c.Type, c.ID, attempt)
	// The next attempt waits from the end of this one: one that timed out took 10 s, and
	// counted from its start it would leave no wait at all.
	ended := s.now()
	out, err := s.Store.UpdateWebhookCall(ctx, webhookID, callID, func(c *store.WebhookCall) error {
		if c.Status != store.CallPending || c.Attempts != attempt {
			return errDone // another runner claimed a later attempt meanwhile (ours ran out)
		}
		c.Attempts, c.LastStatus, c.LastExcerpt, c.UpdatedAt = attempt, res.Status, res.Excerpt, ended
		c.LastError = ""
		switch {
		case res.OK():
			c.Status, c.NextAttemptAt = store.CallDelivered, nil
		default:
			c.LastError = res.Err.Error()
			if next, ok := webhook.NextAttempt(c.EventAt, ended, attempt); ok {
				c.NextAttemptAt = &next
			} else {
				c.Status, c.NextAttemptAt = store.CallFailed, nil
			}
		}
		return nil
	})
	if errors.Is(err, errDone) {
		return s.Store.GetWebhookCall(ctx, webhookID, callID)
	}
	if err != nil {
		return out, err
	}
	s.count(ctx, w, res.OK(), ended, out.NextAttemptAt, held)
	if !s.Sealer.Current(ctx, w.SecretSealed) {
		s.reseal(ctx, w)
	}
	return out, nil
}

// previousSecret is a rotated-out secret still within its overlap ("" otherwise).
func (s *Service) previousSecret(ctx context.Context, w store.Webhook, now time.Time) string {
	if w.PreviousSealed == "" || w.PreviousUntil == nil || now.After(*w.PreviousUntil) {
		return ""
	}
	prev, err := s.Sealer.Open(ctx, w.PreviousSealed)
	if err != nil {
		return ""
	}
	return prev
}

// count records a call's outcome on its webhook: a success ends a run of failures; a failure
// extends it (the webhook's calls are held until the failed one's next attempt, retry), and a
// long enough run disables the webhook. Only the runner's own success (held) ends the hold:
// the calls held meanwhile are due at RetryAt, and a test call or a replay that succeeds
// earlier must not let newer events overtake them.
func (s *Service) count(ctx context.Context, w store.Webhook, ok bool, now time.Time, retry *time.Time, held bool) {
	if ok && w.Failures == 0 && (w.RetryAt == nil || !held) {
		return
	}
	_, err := s.Store.UpdateWebhook(ctx, w.TeamID, w.ID, func(w *store.Webhook) error {
		if ok {
			w.Failures, w.FailingSince = 0, nil
			if held {
				w.RetryAt = nil
			}
			return nil
		}
		w.Failures++
		if retry != nil && (w.RetryAt == nil || retry.After(*w.RetryAt)) {
			// Never earlier: calls held until the later time would be overtaken. (A call
			// that gave up, retry nil, leaves the hold as it is.)
			w.RetryAt = retry
		}
		if w.FailingSince == nil {
			w.FailingSince = &now
		}
		if w.Status == store.WebhookActive && webhook.ShouldDisable(w.Failures, *w.FailingSince, now) {
			w.Status, w.UpdatedAt = store.WebhookAutoDisabled, now
			s.log().Warn("webhook disabled after failing calls", "webhookId", w.ID, "teamId", w.TeamID, "failures", w.Failures)
		}
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log().Error("webhook failure count", "webhookId", w.ID, "err", err.Error())
	}
}

// reseal seals a webhook's secrets again under the keyring's current key.
func (s *Service) reseal(ctx context.Context, w store.Webhook) {
	_, err := s.Store.UpdateWebhook(ctx, w.TeamID, w.ID, func(w *store.Webhook) error {
		for _, sealed := range []*string{&w.SecretSealed, &w.PreviousSealed} {
			if *sealed == "" || s.Sealer.Current(ctx, *sealed) {
				continue
			}
			plain, err := s.Sealer.Open(ctx, *sealed)
			if err != nil {
				return err
			}
			if *sealed, err = s.Sealer.Seal(ctx, plain); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.log().Warn("webhook secret not sealed again", "webhookId", w.ID, "err", err.Error())
	}
}

// Concurrency is how many calls RunDue attempts at once (a receiver that times out holds one
// for webhook.Timeout).
const Concurrency = 8

// RunDue attempts the calls due now, up to limit, and returns how many it attempted. A
// webhook's calls go one after the other, in the order they are due and then made (an email's
// events in the order they happened); Concurrency webhooks are served at once.
func (s *Service) RunDue(ctx context.Context, limit int) (int, error) {
	refs, err := s.Store.DueWebhookCalls(ctx, s.now(), limit)
	if err != nil {
		return 0, err
	}
	return s.attempt(ctx, refs, false), ctx.Err()
}

// AttemptCalls attempts calls Publish made, as RunDue does; those that fail are due again, and
// those of a webhook with older calls waiting for its retry are left to RunDue (errLeft).
func (s *Service) AttemptCalls(ctx context.Context, calls []store.WebhookCall) int {
	refs := make([][2]string, len(calls))
	for i, c := range calls {
		refs[i] = [2]string{c.WebhookID, c.ID}
	}
	return s.attempt(ctx, refs, true)
}

// attempt makes the next attempt of each call (webhook id, call id): a webhook's one after the
// other, in the order given, Concurrency webhooks at once; fresh, for calls just made.
func (s *Service) attempt(ctx context.Context, refs [][2]string, fresh bool) int {
	order, byHook := group(refs)
	var (
		wg  sync.WaitGroup
		n   atomic.Int64
		sem = make(chan struct{}, Concurrency)
	)
	for _, wh := range order {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			n.Add(int64(s.serve(ctx, wh, byHook[wh], fresh)))
		}()
	}
	wg.Wait()
	return int(n.Load())
}

// group splits refs by webhook, in the order each webhook first appears.
func group(refs [][2]string) (order []string, byHook map[string][]string) {
	byHook = map[string][]string{}
	for _, r := range refs {
		if _, ok := byHook[r[0]]; !ok {
			order = append(order, r[0])
		}
		byHook[r[0]] = append(byHook[r[0]], r[1])
	}
	return order, byHook
}

// serve attempts a webhook's calls one after the other and returns how many it attempted. It
// stops when the context has no time left for another post, or when a call fails (the rest
// wait for that call's retry); the calls it leaves stay due.
func (s *Service) serve(ctx context.Context, wh string, ids []string, fresh bool) int {
	n := 0
	for i, id := range ids {
		if !timeLeft(ctx) {
			return n // the rest stay due for the next run
		}
		c, err := s.attemptCall(ctx, wh, id, true, fresh)
		if errors.Is(err, errLeft) {
			return n // this webhook's other calls are the runner's too
		}
		if errors.Is(err, errNotDue) {
			// Another runner posts it now (the stream's and the retries' runners both see a
			// fresh call due): not a failing receiver, nothing to hold.
			continue
		}
		if errors.Is(err, store.ErrNotFound) {
			continue // past its retention (its due entry goes with it)
		}
		if err != nil {
			s.log().Error("webhook call", "webhookId", wh, "callId", id, "err", err.Error())
			continue
		}
		n++
		if c.Status == store.CallPending && c.NextAttemptAt != nil && c.NextAttemptAt.After(s.now()) {
			// The receiver is failing: its other calls here wait with this one, and leave the
			// front of the due calls to other webhooks.
			s.holdAll(ctx, wh, ids[i+1:], *c.NextAttemptAt)
			return n
		}
	}
	return n
}

// Pool attempts due calls without waiting for a slow webhook (the local server's runner): each
// webhook's calls go one after the other in a goroutine of their own, Concurrency webhooks at
// once, and a run hands out the due calls of the webhooks not busy, so one receiver that takes
// its time delays only its own calls.
type Pool struct {
	S *Service
	// Due lists due calls as Store.DueWebhookCalls does, leaving out those skip says to (it is
	// asked once for each due call, in order, and a call it answers false for is listed), so
	// that they do not fill the limit.
	Due func(ctx context.Context, t time.Time, limit int, skip func(webhookID string) bool) ([][2]string, error)

	mu   sync.Mutex
	busy map[string]bool
	wg   sync.WaitGroup
}

// Run hands the due calls of idle webhooks, up to limit, to goroutines of their own, as many
// webhooks as Concurrency allows with those still busy, and returns how many calls it handed
// out. The goroutines stop when ctx ends (a post under way finishes); Wait waits for them.
func (p *Pool) Run(ctx context.Context, limit int) (int, error) {
	p.mu.Lock()
	if p.busy == nil {
		p.busy = map[string]bool{}
	}
	busy := make(map[string]bool, len(p.busy))
	for wh := range p.busy {
		busy[wh] = true
	}
	free := Concurrency - len(p.busy)
	p.mu.Unlock()
	if free <= 0 {
		return 0, nil
	}
	// At most PoolCalls calls of one webhook in a run: a failing webhook's backlog, due since
	// its failure, would otherwise fill the limit run after run (its worker holding 100 at a
	// time) while the calls of other webhooks, due later, waited behind it.
	taken := map[string]int{}
	refs, err := p.Due(ctx, p.S.now(), limit, func(wh string) bool {
		if busy[wh] || taken[wh] >= PoolCalls {
			return true
		}
		taken[wh]++
		return false
	})
	if err != nil {
		return 0, err
	}
	order, byHook := group(refs)
	handed := 0
	for _, wh := range order[:min(len(order), free)] {
		ids := byHook[wh]
		handed += len(ids)
		p.mu.Lock()
		p.busy[wh] = true
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer func() {
				p.mu.Lock()
				delete(p.busy, wh)
				p.mu.Unlock()
				p.wg.Done()
			}()
			p.S.serve(ctx, wh, ids, false)
		}()
	}
	return handed, nil
}

// PoolCalls is how many calls of one webhook a Pool run hands out at most.
const PoolCalls = 20

// Wait waits for the goroutines Run started.
func (p *Pool) Wait() { p.wg.Wait() }

// holdAll holds calls of the webhook until its retry. Stopping, those not held are held by
// the next run (the webhook's retry is set).
func (s *Service) holdAll(ctx context.Context, wh string, ids []string, until time.Time) {
	if len(ids) == 0 {
		return
	}
	if err := s.Store.HoldWebhookCalls(ctx, wh, ids, until); err != nil && ctx.Err() == nil {
		s.log().Error("webhook calls not held", "webhookId", wh, "calls", len(ids), "err", err.Error())
	}
}

// hold moves a pending call's next attempt to until when it is due before: it waits for its
// failing webhook's retry. It makes no attempt and counts none.
func (s *Service) hold(ctx context.Context, webhookID, callID string, until time.Time) (store.WebhookCall, error) {
	c, err := s.Store.UpdateWebhookCall(ctx, webhookID, callID, func(c *store.WebhookCall) error {
		if !c.HoldUntil(until) {
			return errDone
		}
		return nil
	})
	if errors.Is(err, errDone) {
		return s.Store.GetWebhookCall(ctx, webhookID, callID)
	}
	return c, err
}

// Test makes a webhook.test call to the webhook (whatever it subscribes to) and attempts it.
func (s *Service) Test(ctx context.Context, teamID int64, id string) (store.WebhookCall, error) {
	w, err := s.Get(ctx, teamID, id)
	if err != nil {
		return store.WebhookCall{}, err
	}
	now := s.now()
	data, _ := json.Marshal(map[string]any{"test": true, "webhookId": w.ID, "sentAt": stamp(now)})
	c := store.WebhookCall{ID: CallID(w.ID, now, webhook.TestEvent+"\x00"+newNonce()), WebhookID: w.ID, TeamID: teamID,
		Type: webhook.TestEvent, Data: data, EventAt: now, Status: store.CallPending, NextAttemptAt: &now,
		CreatedAt: now, UpdatedAt: now}
	return s.makeAndAttempt(ctx, w, c)
}

// Replay sends a call's event again, as a new call (its own id and attempts).
func (s *Service) Replay(ctx context.Context, teamID int64, id, callID string) (store.WebhookCall, error) {
	w, err := s.Get(ctx, teamID, id)
	if err != nil {
		return store.WebhookCall{}, err
	}
	orig, err := s.Store.GetWebhookCall(ctx, w.ID, callID)
	if err != nil || orig.TeamID != teamID {
		return store.WebhookCall{}, fault.NotFoundf("Webhook call not found")
	}
	now := s.now()
	c := orig
	c.ID = CallID(w.ID, now, "replay\x00"+orig.ID+"\x00"+newNonce())
	c.Status, c.Attempts, c.LastStatus, c.LastExcerpt, c.LastError = store.CallPending, 0, 0, "", ""
	c.NextAttemptAt, c.CreatedAt, c.UpdatedAt, c.Version = &now, now, now, 0
	return s.makeAndAttempt(ctx, w, c)
}

func (s *Service) makeAndAttempt(ctx context.Context, w store.Webhook, c store.WebhookCall) (store.WebhookCall, error) {
	if w.Status != store.WebhookActive {
		return store.WebhookCall{}, fault.New(fault.Invalid, "The webhook is %s: set it ACTIVE first", w.Status)
	}
	if _, err := s.Store.CreateWebhookCalls(ctx, []store.WebhookCall{c}); err != nil {
		return store.WebhookCall{}, err
	}
	return s.Attempt(ctx, w.ID, c.ID)
}

// Calls returns a page of a webhook's delivery log.
func (s *Service) Calls(ctx context.Context, teamID int64, id string, limit int, before string) ([]store.WebhookCall, error) {
	w, err := s.Get(ctx, teamID, id)
	if err != nil {
		return nil, err
	}
	return s.Store.ListWebhookCalls(ctx, w.ID, limit, before)
}

func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// timeLeft reports whether an attempt still fits before ctx's deadline (a Lambda invocation's).
func timeLeft(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	d, ok := ctx.Deadline()
	return !ok || time.Until(d) > webhook.Timeout+2*time.Second
}

// Entries are history entries that a write added to an email: a stream record's (dynamo's
// NewEventsAttribute) or the local store's feed's.
type Entries struct {
	TeamID   int64
	EmailID  string
	EventIDs []string
}

// EmailReader reads an email and its history.
type EmailReader interface {
	GetEmailDetail(ctx context.Context, id string) (store.Email, []store.Event, error)
}

// PublishEntries publishes the events of history entries (EmailEvent), and then other events
// (ChangeEvent's), as Publish does. The emails of teams without webhooks are not read; an
// email is read once, however many of its entries are listed; an email that is gone is skipped.
func (s *Service) PublishEntries(ctx context.Context, emails EmailReader, entries []Entries, more ...Event) ([]store.WebhookCall, error) {
	byTeam := map[int64][]store.Webhook{}
	var order []string
	added := map[string][]string{}
	for _, en := range entries {
		hooks, err := s.teamHooks(ctx, byTeam, en.TeamID)
		if err != nil {
			return nil, err
		}
		if len(hooks) == 0 {
			continue
		}
		if _, ok := added[en.EmailID]; !ok {
			order = append(order, en.EmailID)
		}
		added[en.EmailID] = append(added[en.EmailID], en.EventIDs...)
	}
	var evs []Event
	for _, id := range order {
		e, history, err := emails.GetEmailDetail(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, entry := range history {
			if slices.Contains(added[id], entry.ID) {
				if ev, ok := EmailEvent(e, entry); ok {
					evs = append(evs, ev)
				}
			}
		}
	}
	more, err := s.dropMoves(ctx, emails, byTeam, more)
	if err != nil {
		return nil, err
	}
	return s.publish(ctx, append(evs, more...), byTeam)
}

// Mover tells a contact's change of address from its deletion where that change deletes the
// contact's item and writes a new one (dynamo.Store.Moved): the contact is still in its book.
type Mover interface {
	Moved(ctx context.Context, c store.Contact) (bool, error)
}

// dropMoves leaves out the contact.deleted of a contact whose item went because its address
// changed, when emails is a Mover: the new item's change is its contact.updated
// (dynamo.DecodeChange). It reads the contact only where a webhook wants the event (a book's
// deletion removes its contacts one by one: no read each for a team without such a webhook).
func (s *Service) dropMoves(ctx context.Context, emails EmailReader, byTeam map[int64][]store.Webhook, events []Event) ([]Event, error) {
	m, ok := emails.(Mover)
	if !ok {
		return events, nil
	}
	kept := events[:0:0]
	for _, ev := range events {
		if d, isContact := ev.Data.(ContactData); isContact && ev.Type == "contact.deleted" {
			want, err := s.wanted(ctx, byTeam, ev)
			if err != nil {
				return nil, err
			}
			if !want {
				continue // no webhook wants it: nothing to tell
			}
			moved, err := m.Moved(ctx, store.Contact{ID: d.ID, TeamID: ev.TeamID, BookID: d.ContactBookID, Email: d.Email})
			if err != nil {
				return nil, err
			}
			if moved {
				continue
			}
		}
		kept = append(kept, ev)
	}
	return kept, nil
}
