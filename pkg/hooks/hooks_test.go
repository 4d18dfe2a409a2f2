package hooks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/bolt"
	"github.com/mailroom/mailroom/pkg/webhook"
)

// receiver is a real HTTP endpoint that records the calls it gets and answers with status.
type receiver struct {
	mu     sync.Mutex
	status int
	got    []received
	srv    *httptest.Server
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{status: 200}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{req.Header.Clone(), b})
		status := r.status
		r.mu.Unlock()
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"ok":` + map[bool]string{true: "true", false: "false"}[status < 300] + `}`))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) calls() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// verify checks a call's signature as a receiver would: HMAC-SHA256 of "<ts>.<body>" with the
// secret, computed here from the headers, not with the code under test.
func verify(t *testing.T, c received, secret, header string) {
	t.Helper()
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(c.header.Get(webhook.HeaderTimestamp) + "." + string(c.body)))
	if want := "v1=" + hex.EncodeToString(m.Sum(nil)); c.header.Get(header) != want {
		t.Fatalf("%s %q does not verify with the secret", header, c.header.Get(header))
	}
}

type world struct {
	s     *Service
	st    *bolt.Store
	clock time.Time
	ring  campaign.Keyring
	team  int64
}

func newWorld(t *testing.T) *world {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	w := &world{st: st, clock: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC), team: 1}
	w.ring = campaign.SingleKey(strings.Repeat("k", 64))
	w.s = &Service{Store: st, Policy: webhook.Policy{AllowLocal: true}, Now: func() time.Time { return w.clock },
		Sealer: Sealer{Ring: func(context.Context) (campaign.Keyring, error) { return w.ring, nil }}}
	return w
}

func ptr[T any](v T) *T { return &v }

// TestWebhookLifecycle: a webhook is created with a secret shown once and stored sealed; an
// event makes one call per webhook that wants it, however often it is published; the call is
// signed so a receiver verifies it, and a 500 is retried with backoff until it is taken.
func TestWebhookLifecycle(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	r := newReceiver(t)
	all, secret, err := w.s.Create(ctx, w.team, Fields{URL: ptr(r.srv.URL + "/all")})
	if err != nil || !webhook.ValidSecret(secret) || all.Status != store.WebhookActive {
		t.Fatalf("create: %+v %q %v", all, secret, err)
	}
	stored, _ := w.st.GetWebhook(ctx, w.team, all.ID)
	if strings.Contains(stored.SecretSealed, strings.TrimPrefix(secret, "whsec_")) || stored.SecretSealed == "" {
		t.Fatalf("the secret is stored in clear: %q", stored.SecretSealed)
	}
	onlyDelivered, _, _ := w.s.Create(ctx, w.team, Fields{URL: ptr(r.srv.URL + "/d"), EventTypes: ptr([]string{"email.delivered"})})
	for _, id := range []int64{3, 9} {
		if err := w.st.CreateDomain(ctx, store.Domain{ID: id, TeamID: w.team, Name: fmt.Sprintf("d%d.example", id), CreatedAt: w.clock, UpdatedAt: w.clock}); err != nil {
			t.Fatal(err)
		}
	}
	otherDomain, _, err := w.s.Create(ctx, w.team, Fields{URL: ptr(r.srv.URL + "/x"), DomainIDs: ptr([]int64{9})})
	if err != nil {
		t.Fatal(err)
	}
	paused, _, _ := w.s.Create(ctx, w.team, Fields{URL: ptr(r.srv.URL + "/p")})
	if _, err := w.s.Update(ctx, w.team, paused.ID, Fields{Status: ptr(store.WebhookPaused)}); err != nil {
		t.Fatal(err)
	}
	ev := Event{TeamID: w.team, DomainID: 3, Type: "email.sent", At: w.clock, Key: "em_1/0-SENT",
		Data: map[string]any{"id": "em_1", "status": "SENT"}}
	calls, err := w.s.Publish(ctx, []Event{ev})
	if err != nil || len(calls) != 1 || calls[0].WebhookID != all.ID {
		t.Fatalf("publish: %d calls %v (want one, to the webhook of every type and domain)", len(calls), err)
	}
	if again, _ := w.s.Publish(ctx, []Event{ev}); len(again) != 0 {
		t.Fatalf("the same event published again made %d calls", len(again))
	}
	_ = onlyDelivered
	_ = otherDomain
	r.status = 500
	c, err := w.s.Attempt(ctx, all.ID, calls[0].ID)
	if err != nil || c.Status != store.CallPending || c.Attempts != 1 || c.LastStatus != 500 || c.NextAttemptAt == nil ||
		!strings.Contains(c.LastExcerpt, `"ok":false`) {
		t.Fatalf("after a 500: %+v, %v", c, err)
	}
	if n, _ := w.s.RunDue(ctx, 10); n != 0 {
		t.Fatalf("%d calls attempted before their backoff passed", n)
	}
	r.status = 200
	w.clock = *c.NextAttemptAt
	if n, err := w.s.RunDue(ctx, 10); n != 1 || err != nil {
		t.Fatalf("RunDue: %d, %v", n, err)
	}
	c, _ = w.st.GetWebhookCall(ctx, all.ID, calls[0].ID)
	if c.Status != store.CallDelivered || c.Attempts != 2 || c.LastStatus != 200 {
		t.Fatalf("after the retry: %+v", c)
	}
	got := r.calls()
	if len(got) != 2 {
		t.Fatalf("%d calls received, want 2", len(got))
	}
	for i, g := range got {
		verify(t, g, secret, webhook.HeaderSignature)
		var env webhook.Envelope
		if err := json.Unmarshal(g.body, &env); err != nil || env.ID != c.ID || env.Type != "email.sent" || env.Attempt != i+1 ||
			env.TeamID != w.team || env.Version != webhook.Version || string(env.Data) != `{"id":"em_1","status":"SENT"}` {
			t.Fatalf("envelope %d: %s", i+1, g.body)
		}
		if g.header.Get(webhook.HeaderCall) != c.ID || g.header.Get(webhook.HeaderEvent) != "email.sent" ||
			g.header.Get(webhook.HeaderRetry) != map[int]string{0: "false", 1: "true"}[i] {
			t.Fatalf("headers of call %d: %v", i+1, g.header)
		}
	}
	log, err := w.s.Calls(ctx, w.team, all.ID, 10, "")
	if err != nil || len(log) != 1 || log[0].ID != c.ID {
		t.Fatalf("delivery log %v, %v", log, err)
	}
	// Replay: the same event again, as a new call.
	re, err := w.s.Replay(ctx, w.team, all.ID, c.ID)
	if err != nil || re.ID == c.ID || re.Status != store.CallDelivered || string(re.Data) != string(c.Data) {
		t.Fatalf("replay %+v, %v", re, err)
	}
	if _, err := w.s.Replay(ctx, 2, all.ID, c.ID); err == nil {
		t.Error("another team replayed the call")
	}
	// Test: a webhook.test call, delivered and first in the log.
	w.clock = w.clock.Add(time.Second)
	tc, err := w.s.Test(ctx, w.team, all.ID)
	if err != nil || tc.Type != webhook.TestEvent || tc.Status != store.CallDelivered {
		t.Fatalf("test call %+v, %v", tc, err)
	}
	if log, _ := w.s.Calls(ctx, w.team, all.ID, 10, ""); len(log) != 3 || log[0].ID != tc.ID {
		t.Fatalf("log after the test: %d calls", len(log))
	}
}

// TestRotationAndReseal: after a rotation calls are signed with the new secret and, for a
// day, also with the old one; a keyring rotation re-seals the secrets at the next call.
func TestRotationAndReseal(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	r := newReceiver(t)
	h, oldSecret, _ := w.s.Create(ctx, w.team, Fields{URL: ptr(r.srv.URL)})
	_, newSecret, err := w.s.RotateSecret(ctx, w.team, h.ID)
	if err != nil || newSecret == oldSecret {
		t.Fatal(err)
	}
	tc, err := w.s.Test(ctx, w.team, h.ID)
	if err != nil || tc.Status != store.CallDelivered {
		t.Fatalf("test call: %+v %v", tc, err)
	}
	verify(t, r.calls()[0], newSecret, webhook.HeaderSignature)
	verify(t, r.calls()[0], oldSecret, webhook.HeaderPrevious)
	w.clock = w.clock.Add(SecretOverlap + time.Second)
	if _, err := w.s.Test(ctx, w.team, h.ID); err != nil {
		t.Fatal(err)
	}
	if got := r.calls()[1].header.Get(webhook.HeaderPrevious); got != "" {
		t.Errorf("the old secret still signs after the overlap: %q", got)
	}
	// The deployment's keyring rotates: the next call re-seals the secret under the new key.
	text, _, _ := campaign.RotateKeyring(strings.Repeat("k", 64))
	w.ring, _ = campaign.ParseKeyring(text)
	if _, err := w.s.Test(ctx, w.team, h.ID); err != nil {
		t.Fatal(err)
	}
	stored, _ := w.st.GetWebhook(ctx, w.team, h.ID)
	if !w.s.Sealer.Current(ctx, stored.SecretSealed) {
		t.Errorf("secret not sealed again under the current key: %q", stored.SecretSealed[:8])
	}
	verify(t, r.calls()[2], newSecret, webhook.HeaderSignature)
}

// TestAutoDisable: 50 calls failing in a row over an hour disable the webhook; its calls still
// due are given up; setting it ACTIVE again clears the count.
func TestAutoDisable(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	r := newReceiver(t)
	r.status = 503
	h, _, _ := w.s.Create(ctx, w.team, Fields{URL: ptr(r.srv.URL)})
	var last store.WebhookCall
	for i := range webhook.DisableAfter {
		w.clock = w.clock.Add(2 * time.Minute)
		calls, err := w.s.Publish(ctx, []Event{{TeamID: w.team, Type: "email.delivered", At: w.clock, Key: strings.Repeat("x", i+1), Data: map[string]string{}}})
		if err != nil || len(calls) != 1 {
			t.Fatalf("publish %d: %v", i, err)
		}
		if last, err = w.s.Attempt(ctx, h.ID, calls[0].ID); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := w.s.Get(ctx, w.team, h.ID)
	if got.Status != store.WebhookAutoDisabled || got.Failures != webhook.DisableAfter {
		t.Fatalf("after %d failures over %s: %s, %d failures", webhook.DisableAfter, 100*time.Minute, got.Status, got.Failures)
	}
	w.clock = *last.NextAttemptAt
	if n, _ := w.s.RunDue(ctx, 100); n == 0 {
		t.Fatal("no due call attempted")
	}
	if c, _ := w.st.GetWebhookCall(ctx, h.ID, last.ID); c.Status != store.CallFailed || !strings.Contains(c.LastError, "auto disabled") {
		t.Fatalf("a call of a disabled webhook: %+v", c)
	}
	if again, _ := w.s.Update(ctx, w.team, h.ID, Fields{Status: ptr(store.WebhookActive)}); again.Failures != 0 || again.Status != store.WebhookActive {
		t.Fatalf("re-enabled: %+v", again)
	}
}

// TestCreateChecks: the URL policy, unknown event types (named), the cap, and another team.
func TestCreateChecks(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	aws := &Service{Store: w.s.Store, Sealer: w.s.Sealer, Now: w.s.Now}
	for name, f := range map[string]Fields{
		"metadata address": {URL: ptr("https://169.254.169.254/latest/meta-data")},
		"http on AWS":      {URL: ptr("http://hooks.example.com/")},
		"loopback on AWS":  {URL: ptr("https://127.0.0.1/")},
	} {
		if _, _, err := aws.Create(ctx, w.team, f); err == nil {
			t.Errorf("%s accepted", name)
		} else if fe, ok := fault.As(err); !ok || fe.Kind != fault.Invalid || !strings.HasPrefix(fe.Message, "url: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, _, err := w.s.Create(ctx, w.team, Fields{URL: ptr("http://127.0.0.1:9/"), EventTypes: ptr([]string{"email.sent", "email.sending", "bogus"})})
	if fe, ok := fault.As(err); !ok || fe.Message != `eventTypes: unknown event types "email.sending", "bogus"` {
		t.Errorf("unknown types: %v", err)
	}
	// An empty one (a list's trailing comma) is named too, not left blank.
	_, _, err = w.s.Create(ctx, w.team, Fields{URL: ptr("http://127.0.0.1:9/"), EventTypes: ptr([]string{"email.sent", ""})})
	if fe, ok := fault.As(err); !ok || fe.Message != `eventTypes: unknown event types ""` {
		t.Errorf("an empty type: %v", err)
	}
	// domainIds must be the team's own domains.
	now := w.clock
	if err := w.st.CreateDomain(ctx, store.Domain{ID: 7, TeamID: w.team, Name: "ours.example", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := w.st.CreateDomain(ctx, store.Domain{ID: 8, TeamID: 2, Name: "theirs.example", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	_, _, err = w.s.Create(ctx, w.team, Fields{URL: ptr("http://127.0.0.1:9/"), DomainIDs: ptr([]int64{7, 8})})
	if fe, ok := fault.As(err); !ok || fe.Message != "domainIds: 8 is not a domain of this team" {
		t.Errorf("another team's domain: %v", err)
	}
	mine, _, err := w.s.Create(ctx, w.team, Fields{URL: ptr("http://127.0.0.1:9/"), DomainIDs: ptr([]int64{7})})
	if err != nil {
		t.Fatalf("the team's own domain: %v", err)
	}
	if _, err := w.s.Update(ctx, w.team, mine.ID, Fields{DomainIDs: ptr([]int64{8})}); err == nil {
		t.Error("an update to another team's domain accepted")
	}
	if err := w.s.Delete(ctx, w.team, mine.ID); err != nil {
		t.Fatal(err)
	}
	w.s.MaxPerTeam = 2
	for range 2 {
		if _, _, err := w.s.Create(ctx, w.team, Fields{URL: ptr("http://127.0.0.1:9/")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := w.s.Create(ctx, w.team, Fields{URL: ptr("http://127.0.0.1:9/")}); err == nil {
		t.Error("a third webhook past a cap of 2")
	}
	list, _ := w.s.List(ctx, w.team)
	if _, err := w.s.Get(ctx, 2, list[0].ID); !errors.As(err, new(*fault.Error)) {
		t.Errorf("another team's webhook: %v", err)
	}
}

// TestOneAttemptAtATime: runners racing for the same due call (the stream function, the
// retries, a replay) post it once: the first claims the attempt, the others find it claimed.
func TestOneAttemptAtATime(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	r := newReceiver(t)
	h, _, _ := w.s.Create(ctx, w.team, Fields{URL: ptr(r.srv.URL)})
	calls, err := w.s.Publish(ctx, []Event{{TeamID: w.team, Type: "email.sent", At: w.clock, Key: "race", Data: map[string]string{}}})
	if err != nil || len(calls) != 1 {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := w.s.Attempt(ctx, h.ID, calls[0].ID); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := len(r.calls()); n != 1 {
		t.Fatalf("20 racing runners posted the call %d times, want 1", n)
	}
	if c, _ := w.st.GetWebhookCall(ctx, h.ID, calls[0].ID); c.Status != store.CallDelivered || c.Attempts != 1 {
		t.Fatalf("the call: %+v", c)
	}
}

// TestAFailingReceiverDoesNotHoldUpOthers: a team's failing webhook with hundreds of calls due
// before another team's is tried once per retry, not once per call, and its backlog is held
// behind its retry, so the other team's call goes out within a few runs of 100.
func TestAFailingReceiverDoesNotHoldUpOthers(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	b := backlogBefore(t, w)
	bad, good, hb, hg, theirs := b.bad, b.good, b.badHook, b.goodHook, b.theirs
	runs := 0
	for ; runs < 6 && len(good.calls()) == 0; runs++ {
		if _, err := w.s.RunDue(ctx, 100); err != nil {
			t.Fatal(err)
		}
	}
	if len(good.calls()) != 1 {
		t.Fatalf("after %d runs the other team's call was not made", runs)
	}
	if n := len(bad.calls()); n != 1 {
		t.Errorf("the failing receiver got %d posts before its retry, want 1", n)
	}
	if c, _ := w.st.GetWebhookCall(ctx, hg.ID, theirs[0].ID); c.Status != store.CallDelivered {
		t.Errorf("the other team's call: %s", c.Status)
	}
	got, _ := w.s.Get(ctx, w.team, hb.ID)
	if got.RetryAt == nil || !got.RetryAt.After(w.clock) {
		t.Fatalf("the failing webhook's retry: %v", got.RetryAt)
	}
	// The receiver is fixed before the retry, and a test call says so: it is posted at once,
	// but the backlog and a newer event still wait for the retry, so nothing overtakes them.
	bad.mu.Lock()
	bad.status = 200
	bad.mu.Unlock()
	if c, err := w.s.Test(ctx, w.team, hb.ID); err != nil || c.Status != store.CallDelivered {
		t.Fatalf("a test call to the fixed receiver: %+v %v", c, err)
	}
	late, err := w.s.Publish(ctx, []Event{{TeamID: w.team, Type: "email.opened", At: w.clock, Key: "late", Data: map[string]string{}}})
	if err != nil || len(late) != 1 {
		t.Fatalf("a newer event: %v", err)
	}
	w.clock = w.clock.Add(time.Second)
	for range 3 {
		if _, err := w.s.RunDue(ctx, 100); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(bad.calls()); n != 2 {
		t.Fatalf("before the retry the receiver got %d posts, want the failed one and the test", n)
	}
	// At the retry the backlog goes out, each call once, and the newer event last.
	w.clock = got.RetryAt.Add(time.Second)
	for range 10 {
		if _, err := w.s.RunDue(ctx, 100); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	var order []string
	for _, c := range bad.calls()[2:] {
		var b struct{ ID, Type string }
		_ = json.Unmarshal(c.body, &b)
		if seen[b.ID] {
			t.Fatalf("call %s posted twice after the retry", b.ID)
		}
		seen[b.ID] = true
		order = append(order, b.Type)
	}
	if len(seen) != 351 {
		t.Errorf("after the retry %d of the 350 calls and the newer one were posted", len(seen))
	} else if order[len(order)-1] != "email.opened" {
		t.Errorf("the newer event overtook the backlog: position of the last %q", order[len(order)-1])
	}
	if got, _ := w.s.Get(ctx, w.team, hb.ID); got.RetryAt != nil || got.Failures != 0 {
		t.Errorf("the webhook after a success: retry %v, failures %d", got.RetryAt, got.Failures)
	}
}

// backlog is a failing receiver's webhook with 350 calls due, and another team's webhook
// with one call due a second after them (theirs); the clock a second past that.
type backlog struct {
	bad, good         *receiver
	badHook, goodHook store.Webhook
	theirs            []store.WebhookCall
}

func backlogBefore(t *testing.T, w *world) backlog {
	t.Helper()
	ctx := context.Background()
	b := backlog{bad: newReceiver(t), good: newReceiver(t)}
	b.bad.status = 500
	var err error
	if b.badHook, _, err = w.s.Create(ctx, w.team, Fields{URL: ptr(b.bad.srv.URL)}); err != nil {
		t.Fatal(err)
	}
	if b.goodHook, _, err = w.s.Create(ctx, 2, Fields{URL: ptr(b.good.srv.URL)}); err != nil {
		t.Fatal(err)
	}
	var events []Event
	for i := range 350 {
		events = append(events, Event{TeamID: w.team, Type: "email.delivered", At: w.clock, Key: fmt.Sprint("bad-", i), Data: map[string]string{}})
	}
	if calls, err := w.s.Publish(ctx, events); err != nil || len(calls) != 350 {
		t.Fatalf("backlog: %d calls, %v", len(calls), err)
	}
	w.clock = w.clock.Add(time.Second)
	b.theirs, err = w.s.Publish(ctx, []Event{{TeamID: 2, Type: "email.delivered", At: w.clock, Key: "good", Data: map[string]string{}}})
	if err != nil || len(b.theirs) != 1 {
		t.Fatalf("the other team's call: %v", err)
	}
	w.clock = w.clock.Add(time.Second)
	return b
}

// TestFreshCallsDoNotOvertakeAHeldOne: once a failing webhook's retry time has passed, a call
// just made (the stream's, AttemptCalls) is not posted before the older call held for that
// retry: it is left to the runner, which posts the older one first, then it. (The reviewer's
// sequence: email.queued failed, the receiver came back, email.sent went out first.)
func TestFreshCallsDoNotOvertakeAHeldOne(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	r := newReceiver(t)
	r.status = 500
	if _, _, err := w.s.Create(ctx, w.team, Fields{URL: ptr(r.srv.URL)}); err != nil {
		t.Fatal(err)
	}
	publish := func(typ string) []store.WebhookCall {
		calls, err := w.s.Publish(ctx, []Event{{TeamID: w.team, Type: typ, At: w.clock, Key: typ, Data: map[string]string{}}})
		if err != nil || len(calls) != 1 {
			t.Fatalf("%s: %d calls, %v", typ, len(calls), err)
		}
		return calls
	}
	w.s.AttemptCalls(ctx, publish("email.queued")) // fails: the webhook's retry is set
	r.mu.Lock()
	r.status = 200
	r.mu.Unlock()
	// email.sent is made before the retry's time and attempted after it (a stream batch
	// retried, slow receivers ahead of it in the batch): made, it would be due first.
	w.clock = w.clock.Add(time.Second)
	sent := publish("email.sent")
	w.clock = w.clock.Add(time.Minute) // past the retry
	w.s.AttemptCalls(ctx, sent)
	if n := len(r.calls()); n != 1 {
		t.Fatalf("the fresh call was posted before the held one: %d posts, want the failed one only", n)
	}
	for range 3 {
		if _, err := w.s.RunDue(ctx, 100); err != nil {
			t.Fatal(err)
		}
	}
	var order []string
	for _, c := range r.calls() {
		var b struct{ Type string }
		_ = json.Unmarshal(c.body, &b)
		order = append(order, b.Type)
	}
	if strings.Join(order, " ") != "email.queued email.queued email.sent" {
		t.Fatalf("posts %v, want the failed queued, its retry, then sent", order)
	}
	// The retry ended with a success: fresh calls are posted at once again.
	w.s.AttemptCalls(ctx, publish("email.delivered"))
	if n := len(r.calls()); n != 4 {
		t.Errorf("after the recovery a fresh call: %d posts, want 4", n)
	}
}

// TestAPostCutOffIsRetriedAsARetry: a runner that dies after posting a call and before
// recording it (a crash, a function's timeout) leaves the call due again when its claim runs
// out; the post that follows says it is the second attempt (X-UseSend-Retry: true), so that a
// receiver deduplicating by that marker, as well as by the call's id, sees it for what it is.
func TestAPostCutOffIsRetriedAsARetry(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	r := newReceiver(t)
	h, _, _ := w.s.Create(ctx, w.team, Fields{URL: ptr(r.srv.URL)})
	calls, err := w.s.Publish(ctx, []Event{{TeamID: w.team, Type: "email.sent", At: w.clock, Key: "cut", Data: map[string]string{}}})
	if err != nil || len(calls) != 1 {
		t.Fatal(err)
	}
	dying := &diesRecording{Store: w.st}
	w.s.Store = dying
	if _, err := w.s.Attempt(ctx, h.ID, calls[0].ID); err == nil {
		t.Fatal("the runner that died recording its post reported success")
	}
	w.s.Store = w.st
	if c, _ := w.s.Attempt(ctx, h.ID, calls[0].ID); c.Status != store.CallPending {
		t.Fatalf("the call was attempted again while its claim held: %+v", c)
	}
	w.clock = w.clock.Add(webhook.Timeout + claimMargin + time.Second)
	c, err := w.s.Attempt(ctx, h.ID, calls[0].ID)
	if err != nil || c.Status != store.CallDelivered || c.Attempts != 2 {
		t.Fatalf("after the claim ran out: %+v %v", c, err)
	}
	got := r.calls()
	if len(got) != 2 {
		t.Fatalf("%d posts, want the cut-off one and its retry", len(got))
	}
	for i, want := range []string{"false", "true"} {
		var env struct{ Attempt int }
		_ = json.Unmarshal(got[i].body, &env)
		if got[i].header.Get(webhook.HeaderRetry) != want || env.Attempt != i+1 {
			t.Errorf("post %d: %s %q, attempt %d; want %s, attempt %d", i+1, webhook.HeaderRetry, got[i].header.Get(webhook.HeaderRetry), env.Attempt, want, i+1)
		}
	}
}

// diesRecording is a store whose runner dies recording an attempt's outcome: its second call
// update (the first is the claim) fails.
type diesRecording struct {
	Store
	updates int
}

func (d *diesRecording) UpdateWebhookCall(ctx context.Context, webhookID, id string, fn func(*store.WebhookCall) error) (store.WebhookCall, error) {
	if d.updates++; d.updates == 2 {
		return store.WebhookCall{}, errors.New("the runner died")
	}
	return d.Store.UpdateWebhookCall(ctx, webhookID, id, fn)
}

// TestAnEventTooLargeForACallMakesNone: an event whose data is over MaxCallData makes no call
// (it could not be stored as one DynamoDB item, and would fail its whole stream batch again
// and again) and is no error; the events beside it make theirs.
func TestAnEventTooLargeForACallMakesNone(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	r := newReceiver(t)
	if _, _, err := w.s.Create(ctx, w.team, Fields{URL: ptr(r.srv.URL + "/all")}); err != nil {
		t.Fatal(err)
	}
	big := Event{TeamID: w.team, Type: "contact.created", At: w.clock, Key: "big",
		Data: map[string]any{"note": strings.Repeat("x", MaxCallData)}}
	small := Event{TeamID: w.team, Type: "contact.created", At: w.clock, Key: "small", Data: map[string]any{"note": "x"}}
	calls, err := w.s.Publish(ctx, []Event{big, small})
	if err != nil || len(calls) != 1 || !strings.Contains(string(calls[0].Data), `"note":"x"`) {
		t.Fatalf("publish: %d calls, %v; want the small event's only", len(calls), err)
	}
}

// TestACallClaimedElsewhereHoldsNothing: a call another runner has claimed (the stream's and
// the retries' runners both see a fresh call due) is left to it, and the calls behind it are
// posted now: a claim is no failing receiver (the webhook's other calls were held 15-25 s).
func TestACallClaimedElsewhereHoldsNothing(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	r := newReceiver(t)
	if _, _, err := w.s.Create(ctx, w.team, Fields{URL: ptr(r.srv.URL + "/all")}); err != nil {
		t.Fatal(err)
	}
	var evs []Event
	for i := range 2 {
		evs = append(evs, Event{TeamID: w.team, Type: "email.sent", At: w.clock.Add(time.Duration(i) * time.Millisecond),
			Key: fmt.Sprint("em_", i), Data: map[string]any{"id": fmt.Sprint("em_", i)}})
	}
	calls, err := w.s.Publish(ctx, evs)
	if err != nil || len(calls) != 2 {
		t.Fatalf("publish: %d calls, %v", len(calls), err)
	}
	claim := w.clock.Add(15 * time.Second) // the other runner's claim on the first call
	if _, err := w.st.UpdateWebhookCall(ctx, calls[0].WebhookID, calls[0].ID, func(c *store.WebhookCall) error {
		c.NextAttemptAt, c.Attempts = &claim, 1
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w.clock = w.clock.Add(time.Millisecond) // both are due (made 1 ns apart)
	if n := w.s.AttemptCalls(ctx, calls); n != 1 {
		t.Errorf("attempted %d calls, want the second one", n)
	}
	second, _ := w.st.GetWebhookCall(ctx, calls[1].WebhookID, calls[1].ID)
	first, _ := w.st.GetWebhookCall(ctx, calls[0].WebhookID, calls[0].ID)
	if second.Status != store.CallDelivered || len(r.calls()) != 1 {
		t.Errorf("the call behind the claimed one: %s, %d posts; want DELIVERED, 1", second.Status, len(r.calls()))
	}
	if first.Status != store.CallPending || first.Attempts != 1 || !first.NextAttemptAt.Equal(claim) {
		t.Errorf("the claimed call was touched: %+v", first)
	}
}

// movedReader answers Moved for the contact ids in moved (the DynamoDB store's way).
type movedReader struct {
	EmailReader
	moved map[string]bool
	asked []string
}

func (m *movedReader) Moved(_ context.Context, c store.Contact) (bool, error) {
	m.asked = append(m.asked, c.ID)
	return m.moved[c.ID], nil
}

// TestAMovedContactIsNoDeletion: on a store where a change of address deletes a contact's
// item (a Mover), the contact.deleted of a contact still in its book makes no call, a real
// deletion does; a team without a webhook that wants it has its contact not even read.
func TestAMovedContactIsNoDeletion(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	r := newReceiver(t)
	if _, _, err := w.s.Create(ctx, w.team, Fields{URL: ptr(r.srv.URL + "/c"), EventTypes: ptr([]string{"contact.deleted", "contact.updated"})}); err != nil {
		t.Fatal(err)
	}
	ev := func(typ string, team int64, id string) Event {
		return Event{Type: typ, TeamID: team, At: w.clock, Key: typ + id, Data: ContactData{ID: id, Email: id + "@example.org"}}
	}
	m := &movedReader{moved: map[string]bool{"ct-moved": true}}
	calls, err := w.s.PublishEntries(ctx, m, nil, ev("contact.deleted", w.team, "ct-moved"), ev("contact.updated", w.team, "ct-moved"),
		ev("contact.deleted", w.team, "ct-gone"), ev("contact.deleted", w.team+1, "ct-other"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range calls {
		got = append(got, c.Type)
	}
	if len(calls) != 2 || calls[0].Type != "contact.updated" || calls[1].Type != "contact.deleted" || !strings.Contains(string(calls[1].Data), "ct-gone") {
		t.Errorf("calls %q, want the move's contact.updated and ct-gone's contact.deleted", got)
	}
	if strings.Join(m.asked, " ") != "ct-moved ct-gone" {
		t.Errorf("contacts read %q, want the two a webhook wants", m.asked)
	}
}

// TestABacklogDoesNotOvertakeAFailedCall: a webhook with more due calls than a run reaches
// fails one; those the runner did not reach during the hold, due before the retry, wait for
// it too, so the webhook's calls arrive in the order they were made, the failed one first.
func TestABacklogDoesNotOvertakeAFailedCall(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	r := newReceiver(t)
	r.status = 500
	if _, _, err := w.s.Create(ctx, w.team, Fields{URL: ptr(r.srv.URL)}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		w.clock = w.clock.Add(time.Millisecond)
		ev := Event{TeamID: w.team, Type: "email.sent", At: w.clock, Key: fmt.Sprint(i), Data: map[string]int{"n": i}}
		if _, err := w.s.Publish(ctx, []Event{ev}); err != nil { // made, not attempted: a backlog
			t.Fatal(err)
		}
	}
	if _, err := w.s.RunDue(ctx, 3); err != nil { // the first fails, the next two are held
		t.Fatal(err)
	}
	r.mu.Lock()
	r.status = 200
	r.mu.Unlock()
	w.clock = w.clock.Add(time.Minute) // past the retry: the rest was never reached
	for range 5 {
		if _, err := w.s.RunDue(ctx, 100); err != nil {
			t.Fatal(err)
		}
	}
	var order []int
	for _, c := range r.calls() {
		var b struct{ Data struct{ N int } }
		_ = json.Unmarshal(c.body, &b)
		order = append(order, b.Data.N)
	}
	if fmt.Sprint(order) != "[0 0 1 2 3 4 5 6 7 8 9]" {
		t.Fatalf("posts in the order %v, want the failed call, its retry, then the others as made", order)
	}
}

// TestAPostUnderWayFinishesAtAStop: a runner told to stop (a graceful shutdown) while posting
// a call lets the post finish and records it, instead of cutting it off (the receiver, which
// had it, would get it again as a retry).
func TestAPostUnderWayFinishesAtAStop(t *testing.T) {
	w := newWorld(t)
	arrived, release := make(chan struct{}), make(chan struct{})
	var posts sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		posts.Add(1)
		defer posts.Done()
		close(arrived)
		<-release
		rw.WriteHeader(200)
	}))
	defer srv.Close()
	if _, _, err := w.s.Create(context.Background(), w.team, Fields{URL: ptr(srv.URL)}); err != nil {
		t.Fatal(err)
	}
	calls, err := w.s.Publish(context.Background(), []Event{{TeamID: w.team, Type: "email.sent", At: w.clock, Key: "k", Data: map[string]string{}}})
	if err != nil || len(calls) != 1 {
		t.Fatalf("%d calls, %v", len(calls), err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = w.s.RunDue(ctx, 10)
	}()
	<-arrived
	stop() // the stop comes while the receiver has the post
	close(release)
	<-done
	posts.Wait()
	c, err := w.st.GetWebhookCall(context.Background(), calls[0].WebhookID, calls[0].ID)
	if err != nil || c.Status != store.CallDelivered || c.Attempts != 1 {
		t.Fatalf("the call after a stop during its post: %s, %d attempts, %v; want DELIVERED after 1", c.Status, c.Attempts, err)
	}
}

// TestASlowFailureWaitsFromItsEnd: the next attempt of a call whose attempt failed slowly (a
// receiver timing out takes webhook.Timeout) waits its 2.5 to 5 s from the end of the attempt,
// not from its start (which left none).
func TestASlowFailureWaitsFromItsEnd(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	var clock atomic.Int64
	clock.Store(w.clock.UnixNano())
	w.s.Now = func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		clock.Add(int64(webhook.Timeout)) // the attempt takes as long as a timeout
		rw.WriteHeader(500)
	}))
	defer srv.Close()
	if _, _, err := w.s.Create(ctx, w.team, Fields{URL: ptr(srv.URL)}); err != nil {
		t.Fatal(err)
	}
	calls, err := w.s.Publish(ctx, []Event{{TeamID: w.team, Type: "email.sent", At: w.s.Now(), Key: "k", Data: map[string]string{}}})
	if err != nil || len(calls) != 1 {
		t.Fatalf("%d calls, %v", len(calls), err)
	}
	c, err := w.s.Attempt(ctx, calls[0].WebhookID, calls[0].ID)
	if err != nil || c.NextAttemptAt == nil {
		t.Fatalf("after a failed attempt: %+v, %v", c, err)
	}
	if end, wait := w.s.Now(), c.NextAttemptAt.Sub(w.s.Now()); wait < 2500*time.Millisecond || wait > 5*time.Second {
		t.Fatalf("next attempt %s after the attempt ended (%s), want 2.5 to 5 s", wait, end)
	}
}

// TestAPoolRunReachesPastABacklog: the local runner's first run hands out the call of another
// webhook due after a failing webhook's backlog of 350: no webhook fills a run with its calls
// (PoolCalls), so the others' wait no run for a backlog to be held.
func TestAPoolRunReachesPastABacklog(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	b := backlogBefore(t, w)
	bad, good := b.bad, b.good
	pool := &Pool{S: w.s, Due: w.st.DueWebhookCallsSkipping}
	handed, err := pool.Run(ctx, 100)
	pool.Wait()
	if err != nil || len(good.calls()) != 1 {
		t.Fatalf("the first run handed out %d calls (%v) and the other webhook got %d, want its call", handed, err, len(good.calls()))
	}
	if handed != PoolCalls+1 || len(bad.calls()) != 1 {
		t.Errorf("the run handed out %d calls, the failing receiver got %d posts; want %d and 1", handed, len(bad.calls()), PoolCalls+1)
	}
}
