package lambdafn_test

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/lambdafn"
)

// consoleStep: the console's function answers its sample (a browser without a session) with
// the sign-in page; consoleTour then takes a browser through it.
var consoleStep = step{function: lambdafn.ConsoleFunction, page: func(e *env, resp events.APIGatewayV2HTTPResponse) {
	wantPage(e, resp, `action="/console/session"`)
	consoleTour(e)
}}

// consoleTour signs in through one instance of the function and goes on through others, as
// API Gateway spreads a browser's requests over a function's instances, which share no
// memory: the sealed session and its CSRF token hold on every one, the live view answers once
// and says "changed" only when the state moved on, a forged session is a sign-in page again,
// and sign-out (with the form's token) clears the cookie.
func consoleTour(e *env) {
	t := e.t
	invoke := func(method, path, query string, headers map[string]string, body string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(readSample(t, "console"), &ev); err != nil {
			t.Fatal(err)
		}
		ev.RawPath, ev.RequestContext.HTTP.Path, ev.RequestContext.HTTP.Method = path, path, method
		ev.RawQueryString = query
		if rest, ok := strings.CutPrefix(path, "/console/"); ok {
			ev.PathParameters = map[string]string{"proxy": rest}
		} else { // a route of its own (/, /console, /healthz, /api/v1/doc): no parameters
			ev.RouteKey, ev.RequestContext.RouteKey, ev.PathParameters = method+" "+path, method+" "+path, nil
		}
		for k, v := range headers {
			ev.Headers[k] = v
		}
		ev.Body = body
		raw, _ := json.Marshal(ev)
		// A new instance for every request.
		out, err := e.fixture.handler(t, lambdafn.ConsoleFunction).Invoke(context.Background(), raw)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		var resp events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp
	}
	form := map[string]string{"content-type": "application/x-www-form-urlencoded", "sec-fetch-site": "same-origin"}

	bad := invoke("POST", "/console/session", "", form, url.Values{"key": {"us_not_a_key_0123456789abcdef"}}.Encode())
	if bad.StatusCode != http.StatusUnauthorized || len(bad.Cookies) != 0 {
		t.Errorf("sign-in with a wrong key: %d, cookies %v; want 401 and none", bad.StatusCode, bad.Cookies)
	}
	in := invoke("POST", "/console/session", "", form, url.Values{"key": {sampleKey}}.Encode())
	if in.StatusCode != http.StatusSeeOther || len(in.Cookies) != 1 {
		t.Fatalf("sign-in: %d, cookies %v; want 303 and the session", in.StatusCode, in.Cookies)
	}
	set := in.Cookies[0]
	for _, attr := range []string{"HttpOnly", "SameSite=Strict", "Secure", "Path=/console/"} {
		if !strings.Contains(set, attr) {
			t.Errorf("session cookie %q lacks %s", set, attr)
		}
	}
	cookie, _, _ := strings.Cut(set, ";")
	if strings.Contains(cookie, sampleKey) || strings.Contains(cookie, strings.TrimPrefix(sampleKey, "us_")) {
		t.Error("the session cookie carries the API key in clear")
	}
	session := map[string]string{"cookie": cookie}

	list := invoke("GET", "/console/emails", "", session, "")
	if list.StatusCode != 200 || !strings.Contains(list.Body, "/console/emails/"+e.emailID) {
		t.Fatalf("emails page on another instance: %d, want the list with %s:\n%s", list.StatusCode, e.emailID, list.Body)
	}
	one := invoke("GET", "/console/emails/"+e.emailID, "", session, "")
	if one.StatusCode != 200 || !strings.Contains(one.Body, "QUEUED") {
		t.Errorf("email page: %d, want its timeline:\n%s", one.StatusCode, one.Body)
	}
	if strings.Contains(one.Body, "sim-bounce") || strings.Contains(one.Body, ".eml") {
		t.Error("on AWS the email page offers SES event buttons or a raw message (no outbox there)")
	}

	// The page says what state it was drawn from: a first poll with it hears of no change
	// (nothing changed since), and with another hears of one.
	since := regexp.MustCompile(`data-live="/console/events\?since=(\w+)"`).FindStringSubmatch(list.Body)
	if since == nil {
		t.Fatalf("the emails page has no live view with its state:\n%s", list.Body)
	}
	if r := invoke("GET", "/console/events", "since="+since[1], session, ""); strings.Contains(r.Body, "event: changed") {
		t.Errorf("first poll with the page's own state said changed: %q", r.Body)
	}
	if r := invoke("GET", "/console/events", "since=0123abcd", session, ""); !strings.Contains(r.Body, "event: changed") {
		t.Errorf("first poll with another state: %q, want changed", r.Body)
	}
	// The live view: one answer, the state's id; the same id again is no change, another is.
	first := invoke("GET", "/console/events", "", session, "")
	id := regexp.MustCompile(`(?m)^id: (\w+)$`).FindStringSubmatch(first.Body)
	if first.StatusCode != 200 || id == nil || strings.Contains(first.Body, "event: changed") ||
		!strings.HasPrefix(first.Headers["Content-Type"], "text/event-stream") {
		t.Fatalf("live view: %d %q %q, want a stream with the state's id and no change", first.StatusCode,
			first.Headers["Content-Type"], first.Body)
	}
	same := invoke("GET", "/console/events", "", map[string]string{"cookie": cookie, "last-event-id": id[1]}, "")
	if strings.Contains(same.Body, "event: changed") {
		t.Errorf("live view with the current id said changed: %q", same.Body)
	}
	moved := invoke("GET", "/console/events", "", map[string]string{"cookie": cookie, "last-event-id": "0123abcd"}, "")
	if !strings.Contains(moved.Body, "event: changed") {
		t.Errorf("live view with an old id: %q, want changed", moved.Body)
	}

	// A forged session is no session.
	forged := cookie[:len(cookie)-4] + "AAAA"
	if r := invoke("GET", "/console/emails", "", map[string]string{"cookie": forged}, ""); !strings.Contains(r.Body, `action="/console/session"`) {
		t.Errorf("a forged session cookie was taken: %d", r.StatusCode)
	}
	// The OpenAPI document the pages link to.
	if doc := invoke("GET", "/api/v1/doc", "", nil, ""); doc.StatusCode != 200 || !strings.Contains(doc.Body, `"openapi"`) {
		t.Errorf("GET /api/v1/doc: %d", doc.StatusCode)
	}
	// Every path the document lists besides the API's is served here too.
	for _, b := range api.ServedBesides {
		path, status := cmp.Or(b.Try, b.Path), cmp.Or(b.Anonymous, b.Status)
		var headers map[string]string
		if b.Method == "POST" {
			headers = form // as a console page's form posts (the sample is a typed address)
		}
		if r := invoke(b.Method, path, "", headers, ""); r.StatusCode != status {
			t.Errorf("%s %s: %d, documented %d without a session", b.Method, path, r.StatusCode, status)
		}
	}

	// Sign-out needs the form's CSRF token, which another instance made.
	csrf := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(list.Body)
	if csrf == nil {
		t.Fatal("no CSRF token on the page")
	}
	withCookie := map[string]string{"cookie": cookie}
	for k, v := range form {
		withCookie[k] = v
	}
	if r := invoke("POST", "/console/signout", "", withCookie, "csrf=0000"); r.StatusCode != http.StatusForbidden {
		t.Errorf("sign-out with a wrong token: %d, want 403", r.StatusCode)
	}
	out := invoke("POST", "/console/signout", "", withCookie, "csrf="+csrf[1])
	if out.StatusCode != http.StatusSeeOther || len(out.Cookies) != 1 || !strings.Contains(out.Cookies[0], "Max-Age=0") {
		t.Errorf("sign-out: %d, cookies %v; want 303 and the cookie cleared", out.StatusCode, out.Cookies)
	}
}
