package api_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

type hookReceiver struct {
	mu     sync.Mutex
	status int
	calls  []hookCall
}

type hookCall struct {
	header http.Header
	body   []byte
}

func (h *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.calls = append(h.calls, hookCall{r.Header.Clone(), b})
	status := h.status
	h.mu.Unlock()
	w.WriteHeader(status)
}

// types returns the event types received so far, and the calls.
func (h *hookReceiver) received() ([]string, []hookCall) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var types []string
	for _, c := range h.calls {
		types = append(types, c.header.Get("X-UseSend-Event"))
	}
	return types, append([]hookCall(nil), h.calls...)
}

func signature(secret string, c hookCall) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(c.header.Get("X-UseSend-Timestamp") + "." + string(c.body)))
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// TestWebhooks: a webhook made through the API gets an email's events as it goes through the
// local server (queued, sent, delivered), each signed with its secret; the delivery log lists
// them; a test and a replay go out at once; a 500 is retried; keys that may not manage the
// team's webhooks are refused; unknown event types are named.
func TestWebhooks(t *testing.T) {
	e := newEnv(t)
	rcv := &hookReceiver{status: 200}
	srv := httptest.NewServer(http.HandlerFunc(rcv.serve))
	defer srv.Close()
	var hook struct {
		ID, Secret, Status string
		EventTypes         []string
	}
	e.mustDo("POST", "/api/v1/webhooks", `{"url":"`+srv.URL+`/hooks","description":"all events"}`, &hook)
	if !strings.HasPrefix(hook.Secret, "whsec_") || hook.Status != store.WebhookActive || hook.EventTypes == nil {
		t.Fatalf("create: %+v", hook)
	}
	var got struct{ Secret *string }
	e.mustDo("GET", "/api/v1/webhooks/"+hook.ID, "", &got)
	if got.Secret != nil {
		t.Error("the secret is shown again after creation")
	}
	id := e.send(`{"from":"a@example.com","to":"x@example.org","subject":"s","text":"t"}`)
	e.await(id, "DELIVERED")
	deadline := time.Now().Add(10 * time.Second)
	var types []string
	var calls []hookCall
	for time.Now().Before(deadline) {
		if types, calls = rcv.received(); len(types) >= 3 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !slices.Equal(types, []string{"email.queued", "email.sent", "email.delivered"}) {
		t.Fatalf("received %v, want queued, sent, delivered in order", types)
	}
	for _, c := range calls {
		if c.header.Get("X-UseSend-Signature") != signature(hook.Secret, c) {
			t.Fatalf("a call's signature does not verify: %v", c.header)
		}
		var env struct {
			ID, Type string
			Attempt  int
			Data     struct{ ID, Status string }
		}
		if err := json.Unmarshal(c.body, &env); err != nil || env.Data.ID != id || env.Attempt != 1 || env.ID != c.header.Get("X-UseSend-Call") {
			t.Fatalf("envelope %s", c.body)
		}
	}
	var log struct {
		Data []struct {
			ID, Type, Status string
			Attempts         int
		}
		Count int
	}
	// The receiver has the call before the runner records its answer: wait for the log.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		e.mustDo("GET", "/api/v1/webhooks/"+hook.ID+"/calls", "", &log)
		if log.Count == 3 && log.Data[0].Status == store.CallDelivered || time.Now().After(deadline) {
			break
		}
	}
	if log.Count != 3 || log.Data[0].Type != "email.delivered" || log.Data[0].Status != store.CallDelivered {
		t.Fatalf("delivery log %+v", log)
	}
	var replay struct{ ID, Type, Status string }
	e.mustDo("POST", "/api/v1/webhooks/"+hook.ID+"/calls/"+log.Data[2].ID+"/replay", "", &replay)
	if replay.ID == log.Data[2].ID || replay.Type != "email.queued" || replay.Status != store.CallDelivered {
		t.Fatalf("replay %+v", replay)
	}
	// A receiver failing: the test call is logged PENDING with its answer, then retried.
	rcv.mu.Lock()
	rcv.status = 500
	rcv.mu.Unlock()
	var test struct {
		ID, Type, Status string
		LastStatusCode   int
		NextAttemptAt    *string
	}
	e.mustDo("POST", "/api/v1/webhooks/"+hook.ID+"/test", "", &test)
	if test.Type != "webhook.test" || test.Status != store.CallPending || test.LastStatusCode != 500 || test.NextAttemptAt == nil {
		t.Fatalf("test call against a 500: %+v", test)
	}
	// Keys that may not manage the team's webhooks, and bad input.
	if r := e.request(e.keyFor(store.PermissionSending, 0), "GET", "/api/v1/webhooks", nil); r.status != 403 {
		t.Errorf("a SENDING key: %d", r.status)
	}
	if r := e.request(e.keyFor(store.PermissionFull, e.domain), "GET", "/api/v1/webhooks", nil); r.status != 403 {
		t.Errorf("a domain-restricted key: %d", r.status)
	}
	r := e.do("POST", "/api/v1/webhooks", `{"url":"`+srv.URL+`","eventTypes":["email.sent","email.sending"]}`)
	if r.status != 400 || !strings.Contains(string(r.body), "email.sending") {
		t.Errorf("an unknown event type: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/api/v1/webhooks", `{"url":"http://169.254.169.254/latest/meta-data"}`)
	if r.status != 400 || !strings.Contains(string(r.body), "url") {
		t.Errorf("the metadata address: %d %s", r.status, r.body)
	}
	var other map[string]any
	e.mustDo("PATCH", "/api/v1/webhooks/"+hook.ID, `{"status":"PAUSED"}`, &other)
	if other["status"] != store.WebhookPaused {
		t.Errorf("pause: %v", other)
	}
	e.mustDo("DELETE", "/api/v1/webhooks/"+hook.ID, "", &other)
	if r := e.do("GET", "/api/v1/webhooks/"+hook.ID, ""); r.status != 404 {
		t.Errorf("a deleted webhook: %d", r.status)
	}
}
