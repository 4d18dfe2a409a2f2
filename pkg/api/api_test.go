package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	netmail "net/mail"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/app"
	"github.com/mailroom/mailroom/pkg/config"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/team"
)

// clock is real time plus an offset the test can move forward, shared by the app under test
// (real time keeps consecutive events apart; the offset skips hours and days).
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().UTC().Add(c.offset)
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// env is a running local Mailroom (embedded store, outbox mailer, in-process delivery) behind
// httptest, with one team, a FULL key and the verified domain example.com.
type env struct {
	t      *testing.T
	app    *app.App
	srv    *httptest.Server
	clock  *clock
	key    string
	teamID int64
	domain int64
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvAt(t, t.TempDir(), 2)
}

func newEnvAt(t *testing.T, dir string, workers int) *env {
	t.Helper()
	ctx := context.Background()
	clk := &clock{}
	cfg := config.Config{Backend: config.BackendEmbedded, DataDir: dir, Workers: workers,
		AuthCacheTTL: time.Minute, LogLevel: slog.LevelError + 4}
	// Listen first: links in emails (unsubscribe) need the server's address, as in server.Start.
	srv := httptest.NewUnstartedServer(nil)
	cfg.PublicURL = "http://" + srv.Listener.Addr().String()
	a, err := app.New(ctx, cfg, app.Options{Local: true, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, app: a, clock: clk, srv: srv}
	srv.Config.Handler = a.Services.Handler()
	srv.Start()
	t.Cleanup(func() {
		e.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Close(ctx)
	})
	e.key, e.teamID = e.newTeam("team", store.PermissionFull, 0)
	var d map[string]any
	e.mustDo("POST", "/api/v1/domains", `{"name":"example.com","region":"us-east-1"}`, &d)
	e.domain = int64(d["id"].(float64))
	return e
}

// newTeam creates a team with a key and returns the key.
func (e *env) newTeam(name string, perm store.Permission, domainID int64) (string, int64) {
	e.t.Helper()
	admin := &team.Admin{Store: e.app.Store, Now: time.Now}
	tm, err := admin.CreateTeam(context.Background(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	key, _, err := admin.CreateKey(context.Background(), team.KeyRequest{TeamID: tm.ID, Permission: perm, DomainID: domainID})
	if err != nil {
		e.t.Fatal(err)
	}
	return key, tm.ID
}

// keyFor makes another key of the main team.
func (e *env) keyFor(perm store.Permission, domainID int64) string {
	admin := &team.Admin{Store: e.app.Store, Now: time.Now}
	key, _, err := admin.CreateKey(context.Background(), team.KeyRequest{TeamID: e.teamID, Permission: perm, DomainID: domainID})
	if err != nil {
		e.t.Fatal(err)
	}
	return key
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// errorOf returns the code and message of an error response, failing on another shape.
func (r response) errorOf(t *testing.T) (string, string) {
	t.Helper()
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	r.json(t, &body)
	if body.Error.Code == "" || body.Error.Message == "" {
		t.Fatalf("not an error envelope: %s", r.body)
	}
	return body.Error.Code, body.Error.Message
}

func (e *env) request(key, method, path string, body []byte, headers ...string) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	r := e.exchange(http.DefaultClient.Do, req)
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		e.t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return r
}

// exchange sends req with do and reads the whole answer.
func (e *env) exchange(do func(*http.Request) (*http.Response, error), req *http.Request) response {
	e.t.Helper()
	resp, err := do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (e *env) do(method, path, body string, headers ...string) response {
	return e.request(e.key, method, path, []byte(body), headers...)
}

func (e *env) mustDo(method, path, body string, out any, headers ...string) {
	e.t.Helper()
	r := e.do(method, path, body, headers...)
	if r.status != http.StatusOK {
		e.t.Fatalf("%s %s = %d %s", method, path, r.status, r.body)
	}
	if out != nil {
		r.json(e.t, out)
	}
}

type emailDetail struct {
	ID           string   `json:"id"`
	TeamID       int64    `json:"teamId"`
	To           []string `json:"to"`
	CC           []string `json:"cc"`
	From         string   `json:"from"`
	Subject      string   `json:"subject"`
	HTML         *string  `json:"html"`
	Text         *string  `json:"text"`
	LatestStatus string   `json:"latestStatus"`
	ScheduledAt  *string  `json:"scheduledAt"`
	DomainID     int64    `json:"domainId"`
	EmailEvents  []struct {
		EmailID   string          `json:"emailId"`
		Status    string          `json:"status"`
		CreatedAt string          `json:"createdAt"`
		Data      json.RawMessage `json:"data"`
	} `json:"emailEvents"`
}

func (e *env) get(id string) emailDetail {
	e.t.Helper()
	var d emailDetail
	e.mustDo("GET", "/api/v1/emails/"+id, "", &d)
	return d
}

// await polls the email until its latestStatus is want (delivery is asynchronous).
func (e *env) await(id, want string) emailDetail {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		d := e.get(id)
		if d.LatestStatus == want {
			return d
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("email %s: latestStatus %s, want %s (events %+v)", id, d.LatestStatus, want, d.EmailEvents)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) send(body string, headers ...string) string {
	e.t.Helper()
	var out struct {
		EmailID string `json:"emailId"`
	}
	e.mustDo("POST", "/api/v1/emails", body, &out, headers...)
	if out.EmailID == "" {
		e.t.Fatalf("no emailId")
	}
	return out.EmailID
}

func (e *env) count() int {
	e.t.Helper()
	var out struct {
		Count int `json:"count"`
	}
	e.mustDo("GET", "/api/v1/emails", "", &out)
	return out.Count
}

func (e *env) outbox(id string) string {
	b, err := os.ReadFile(filepath.Join(e.app.OutboxDir, id+".eml"))
	if err != nil {
		e.t.Fatalf("outbox: %v", err)
	}
	return string(b)
}

const simple = `{"to":"success@simulator.amazonses.com","from":"Hello <hello@example.com>","subject":"Hi there","text":"plain body","html":"<p>html body</p>"}`

func TestSendDeliversThroughOutbox(t *testing.T) {
	e := newEnv(t)
	att := base64.StdEncoding.EncodeToString([]byte("report contents"))
	id := e.send(`{"to":["ann@example.org","success@simulator.amazonses.com"],"cc":"cc@example.org",
		"bcc":"hidden@example.org","replyTo":"reply@example.com","from":"Hello <hello@example.com>",
		"subject":"Quarterly report","text":"see attached","html":"<p>see attached</p>",
		"headers":{"X-Campaign":"q3"},"attachments":[{"filename":"report.txt","content":"` + att + `"}]}`)
	d := e.await(id, "DELIVERED")
	statuses := []string{}
	for _, ev := range d.EmailEvents {
		statuses = append(statuses, ev.Status)
		if ev.EmailID != id {
			t.Errorf("event emailId %q", ev.EmailID)
		}
	}
	if got := strings.Join(statuses, ","); !strings.HasPrefix(got, "QUEUED,SENT,DELIVERED") {
		t.Errorf("history = %s, want QUEUED,SENT,DELIVERED...", got)
	}
	if d.TeamID != e.teamID || d.DomainID != e.domain || d.Subject != "Quarterly report" || *d.Text != "see attached" {
		t.Errorf("detail = %+v", d)
	}
	msg := e.outbox(id)
	for _, want := range []string{"X-Usesend-Email-ID: " + id, "Subject: Quarterly report", "Cc: <cc@example.org>",
		"Reply-To: <reply@example.com>", "X-Campaign: q3", "multipart/mixed", "multipart/alternative",
		"report.txt", base64.StdEncoding.EncodeToString([]byte("report contents"))} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(strings.ToLower(msg), "hidden@example.org") {
		t.Error("bcc address leaked into the message")
	}
}

func TestReplyReferencesTheFirstMessage(t *testing.T) {
	e := newEnv(t)
	first := e.send(simple)
	e.await(first, "DELIVERED")
	reply := e.send(`{"to":"success@simulator.amazonses.com","from":"hello@example.com","subject":"Re: Hi there","text":"t","inReplyToId":"` + first + `"}`)
	e.await(reply, "DELIVERED")
	want := "<" + first + "@example.com>"
	if msg := e.outbox(first); !strings.Contains(msg, "Message-ID: "+want) {
		t.Errorf("first message lacks Message-ID %s", want)
	}
	msg := e.outbox(reply)
	if !strings.Contains(msg, "In-Reply-To: "+want) || !strings.Contains(msg, "References: "+want) {
		t.Errorf("reply does not reference %s:\n%s", want, msg)
	}
	// A reply to the reply names the whole thread, oldest first (RFC 5322 3.6.4); a reply to
	// an email with References of its own goes on from those.
	third := e.send(`{"to":"success@simulator.amazonses.com","from":"hello@example.com","subject":"Re: Hi there","text":"t","inReplyToId":"` + reply + `"}`)
	e.await(third, "DELIVERED")
	replyID := "<" + reply + "@example.com>"
	header := func(id, name string) string {
		m, err := netmail.ReadMessage(strings.NewReader(e.outbox(id)))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(m.Header.Get(name)), " ") // unfolded
	}
	if got := header(third, "References"); header(third, "In-Reply-To") != replyID || got != want+" "+replyID {
		t.Errorf("the third message's References %q, want the thread %s %s", got, want, replyID)
	}
	own := e.send(`{"to":"success@simulator.amazonses.com","from":"hello@example.com","subject":"Re: elsewhere","text":"t","headers":{"References":"<root@other.test> <mid@other.test>"}}`)
	e.await(own, "DELIVERED")
	answer := e.send(`{"to":"success@simulator.amazonses.com","from":"hello@example.com","subject":"Re: elsewhere","text":"t","inReplyToId":"` + own + `"}`)
	e.await(answer, "DELIVERED")
	ownID := "<" + own + "@example.com>"
	if got := header(answer, "References"); got != "<root@other.test> <mid@other.test> "+ownID {
		t.Errorf("a reply to an email with its own References: %q, want them then %s", got, ownID)
	}
	// A reply to an email that replied to an outside message by its own In-Reply-To (no
	// References): that message, then the email (RFC 5322 3.6.4).
	outside := e.send(`{"to":"success@simulator.amazonses.com","from":"hello@example.com","subject":"Re: yours","text":"t","headers":{"In-Reply-To":"<ext-123@customer.example>"}}`)
	e.await(outside, "DELIVERED")
	back := e.send(`{"to":"success@simulator.amazonses.com","from":"hello@example.com","subject":"Re: yours","text":"t","inReplyToId":"` + outside + `"}`)
	e.await(back, "DELIVERED")
	if got, want := header(back, "References"), "<ext-123@customer.example> <"+outside+"@example.com>"; got != want {
		t.Errorf("a reply to an email with its own In-Reply-To: References %q, want %q", got, want)
	}
	// A reply to an email not sent yet (scheduled; or sent just before it) is in its thread
	// too: locally the Message-ID is known before the send.
	scheduled := e.send(`{"to":"success@simulator.amazonses.com","from":"hello@example.com","subject":"Later","text":"t","scheduledAt":"` +
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `"}`)
	early := e.send(`{"to":"success@simulator.amazonses.com","from":"hello@example.com","subject":"Re: Later","text":"t","inReplyToId":"` + scheduled + `"}`)
	e.await(early, "DELIVERED")
	if got, want := header(early, "In-Reply-To"), "<"+scheduled+"@example.com>"; got != want {
		t.Errorf("a reply to a scheduled email: In-Reply-To %q, want %q", got, want)
	}
}

func TestSimulatorBounceSuppressesNextSend(t *testing.T) {
	e := newEnv(t)
	id := e.send(`{"to":"bounce@simulator.amazonses.com","from":"hello@example.com","subject":"s","text":"t"}`)
	d := e.await(id, "BOUNCED")
	last := d.EmailEvents[len(d.EmailEvents)-1]
	if !strings.Contains(string(last.Data), "Permanent") {
		t.Errorf("bounce data = %s", last.Data)
	}
	next := e.send(`{"to":"bounce@simulator.amazonses.com","from":"hello@example.com","subject":"s","text":"t"}`)
	e.await(next, "SUPPRESSED")
	if _, err := os.Stat(filepath.Join(e.app.OutboxDir, next+".eml")); !os.IsNotExist(err) {
		t.Errorf("suppressed email was written to the outbox: %v", err)
	}
	c := e.send(`{"to":"complaint@simulator.amazonses.com","from":"hello@example.com","subject":"s","text":"t"}`)
	e.await(c, "COMPLAINED")
}

func TestBatch(t *testing.T) {
	e := newEnv(t)
	items := []string{}
	for i := range 3 {
		items = append(items, fmt.Sprintf(`{"to":"u%d@example.org","from":"hello@example.com","subject":"n%d","text":"t"}`, i, i))
	}
	var out struct {
		Data []struct {
			EmailID string `json:"emailId"`
		} `json:"data"`
	}
	e.mustDo("POST", "/api/v1/emails/batch", "["+strings.Join(items, ",")+"]", &out)
	if len(out.Data) != 3 {
		t.Fatalf("data = %+v", out.Data)
	}
	for i, d := range out.Data {
		if got := e.get(d.EmailID); got.Subject != fmt.Sprintf("n%d", i) {
			t.Errorf("item %d subject %q: order not kept", i, got.Subject)
		}
	}
	r := e.do("POST", "/api/v1/emails/batch", "["+items[0]+`,{"to":"bad","from":"hello@example.com","subject":"s","text":"t"}]`)
	if code, msg := r.errorOf(t); r.status != 400 || code != "BAD_REQUEST" || !strings.HasPrefix(msg, "[1].to:") {
		t.Errorf("bad element: %d %s %s", r.status, code, msg)
	}
	r = e.do("POST", "/api/v1/emails/batch", "["+items[0]+`,{"to":"a@example.org","from":"hello@unverified.com","subject":"s","text":"t"}]`)
	if _, msg := r.errorOf(t); r.status != 400 || !strings.HasPrefix(msg, "[1].from:") {
		t.Errorf("unverified domain element: %d %s", r.status, msg)
	}
	// Every bad element is named at once: malformed ones, and those the store refuses
	// (unknown domain, template, email replied to), whether or not another is malformed.
	refused := []string{
		`{"to":"a@example.org","from":"x@nowhere.example","subject":"s","text":"t"}`,
		`{"to":"a@example.org","from":"hello@example.com","templateId":"tpl_nope"}`,
		`{"to":"a@example.org","from":"hello@example.com","subject":"s","text":"t","inReplyToId":"emnope"}`,
	}
	for _, first := range []string{`{"to":"bad","from":"hello@example.com","subject":"s","text":"t"}`, items[0]} {
		r = e.do("POST", "/api/v1/emails/batch", "["+first+","+strings.Join(refused, ",")+","+items[1]+"]")
		_, msg := r.errorOf(t)
		want := []string{"[1].from:", "[2].templateId:", "[3].inReplyToId:"}
		if first != items[0] {
			want = append([]string{"[0].to:"}, want...)
		}
		if r.status != 400 || len(regexp.MustCompile(`\[\d+\]\.`).FindAllString(msg, -1)) != len(want) || strings.Contains(msg, "[4]") {
			t.Errorf("batch with bad elements %v: %d %q", want, r.status, msg)
		}
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Errorf("batch: %q does not name %s", msg, w)
			}
		}
	}
	// A key restricted to example.com, sending from another domain of the team: without a
	// malformed element its 403 names the element; beside one, the 400 is the answer.
	var other map[string]any
	e.mustDo("POST", "/api/v1/domains", `{"name":"other.example","region":"us-east-1"}`, &other)
	restricted := e.keyFor(store.PermissionFull, e.domain)
	fromOther := `{"to":"a@example.org","from":"hi@other.example","subject":"s","text":"t"}`
	r = e.request(restricted, "POST", "/api/v1/emails/batch", []byte("["+items[0]+","+fromOther+"]"))
	if _, msg := r.errorOf(t); r.status != 403 || !strings.HasPrefix(msg, "[1].from:") {
		t.Errorf("a restricted key's batch from another domain: %d %q, want 403 naming [1].from", r.status, msg)
	}
	r = e.request(restricted, "POST", "/api/v1/emails/batch", []byte(`[{"to":"bad","from":"hello@example.com","subject":"s","text":"t"},`+fromOther+"]"))
	if _, msg := r.errorOf(t); r.status != 400 || !strings.HasPrefix(msg, "[0].to:") || strings.Contains(msg, "[1]") {
		t.Errorf("the same beside a malformed element: %d %q, want the 400 naming [0].to", r.status, msg)
	}
	r = e.request(restricted, "POST", "/api/v1/emails/batch", []byte("["+fromOther+`,{"to":"a@example.org","from":"hello@example.com","subject":"s","text":"t","templateId":3}]`))
	if _, msg := r.errorOf(t); r.status != 400 || !strings.HasPrefix(msg, "[1].templateId:") {
		t.Errorf("a 403 beside a malformed element: %d %q, want the 400", r.status, msg)
	}
	many := make([]string, 101)
	for i := range many {
		many[i] = items[0]
	}
	r = e.do("POST", "/api/v1/emails/batch", "["+strings.Join(many, ",")+"]")
	if _, msg := r.errorOf(t); r.status != 400 || !strings.Contains(msg, "at most 100") {
		t.Errorf("101 items: %d %s", r.status, msg)
	}
	if n := e.count(); n != 3 {
		t.Errorf("count = %d, want 3: a failed batch stored something", n)
	}
}

func TestIdempotency(t *testing.T) {
	e := newEnv(t)
	first := e.send(simple, "Idempotency-Key", "order-1")
	r := e.do("POST", "/api/v1/emails", simple, "Idempotency-Key", "order-1")
	var again struct {
		EmailID string `json:"emailId"`
	}
	r.json(t, &again)
	if r.status != 200 || again.EmailID != first || r.header.Get("Idempotency-Replayed") != "true" {
		t.Errorf("replay = %d %s %q", r.status, r.body, r.header.Get("Idempotency-Replayed"))
	}
	r = e.do("POST", "/api/v1/emails", strings.Replace(simple, "Hi there", "Other", 1), "Idempotency-Key", "order-1")
	if code, msg := r.errorOf(t); r.status != 409 || code != "NOT_UNIQUE" || !strings.Contains(msg, "different payload") {
		t.Errorf("different body: %d %s %s", r.status, code, msg)
	}
	// Single and batch share the key space.
	r = e.do("POST", "/api/v1/emails/batch", "["+simple+"]", "Idempotency-Key", "order-1")
	if r.status != 409 {
		t.Errorf("batch with a single-send key: %d", r.status)
	}
	r = e.do("POST", "/api/v1/emails", simple, "Idempotency-Key", strings.Repeat("k", 257))
	if _, msg := r.errorOf(t); r.status != 400 || msg != "Invalid Idempotency-Key length" {
		t.Errorf("long key: %d %s", r.status, msg)
	}
	// Another team may use the same key.
	other, _ := e.newTeam("other", store.PermissionFull, 0)
	r = e.request(other, "POST", "/api/v1/emails", []byte(simple), "Idempotency-Key", "order-1")
	if r.status != 400 { // other team has no example.com: validated, not replayed
		t.Errorf("other team replayed team 1's record: %d %s", r.status, r.body)
	}
	// A failed request stores nothing: the key can be used again.
	bad := `{"to":"a@example.org","from":"hello@unverified.com","subject":"s","text":"t"}`
	if r := e.do("POST", "/api/v1/emails", bad, "Idempotency-Key", "order-2"); r.status != 400 {
		t.Fatalf("bad send: %d", r.status)
	}
	e.send(simple, "Idempotency-Key", "order-2")
	// Records expire after 24 hours.
	e.clock.Add(24*time.Hour + time.Minute)
	if id := e.send(simple, "Idempotency-Key", "order-1"); id == first {
		t.Error("expired key replayed the old email")
	}
	if n := e.count(); n != 3 {
		t.Errorf("count = %d, want 3", n)
	}
}

// TestInReplyToKeepsTheKeysScope: a key restricted to a domain cannot reply to an email of the
// team's other domains, which it cannot read either: the id is not found, as an unknown one.
func TestInReplyToKeepsTheKeysScope(t *testing.T) {
	e := newEnv(t)
	first := e.send(`{"from":"a@example.com","to":"b@example.org","subject":"Hi","text":"t"}`)
	var d struct{ ID int64 }
	e.mustDo("POST", "/api/v1/domains", `{"name":"other.example"}`, &d)
	key := e.keyFor(store.PermissionFull, d.ID)
	reply := func(to string) response {
		return e.request(key, "POST", "/api/v1/emails", []byte(`{"from":"a@other.example","to":"b@example.org","subject":"Re: Hi","text":"t","inReplyToId":"`+to+`"}`))
	}
	hidden, unknown := reply(first), reply("emnope")
	if _, msg := hidden.errorOf(t); hidden.status != 400 || msg != "inReplyToId: email "+first+" not found" {
		t.Errorf("a reply to another domain's email: %d %s", hidden.status, hidden.body)
	}
	if unknown.status != 400 {
		t.Errorf("a reply to an unknown email: %d %s", unknown.status, unknown.body)
	}
	own := e.request(key, "POST", "/api/v1/emails", []byte(`{"from":"a@other.example","to":"b@example.org","subject":"Hi","text":"t"}`))
	var sent struct{ EmailID string }
	if err := json.Unmarshal(own.body, &sent); own.status != 200 || err != nil {
		t.Fatalf("a send from the key's own domain: %d %s", own.status, own.body)
	}
	if r := reply(sent.EmailID); r.status != 200 {
		t.Errorf("a reply to the key's own domain's email: %d %s", r.status, r.body)
	}
}

// TestIdempotentReplayKeepsTheKeysScope: a key restricted to another domain that repeats a
// teammate's request with its Idempotency-Key gets the 403 it gets without the key, not the
// teammate's email ids.
func TestIdempotentReplayKeepsTheKeysScope(t *testing.T) {
	e := newEnv(t)
	body := `{"from":"a@example.com","to":"b@example.org","subject":"Scoped","text":"t"}`
	first := e.send(body, "Idempotency-Key", "shared")
	var d struct{ ID int64 }
	e.mustDo("POST", "/api/v1/domains", `{"name":"other.example"}`, &d)
	for _, key := range []string{e.keyFor(store.PermissionFull, d.ID), e.keyFor(store.PermissionSending, d.ID)} {
		without := e.request(key, "POST", "/api/v1/emails", []byte(body))
		with := e.request(key, "POST", "/api/v1/emails", []byte(body), "Idempotency-Key", "shared")
		if without.status != 403 || with.status != 403 || strings.Contains(string(with.body), first) || with.header.Get("Idempotency-Replayed") != "" {
			t.Errorf("another domain's key: %d without the Idempotency-Key, %d with it: %s", without.status, with.status, with.body)
		}
		batch := e.request(key, "POST", "/api/v1/emails/batch", []byte("["+body+"]"), "Idempotency-Key", "shared-batch")
		if batch.status != 403 || !strings.Contains(string(batch.body), "[0].from") {
			t.Errorf("another domain's key, batch: %d %s", batch.status, batch.body)
		}
	}
	if r := e.do("POST", "/api/v1/emails", body, "Idempotency-Key", "shared"); r.status != 200 || !strings.Contains(string(r.body), first) {
		t.Errorf("the team's own replay: %d %s", r.status, r.body)
	}
	// A restricted key's own retry is replayed even after its domain stopped being verified:
	// what was accepted stays accepted.
	own := e.keyFor(store.PermissionFull, 1)
	r := e.request(own, "POST", "/api/v1/emails", []byte(body), "Idempotency-Key", "own")
	if r.status != 200 {
		t.Fatalf("the domain's own key: %d %s", r.status, r.body)
	}
	if _, err := e.app.Store.UpdateDomain(context.Background(), 1, 1, func(d *store.Domain) error { d.Status = store.DomainFailed; return nil }); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(10 * time.Minute) // past the domain cache
	if again := e.request(own, "POST", "/api/v1/emails", []byte(body), "Idempotency-Key", "own"); again.status != 200 || string(again.body) != string(r.body) {
		t.Errorf("the restricted key's retry after its domain failed verification: %d %s, want %s", again.status, again.body, r.body)
	}
	if fresh := e.request(own, "POST", "/api/v1/emails", []byte(body), "Idempotency-Key", "new"); fresh.status != 400 {
		t.Errorf("a new send from the unverified domain: %d %s", fresh.status, fresh.body)
	}
}

func TestIdempotencyConcurrent(t *testing.T) {
	e := newEnv(t)
	const n = 40
	var wg sync.WaitGroup
	results := make([]response, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.do("POST", "/api/v1/emails/batch", "["+simple+","+simple+"]", "Idempotency-Key", "same")
		}()
	}
	wg.Wait()
	ids := map[string]bool{}
	for _, r := range results {
		switch r.status {
		case 200:
			var out struct {
				Data []struct{ EmailID string } `json:"data"`
			}
			r.json(t, &out)
			ids[out.Data[0].EmailID+","+out.Data[1].EmailID] = true
		case 409:
			if _, msg := r.errorOf(t); !strings.Contains(msg, "in progress") {
				t.Errorf("409 message %q", msg)
			}
		default:
			t.Errorf("status %d %s", r.status, r.body)
		}
	}
	if len(ids) != 1 {
		t.Errorf("%d different batches answered, want 1: %v", len(ids), ids)
	}
	if c := e.count(); c != 2 {
		t.Errorf("count = %d, want exactly one batch of 2", c)
	}
}

func TestListEmails(t *testing.T) {
	e := newEnv(t)
	var ids []string
	for i := range 5 {
		ids = append(ids, e.send(fmt.Sprintf(`{"to":"u%d@example.org","from":"hello@example.com","subject":"n%d","text":"t"}`, i, i)))
		e.clock.Add(time.Hour)
	}
	var d map[string]any
	e.mustDo("POST", "/api/v1/domains", `{"name":"other.com"}`, &d)
	otherDomain := int64(d["id"].(float64))
	otherID := e.send(`{"to":"u@example.org","from":"hello@other.com","subject":"o","text":"t"}`)

	type page struct {
		Data []struct {
			ID           string  `json:"id"`
			LatestStatus string  `json:"latestStatus"`
			ScheduledAt  *string `json:"scheduledAt"`
			DomainID     int64   `json:"domainId"`
		} `json:"data"`
		Count int `json:"count"`
	}
	var p page
	e.mustDo("GET", "/api/v1/emails?limit=2&page=1", "", &p)
	if p.Count != 6 || len(p.Data) != 2 || p.Data[0].ID != otherID || p.Data[1].ID != ids[4] {
		t.Errorf("page 1 = %+v, want newest first and count 6", p)
	}
	e.mustDo("GET", "/api/v1/emails?limit=2&page=3", "", &p)
	if len(p.Data) != 2 || p.Data[1].ID != ids[0] {
		t.Errorf("page 3 = %+v", p)
	}
	e.mustDo("GET", fmt.Sprintf("/api/v1/emails?domainId=%d", e.domain), "", &p)
	if p.Count != 5 || len(p.Data) != 5 {
		t.Errorf("domain filter = %d/%d, want 5", p.Count, len(p.Data))
	}
	e.mustDo("GET", fmt.Sprintf("/api/v1/emails?domainId=%d&domainId=%d", e.domain, otherDomain), "", &p)
	if p.Count != 6 {
		t.Errorf("two domains = %d, want 6", p.Count)
	}
	e.mustDo("GET", "/api/v1/emails?domainId=", "", &p) // no filter, as upstream reads it
	if p.Count != 6 {
		t.Errorf("an empty domainId = %d, want 6 (no filter)", p.Count)
	}
	// ids[i] was created at now-(5-i)h: select ids[1] and ids[2].
	start := e.clock.Now().Add(-4*time.Hour - time.Minute).Format(time.RFC3339)
	end := e.clock.Now().Add(-3*time.Hour + time.Minute).Format(time.RFC3339)
	e.mustDo("GET", "/api/v1/emails?startDate="+start+"&endDate="+end, "", &p)
	if p.Count != 2 || len(p.Data) != 2 || p.Data[0].ID != ids[2] || p.Data[1].ID != ids[1] {
		t.Errorf("date range = %+v, want ids[2], ids[1]", p)
	}
	for _, q := range []string{"page=0", "limit=0", "limit=101", "page=x", "startDate=yesterday", "domainId=abc",
		"startDate=2024-02-01T00:00:00Z&endDate=2024-01-01T00:00:00Z"} {
		r := e.do("GET", "/api/v1/emails?"+q, "")
		if code, _ := r.errorOf(t); r.status != 400 || code != "BAD_REQUEST" {
			t.Errorf("?%s = %d %s", q, r.status, code)
		}
	}
	// An email's own createdAt, as shown (to the millisecond), finds it as either bound.
	e.clock.Add(1234567 * time.Nanosecond)
	id := e.send(simple)
	var got struct{ CreatedAt string }
	e.mustDo("GET", "/api/v1/emails/"+id, "", &got)
	for _, q := range []string{"endDate=" + got.CreatedAt, "startDate=" + got.CreatedAt + "&endDate=" + got.CreatedAt} {
		e.mustDo("GET", "/api/v1/emails?"+q, "", &p)
		if len(p.Data) == 0 || p.Data[0].ID != id {
			t.Errorf("?%s finds %+v, want %s first", q, p.Data, id)
		}
	}
	// Every list says the same of a page out of range: the range.
	for _, path := range []string{"/api/v1/emails?page=1000001", "/api/v1/campaigns?page=1000001", "/api/v1/campaigns?page=0", "/api/v1/suppressions?page=0"} {
		r := e.do("GET", path, "")
		if _, msg := r.errorOf(t); r.status != 400 || msg != "page: must be an integer from 1 to 1000000" {
			t.Errorf("%s = %d %q", path, r.status, msg)
		}
	}
}

func TestGetEmailScoping(t *testing.T) {
	e := newEnv(t)
	id := e.send(simple)
	other, _ := e.newTeam("other", store.PermissionFull, 0)
	if r := e.request(other, "GET", "/api/v1/emails/"+id, nil); r.status != 404 {
		t.Errorf("another team's email: %d", r.status)
	}
	if r := e.do("GET", "/api/v1/emails/emnotthere", ""); r.status != 404 {
		t.Errorf("unknown email: %d", r.status)
	}
	if r := e.do("GET", "/api/v1/emails/ab", ""); r.status != 400 {
		t.Errorf("short id: %d", r.status)
	}
	d := e.get(id)
	if d.EmailEvents[0].Status != "QUEUED" || d.ScheduledAt != nil {
		t.Errorf("first event %+v", d.EmailEvents)
	}
}

func TestScheduledSendIsStoredScheduled(t *testing.T) {
	e := newEnv(t)
	at := e.clock.Now().Add(48 * time.Hour).Truncate(time.Second)
	id := e.send(`{"to":"a@example.org","from":"hello@example.com","subject":"s","text":"t","scheduledAt":"` + at.Format(time.RFC3339) + `"}`)
	d := e.get(id)
	if d.LatestStatus != "SCHEDULED" || d.ScheduledAt == nil || d.EmailEvents[0].Status != "SCHEDULED" {
		t.Fatalf("scheduled email = %+v", d)
	}
	if got, _ := time.Parse(time.RFC3339, *d.ScheduledAt); !got.Equal(at) {
		t.Errorf("scheduledAt %s, want %s", *d.ScheduledAt, at)
	}
	// A few minutes in the past (a client's clock behind): sent now. Further: refused.
	drift := e.clock.Now().Add(-5 * time.Minute).Format(time.RFC3339)
	past := e.send(`{"to":"a@example.org","from":"hello@example.com","subject":"s","text":"t","scheduledAt":"` + drift + `"}`)
	e.await(past, "DELIVERED")
	// Its scheduledAt stays as given (upstream's, and a reschedule's, way), not null.
	if d := e.get(past); d.ScheduledAt == nil || *d.ScheduledAt != strings.Replace(drift, "Z", ".000Z", 1) {
		t.Errorf("the email sent at once for a time just past has scheduledAt %v, want %s", d.ScheduledAt, drift)
	}
	r := e.do("POST", "/api/v1/emails", `{"to":"a@example.org","from":"hello@example.com","subject":"s","text":"t","scheduledAt":"2001-01-01T00:00:00Z"}`)
	if _, msg := r.errorOf(t); r.status != 400 || !strings.HasPrefix(msg, "scheduledAt: ") {
		t.Errorf("scheduledAt in 2001: %d %s, want 400 naming scheduledAt", r.status, msg)
	}
}

func TestDomains(t *testing.T) {
	e := newEnv(t)
	r := e.do("GET", fmt.Sprintf("/api/v1/domains/%d", e.domain), "")
	var d struct {
		ID         int64  `json:"id"`
		Name       string `json:"name"`
		Status     string `json:"status"`
		Region     string `json:"region"`
		PublicKey  string `json:"publicKey"`
		DNSRecords []struct {
			Type, Name, Value, TTL, Status string
			Priority                       string `json:"priority"`
			Recommended                    bool   `json:"recommended"`
		} `json:"dnsRecords"`
	}
	r.json(t, &d)
	if d.Name != "example.com" || d.Status != "SUCCESS" || d.Region != "us-east-1" || d.PublicKey == "" {
		t.Errorf("domain = %+v", d)
	}
	if strings.Contains(strings.ToLower(string(r.body)), "private") {
		t.Error("a domain response mentions the private key")
	}
	// As upstream's: only the DMARC record says recommended; the others leave it out.
	if n := strings.Count(string(r.body), `"recommended"`); n != 1 {
		t.Errorf("%d records carry recommended, want 1 (DMARC): %s", n, r.body)
	}
	want := map[string]string{
		"MX mail":                 "feedback-smtp.us-east-1.amazonses.com",
		"TXT mailroom._domainkey": "p=" + d.PublicKey,
		"TXT mail":                "v=spf1 include:amazonses.com ~all",
		"TXT _dmarc":              "v=DMARC1; p=none;",
	}
	for _, rec := range d.DNSRecords {
		k := rec.Type + " " + rec.Name
		if want[k] != rec.Value || rec.TTL != "Auto" {
			t.Errorf("record %s = %+v", k, rec)
		}
		if (rec.Type == "MX") != (rec.Priority == "10") || (rec.Name == "_dmarc") != rec.Recommended {
			t.Errorf("record %s priority/recommended = %+v", k, rec)
		}
		delete(want, k)
	}
	if len(want) != 0 {
		t.Errorf("missing records %v", want)
	}
	if r := e.do("POST", "/api/v1/domains", `{"name":"Example.com"}`); r.status != 409 {
		t.Errorf("duplicate = %d", r.status)
	}
	for body, field := range map[string]string{`{"name":"not a domain"}`: "name:", `{}`: "name:",
		`{"name":5}`: "name:", `{"name":"x.io","region":"mars"}`: "region:", `{`: "Malformed",
		`{"name":"x.io","region":null}`: "region:", `{"name":"x.io","region":""}`: "region:", `{"name":"x.io","region":1}`: "region:"} {
		r := e.do("POST", "/api/v1/domains", body)
		if _, msg := r.errorOf(t); r.status != 400 || !strings.HasPrefix(msg, field) {
			t.Errorf("create %s = %d %s", body, r.status, msg)
		}
	}
	var list []map[string]any
	e.mustDo("GET", "/api/v1/domains", "", &list)
	if len(list) != 1 {
		t.Errorf("list = %d domains", len(list))
	}
	var v struct{ Message string }
	e.mustDo("PUT", fmt.Sprintf("/api/v1/domains/%d/verify", e.domain), "", &v)
	if !strings.Contains(v.Message, "SUCCESS") {
		t.Errorf("verify message %q", v.Message)
	}
	other, _ := e.newTeam("other", store.PermissionFull, 0)
	// The SES identity of a domain belongs to the whole account: one team only may hold it.
	if r := e.request(other, "POST", "/api/v1/domains", []byte(`{"name":"example.com"}`)); r.status != 409 {
		t.Errorf("another team registered example.com: %d %s", r.status, r.body)
	}
	for _, m := range []string{"GET", "DELETE"} {
		if r := e.request(other, m, fmt.Sprintf("/api/v1/domains/%d", e.domain), nil); r.status != 404 {
			t.Errorf("%s another team's domain = %d", m, r.status)
		}
	}
	if r := e.do("GET", "/api/v1/domains/999", ""); r.status != 404 {
		t.Errorf("unknown domain = %d", r.status)
	}
	if r := e.do("GET", "/api/v1/domains/abc", ""); r.status != 400 {
		t.Errorf("non-numeric id = %d", r.status)
	}
	var del struct {
		ID      int64 `json:"id"`
		Success bool  `json:"success"`
	}
	e.mustDo("DELETE", fmt.Sprintf("/api/v1/domains/%d", e.domain), "", &del)
	if !del.Success || del.ID != e.domain {
		t.Errorf("delete = %+v", del)
	}
	if r := e.do("POST", "/api/v1/emails", simple); r.status != 400 {
		t.Errorf("send from a deleted domain = %d", r.status)
	}
	e.mustDo("POST", "/api/v1/domains", `{"name":"example.com"}`, nil)
}

func TestTemplates(t *testing.T) {
	e := newEnv(t)
	var tpl struct {
		ID, Name, Subject, HTML, Text string
	}
	e.mustDo("POST", "/api/v1/templates", `{"name":"welcome","subject":"Welcome {{name}}","html":"<p>Hi {{name}}, code {{code}}</p>","text":"Hi {{name}}"}`, &tpl)
	id := e.send(`{"to":"a@example.org","from":"hello@example.com","templateId":"` + tpl.ID + `","variables":{"name":"<Ann>","code":"42"}}`)
	d := e.get(id)
	if d.Subject != "Welcome <Ann>" || *d.HTML != "<p>Hi &lt;Ann&gt;, code 42</p>" || *d.Text != "Hi <Ann>" {
		t.Errorf("rendered = %q %q %q", d.Subject, *d.HTML, *d.Text)
	}
	id = e.send(`{"to":"a@example.org","from":"hello@example.com","templateId":"` + tpl.ID + `","subject":"Mine","variables":{"name":"B","code":"1"}}`)
	if d := e.get(id); d.Subject != "Mine" {
		t.Errorf("caller subject did not win: %q", d.Subject)
	}
	r := e.do("POST", "/api/v1/emails", `{"to":"a@example.org","from":"hello@example.com","templateId":"`+tpl.ID+`","variables":{"name":"x"}}`)
	if _, msg := r.errorOf(t); r.status != 400 || msg != "variables: missing value for code" {
		t.Errorf("missing variable = %d %s", r.status, msg)
	}
	// A value that would put a control character in the subject is refused, naming it.
	r = e.do("POST", "/api/v1/emails", `{"to":"a@example.org","from":"hello@example.com","templateId":"`+tpl.ID+`","variables":{"name":"a\u0007b","code":"1"}}`)
	if _, msg := r.errorOf(t); r.status != 400 || msg != "subject: must not contain control characters after rendering" {
		t.Errorf("control character from a variable = %d %s", r.status, msg)
	}
	r = e.do("POST", "/api/v1/templates", `{"name":"bell","subject":"ding\u0007","text":"t"}`)
	if _, msg := r.errorOf(t); r.status != 400 || msg != "subject: must not contain control characters" {
		t.Errorf("template subject with a control character = %d %s", r.status, msg)
	}
	r = e.do("POST", "/api/v1/emails", `{"to":"a@example.org","from":"hello@example.com","templateId":"tpl_nope"}`)
	if _, msg := r.errorOf(t); r.status != 400 || !strings.HasPrefix(msg, "templateId:") {
		t.Errorf("unknown template = %d %s", r.status, msg)
	}
	e.mustDo("PATCH", "/api/v1/templates/"+tpl.ID, `{"subject":"Hello {{name}}"}`, &tpl)
	if tpl.Subject != "Hello {{name}}" || tpl.Name != "welcome" {
		t.Errorf("patched = %+v", tpl)
	}
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	e.mustDo("GET", "/api/v1/templates", "", &list)
	if len(list.Data) != 1 || list.Data[0].ID != tpl.ID {
		t.Errorf("list = %+v", list)
	}
	other, _ := e.newTeam("other", store.PermissionFull, 0)
	if r := e.request(other, "GET", "/api/v1/templates/"+tpl.ID, nil); r.status != 404 {
		t.Errorf("another team's template = %d", r.status)
	}
	e.mustDo("DELETE", "/api/v1/templates/"+tpl.ID, "", nil)
	if r := e.do("GET", "/api/v1/templates/"+tpl.ID, ""); r.status != 404 {
		t.Errorf("deleted template = %d", r.status)
	}
	if r := e.do("POST", "/api/v1/templates", `{"name":"x"}`); r.status != 400 {
		t.Errorf("template without body = %d", r.status)
	}
}

func TestAuthAndPermissions(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		key    string
		status int
		code   string
	}{
		{"", 401, "UNAUTHORIZED"},
		{"nounderscore", 403, "FORBIDDEN"},
		{"us_abcdefghij_0123456789abcdef0123456789abcdef", 403, "FORBIDDEN"},
		{e.key[:len(e.key)-4] + "0000", 403, "FORBIDDEN"},
	}
	for _, c := range cases {
		r := e.request(c.key, "GET", "/api/v1/emails", nil)
		if code, msg := r.errorOf(t); r.status != c.status || code != c.code {
			t.Errorf("key %q = %d %s %s", c.key, r.status, code, msg)
		}
	}
	sending := e.keyFor(store.PermissionSending, 0)
	if r := e.request(sending, "POST", "/api/v1/domains", []byte(`{"name":"x.com"}`)); r.status != 403 {
		t.Errorf("SENDING key created a domain: %d", r.status)
	}
	if r := e.request(sending, "GET", "/api/v1/domains", nil); r.status != 403 {
		t.Errorf("SENDING key listed domains: %d", r.status)
	}
	if r := e.request(sending, "POST", "/api/v1/templates", []byte(`{"name":"x","text":"t"}`)); r.status != 403 {
		t.Errorf("SENDING key created a template: %d", r.status)
	}
	if r := e.request(sending, "POST", "/api/v1/emails", []byte(simple)); r.status != 200 {
		t.Errorf("SENDING key could not send: %d %s", r.status, r.body)
	}
	var d map[string]any
	e.mustDo("POST", "/api/v1/domains", `{"name":"other.com"}`, &d)
	scoped := e.keyFor(store.PermissionFull, e.domain)
	if r := e.request(scoped, "POST", "/api/v1/emails", []byte(strings.Replace(simple, "example.com", "other.com", 1))); r.status != 403 {
		t.Errorf("domain-scoped key sent from another domain: %d", r.status)
	}
	if r := e.request(scoped, "GET", fmt.Sprintf("/api/v1/domains/%v", d["id"]), nil); r.status != 404 {
		t.Errorf("domain-scoped key read another domain: %d", r.status)
	}
	var list []map[string]any
	r := e.request(scoped, "GET", "/api/v1/domains", nil)
	r.json(t, &list)
	if len(list) != 1 {
		t.Errorf("domain-scoped key lists %d domains", len(list))
	}
}

func TestBadInputStoresNothing(t *testing.T) {
	e := newEnv(t)
	att := `{"filename":"a.txt","content":"aGk="}`
	cases := []struct {
		name, body string
		status     int
		field      string
	}{
		{"malformed", `{"to":`, 400, "Malformed JSON in request body"},
		{"wrong type", `{"to":"a@example.org","from":"hello@example.com","subject":1,"text":"t"}`, 400, "subject:"},
		{"missing from", `{"to":"a@example.org","subject":"s","text":"t"}`, 400, "from:"},
		{"invalid address", `{"to":"a@@example.org","from":"hello@example.com","subject":"s","text":"t"}`, 400, "to:"},
		{"unverified domain", `{"to":"a@example.org","from":"hello@nowhere.com","subject":"s","text":"t"}`, 400, "from:"},
		{"11 attachments", `{"to":"a@example.org","from":"hello@example.com","subject":"s","text":"t","attachments":[` + strings.TrimSuffix(strings.Repeat(att+",", 11), ",") + `]}`, 400, "attachments:"},
		{"CRLF header", `{"to":"a@example.org","from":"hello@example.com","subject":"s","text":"t","headers":{"X-A":"a\r\nBcc: x@y.z"}}`, 400, "headers.X-A:"},
		{"unknown inReplyTo", `{"to":"a@example.org","from":"hello@example.com","subject":"s","text":"t","inReplyToId":"emnope"}`, 400, "inReplyToId:"},
	}
	for _, c := range cases {
		r := e.do("POST", "/api/v1/emails", c.body)
		if _, msg := r.errorOf(t); r.status != c.status || !strings.HasPrefix(msg, c.field) {
			t.Errorf("%s: %d %q, want %d %q", c.name, r.status, msg, c.status, c.field)
		}
	}
	// A body declared as something else than JSON (curl's -d, fetch's string body) is refused
	// naming the header; JSON with a charset, a +json type, or no Content-Type is read.
	ok := `{"to":"a@example.org","from":"hello@example.com","subject":"s","text":"t"}`
	for _, ct := range []string{"application/x-www-form-urlencoded", "text/plain;charset=UTF-8", "multipart/form-data; boundary=x", "application/xml", "json"} {
		r := e.do("POST", "/api/v1/emails", ok, "Content-Type", ct)
		if code, msg := r.errorOf(t); r.status != 400 || code != "BAD_REQUEST" || !strings.HasPrefix(msg, "Content-Type: must be application/json") {
			t.Errorf("Content-Type %s: %d %s %q", ct, r.status, code, msg)
		}
	}
	if n := e.count(); n != 0 {
		t.Errorf("count = %d after only bad requests", n)
	}
	for _, ct := range []string{"application/json; charset=utf-8", "Application/JSON", "application/vnd.api+json", "",
		"application/json,application/json", "application/json; charset"} {
		if r := e.do("POST", "/api/v1/emails", ok, "Content-Type", ct); r.status != 200 {
			t.Errorf("Content-Type %q: %d %s", ct, r.status, r.body)
		}
	}
	if n := e.count(); n != 6 {
		t.Errorf("count = %d after six good requests", n)
	}
	huge := bytes.Repeat([]byte("a"), 57<<20)
	r := e.request(e.key, "POST", "/api/v1/emails", append(append([]byte(`{"to":"a@example.org","from":"hello@example.com","subject":"s","text":"`), huge...), []byte(`"}`)...))
	if code, _ := r.errorOf(t); r.status != 413 || code != "PAYLOAD_TOO_LARGE" {
		t.Errorf("oversized body = %d %s", r.status, code)
	}
	if n := e.count(); n != 6 {
		t.Errorf("count = %d after an oversized body, want the six good ones", n)
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	e := newEnv(t)
	r := e.do("GET", "/api/v1/nope", "")
	if code, _ := r.errorOf(t); r.status != 404 || code != "NOT_FOUND" {
		t.Errorf("unknown route = %d %s", r.status, code)
	}
	r = e.do("DELETE", "/api/v1/emails", "")
	if code, _ := r.errorOf(t); r.status != 405 || code != "METHOD_NOT_ALLOWED" {
		t.Errorf("wrong method = %d %s", r.status, code)
	}
}

func TestQueuedEmailsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	first := newEnvAt(t, dir, 0) // no delivery goroutines: the email stays QUEUED
	id := first.send(simple)
	if d := first.get(id); d.LatestStatus != "QUEUED" {
		t.Fatalf("status before restart %s", d.LatestStatus)
	}
	key := first.key
	first.srv.Close()
	if err := first.app.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := reopen(t, dir, key)
	second.await(id, "DELIVERED")
}

// reopen starts the app again on dir, as a restarted server does: pending emails are recovered
// and schedules that came due meanwhile fire.
func reopen(t *testing.T, dir, key string) *env {
	t.Helper()
	ctx := context.Background()
	cfg := config.Config{Backend: config.BackendEmbedded, DataDir: dir, Workers: 2, AuthCacheTTL: time.Minute, LogLevel: slog.LevelError + 4}
	a, err := app.New(ctx, cfg, app.Options{Local: true})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, app: a, key: key, clock: &clock{}, srv: httptest.NewServer(a.Services.Handler())}
	t.Cleanup(func() {
		e.srv.Close()
		_ = a.Close(context.Background())
	})
	if _, err := a.Pool.Recover(ctx, a.Store); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	return e
}

// A query that does not decode is a 400 naming it, not a list read without it.
func TestMalformedQueryIsRefused(t *testing.T) {
	e := newEnv(t)
	r := e.do("GET", "/api/v1/emails?limit=%ZZ", "")
	if _, msg := r.errorOf(t); r.status != 400 || msg != "query: malformed: %ZZ is not a %-escape" {
		t.Errorf("limit=%%ZZ = %d %q", r.status, msg)
	}
	if r := e.do("GET", "/api/v1/emails?limit=5", ""); r.status != 200 {
		t.Errorf("a good query = %d", r.status)
	}
}

// A suppression of an address the send checks would now refuse (stored from SES's events, or
// before a stricter check) can still be removed.
func TestOddSuppressionCanBeRemoved(t *testing.T) {
	e := newEnv(t)
	odd := "bounced@mail_relay.example.org"
	if err := e.app.Store.PutSuppression(context.Background(), store.Suppression{TeamID: e.teamID, Email: odd, Reason: store.ReasonHardBounce, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if r := e.do("DELETE", "/api/v1/suppressions/"+odd, ""); r.status != 200 {
		t.Fatalf("DELETE %s = %d %s", odd, r.status, r.body)
	}
	if r := e.do("DELETE", "/api/v1/suppressions/"+odd, ""); r.status != 404 {
		t.Errorf("a second DELETE = %d, want 404", r.status)
	}
}

// DELETE /suppressions/{email} answers with the address as the list holds it (as POST does),
// not the path as written.
func TestSuppressionDeleteAnswersTheListedAddress(t *testing.T) {
	e := newEnv(t)
	e.mustDo("POST", "/api/v1/suppressions", `{"email":"Ann <Ann@Example.org>"}`, nil)
	var out struct {
		Email   string
		Success bool
	}
	e.mustDo("DELETE", "/api/v1/suppressions/ANN@EXAMPLE.ORG", "", &out)
	if out.Email != "ann@example.org" || !out.Success {
		t.Errorf("DELETE answered %+v, want ann@example.org", out)
	}
}

// A wrong element of a list is named by its index.
func TestListElementNamed(t *testing.T) {
	e := newEnv(t)
	r := e.do("POST", "/api/v1/contactBooks", `{"name":"B","variables":["a",5]}`)
	if _, msg := r.errorOf(t); r.status != 400 || !strings.HasPrefix(msg, "variables[1]: must be a string") {
		t.Errorf("variables [\"a\",5] = %d %q, want a 400 naming variables[1]", r.status, msg)
	}
	// A whole float elsewhere has the body written again (integralNumbers), its keys in
	// another order: the element is still found.
	r = e.do("POST", "/api/v1/contactBooks", `{"variables":["a",5],"name":"B","x":1.0}`)
	if _, msg := r.errorOf(t); r.status != 400 || !strings.HasPrefix(msg, "variables[1]: must be a string") {
		t.Errorf("with a whole float beside it = %d %q, want a 400 naming variables[1]", r.status, msg)
	}
	// A whole float in an integer list has the body decoded again, written anew: the bad
	// element is found in that body.
	r = e.do("POST", "/api/v1/webhooks", `{"url":"https://example.com/h","domainIds":[1.0,"x"]}`)
	if _, msg := r.errorOf(t); r.status != 400 || !strings.HasPrefix(msg, "domainIds[1]: must be an integer") {
		t.Errorf("domainIds [1.0,\"x\"] = %d %q, want a 400 naming domainIds[1]", r.status, msg)
	}
}

// A book created without an emoji has upstream's default; one given keeps it.
func TestContactBookDefaultEmoji(t *testing.T) {
	e := newEnv(t)
	var b struct {
		Emoji string `json:"emoji"`
	}
	e.mustDo("POST", "/api/v1/contactBooks", `{"name":"Plain"}`, &b)
	if b.Emoji != "📙" {
		t.Errorf("emoji %q, want 📙", b.Emoji)
	}
	e.mustDo("POST", "/api/v1/contactBooks", `{"name":"Own","emoji":"📬"}`, &b)
	if b.Emoji != "📬" {
		t.Errorf("emoji %q, want 📬", b.Emoji)
	}
}

// Every body, not only a send's or a contact's, refuses a field given twice (at any depth) with
// a 400 naming it and writes nothing; a list given for a single value names the field, not an
// element of it; a book's property that is not a string is named by its key.
func TestEveryBodyNamesItsBadField(t *testing.T) {
	e := newEnv(t)
	var b struct{ ID string }
	e.mustDo("POST", "/api/v1/contactBooks", `{"name":"B"}`, &b)
	var d struct{ ID int64 }
	e.mustDo("POST", "/api/v1/domains", `{"name":"given.example.com"}`, &d)
	book, dom := "/api/v1/contactBooks/"+b.ID, fmt.Sprintf("/api/v1/domains/%d", d.ID)
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/api/v1/domains", `{"name":"d1.example.net","name":"d2.example.net"}`, "name: given more than once"},
		{"PATCH", dom, `{"openTracking":true,"openTracking":false}`, "openTracking: given more than once"},
		{"PATCH", dom, `{"open_tracking":true}`, `open_tracking: unknown field; did you mean "openTracking"?`},
		{"PATCH", dom, `{"openTracking":[true]}`, "openTracking: must be a boolean"},
		{"POST", "/api/v1/contactBooks", `{"name":"a","name":"b"}`, "name: given more than once"},
		{"POST", "/api/v1/contactBooks", `{"name":["x"]}`, "name: must be a string"},
		{"POST", "/api/v1/contactBooks", `{"name":"x","properties":{"plan":1}}`, "properties.plan: must be a string"},
		{"PATCH", book, `{"name":"a","name":"b"}`, "name: given more than once"},
		{"POST", "/api/v1/suppressions", `{"email":"s1@example.org","email":"s2@example.org"}`, "email: given more than once"},
		{"DELETE", book + "/contacts/bulk", `{"contactIds":["a"],"contactIds":["b"]}`, "contactIds: given more than once"},
		{"POST", book + "/contacts", `{"email":"p@example.org","properties":{"plan":"a","plan":"b"}}`, "properties.plan: given more than once"},
		{"POST", book + "/contacts", `{"email":"p@example.org","properties":["a"]}`, "properties: must be an object"},
		{"POST", book + "/contacts/bulk", `[{"email":"q@example.org","properties":{"plan":"a","plan":"b"}}]`, "[0].properties.plan: given more than once"},
		// encoding/json fills a struct's field from a key in any case: "Email" is email again.
		{"POST", book + "/contacts", `{"email":"p@example.org","Email":"q@example.org"}`, "Email: given more than once"},
		{"POST", "/api/v1/suppressions", `{"email":"s1@example.org","EMAIL":"s2@example.org"}`, "EMAIL: given more than once"},
		// A float for an integer is decoded again with integers: the repeat is still seen.
		{"POST", "/api/v1/campaigns", `{"name":"a","name":"b","from":"news@example.com","subject":"s","contactBookId":"` + b.ID + `","html":"<p>x</p>","batchSize":500.0}`, "name: given more than once"},
		{"POST", "/api/v1/campaigns", `{"name":"a","from":"news@example.com","subject":"s","contactBookId":"` + b.ID + `","html":"<p>x</p>","batchSize":1.0,"batchSize":2}`, "batchSize: given more than once"},
		// A line break is named as such, not as a length.
		{"POST", "/api/v1/campaigns", `{"name":"a","from":"news@example.com","subject":"a\nb","contactBookId":"` + b.ID + `","html":"<p>x</p>"}`, "subject: must not contain line breaks"},
		{"POST", "/api/v1/campaigns", `{"name":"` + strings.Repeat("n", 201) + `","from":"news@example.com","subject":"s","contactBookId":"` + b.ID + `","html":"<p>x</p>"}`, "name: at most 200 bytes"},
		{"POST", book + "/contacts", `{"email":"p@example.org","firstName":"Ça\nva"}`, "firstName: must not contain line breaks"},
		{"POST", book + "/contacts/bulk", `[{"email":"q@example.org","lastName":"` + strings.Repeat("l", 201) + `"}]`, "[0].lastName: at most 200 bytes"},
	} {
		r := e.do(c.method, c.path, c.body)
		if _, msg := r.errorOf(t); r.status != 400 || !strings.Contains(msg, c.want) {
			t.Errorf("%s %s %s = %d %q, want a 400 saying %q", c.method, c.path, c.body, r.status, msg, c.want)
		}
	}
	var domains []struct{ Name string }
	e.mustDo("GET", "/api/v1/domains", "", &domains)
	var books []struct{ Name string }
	e.mustDo("GET", "/api/v1/contactBooks", "", &books)
	var contacts []struct{ Email string }
	e.mustDo("GET", book+"/contacts", "", &contacts)
	var sups struct{ Data []struct{ Email string } }
	e.mustDo("GET", "/api/v1/suppressions", "", &sups)
	for _, d := range domains {
		if strings.HasSuffix(d.Name, ".example.net") {
			t.Errorf("domain %s written", d.Name)
		}
	}
	if len(books) != 1 || books[0].Name != "B" || len(contacts) != 0 || len(sups.Data) != 0 {
		t.Errorf("written: books %v, contacts %v, suppressions %v; want only book B", books, contacts, sups.Data)
	}
}

// TestListsFitALambdaAnswer: the unpaged lists leave out (null, flagged) the bodies past the
// list's bounds, as GET /emails does, so their answer fits Lambda's 6 MB; the whole record is
// at its own route. A contacts page is measured as an invocation carries it (escaped or
// base64), so one that would not fit is a 400 naming limit here as on AWS.
func TestListsFitALambdaAnswer(t *testing.T) {
	e := newEnv(t)
	big := strings.Repeat("<p>Our monthly news, and a link to read more.</p>", 2000) // 98 KB
	var tpl struct{ ID string }
	e.mustDo("POST", "/api/v1/templates", mustJSON(map[string]string{"name": "big", "subject": "s", "html": big, "text": "short"}), &tpl)
	var list struct {
		Data []struct {
			ID          string  `json:"id"`
			HTML        *string `json:"html"`
			Text        *string `json:"text"`
			HTMLOmitted bool    `json:"htmlOmitted"`
			TextOmitted bool    `json:"textOmitted"`
		} `json:"data"`
	}
	e.mustDo("GET", "/api/v1/templates", "", &list)
	if len(list.Data) != 1 || list.Data[0].HTML != nil || !list.Data[0].HTMLOmitted || list.Data[0].Text == nil ||
		*list.Data[0].Text != "short" || list.Data[0].TextOmitted {
		t.Errorf("listed template: %+v, want html null and flagged, text kept", list.Data)
	}
	var whole struct{ HTML string }
	e.mustDo("GET", "/api/v1/templates/"+tpl.ID, "", &whole)
	if whole.HTML != big {
		t.Errorf("GET /templates/{id}: html of %d bytes, want the whole %d", len(whole.HTML), len(big))
	}

	e.mustDo("POST", "/api/v1/contactBooks", mustJSON(map[string]any{"name": "optin", "doubleOptInEnabled": true,
		"doubleOptInFrom": "news@example.com", "doubleOptInSubject": "Confirm",
		"doubleOptInContent": big + `<a href="{{doubleOptInUrl}}">Confirm</a>`}), nil)
	var books []struct {
		DoubleOptInContent        *string `json:"doubleOptInContent"`
		DoubleOptInContentOmitted bool    `json:"doubleOptInContentOmitted"`
	}
	e.mustDo("GET", "/api/v1/contactBooks", "", &books)
	if len(books) != 1 || books[0].DoubleOptInContent != nil || !books[0].DoubleOptInContentOmitted {
		t.Errorf("listed book: %+v, want its content null and flagged", books)
	}

	var b struct{ ID string }
	e.mustDo("POST", "/api/v1/contactBooks", `{"name":"quoted"}`, &b)
	props := map[string]string{}
	for i := range 50 { // values of escaped JSON: a quote costs two bytes as a JSON string
		props[fmt.Sprintf("p%02d", i)] = strings.Repeat(`{"a":"b"}`, 222)
	}
	var contacts []map[string]any
	for i := range 34 {
		contacts = append(contacts, map[string]any{"email": fmt.Sprintf("q%02d@example.org", i), "properties": props})
	}
	e.mustDo("POST", "/api/v1/contactBooks/"+b.ID+"/contacts/bulk", mustJSON(contacts), nil)
	r := e.do("GET", "/api/v1/contactBooks/"+b.ID+"/contacts?limit=34", "")
	if _, msg := r.errorOf(t); r.status != 400 || !strings.HasPrefix(msg, "limit: these 34 contacts come to") {
		t.Errorf("34 contacts of 2 KB properties of quotes = %d %q, want a 400 naming limit", r.status, msg)
	}
	if r := e.do("GET", "/api/v1/contactBooks/"+b.ID+"/contacts?limit=20", ""); r.status != 200 {
		t.Errorf("20 of them = %d, want 200", r.status)
	}
}

// A contact body giving a field twice is a 400 naming it, whole or in a bulk import, as a send's
// is: a decoder would keep the last silently.
func TestContactFieldGivenTwice(t *testing.T) {
	e := newEnv(t)
	var b struct{ ID string }
	e.mustDo("POST", "/api/v1/contactBooks", `{"name":"B"}`, &b)
	for path, body := range map[string]string{
		"/api/v1/contactBooks/" + b.ID + "/contacts":      `{"email":"a@example.org","email":"b@example.org"}`,
		"/api/v1/contactBooks/" + b.ID + "/contacts/bulk": `[{"email":"c@example.org"},{"email":"a@example.org","email":"b@example.org"}]`,
	} {
		r := e.do("POST", path, body)
		if _, msg := r.errorOf(t); r.status != 400 || !strings.Contains(msg, "email: given more than once") {
			t.Errorf("%s %s = %d %q, want a 400 naming email", path, body, r.status, msg)
		}
	}
	var list []struct{ Email string }
	e.mustDo("GET", "/api/v1/contactBooks/"+b.ID+"/contacts", "", &list)
	if len(list) != 0 {
		t.Errorf("%d contacts written, want none", len(list))
	}
}

// mustJSON is v as a JSON body.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// A book's variables are kept as upstream keeps them: trimmed, blanks dropped, a later spelling
// of a name in another case dropped; a name of other characters or a contact's own field is a
// 400 naming its place, on create and on PATCH.
func TestBookVariablesAsUpstreamKeepsThem(t *testing.T) {
	e := newEnv(t)
	var b struct {
		ID        string   `json:"id"`
		Variables []string `json:"variables"`
	}
	e.mustDo("POST", "/api/v1/contactBooks", `{"name":"V","variables":["Plan"," plan ","","plan_2","PLAN"]}`, &b)
	if strings.Join(b.Variables, ",") != "Plan,plan_2" {
		t.Errorf("variables %q, want [Plan plan_2]", b.Variables)
	}
	e.mustDo("PATCH", "/api/v1/contactBooks/"+b.ID, `{"variables":[" City","city","Zip"]}`, nil)
	e.mustDo("GET", "/api/v1/contactBooks/"+b.ID, "", &b)
	if strings.Join(b.Variables, ",") != "City,Zip" {
		t.Errorf("after PATCH: variables %q, want [City Zip]", b.Variables)
	}
	for body, field := range map[string]string{
		`{"name":"V","variables":["ok","a-b"]}`:        "variables[1]",
		`{"name":"V","variables":["städt"]}`:           "variables[0]",
		`{"name":"V","variables":["x","FirstName"]}`:   "variables[1]",
		`{"name":"V","variables":["email"]}`:           "variables[0]",
		`{"name":"V","variables":["a","","lastname"]}`: "variables[2]",
	} {
		r := e.do("POST", "/api/v1/contactBooks", body)
		if _, msg := r.errorOf(t); r.status != 400 || !strings.HasPrefix(msg, field+":") {
			t.Errorf("%s = %d %q, want a 400 naming %s", body, r.status, msg, field)
		}
	}
	if r := e.do("PATCH", "/api/v1/contactBooks/"+b.ID, `{"variables":["a b"]}`); r.status != 400 {
		t.Errorf("PATCH with a space in a name = %d, want 400", r.status)
	}
}

// A contact's property named as one of its book's variables in another case is stored under
// the variable's spelling (upsert and PATCH), as upstream stores it; other names as given.
func TestContactPropertiesTakeTheVariablesSpelling(t *testing.T) {
	e := newEnv(t)
	var b struct{ ID string }
	e.mustDo("POST", "/api/v1/contactBooks", `{"name":"P","variables":["company"]}`, &b)
	contacts := "/api/v1/contactBooks/" + b.ID + "/contacts"
	var created struct{ ContactID string }
	e.mustDo("POST", contacts, `{"email":"ann@example.org","properties":{"company":"Acme","city":"Paris"}}`, &created)
	e.mustDo("POST", contacts, `{"email":"ann@example.org","properties":{"Company":"Beta","City":"Lyon"}}`, nil)
	var c struct{ Properties map[string]string }
	e.mustDo("GET", contacts+"/"+created.ContactID, "", &c)
	if want := map[string]string{"company": "Beta", "city": "Paris", "City": "Lyon"}; !maps.Equal(c.Properties, want) {
		t.Errorf("after the upsert: %v, want %v", c.Properties, want)
	}
	e.mustDo("PATCH", contacts+"/"+created.ContactID, `{"properties":{"COMPANY":"Gamma"}}`, nil)
	e.mustDo("GET", contacts+"/"+created.ContactID, "", &c)
	if c.Properties["company"] != "Gamma" || len(c.Properties) != 3 {
		t.Errorf("after the PATCH: %v, want company Gamma and nothing else added", c.Properties)
	}
}

// A property with a control character (JSON writes one as six bytes: 50 such values made a
// contact's webhook call larger than a DynamoDB item) is a 400 naming it; tab and line breaks
// are kept.
func TestContactPropertiesRefuseControlCharacters(t *testing.T) {
	e := newEnv(t)
	var b struct{ ID string }
	e.mustDo("POST", "/api/v1/contactBooks", `{"name":"C"}`, &b)
	contacts := "/api/v1/contactBooks/" + b.ID + "/contacts"
	r := e.do("POST", contacts, `{"email":"ann@example.org","properties":{"p":"a\u0001b"}}`)
	if _, msg := r.errorOf(t); r.status != 400 || !strings.HasPrefix(msg, "properties.p:") {
		t.Errorf("a control character = %d %q, want a 400 naming properties.p", r.status, msg)
	}
	r = e.do("POST", contacts+"/bulk", `[{"email":"bob@example.org","properties":{"q":"\u0007"}}]`)
	if r.status != 400 {
		t.Errorf("a control character in a bulk import = %d, want 400", r.status)
	}
	e.mustDo("POST", contacts, `{"email":"cid@example.org","properties":{"address":"1 Main St\n\tSpringfield"}}`, nil)
}
