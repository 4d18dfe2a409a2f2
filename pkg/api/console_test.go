package api_test

import (
	"bufio"
	"bytes"
	"fmt"
	stdhtml "html"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/team"
)

// consoleServer serves the console of e's services, its live view polling every 20 ms, its
// event buttons and keys page on.
func consoleServer(t *testing.T, e *env, opts ...func(*api.Console)) *httptest.Server {
	con := api.NewConsole(e.app.Services, e.app.OutboxDir)
	for _, o := range opts {
		o(con)
	}
	con.Poll = 20 * time.Millisecond
	con.Events = e.app.Ingester
	con.Keys = &team.Admin{Store: e.app.Store, Now: time.Now}
	srv := httptest.NewServer(con.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// changes reads a live view's stream and says each "changed" on the channel (buffered: one
// is kept until read).
func changes(stream io.Reader) <-chan bool {
	changed := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stream)
		for sc.Scan() {
			if sc.Text() == "event: changed" {
				select {
				case changed <- true:
				default:
				}
			}
		}
	}()
	return changed
}

// consoleClient is a browser on the console: a cookie jar, no redirects followed silently.
func consoleClient(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 10 * time.Second}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func postForm(t *testing.T, c *http.Client, u string, form url.Values, origin string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestConsole: a browser signs in with an API key, sees the team's emails, one email's
// message (in a sandboxed frame, under a policy that blocks scripts and remote content), its
// events and raw message, and is told when something changes; a bad key, a cross-site post
// and a sign-out without its token are refused; a key restricted to another domain sees none
// of this domain's emails.
func TestConsole(t *testing.T) {
	e := newEnv(t)
	srv := consoleServer(t, e)
	c := consoleClient(t)

	if code, body := get(t, c, srv.URL+"/"); code != 200 || !strings.Contains(body, `action="/console/session"`) {
		t.Fatalf("GET / = %d, want the sign-in page:\n%s", code, body)
	}
	if code, _ := get(t, c, srv.URL+"/console/events"); code != 401 {
		t.Errorf("events before signing in = %d", code)
	}
	if code, body := postForm(t, c, srv.URL+"/console/session", url.Values{"key": {"us_bogus"}}, srv.URL); code != 401 || !strings.Contains(body, "not valid") {
		t.Errorf("a bad key = %d", code)
	}
	if code, _ := postForm(t, c, srv.URL+"/console/session", url.Values{"key": {e.key}}, "https://evil.example"); code != 403 {
		t.Errorf("a cross-site sign-in = %d", code)
	}
	code, body := postForm(t, c, srv.URL+"/console/session", url.Values{"key": {e.key}}, srv.URL)
	if code != 200 || !strings.Contains(body, "<h1>Emails</h1>") {
		t.Fatalf("sign in = %d:\n%s", code, body)
	}
	u, _ := url.Parse(srv.URL + "/console/")
	ck := c.Jar.Cookies(u)
	if len(ck) != 1 || ck[0].Value == "" {
		t.Fatalf("session cookie %v", ck)
	}

	// The live view says "changed" once an email is sent.
	resp, err := c.Get(srv.URL + "/console/events")
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %v %v", resp, err)
	}
	changed := changes(resp.Body)
	html := `<p>Hello <b>console</b></p><script>alert(1)</script><img src="https://tracker.example/p.gif">`
	id := e.send(`{"from":"a@example.com","to":"reader@example.org","subject":"Console test","html":` + jsonString(html) + `,"text":"Hello console",` +
		`"attachments":[{"filename":"report <v2>?.pdf","content":"aGVsbG8="}]}`)
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Error("the live view did not say changed after a send")
	}
	resp.Body.Close()
	e.await(id, "DELIVERED")

	code, body = get(t, c, srv.URL+"/console/?q=reader@example")
	if code != 200 || !strings.Contains(body, "/console/emails/"+id) || !strings.Contains(body, "Console test") {
		t.Fatalf("search = %d:\n%s", code, body)
	}
	if _, body := get(t, c, srv.URL+"/console/?q=nobody-here"); strings.Contains(body, id) {
		t.Error("a search for someone else lists the email")
	}

	if _, body := get(t, c, srv.URL+"/console/?status=BOUNCED"); strings.Contains(body, id) {
		t.Error("the BOUNCED filter lists a delivered email")
	}
	resp, err = c.Get(srv.URL + "/console/emails/" + id)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "img-src 'self' data:") {
		t.Errorf("policy %q", csp)
	}
	frame := regexp.MustCompile(`<iframe id="html"[^>]*sandbox=""[^>]*srcdoc="([^"]*)"`).FindStringSubmatch(page)
	if frame == nil || !strings.Contains(frame[1], "&lt;b&gt;console&lt;/b&gt;") {
		t.Fatalf("no sandboxed frame with the message:\n%s", page)
	}
	// The attachment is named as the message names it (the MIME library replaces "<", ">" and "?").
	for _, want := range []string{"Hello console", ">QUEUED<", ">SENT<", ">DELIVERED<", "Download the .eml", "X-Usesend-Email-ID", "<li>report _v2__.pdf</li>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the email's page lacks %q", want)
		}
	}
	if code, raw := get(t, c, srv.URL+"/console/emails/"+id+"/raw"); code != 200 || !strings.Contains(raw, "Subject: Console test") || !strings.Contains(raw, `filename="report _v2__.pdf"`) {
		t.Errorf("raw = %d %.80s", code, raw)
	}
	if code, body := get(t, c, srv.URL+"/console/emails/"+id+"?fragment=timeline"); code != 200 || strings.Contains(body, "<html") || !strings.Contains(body, "DELIVERED") {
		t.Errorf("timeline fragment = %d", code)
	}
	// Without a session a fragment is a 401 for the page's script, not the sign-in page it
	// would draw inside the one it has.
	for _, frag := range []string{"/console/emails/" + id + "?fragment=timeline", "/console/emails?fragment=rows"} {
		if code, body := get(t, &http.Client{}, srv.URL+frag); code != 401 || strings.Contains(body, "<html") {
			t.Errorf("%s without a session = %d %.80s", frag, code, body)
		}
	}

	// The page fires SES events through SES's handling: a permanent bounce is in the history
	// and suppresses the address.
	token := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if token == nil || !strings.Contains(page, `id="sim-bounce"`) {
		t.Fatal("no CSRF token or no event buttons on the page")
	}
	if code, body := postForm(t, c, srv.URL+"/console/emails/"+id+"/simulate", url.Values{"csrf": {"forged"}, "event": {"open"}}, srv.URL); code != 403 ||
		!strings.Contains(body, "This form is out of date: reload the page and try again") {
		t.Errorf("an event without the token = %d", code)
	}
	if code, body := postForm(t, c, srv.URL+"/console/emails/"+id+"/simulate", url.Values{"csrf": {token[1]}, "event": {"bounce"}, "subtype": {"boing"}}, srv.URL); code != 400 || !strings.Contains(body, "subtype") {
		t.Errorf("an unknown bounce = %d %s", code, body)
	}
	code, body = postForm(t, c, srv.URL+"/console/emails/"+id+"/simulate", url.Values{"csrf": {token[1]}, "event": {"bounce"}, "subtype": {"permanent-general"}}, srv.URL)
	if code != 200 || !strings.Contains(body, ">BOUNCED<") {
		t.Fatalf("a simulated bounce = %d:\n%s", code, body)
	}
	// The page it returns to says what was fired; a ?fired= naming anything else says nothing.
	if !strings.Contains(body, `<p role="status" id="fired">Bounce event fired`) {
		t.Errorf("the page after a simulated bounce does not say it was fired")
	}
	if _, page := get(t, c, srv.URL+"/console/emails/"+id+"?fired=Hacked"); strings.Contains(page, `id="fired"`) {
		t.Errorf("?fired= with a type no button fires is shown")
	}
	var sup struct {
		Data []struct{ Email, Reason string }
	}
	e.mustDo("GET", "/api/v1/suppressions", "", &sup)
	if len(sup.Data) != 1 || sup.Data[0].Email != "reader@example.org" {
		t.Errorf("suppressions after a simulated hard bounce: %+v", sup)
	}
	sending := consoleClient(t)
	postForm(t, sending, srv.URL+"/console/session", url.Values{"key": {e.keyFor(store.PermissionSending, 0)}}, srv.URL)
	if _, body := get(t, sending, srv.URL+"/console/emails/"+id); strings.Contains(body, `id="sim-bounce"`) {
		t.Error("a SENDING key is offered the event buttons")
	}

	// Domains with their records; campaigns with their counters.
	if code, body := get(t, c, srv.URL+"/console/domains"); code != 200 || !strings.Contains(body, "example.com") || !strings.Contains(body, "_domainkey") {
		t.Errorf("domains = %d:\n%.400s", code, body)
	} else if !strings.Contains(body, `data-copy="v=spf1 include:amazonses.com ~all"`) || strings.Count(body, `class="copy"`) < 8 {
		t.Errorf("domains: no copy button for each record's name and value:\n%.2000s", body)
	}
	bookID := e.book(`{"email":"ann@example.org","firstName":"Ann"}`)
	var cp campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"Console launch","from":"news@example.com","subject":"Hi","contactBookId":"`+bookID+
		`","html":`+jsonString(campaignHTML)+`,"sendNow":true}`, &cp)
	e.awaitCampaign(cp.ID, func(c campaignOut) bool { return c.Status == "SENT" && c.Delivered == 1 })
	code, body = get(t, c, srv.URL+"/console/campaigns?fragment=rows")
	row := regexp.MustCompile(`data-campaign="` + cp.ID + `">.*?Console launch.*?SENT</span></td>\s*<td data-label="Total">1</td><td data-label="Sent">1</td><td data-label="Delivered">1</td>`).FindString(strings.ReplaceAll(body, "\n", " "))
	if code != 200 || row == "" {
		t.Errorf("campaigns = %d, want the campaign SENT with total, sent and delivered 1:\n%s", code, body)
	}

	// The suppression list has the bounced address; a webhook's calls are listed and replayed.
	if code, body := get(t, c, srv.URL+"/console/suppressions"); code != 200 || !strings.Contains(body, "reader@example.org") {
		t.Errorf("suppressions = %d", code)
	}
	rcv := &hookReceiver{status: 200}
	hooksrv := httptest.NewServer(http.HandlerFunc(rcv.serve))
	defer hooksrv.Close()
	var hook struct{ ID string }
	e.mustDo("POST", "/api/v1/webhooks", `{"url":"`+hooksrv.URL+`"}`, &hook)
	var test struct{ ID string }
	e.mustDo("POST", "/api/v1/webhooks/"+hook.ID+"/test", "", &test)
	code, body = get(t, c, srv.URL+"/console/webhooks")
	if code != 200 || !strings.Contains(body, `data-call="`+test.ID+`"`) || !strings.Contains(body, "webhook.test") {
		t.Fatalf("webhooks = %d:\n%s", code, body)
	}
	// (Other events may reach the new webhook meanwhile: count the test calls.)
	tests := func() int {
		types, _ := rcv.received()
		return count(types, "webhook.test")
	}
	before := tests()
	// The page a replay returns to marks the new call (not the one replayed).
	if code, page := postForm(t, c, srv.URL+"/console/webhooks/"+hook.ID+"/calls/"+test.ID+"/replay", url.Values{"csrf": {token[1]}}, srv.URL); code != 200 {
		t.Errorf("replay = %d", code)
	} else if m := regexp.MustCompile(`<li data-call="([^"]+)" id="call-[^"]+" class="replayed"><p role="status" id="replayed">`).FindStringSubmatch(page); m == nil || m[1] == test.ID {
		t.Errorf("the page after a replay does not mark its new call (%v):\n%s", m, page)
	}
	if after := tests(); after != before+1 {
		t.Errorf("the replay made %d test calls, want 1", after-before)
	}
	if code, _ := get(t, sending, srv.URL+"/console/webhooks"); code != 403 {
		t.Errorf("a SENDING key on the webhooks page = %d", code)
	}

	// Analytics drawn on the page; templates with a preview; contact books and their contacts.
	code, body = get(t, c, srv.URL+"/console/analytics?days=7")
	if code != 200 || !strings.Contains(body, `<svg id="series"`) || strings.Count(body, "<polyline") != 6 || !strings.Contains(body, "delivered 2") ||
		!strings.Contains(body, `<svg id="reputation-chart"`) {
		t.Errorf("analytics = %d:\n%s", code, body)
	}
	// The bars: the bounce rate on 0–10%, the complaint rate on 0–1% (SES's limits are 0.1%
	// and 0.5% there), each as the API reports it.
	var rep struct{ BounceRate, ComplaintRate float64 }
	e.mustDo("GET", "/api/v1/analytics/reputation-metrics", "", &rep)
	for _, b := range []struct {
		y    string
		rate float64
		full float64
	}{{"30", rep.BounceRate, 10}, {"100", rep.ComplaintRate, 1}} {
		want := fmt.Sprintf(`<rect x="0" y="%s" width="%d" height="18"`, b.y, int(min(b.rate, b.full)*720/b.full))
		if strings.Count(body, `<rect x="0" y="`+b.y+`"`) != 2 || !strings.Contains(body, want) {
			t.Errorf("the reputation bar at y=%s for %.2f%% is not %s", b.y, b.rate, want)
		}
	}
	e.mustDo("POST", "/api/v1/templates", `{"name":"Welcome","subject":"Hi","html":"<p>Welcome aboard</p>"}`, nil)
	if code, body := get(t, c, srv.URL+"/console/templates"); code != 200 || !strings.Contains(body, `sandbox=""`) || !strings.Contains(body, "&lt;p&gt;Welcome aboard") {
		t.Errorf("templates = %d:\n%s", code, body)
	}
	code, body = get(t, c, srv.URL+"/console/books")
	if code != 200 || !strings.Contains(body, "/console/books/"+bookID) {
		t.Fatalf("books = %d:\n%s", code, body)
	}
	if code, body := get(t, c, srv.URL+"/console/books/"+bookID); code != 200 || !strings.Contains(body, "ann@example.org") {
		t.Errorf("book = %d:\n%s", code, body)
	}

	// Keys: made on the keys page (shown once) work in the API at once; revoked there, they
	// stop at once, each logged by its id (never the key). A SENDING key may not see the page.
	var logs syncBuffer
	e.app.Services.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	if code, body := postForm(t, c, srv.URL+"/console/keys", url.Values{"csrf": {token[1]}, "name": {"ci"}, "permission": {"SENDING"}}, srv.URL); code != 200 {
		t.Fatalf("create a key = %d %s", code, body)
	} else if m := regexp.MustCompile(`<pre id="created-key">(us_([0-9a-z]{10})_[0-9a-f]{32})</pre>`).FindStringSubmatch(body); m == nil {
		t.Fatalf("the new key is not shown:\n%s", body)
	} else {
		if r := e.request(m[1], "GET", "/api/v1/emails", nil); r.status != 200 {
			t.Errorf("the console's new key: %d", r.status)
		}
		// The list is newest first: the new key is its first row.
		_, keys := get(t, c, srv.URL+"/console/keys")
		if ids := regexp.MustCompile(`<td data-label="Id"><code>([0-9a-z]{10})</code>`).FindAllStringSubmatch(keys, -1); len(ids) < 2 || ids[0][1] != m[2] {
			t.Errorf("the keys page's first row is %v, want the new key %s first", ids, m[2])
		}
		// The page a revoke returns to says so; one naming a key still there says nothing.
		if _, page := get(t, c, srv.URL+"/console/keys?revoked="+m[2]); strings.Contains(page, `id="revoked"`) {
			t.Errorf("the keys page says a key it lists was revoked")
		}
		if code, page := postForm(t, c, srv.URL+"/console/keys/"+m[2]+"/revoke", url.Values{"csrf": {token[1]}}, srv.URL); code != 200 {
			t.Errorf("revoke = %d", code)
		} else if !strings.Contains(page, `<p role="status" id="revoked">Key <code>`+m[2]+`</code> revoked`) || strings.Contains(page, `data-key="`+m[2]+`"`) {
			t.Errorf("the page after a revoke does not say so, or still lists the key:\n%s", page)
		}
		// A link made elsewhere (without the session's tag) does not say so, the key gone or not.
		for _, id := range []string{m[2], "abcdefghij"} {
			if _, page := get(t, c, srv.URL+"/console/keys?revoked="+id+"&t=00"); strings.Contains(page, `id="revoked"`) {
				t.Errorf("the keys page says key %s was revoked on a link without its tag", id)
			}
		}
		if r := e.request(m[1], "GET", "/api/v1/emails", nil); r.status != 403 {
			t.Errorf("a key revoked in the console: %d, want 403 at once", r.status)
		}
		out := logs.String()
		if !strings.Contains(out, `"msg":"console: API key created"`) || !strings.Contains(out, `"msg":"console: API key revoked"`) ||
			!strings.Contains(out, `"keyId":"`+m[2]+`"`) || strings.Contains(out, m[1]) || strings.Contains(out, m[1][len(m[1])-32:]) {
			t.Errorf("the key's log lines (its id, never the key or its secret):\n%s", out)
		}
	}
	// A refused key is said on the keys page, next to its form, naming what was wrong.
	for form, want := range map[string]url.Values{
		"The key was not created: permission: FULL or SENDING":  {"csrf": {token[1]}, "permission": {"ROOT"}},
		"The key was not created: name: at most 100 characters": {"csrf": {token[1]}, "permission": {"FULL"}, "name": {strings.Repeat("n", 101)}},
	} {
		if code, page := postForm(t, c, srv.URL+"/console/keys", want, srv.URL); code != 400 || !strings.Contains(page, form) || !strings.Contains(page, `action="/console/keys"`) {
			t.Errorf("a refused key = %d, want 400 and the keys page saying %q:\n%.2000s", code, form, page)
		}
	}
	if code, _ := get(t, sending, srv.URL+"/console/keys"); code != 403 {
		t.Errorf("a SENDING key on the keys page = %d", code)
	}

	// Sign-out needs the page's token.
	if code, _ := postForm(t, c, srv.URL+"/console/signout", url.Values{"csrf": {"forged"}}, srv.URL); code != 403 {
		t.Errorf("sign-out without the token = %d", code)
	}
	if code, body := postForm(t, c, srv.URL+"/console/signout", url.Values{"csrf": {token[1]}}, srv.URL); code != 200 || !strings.Contains(body, "Sign in") {
		t.Errorf("sign-out = %d", code)
	}
	if code, _ := get(t, c, srv.URL+"/console/emails/"+id); code != 401 {
		t.Errorf("the email after signing out = %d", code)
	}

	// A key restricted to another domain sees none of it.
	var d map[string]any
	e.mustDo("POST", "/api/v1/domains", `{"name":"other.example"}`, &d)
	other := consoleClient(t)
	postForm(t, other, srv.URL+"/console/session", url.Values{"key": {e.keyFor(store.PermissionFull, int64(d["id"].(float64)))}}, srv.URL)
	if _, body := get(t, other, srv.URL+"/console/"); strings.Contains(body, id) || !strings.Contains(body, "No email matches") {
		t.Error("a key of another domain lists the email")
	}
	if code, _ := get(t, other, srv.URL+"/console/emails/"+id); code != 404 {
		t.Errorf("a key of another domain opens the email: %d", code)
	}
}

func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

// signedIn returns a console browser signed in with key.
func signedIn(t *testing.T, srv *httptest.Server, key string) *http.Client {
	t.Helper()
	c := consoleClient(t)
	if code, body := postForm(t, c, srv.URL+"/console/session", url.Values{"key": {key}}, srv.URL); code != 200 {
		t.Fatalf("sign in = %d:\n%.300s", code, body)
	}
	return c
}

// TestConsoleShowsAKeyWhatTheAPIShowsIt: each console page answers a key as the API route it
// mirrors does. A SENDING key sees its emails and nothing else, not even a campaign email's
// unsubscribe link in the headers; a key of one domain fires no event that suppresses an
// address for the whole team; a live stream ends with its session.
func TestConsoleShowsAKeyWhatTheAPIShowsIt(t *testing.T) {
	e := newEnv(t)
	srv := consoleServer(t, e)

	bookID := e.book(`{"email":"ann@example.org","firstName":"Ann"}`)
	var cp campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"Launch","from":"news@example.com","subject":"Hi","contactBookId":"`+bookID+
		`","html":`+jsonString(campaignHTML)+`,"sendNow":true}`, &cp)
	e.awaitCampaign(cp.ID, func(c campaignOut) bool { return c.Status == "SENT" && c.Delivered == 1 })

	sendingKey := e.keyFor(store.PermissionSending, 0)
	sending := signedIn(t, srv, sendingKey)
	pages := map[string]string{ // console page -> the API route it shows
		"/console/campaigns": "/api/v1/campaigns", "/console/books": "/api/v1/contactBooks",
		"/console/books/" + bookID: "/api/v1/contactBooks/" + bookID + "/contacts", "/console/domains": "/api/v1/domains",
		"/console/templates": "/api/v1/templates", "/console/analytics": "/api/v1/analytics/email-time-series",
		"/console/suppressions": "/api/v1/suppressions", "/console/webhooks": "/api/v1/webhooks",
	}
	for page, route := range pages {
		apiStatus := e.request(sendingKey, "GET", route, nil).status
		if code, body := get(t, sending, srv.URL+page); code != apiStatus || code != 403 || strings.Contains(body, "Launch") || strings.Contains(body, "ann@example.org") {
			t.Errorf("a SENDING key on %s = %d, the API on %s = %d:\n%.300s", page, code, route, apiStatus, body)
		}
	}
	code, list := get(t, sending, srv.URL+"/console/")
	if code != 200 {
		t.Fatalf("a SENDING key's emails = %d", code)
	}
	for _, link := range []string{`href="/console/campaigns"`, `href="/console/books"`, `href="/console/domains"`, `href="/console/templates"`, `href="/console/analytics"`} {
		if strings.Contains(list, link) {
			t.Errorf("a SENDING key's menu has %s", link)
		}
	}
	m := regexp.MustCompile(`/console/emails/([0-9a-z]+)"`).FindStringSubmatch(list)
	if m == nil {
		t.Fatalf("the campaign email is not listed:\n%s", list)
	}
	// Its domain filter offers the domains of the emails it sees (it may not list domains),
	// every one of them, whatever the page shows: filtered to one, the others stay offered.
	if !regexp.MustCompile(`<option value="\d+" *>example\.com</option>`).MatchString(list) {
		t.Errorf("a SENDING key's domain filter does not offer its emails' domain:\n%s", list)
	}
	var other struct{ ID int64 }
	e.mustDo("POST", "/api/v1/domains", `{"name":"other.example","region":"us-east-1"}`, &other)
	e.await(e.send(`{"from":"hi@other.example","to":"x@example.org","subject":"s","text":"t"}`), "DELIVERED")
	e.mustDo("POST", "/api/v1/domains", `{"name":"unused.example","region":"us-east-1"}`, nil)
	_, filtered := get(t, sending, srv.URL+"/console/?domain="+strconv.FormatInt(e.domain, 10))
	for name, want := range map[string]bool{"example.com": true, "other.example": true, "unused.example": false} {
		if got := regexp.MustCompile(`<option value="\d+"[^>]*>` + regexp.QuoteMeta(name) + `</option>`).MatchString(filtered); got != want {
			t.Errorf("filtered to example.com, a SENDING key's domain filter offers %s: %v, want %v", name, got, want)
		}
	}
	code, page := get(t, sending, srv.URL+"/console/emails/"+m[1])
	if code != 200 || !strings.Contains(page, "List-Unsubscribe: ") {
		t.Fatalf("the campaign email's page = %d, with its headers:\n%s", code, page)
	}
	// The download it may not have (the raw message carries the link) is not offered.
	if strings.Contains(page, "Download the .eml") {
		t.Error("a SENDING key is offered a campaign email's .eml, which it may not read")
	}
	if tok := regexp.MustCompile(`/unsubscribe/([A-Za-z0-9_\-.~%]+)`).FindAllStringSubmatch(page, -1); len(tok) == 0 {
		t.Error("the page shows no (redacted) unsubscribe link")
	} else {
		for _, x := range tok {
			if x[1] != "redacted" {
				t.Errorf("a SENDING key sees an unsubscribe token: %s", x[0])
			}
		}
	}
	full := signedIn(t, srv, e.key)
	_, fullPage := get(t, full, srv.URL+"/console/emails/"+m[1])
	link := regexp.MustCompile(`List-Unsubscribe: &lt;(\S*/unsubscribe/([A-Za-z0-9_\-.~%]{20,}))&gt;`).FindStringSubmatch(fullPage)
	if link == nil {
		t.Fatal("a FULL key does not see the campaign email's List-Unsubscribe header")
	}
	// With click tracking, SES reports a click on the link with the link: the event's data
	// is redacted too, in the API and on the page.
	fullToken := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(fullPage)
	if code, _ := postForm(t, full, srv.URL+"/console/emails/"+m[1]+"/simulate", url.Values{"csrf": {fullToken[1]}, "event": {"click"}, "url": {link[1]}}, srv.URL); code != 200 {
		t.Fatalf("a simulated click = %d", code)
	}
	if r := e.request(e.key, "GET", "/api/v1/emails/"+m[1], nil); !strings.Contains(string(r.body), link[2]) {
		t.Fatalf("the click is not recorded with its link: %s", r.body)
	}
	if r := e.request(sendingKey, "GET", "/api/v1/emails/"+m[1], nil); r.status != 200 || strings.Contains(string(r.body), link[2]) || !strings.Contains(string(r.body), "/unsubscribe/redacted") {
		t.Errorf("a SENDING key reads the click's link: %d %s", r.status, r.body)
	}
	if _, page := get(t, sending, srv.URL+"/console/emails/"+m[1]); strings.Contains(page, link[2]) {
		t.Error("a SENDING key's console page shows the click's link")
	}

	// A FULL key of one domain: the API refuses it a suppression, so the console refuses it a
	// bounce, which would suppress the address for the whole team.
	var d struct{ ID int64 }
	e.mustDo("GET", "/api/v1/domains/1", "", &d)
	one := signedIn(t, srv, e.keyFor(store.PermissionFull, d.ID))
	_, page = get(t, one, srv.URL+"/console/emails/"+m[1])
	token := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if token == nil || strings.Contains(page, `id="sim-bounce"`) {
		t.Fatalf("a key of one domain: token %v, or offered the event buttons", token)
	}
	if code, _ := postForm(t, one, srv.URL+"/console/emails/"+m[1]+"/simulate", url.Values{"csrf": {token[1]}, "event": {"bounce"}, "subtype": {"permanent-general"}}, srv.URL); code != 403 {
		t.Errorf("a key of one domain fires a bounce: %d", code)
	}
	var sup struct{ Data []any }
	if e.mustDo("GET", "/api/v1/suppressions", "", &sup); len(sup.Data) != 0 {
		t.Errorf("suppressions: %v", sup.Data)
	}

	// A live stream ends when its session does.
	resp, err := one.Get(srv.URL + "/console/events")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("events: %v %v", resp, err)
	}
	ended := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, resp.Body)
		close(ended)
	}()
	if code, _ := postForm(t, one, srv.URL+"/console/signout", url.Values{"csrf": {token[1]}}, srv.URL); code != 200 {
		t.Fatalf("sign out = %d", code)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Error("the live stream outlived its session")
	}
	resp.Body.Close()
	// Sign out again from a tab still open on a page: signed out, no error to act on.
	if code, body := postForm(t, one, srv.URL+"/console/signout", url.Values{"csrf": {token[1]}}, srv.URL); code != 200 ||
		!strings.Contains(body, "Sign in") || strings.Contains(body, "session ended") {
		t.Errorf("a second sign-out = %d: %.200s", code, body)
	}
}

// TestConsoleHardening: framing refused by both headers, only the style and script served from
// static (no listing, no template), a form from an opaque origin refused, a form's body bounded
// and URL-encoded, a key name bounded.
func TestConsoleHardening(t *testing.T) {
	e := newEnv(t)
	srv := consoleServer(t, e, func(c *api.Console) { c.MaxSessions = 3 })
	c := consoleClient(t)
	resp, err := c.Get(srv.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := resp.Header; h.Get("X-Frame-Options") != "DENY" || !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") || h.Get("Referrer-Policy") != "same-origin" {
		t.Errorf("headers %v", h)
	}
	for path, want := range map[string]int{"/console/static/": 404, "/console/static/layout.html": 404, "/console/static/console.css": 200, "/console/static/console.js": 200, "/console/static/icon.svg": 200} {
		if code, _ := get(t, c, srv.URL+path); code != want {
			t.Errorf("GET %s = %d, want %d", path, code, want)
		}
	}
	if code, _ := postForm(t, c, srv.URL+"/console/session", url.Values{"key": {e.key}}, "null"); code != 403 {
		t.Errorf("a sign-in from an opaque origin = %d", code)
	}
	// Sec-Fetch-Site, which no page can set, decides where a browser sends it: behind a proxy
	// that rewrites Host, a same-origin form still signs in; another port of the host does not.
	for _, c := range []struct {
		origin, site string
		want         int
	}{
		{"https://mailroom-3000.ide.example", "same-origin", 200},
		{srv.URL, "same-site", 403},
		{srv.URL, "cross-site", 403},
		{"https://mailroom-3000.ide.example", "", 403},
	} {
		req, _ := http.NewRequest("POST", srv.URL+"/console/session", strings.NewReader(url.Values{"key": {e.key}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", c.origin)
		if c.site != "" {
			req.Header.Set("Sec-Fetch-Site", c.site)
		}
		resp, err := consoleClient(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("a sign-in from %s, Sec-Fetch-Site %q = %d, want %d", c.origin, c.site, resp.StatusCode, c.want)
		}
	}
	// Forms are small and URL-encoded: a multipart one (whose parts the form reader would
	// spool to disk) is refused before it is read, a long one does not sign in.
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	_ = mw.WriteField("key", e.key)
	part, _ := mw.CreateFormFile("pad", "pad.bin")
	_, _ = part.Write(bytes.Repeat([]byte("x"), 100<<10))
	_ = mw.Close()
	for _, f := range []struct {
		ctype, body string
		want        int
	}{
		{mw.FormDataContentType(), mp.String(), 415},
		{"application/x-www-form-urlencoded", url.Values{"key": {e.key}, "pad": {strings.Repeat("x", 100<<10)}}.Encode(), 401},
		{"application/x-www-form-urlencoded", url.Values{"key": {e.key}}.Encode(), 200},
	} {
		req, _ := http.NewRequest("POST", srv.URL+"/console/session", strings.NewReader(f.body))
		req.Header.Set("Content-Type", f.ctype)
		req.Header.Set("Origin", srv.URL)
		resp, err := consoleClient(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != f.want {
			t.Errorf("a sign-in of %d bytes as %.33s = %d, want %d", len(f.body), f.ctype, resp.StatusCode, f.want)
		}
	}
	full := signedIn(t, srv, e.key)
	_, page := get(t, full, srv.URL+"/console/keys")
	token := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if token == nil {
		t.Fatal("no token on the keys page")
	}
	// Past MaxSessions, a sign-in ends the oldest session, and only it.
	first := signedIn(t, srv, e.key)
	time.Sleep(2 * time.Millisecond) // expiries apart
	second := signedIn(t, srv, e.key)
	time.Sleep(2 * time.Millisecond)
	signedIn(t, srv, e.key) // the fourth: full's was the oldest
	if code, _ := get(t, full, srv.URL+"/console/keys"); code != 401 {
		t.Errorf("the oldest session after a sign-in past the cap = %d", code)
	}
	for _, c := range []*http.Client{first, second} {
		if code, _ := get(t, c, srv.URL+"/console/keys"); code != 200 {
			t.Errorf("a newer session after a sign-in past the cap = %d", code)
		}
	}
	full = first
	_, page = get(t, full, srv.URL+"/console/keys")
	token = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	long := strings.Repeat("é", team.MaxKeyName+1)
	if code, body := postForm(t, full, srv.URL+"/console/keys", url.Values{"csrf": {token[1]}, "name": {long}, "permission": {"FULL"}}, srv.URL); code != 400 || !strings.Contains(body, "name: at most 100 characters") {
		t.Errorf("a key name of %d characters = %d %s", team.MaxKeyName+1, code, body)
	}
	if code, _ := postForm(t, full, srv.URL+"/console/keys", url.Values{"csrf": {token[1]}, "name": {strings.Repeat("é", team.MaxKeyName)}, "permission": {"FULL"}}, srv.URL); code != 200 {
		t.Errorf("a key name of %d characters = %d", team.MaxKeyName, code)
	}
}

// A page asked for without a session shows the sign-in form, which comes back to it; a search
// says when it looked through the newest emails only; campaigns have pages; a bad date or a
// bad domain in a form is said, not ignored.
func TestConsoleSignInComesBackAndPages(t *testing.T) {
	e := newEnv(t)
	srv := consoleServer(t, e, func(c *api.Console) { c.Scan = 100 })
	c := consoleClient(t)

	code, body := get(t, c, srv.URL+"/console/domains")
	if code != 401 || !strings.Contains(body, `action="/console/session"`) || !strings.Contains(body, `name="next" value="/console/domains"`) {
		t.Fatalf("a page without a session = %d:\n%s", code, body)
	}
	if code, body := postForm(t, c, srv.URL+"/console/session", url.Values{"key": {e.key}, "next": {"/console/domains"}}, srv.URL); code != 200 || !strings.Contains(body, "<h1>Domains</h1>") {
		t.Fatalf("signing in from /console/domains = %d, want that page:\n%.300s", code, body)
	}
	if _, body := get(t, consoleClient(t), srv.URL+"/console/emails?q=x&status=SENT"); !strings.Contains(body, `name="next" value="/console/emails?q=x&amp;status=SENT"`) {
		t.Errorf("the sign-in form of a bookmarked search does not come back to it:\n%s", body)
	}
	for _, next := range []string{"https://evil.example/console/", "//evil.example/console/", "/console/events", "/elsewhere", "/console/\\evil"} {
		if code, body := postForm(t, c, srv.URL+"/console/session", url.Values{"key": {e.key}, "next": {next}}, srv.URL); code != 200 || !strings.Contains(body, "<h1>Emails</h1>") {
			t.Errorf("signing in with next=%q = %d, want the console's home", next, code)
		}
	}

	// 120 emails, the oldest one with a subject of its own: a search of the newest 100 does not
	// find it, and says so.
	e.send(`{"from":"a@example.com","to":"old@example.org","subject":"The oldest one","text":"x"}`)
	for range 6 {
		batch := make([]string, 20)
		for i := range batch {
			batch[i] = `{"from":"a@example.com","to":"r@example.org","subject":"Newer","text":"x"}`
		}
		e.mustDo("POST", "/api/v1/emails/batch", "["+strings.Join(batch, ",")+"]", nil)
	}
	_, body = get(t, c, srv.URL+"/console/emails?q=oldest")
	if !strings.Contains(body, "No email matches") || !strings.Contains(body, "looks through the newest 100 emails") {
		t.Errorf("a search past the newest 100 does not say it looked through those only:\n%s", body)
	}
	_, body = get(t, c, srv.URL+"/console/emails?q=newer")
	if !strings.Contains(body, "looks through the newest 100 emails") || !strings.Contains(body, "50 of 100") {
		t.Errorf("a search that matches the newest 100:\n%s", body)
	}
	if _, body = get(t, c, srv.URL+"/console/emails"); strings.Contains(body, "looks through the newest") {
		t.Error("the unfiltered list says it is limited")
	}
	_, body = get(t, c, srv.URL+"/console/emails?from=garbage&to=2026-01-01")
	if !strings.Contains(body, "From: not a date") {
		t.Errorf("a date that is not one is not said:\n%s", body)
	}
	_, body = get(t, c, srv.URL+"/console/emails?page=99")
	if !strings.Contains(body, `href="/console/emails?page=3" rel="prev"`) {
		t.Errorf("past the last page, the link back is not to the last page:\n%s", body)
	}

	// 31 campaigns: two pages, the oldest on the second.
	book := e.book()
	for i := range 31 {
		e.mustDo("POST", "/api/v1/campaigns", fmt.Sprintf(`{"name":"Campaign %02d","from":"news@example.com","subject":"News","contactBookId":%q,"html":"<p>Hi</p><a href=\"{{usesend_unsubscribe_url}}\">Unsubscribe</a>"}`, i, book), nil)
		time.Sleep(time.Millisecond) // one creation time each: the list is newest first
	}
	_, first := get(t, c, srv.URL+"/console/campaigns")
	_, second := get(t, c, srv.URL+"/console/campaigns?page=2")
	if !strings.Contains(first, "Campaign 30") || strings.Contains(first, "Campaign 00") || !strings.Contains(first, `href="/console/campaigns?page=2" rel="next"`) {
		t.Errorf("the first page of campaigns:\n%s", first)
	}
	if !strings.Contains(second, "Campaign 00") || !strings.Contains(second, "page 2 of 2") || !strings.Contains(second, `data-live="/console/events?campaigns=2`) {
		t.Errorf("the second page of campaigns:\n%s", second)
	}
	if _, past := get(t, c, srv.URL+"/console/campaigns?page=9999"); !strings.Contains(past, "page 2 of 2") {
		t.Errorf("a page past the last is not the last one:\n%s", past)
	}

	// A domain that is not a number is refused, not read as "every domain".
	form := url.Values{"name": {"x"}, "permission": {"FULL"}, "domain": {"abc"}, "csrf": {csrfOf(t, c, srv.URL+"/console/keys")}}
	if code, body := postForm(t, c, srv.URL+"/console/keys", form, srv.URL); code != 400 || !strings.Contains(body, "its domain is not one of the team") || !strings.Contains(body, "<h1>API keys</h1>") {
		t.Errorf("a key for domain \"abc\" = %d: %s", code, body)
	}
	// A key of one domain shows the domain's name; the answer to the form marks itself so
	// that the page's script gives it the page's address (a reload does not post again).
	form.Set("domain", fmt.Sprint(e.domain))
	code, body = postForm(t, c, srv.URL+"/console/keys", form, srv.URL)
	if code != 200 || !strings.Contains(body, "data-posted") || !regexp.MustCompile(`<td data-label="Permission">FULL</td><td data-label="Domain">example\.com</td>`).MatchString(body) {
		t.Errorf("a key of example.com = %d:\n%s", code, body)
	}
}

// csrfOf is the CSRF token of the forms of the page at u.
func csrfOf(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	_, page := get(t, c, u)
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on %s", u)
	}
	return m[1]
}

// TestConsoleAsAPersonUsesIt: what a person meets that a script does not. An error is a page
// of the console; a wrong key keeps the page signing in was for; a filtered list is redrawn
// when an email comes into its filter, however old; an email's status at the top of its page
// changes live with its timeline; a book's contacts are paged; the message's remote content
// can be shown on request; the keys page marks this session's key and asks before a revoke.
func TestConsoleAsAPersonUsesIt(t *testing.T) {
	e := newEnv(t)
	srv := consoleServer(t, e)
	c := signedIn(t, srv, e.key)

	code, body := get(t, c, srv.URL+"/console/emails/emnope")
	if code != 404 || !strings.Contains(body, "<h1>That did not work</h1>") || !strings.Contains(body, `aria-label="Main"`) {
		t.Errorf("an unknown email = %d, want the console's error page with its menu:\n%.400s", code, body)
	}
	for _, path := range []string{"/console/nope", "/console/emails/x/simulate"} { // no page; a page that takes POST only
		if code, body := get(t, c, srv.URL+path); code != 404 || !strings.Contains(body, "<h1>That did not work</h1>") {
			t.Errorf("GET %s = %d, want the console's error page:\n%.300s", path, code, body)
		}
	}
	code, body = postForm(t, consoleClient(t), srv.URL+"/console/session", url.Values{"key": {"us_wrong"}, "next": {"/console/domains"}}, srv.URL)
	if code != 401 || !strings.Contains(body, `name="next" value="/console/domains"`) {
		t.Errorf("a wrong key = %d, the form again without where it was going:\n%s", code, body)
	}

	// A filtered list's live view watches that list: a bounce of the oldest of 51 emails
	// (not among the newest 50) redraws the page of bounced emails.
	first := e.send(`{"from":"a@example.com","to":"first@example.org","subject":"First","text":"x"}`)
	batch := make([]string, 50)
	for i := range batch {
		batch[i] = `{"from":"a@example.com","to":"r@example.org","subject":"Later","text":"x"}`
	}
	e.mustDo("POST", "/api/v1/emails/batch", "["+strings.Join(batch, ",")+"]", nil)
	e.await(first, "DELIVERED")
	code, body = get(t, c, srv.URL+"/console/emails?status=BOUNCED")
	live := regexp.MustCompile(`data-live="([^"]+)"`).FindStringSubmatch(body)
	if code != 200 || live == nil || !strings.Contains(live[1], "status=BOUNCED") {
		t.Fatalf("the bounced emails' page = %d, live view %v", code, live)
	}
	resp, err := c.Get(srv.URL + strings.ReplaceAll(live[1], "&amp;", "&"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("its stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	changed := changes(resp.Body)
	select {
	case <-changed:
		t.Fatal("the stream said changed before anything changed")
	case <-time.After(200 * time.Millisecond):
	}
	_, page := get(t, c, srv.URL+"/console/emails/"+first)
	token := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)[1]
	if code, _ := postForm(t, c, srv.URL+"/console/emails/"+first+"/simulate", url.Values{"csrf": {token}, "event": {"bounce"}, "subtype": {"transient-general"}}, srv.URL); code != 200 {
		t.Fatalf("a simulated bounce = %d", code)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Error("the bounced emails' live view did not say changed when the oldest email bounced")
	}
	// The live fragment of an email's page carries its status as well as its timeline; a
	// transient bounce is reported with a 4.x.x status, as a receiving server gives it.
	_, frag := get(t, c, srv.URL+"/console/emails/"+first+"?fragment=timeline")
	if !strings.Contains(frag, `data-part="summary"`) || !regexp.MustCompile(`id="status">BOUNCED<`).MatchString(frag) || !strings.Contains(frag, `data-part="timeline"`) {
		t.Errorf("the email's live fragment lacks its status or its timeline:\n%s", frag)
	}
	if !strings.Contains(frag, `&#34;status&#34;: &#34;4.4.7&#34;`) {
		t.Errorf("a transient bounce's recipient status is not 4.x.x:\n%s", frag)
	}

	// Remote content: blocked by the page's policy unless asked for (scripts never).
	resp2, err := c.Get(srv.URL + "/console/emails/" + first)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	resp3, err := c.Get(srv.URL + "/console/emails/" + first + "?remote=1")
	if err != nil {
		t.Fatal(err)
	}
	resp3.Body.Close()
	if strict, open := resp2.Header.Get("Content-Security-Policy"), resp3.Header.Get("Content-Security-Policy"); strings.Contains(strict, "https:") ||
		!strings.Contains(open, "img-src 'self' data: http: https:") || !strings.Contains(open, "script-src 'self';") {
		t.Errorf("policies: by default %q; with remote content %q", strict, open)
	}
	// Resource hints and frames reach a host though the policy blocks what they load (a DNS
	// lookup, a connection: the sender learns the message was opened): the blocked preview
	// has none of them; shown with its remote content, the message is as written.
	leaky := e.send(`{"from":"a@example.com","to":"leak@example.org","subject":"Hints","html":` + jsonString(
		`<head><link rel="preconnect" href="https://hint1.example"><LINK rel=dns-prefetch href=//hint2.example></head>`+
			`<body><p>kept words</p><iframe src="https://hint3.example/x"></iframe><object data="https://hint4.example/o"></object></body>`) + `}`)
	_, blocked := get(t, c, srv.URL+"/console/emails/"+leaky)
	_, shown := get(t, c, srv.URL+"/console/emails/"+leaky+"?remote=1")
	for _, host := range []string{"hint1.example", "hint2.example", "hint3.example", "hint4.example"} {
		if strings.Contains(blocked, host) {
			t.Errorf("the blocked preview still names %s", host)
		}
		if !strings.Contains(shown, host) {
			t.Errorf("the preview with remote content lost %s", host)
		}
	}
	if !strings.Contains(blocked, "kept words") {
		t.Error("the blocked preview lost the message's text")
	}
	// Nor does one hidden inside another, which a removal would join up again.
	nested := e.send(`{"from":"a@example.com","to":"leak@example.org","subject":"Nested","html":` + jsonString(
		`<p>x</p><lin<link>k rel="preconnect" href="https://hint5.example"><<iframe>link rel=dns-prefetch href=//hint6.example>`+
			`<ifr<object data=x>ame src="https://hint7.example/"></iframe>`) + `}`)
	_, blocked = get(t, c, srv.URL+"/console/emails/"+nested)
	frame := regexp.MustCompile(`<iframe id="html"[^>]*srcdoc="([^"]*)"`).FindStringSubmatch(blocked)
	if frame == nil {
		t.Fatalf("no preview of the nested hints:\n%s", blocked)
	}
	if doc := stdhtml.UnescapeString(frame[1]); regexp.MustCompile(`(?i)<(link|iframe|object)\b`).MatchString(doc) {
		t.Errorf("the blocked preview joined a hidden tag up again: %s", doc)
	}
	// A scheduled email's page says when it goes out; the list's time column is the creation.
	at := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	later := e.send(`{"from":"a@example.com","to":"later@example.org","subject":"Later","text":"x","scheduledAt":"` + at.Format(time.RFC3339) + `"}`)
	if _, page := get(t, c, srv.URL+"/console/emails/"+later); !strings.Contains(page, `<dt>Scheduled for</dt><dd><time datetime="`+at.Format(time.RFC3339)+`"`) {
		t.Errorf("a scheduled email's page does not say when it goes out")
	}
	if _, list := get(t, c, srv.URL+"/console/emails"); !strings.Contains(list, `<th scope="col">Created</th>`) || strings.Contains(list, `data-label="Sent"`) {
		t.Errorf("the list's time column is not named for what it shows (the creation)")
	}

	// A book of 150 contacts: 1–100, then 101–150 on the next page.
	var rows []string
	for i := range 150 {
		rows = append(rows, fmt.Sprintf(`{"email":"c%03d@example.org"}`, i))
	}
	bookID := e.book(rows...)
	_, p1 := get(t, c, srv.URL+"/console/books/"+bookID)
	_, p2 := get(t, c, srv.URL+"/console/books/"+bookID+"?page=2")
	if !strings.Contains(p1, "150 contact(s), 1–100 shown") || !strings.Contains(p1, `href="/console/books/`+bookID+`?page=2"`) ||
		strings.Count(p2, `data-label="Email"`) != 50 || !strings.Contains(p2, "101–150 of 150") {
		t.Errorf("a book's pages:\n%s\n---\n%s", p1, p2)
	}
	// A page past the end, however far, shows nothing and links back to the last page.
	for _, page := range []string{"3", "92233720368547759"} {
		_, past := get(t, c, srv.URL+"/console/books/"+bookID+"?page="+page)
		if !strings.Contains(past, "past the last of 150") || !strings.Contains(past, "150 contact(s), none on this page.") || strings.Contains(past, "0–0") || !strings.Contains(past, `href="/console/books/`+bookID+`?page=2" rel="prev"`) || strings.Contains(past, `rel="next"`) {
			t.Errorf("page %s of 2:\n%s", page, past)
		}
	}
	if !strings.Contains(p1, "<title>Newsletter · Contacts · Mailroom</title>") {
		t.Errorf("a book's page is not titled with its name:\n%.300s", p1)
	}

	// The keys page marks the session's own key, and every revoke asks first.
	_, keys := get(t, c, srv.URL+"/console/keys")
	if !strings.Contains(keys, "this session's key") || !strings.Contains(keys, `data-confirm="Revoke the key this session signed in with?`) {
		t.Errorf("the keys page does not mark this session's key:\n%s", keys)
	}
}

// TestConsoleOneShotSearchRetriesLater: on Lambda (OneShot) each look of a live view is a new
// request; a filtered page's look searches up to Scan emails, so its browser is told to come
// back five times later than the newest emails' view.
func TestConsoleOneShotSearchRetriesLater(t *testing.T) {
	e := newEnv(t)
	srv := consoleServer(t, e, func(c *api.Console) { c.OneShot = true })
	c := signedIn(t, srv, e.key)
	for query, want := range map[string]string{"": "retry: 3000\n", "?list=1&status=BOUNCED": "retry: 15000\n", "?list=1&domain=1": "retry: 3000\n"} {
		if code, body := get(t, c, srv.URL+"/console/events"+query); code != 200 || !strings.HasPrefix(body, want) {
			t.Errorf("events%s = %d %q, want it to start %q", query, code, body, want)
		}
	}
}

// syncBuffer is a bytes.Buffer the server's goroutines may write while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestConsoleRevokingItsOwnKeySaysSo: revoking the key the session signed in with ends the
// session and answers the sign-in page saying why (it answered a 401 sign-in page, silent).
func TestConsoleRevokingItsOwnKeySaysSo(t *testing.T) {
	e := newEnv(t)
	srv := consoleServer(t, e)
	key := e.keyFor(store.PermissionFull, 0)
	id := strings.SplitN(key, "_", 3)[1]
	c := signedIn(t, srv, key)
	token := csrfOf(t, c, srv.URL+"/console/keys")
	code, page := postForm(t, c, srv.URL+"/console/keys/"+id+"/revoke", url.Values{"csrf": {token}}, srv.URL)
	if code != 200 || !strings.Contains(page, `<p role="status" id="notice">The key `+id+` is revoked`) || !strings.Contains(page, `action="/console/session"`) {
		t.Fatalf("revoking the session's own key = %d:\n%s", code, page)
	}
	if code, _ := get(t, c, srv.URL+"/console/keys"); code != 401 {
		t.Errorf("the keys page after the session's key was revoked = %d, want the sign-in page (401)", code)
	}
	if r := e.request(key, "GET", "/api/v1/emails", nil); r.status != 403 {
		t.Errorf("the revoked key in the API: %d, want 403", r.status)
	}
}

// TestConsoleSearchFindsCcAndBcc: a recipient in cc or bcc is found as one in to is (the
// email's page shows them all); a search does not match across the end of the subject and the
// start of a recipient.
func TestConsoleSearchFindsCcAndBcc(t *testing.T) {
	e := newEnv(t)
	srv := consoleServer(t, e)
	c := signedIn(t, srv, e.key)
	copied := e.send(`{"from":"a@example.com","to":"main@example.org","cc":"carbon@example.net","bcc":"blind@example.net","subject":"Copies","text":"x"}`)
	for q, want := range map[string]bool{"carbon@example": true, "blind@": true, "copies": true, "main@": true, "copies main": false} {
		if _, body := get(t, c, srv.URL+"/console/?q="+url.QueryEscape(q)); strings.Contains(body, "/console/emails/"+copied) != want {
			t.Errorf("a search for %q lists the email with cc and bcc: %v, want %v", q, !want, want)
		}
	}
}

// TestConsoleSignInsEndOnlyTheirTeamsSessions: a team signing in past its share of sessions
// ends its own oldest, not another team's: any key could otherwise sign every other team out.
func TestConsoleSignInsEndOnlyTheirTeamsSessions(t *testing.T) {
	e := newEnv(t)
	srv := consoleServer(t, e, func(c *api.Console) { c.MaxSessions, c.TeamSessions = 5, 2 })
	victim := signedIn(t, srv, e.key)
	otherKey, _ := e.newTeam("other", store.PermissionFull, 0)
	var other []*http.Client
	for range 6 {
		time.Sleep(2 * time.Millisecond) // expiries apart
		other = append(other, signedIn(t, srv, otherKey))
	}
	if code, _ := get(t, victim, srv.URL+"/console/keys"); code != 200 {
		t.Errorf("a session after another team's 6 sign-ins = %d, want 200", code)
	}
	for i, c := range other {
		want := 401
		if i >= len(other)-2 {
			want = 200 // the team's two newest
		}
		if code, _ := get(t, c, srv.URL+"/console/keys"); code != want {
			t.Errorf("the other team's sign-in %d = %d, want %d", i, code, want)
		}
	}
}
