package api_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/bolt"
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

// feedDrained waits until the local server's webhook runner has read the whole feed.
func (e *env) feedDrained() {
	e.t.Helper()
	st := e.app.Store.(*bolt.Store)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		feed, err := st.FeedAfter(context.Background(), 0, 1)
		if err != nil || len(feed) == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatal("the webhook runner does not read the feed")
		}
	}
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
	e.feedDrained() // the environment's own domain's events
	rcv := &hookReceiver{status: 200}
	srv := httptest.NewServer(http.HandlerFunc(rcv.serve))
	defer srv.Close()
	var hook struct {
		ID, Secret, Status string
		EventTypes         []string
	}
	// A query a request line cannot carry as written is stored and called percent-encoded
	// (the calls below arrive).
	e.mustDo("POST", "/api/v1/webhooks", `{"url":"`+srv.URL+`/hooks?tag=ü y","description":"all events"}`, &hook)
	if !strings.HasPrefix(hook.Secret, "whsec_") || hook.Status != store.WebhookActive || hook.EventTypes == nil {
		t.Fatalf("create: %+v", hook)
	}
	var got struct {
		Secret *string
		URL    string
	}
	e.mustDo("GET", "/api/v1/webhooks/"+hook.ID, "", &got)
	if got.Secret != nil {
		t.Error("the secret is shown again after creation")
	}
	if got.URL != srv.URL+"/hooks?tag=%C3%BC%20y" {
		t.Errorf("url stored as %q", got.URL)
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
	// Paging: before takes a call id of the list, and refuses anything else.
	var older struct{ Data []struct{ ID string } }
	e.mustDo("GET", "/api/v1/webhooks/"+hook.ID+"/calls?before="+log.Data[0].ID, "", &older)
	if len(older.Data) != 2 || older.Data[0].ID != log.Data[1].ID {
		t.Errorf("calls before the newest: %+v, want the two older", older.Data)
	}
	if r := e.do("GET", "/api/v1/webhooks/"+hook.ID+"/calls?before=garbage", ""); r.status != 400 {
		t.Errorf("before=garbage: %d, want 400", r.status)
	} else if _, msg := r.errorOf(t); !strings.HasPrefix(msg, "before:") {
		t.Errorf("before=garbage: %q, want it named", msg)
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

// TestWebhookRecordEvents: writes to contacts, domains and campaigns reach a webhook that
// subscribes to them, in order, each with its record's data; email events it did not subscribe
// to do not.
func TestWebhookRecordEvents(t *testing.T) {
	e := newEnv(t)
	e.feedDrained() // the environment's own domain's events
	rcv := &hookReceiver{status: 200}
	srv := httptest.NewServer(http.HandlerFunc(rcv.serve))
	defer srv.Close()
	var hook struct{ ID, Secret string }
	e.mustDo("POST", "/api/v1/webhooks", `{"url":"`+srv.URL+`","eventTypes":["contact.created","contact.updated",
		"contact.deleted","domain.created","domain.verified","domain.updated","domain.deleted","campaign.started",
		"campaign.paused","campaign.sent"]}`, &hook)

	bookID := e.book()
	var ct struct{ ContactID string }
	e.mustDo("POST", "/api/v1/contactBooks/"+bookID+"/contacts", `{"email":"ann@example.org","firstName":"Ann","properties":{"plan":"free"}}`, &ct)
	// A change of a property alone is an update too (the upsert must not change the stored
	// contact's map in place, or the store sees no change).
	e.mustDo("POST", "/api/v1/contactBooks/"+bookID+"/contacts", `{"email":"ann@example.org","properties":{"plan":"pro"}}`, nil)
	e.mustDo("PATCH", "/api/v1/contactBooks/"+bookID+"/contacts/"+ct.ContactID, `{"firstName":"Anne"}`, nil)
	e.mustDo("DELETE", "/api/v1/contactBooks/"+bookID+"/contacts/"+ct.ContactID, "", nil)
	var dom struct{ ID int64 }
	e.mustDo("POST", "/api/v1/domains", `{"name":"example.net"}`, &dom)
	e.mustDo("PUT", fmt.Sprintf("/api/v1/domains/%d/verify", dom.ID), "", nil)
	e.mustDo("DELETE", fmt.Sprintf("/api/v1/domains/%d", dom.ID), "", nil)
	other := e.book(`{"email":"bob@example.org","firstName":"Bob"}`)
	var c campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"Launch","from":"news@example.com","subject":"Hi","contactBookId":"`+other+
		`","html":`+jsonString(campaignHTML)+`,"sendNow":true}`, &c)
	e.awaitCampaign(c.ID, func(c campaignOut) bool { return c.Status == "SENT" })

	want := []string{"contact.created", "contact.updated", "contact.updated", "contact.deleted", "domain.created", "domain.verified",
		"domain.deleted", "contact.created", "campaign.started", "campaign.sent"}
	var types []string
	var calls []hookCall
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if types, calls = rcv.received(); len(types) >= len(want) {
			break
		}
	}
	time.Sleep(200 * time.Millisecond) // nothing more is coming
	types, calls = rcv.received()
	if !slices.Equal(types, want) {
		for _, c := range calls {
			t.Logf("%s", c.body)
		}
		t.Fatalf("received %v\nwant %v", types, want)
	}
	datas := make([]map[string]any, len(calls))
	for i, call := range calls {
		if call.header.Get("X-UseSend-Signature") != signature(hook.Secret, call) {
			t.Fatalf("call %d's signature does not verify", i)
		}
		var env struct {
			Type string
			Data map[string]any
		}
		if err := json.Unmarshal(call.body, &env); err != nil || env.Type != want[i] {
			t.Fatalf("envelope %s", call.body)
		}
		datas[i] = env.Data
	}
	for i, check := range []map[string]any{
		{"id": ct.ContactID, "email": "ann@example.org", "firstName": "Ann", "contactBookId": bookID, "subscribed": true},
		{"id": ct.ContactID, "firstName": "Ann"},
		{"id": ct.ContactID, "firstName": "Anne"},
		{"id": ct.ContactID, "firstName": "Anne"},
		{"id": float64(dom.ID), "name": "example.net"},
		{"id": float64(dom.ID), "status": "SUCCESS"},
		{"id": float64(dom.ID), "name": "example.net"},
		{"email": "bob@example.org"},
		{"id": c.ID, "name": "Launch", "status": "RUNNING", "contactBookId": other},
		{"id": c.ID, "status": "SENT"},
	} {
		for k, v := range check {
			if datas[i][k] != v {
				t.Errorf("%s data %s = %v, want %v (%v)", want[i], k, datas[i][k], v, datas[i])
			}
		}
	}
	if props, _ := datas[1]["properties"].(map[string]any); props["plan"] != "pro" {
		t.Errorf("the upsert's contact.updated carries properties %v, want plan pro", datas[1]["properties"])
	}
}

// TestWebhookCallsPageWithinLambdasAnswer: a page of calls that would pass Lambda's 6 MB as its
// invocation carries it is a 400 naming limit (as for contacts), here as on AWS, where it was
// a bare 500; fewer at a time go through.
func TestWebhookCallsPageWithinLambdasAnswer(t *testing.T) {
	e := newEnv(t)
	var hook struct{ ID string }
	e.mustDo("POST", "/api/v1/webhooks", `{"url":"https://hooks.example.com/x","eventTypes":["contact.created"]}`, &hook)
	data := []byte(`{"note":"` + strings.Repeat(`\"`, 125_000) + `"}`) // 250 KB, twice that escaped
	var calls []store.WebhookCall
	at := time.Now().UTC()
	for i := range 20 {
		calls = append(calls, store.WebhookCall{ID: fmt.Sprintf("whc_%012x%04d", at.UnixMilli(), i), WebhookID: hook.ID, TeamID: e.teamID,
			Type: "contact.created", Data: data, EventAt: at, Status: store.CallDelivered, CreatedAt: at, UpdatedAt: at})
	}
	if _, err := e.app.Store.CreateWebhookCalls(context.Background(), calls); err != nil {
		t.Fatal(err)
	}
	r := e.do("GET", "/api/v1/webhooks/"+hook.ID+"/calls", "")
	if _, msg := r.errorOf(t); r.status != 400 || !strings.HasPrefix(msg, "limit: these 20 calls") {
		t.Errorf("20 calls of 250 KB = %d %q, want a 400 naming limit", r.status, msg)
	}
	var page struct{ Count int }
	e.mustDo("GET", "/api/v1/webhooks/"+hook.ID+"/calls?limit=5", "", &page)
	if page.Count != 5 {
		t.Errorf("limit=5 gave %d calls", page.Count)
	}
}

// TestASlowReceiverDelaysOnlyItsOwnCalls: a receiver that takes its time (answering in time,
// so not failing) holds up its own calls only: another webhook gets the calls of events that
// came after, while the slow one still has its first call open.
func TestASlowReceiverDelaysOnlyItsOwnCalls(t *testing.T) {
	e := newEnv(t)
	e.feedDrained()
	release := make(chan struct{})
	var slowCalls sync.WaitGroup
	slowCalls.Add(1)
	var once sync.Once
	var slowEnded atomic.Bool // its first call given up by the runner (its timeout)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		once.Do(slowCalls.Done)
		select {
		case <-release:
		case <-r.Context().Done():
			slowEnded.Store(true)
		}
	}))
	defer slow.Close()
	defer close(release)
	fast := &hookReceiver{status: 200}
	fastSrv := httptest.NewServer(http.HandlerFunc(fast.serve))
	defer fastSrv.Close()
	e.mustDo("POST", "/api/v1/webhooks", `{"url":"`+slow.URL+`","eventTypes":["contact.created"]}`, nil)
	e.mustDo("POST", "/api/v1/webhooks", `{"url":"`+fastSrv.URL+`","eventTypes":["contact.created"]}`, nil)
	book := e.book()
	e.mustDo("POST", "/api/v1/contactBooks/"+book+"/contacts", `{"email":"first@example.org"}`, nil)
	slowCalls.Wait() // the slow receiver has its first call, and holds it
	e.mustDo("POST", "/api/v1/contactBooks/"+book+"/contacts", `{"email":"second@example.org"}`, nil)
	for {
		ended := slowEnded.Load() // read first: a call that came after it came too late
		_, calls := fast.received()
		if ended {
			t.Fatalf("the other webhook's calls waited for the slow receiver's first call to end (%d of 2 by then)", len(calls))
		}
		if len(calls) == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
}
