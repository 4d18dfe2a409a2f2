package api_test

import (
	"bufio"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/store"
)

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
	con := api.NewConsole(e.app.Services, e.app.OutboxDir)
	con.Poll = 20 * time.Millisecond
	srv := httptest.NewServer(con.Handler())
	defer srv.Close()
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
	changed := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() == "event: changed" {
				changed <- true
				return
			}
		}
	}()
	html := `<p>Hello <b>console</b></p><script>alert(1)</script><img src="https://tracker.example/p.gif">`
	id := e.send(`{"from":"a@example.com","to":"reader@example.org","subject":"Console test","html":` + jsonString(html) + `,"text":"Hello console"}`)
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
	for _, want := range []string{"Hello console", ">QUEUED<", ">SENT<", ">DELIVERED<", "Download the .eml", "X-Usesend-Email-Id"} {
		if !strings.Contains(page, want) {
			t.Errorf("the email's page lacks %q", want)
		}
	}
	if code, raw := get(t, c, srv.URL+"/console/emails/"+id+"/raw"); code != 200 || !strings.Contains(raw, "Subject: Console test") {
		t.Errorf("raw = %d %.80s", code, raw)
	}
	if code, body := get(t, c, srv.URL+"/console/emails/"+id+"?fragment=timeline"); code != 200 || strings.Contains(body, "<html") || !strings.Contains(body, "DELIVERED") {
		t.Errorf("timeline fragment = %d", code)
	}

	// Sign-out needs the page's token.
	if code, _ := postForm(t, c, srv.URL+"/console/signout", url.Values{"csrf": {"forged"}}, srv.URL); code != 403 {
		t.Errorf("sign-out without the token = %d", code)
	}
	token := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if token == nil {
		t.Fatal("no CSRF token on the page")
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
