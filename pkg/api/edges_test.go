package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// raw sends one request as given and does not follow a redirect (http.Client would, and
// hide it).
func (e *env) raw(method, path, body string, headers ...string) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.key)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	return e.exchange(http.DefaultTransport.RoundTrip, req)
}

// TestWhatNoRouteTakes: a known path with another method is a 405 that names the methods it
// has (Allow); an unknown one a JSON 404; both carry a request id like every answer.
func TestWhatNoRouteTakes(t *testing.T) {
	e := newEnv(t)
	r := e.raw("DELETE", "/api/v1/emails", "")
	if code, _ := r.errorOf(t); r.status != 405 || code != "METHOD_NOT_ALLOWED" {
		t.Errorf("DELETE /api/v1/emails = %d %s", r.status, r.body)
	}
	allow := strings.Split(r.header.Get("Allow"), ", ")
	for _, m := range []string{"GET", "HEAD", "POST"} {
		if !strings.Contains(","+strings.Join(allow, ",")+",", ","+m+",") {
			t.Errorf("Allow = %q, want %s in it", r.header.Get("Allow"), m)
		}
	}
	if len(allow) != 3 {
		t.Errorf("Allow = %q, want GET, HEAD and POST only", r.header.Get("Allow"))
	}
	r = e.raw("GET", "/api/v1/nope", "")
	if code, _ := r.errorOf(t); r.status != 404 || code != "NOT_FOUND" || r.header.Get("X-Request-Id") == "" {
		t.Errorf("GET /api/v1/nope = %d %s, X-Request-Id %q", r.status, r.body, r.header.Get("X-Request-Id"))
	}
}

// TestFixedPathsAreNotIDs: a path without wildcards asked for with a method it does not have is
// a 405, not the route of that method whose wildcard would take its last segment for an id
// (GET /emails/batch is no email; PUT .../contacts/bulk upserts no contact), locally and in
// the Lambda function API Gateway hands it to.
func TestFixedPathsAreNotIDs(t *testing.T) {
	e := newEnv(t)
	var b struct{ ID string }
	e.mustDo("POST", "/api/v1/contactBooks", `{"name":"B"}`, &b)
	bulk := "/api/v1/contactBooks/" + b.ID + "/contacts/bulk"
	for _, c := range []struct{ method, path, allow string }{
		{"GET", "/api/v1/emails/batch", "POST"},
		{"PATCH", "/api/v1/emails/batch", "POST"},
		{"GET", bulk, "POST, DELETE"},
		{"PUT", bulk, "POST, DELETE"},
		{"PATCH", bulk, "POST, DELETE"},
	} {
		r := e.raw(c.method, c.path, `{"email":"z@example.org"}`)
		if code, _ := r.errorOf(t); r.status != 405 || code != "METHOD_NOT_ALLOWED" || r.header.Get("Allow") != c.allow {
			t.Errorf("%s %s = %d %s, Allow %q; want 405, Allow %q", c.method, c.path, r.status, r.body, r.header.Get("Allow"), c.allow)
		}
	}
	var contacts []struct{ Email string }
	e.mustDo("GET", "/api/v1/contactBooks/"+b.ID+"/contacts", "", &contacts)
	if len(contacts) != 0 {
		t.Errorf("contacts %v written by a PUT to .../contacts/bulk", contacts)
	}
	// The GetEmail function alone (as on AWS) answers GET /api/v1/emails/batch the same way.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/api/v1/emails/batch", nil)
	req.Header.Set("Authorization", "Bearer "+e.key)
	e.app.Services.FunctionHandler("GetEmail").ServeHTTP(rec, req)
	if rec.Code != 405 || rec.Header().Get("Allow") != "POST" {
		t.Errorf("GetEmail function: GET /api/v1/emails/batch = %d %s, want 405", rec.Code, rec.Body)
	}
}

// TestTwoAuthorizationHeaders: two Authorization headers are refused as API Gateway's
// joining them makes them refused on AWS, not read as the first alone.
func TestTwoAuthorizationHeaders(t *testing.T) {
	e := newEnv(t)
	r := e.raw("GET", "/api/v1/domains", "", "Authorization", "Bearer "+e.key) // raw sets one already
	if code, _ := r.errorOf(t); r.status != 403 || code != "FORBIDDEN" {
		t.Errorf("two Authorization headers = %d %s, want 403", r.status, r.body)
	}
	if r := e.raw("GET", "/api/v1/domains", ""); r.status != 200 {
		t.Errorf("one = %d %s", r.status, r.body)
	}
}

// TestUncleanPathsAreServed: a base URL that ends in "/" makes "//api/v1/...": it is served,
// not redirected (a redirect is no JSON, and a POST's client may not follow it).
func TestUncleanPathsAreServed(t *testing.T) {
	e := newEnv(t)
	r := e.raw("POST", "//api/v1/emails", `{"from":"a@example.com","to":"b@example.org","subject":"s","text":"t"}`,
		"Content-Type", "application/json")
	var sent struct{ EmailID string }
	if r.status != 200 {
		t.Fatalf("POST //api/v1/emails = %d %s", r.status, r.body)
	}
	r.json(t, &sent)
	if r := e.raw("GET", "/api/v1/./emails/../emails/"+sent.EmailID, ""); r.status != 200 || !bytes.Contains(r.body, []byte(sent.EmailID)) {
		t.Errorf("GET with dot segments = %d %s", r.status, r.body)
	}
	for _, p := range []string{"/api/v1/emails/", "/api/v1/emails/" + sent.EmailID + "/", "/api/v1/domains//"} {
		if r := e.raw("GET", p, ""); r.status != 200 {
			t.Errorf("GET %s (a trailing slash) = %d %s", p, r.status, r.body)
		}
	}
	// An encoded "/" stays in its segment: the id "x/../../domains/<id>" is refused as an
	// address, and does not reach the route of the domain it spells.
	domain := fmt.Sprint(e.domain)
	r = e.raw("DELETE", "/api/v1/suppressions/x%2F..%2F..%2Fdomains%2F"+domain, "")
	if r.status == 200 {
		t.Errorf("an encoded traversal was served: %s", r.body)
	}
	if r := e.raw("GET", "/api/v1/domains/"+domain, ""); r.status != 200 {
		t.Fatalf("the domain is gone: %d %s", r.status, r.body)
	}
	// And an encoded "/" in an unclean path is kept: the suppression "a/b@example.org".
	e.mustDo("POST", "/api/v1/suppressions", `{"email":"a/b@example.org","reason":"MANUAL"}`, nil)
	if r := e.raw("DELETE", "//api/v1/suppressions/a%2Fb@example.org", ""); r.status != 200 {
		t.Errorf("DELETE //…/a%%2Fb@example.org = %d %s", r.status, r.body)
	}
}

// TestRequestEdges: what an unfriendly client sends gets a 400 that names what is wrong, and
// what a friendly one sends in an unusual but valid way is taken.
func TestRequestEdges(t *testing.T) {
	e := newEnv(t)
	send := `{"from":"a@example.com","to":"b@example.org","subject":"s","text":"t"}`
	refused := func(what string, r response, field string) {
		t.Helper()
		code, msg := r.errorOf(t)
		if r.status != 400 || code != "BAD_REQUEST" || !strings.HasPrefix(msg, field) {
			t.Errorf("%s = %d %s, want a 400 naming %s", what, r.status, r.body, field)
		}
	}
	refused("a gzip body", e.raw("POST", "/api/v1/emails", send, "Content-Encoding", "gzip"), "Content-Encoding")
	refused("a lone surrogate", e.raw("POST", "/api/v1/emails",
		`{"from":"a@example.com","to":"b@example.org","subject":"s\ud800","text":"t"}`), "body")
	refused("a low surrogate first", e.raw("POST", "/api/v1/emails",
		`{"from":"a@example.com","to":"b@example.org","subject":"s\udc00\ud800","text":"t"}`), "body")
	// A pair is a character; an escaped backslash before "ud800" is no escape of it.
	for _, subject := range []string{`\ud83d\ude00`, `\\ud800`, `\\\ud83d\ude00`} {
		body := `{"from":"a@example.com","to":"b@example.org","subject":"` + subject + `","text":"t"}`
		if r := e.raw("POST", "/api/v1/emails", body); r.status != 200 {
			t.Errorf("subject %s = %d %s", subject, r.status, r.body)
		}
	}
	refused("two Idempotency-Key headers", e.raw("POST", "/api/v1/emails", send,
		"Idempotency-Key", "a", "Idempotency-Key", "b"), "Idempotency-Key")
	// The length is in characters: 256 of them, two bytes each, is a key.
	if r := e.raw("POST", "/api/v1/emails", send, "Idempotency-Key", strings.Repeat("é", 256)); r.status != 200 {
		t.Errorf("256 two-byte characters = %d %s", r.status, r.body)
	}
	if r := e.raw("POST", "/api/v1/emails", send, "Idempotency-Key", strings.Repeat("é", 257)); r.status != 400 {
		t.Errorf("257 characters = %d %s", r.status, r.body)
	}
	refused("an integer field given 1.5", e.raw("POST", "/api/v1/campaigns", `{"batchSize":1.5}`), "batchSize: must be an integer")
	refused("a campaign subject with a NUL", e.raw("POST", "/api/v1/campaigns",
		`{"name":"N","from":"a@example.com","subject":"a\u0000b","contactBookId":"cb_x","html":"<p>x</p>"}`), "subject: must not contain control characters")
	refused("a NUL in a header value", e.raw("POST", "/api/v1/emails",
		`{"from":"a@example.com","to":"b@example.org","subject":"s","text":"t","headers":{"X-A":"a\u0000b"}}`), "headers.X-A: must not contain CR, LF or NUL")
	// A non-ASCII address is refused with its reason wherever an address is taken.
	bookID := e.book(`{"email":"ann@example.org"}`)
	// A type error names the field down to the property, or the bulk element by its index.
	refused("a send body that is an array", e.raw("POST", "/api/v1/emails", `[]`), "body: must be an object")
	refused("a property that is a number", e.raw("POST", "/api/v1/contactBooks/"+bookID+"/contacts", `{"email":"p@example.org","properties":{"plan":"pro","seats":3}}`),
		"properties.seats: must be a string")
	refused("a bulk element's property", e.raw("POST", "/api/v1/contactBooks/"+bookID+"/contacts/bulk", `[{"email":"p@example.org"},{"email":"q@example.org","properties":{"seats":3}}]`),
		"[1].properties.seats: must be a string")
	refused("a bulk element that is not an object", e.raw("POST", "/api/v1/contactBooks/"+bookID+"/contacts/bulk", `[{"email":"p@example.org"},"q@example.org"]`),
		"[1]: must be a JSON object")
	for _, c := range []struct{ path, body, field string }{
		{"/api/v1/emails", `{"from":"a@example.com","to":"zoë@example.org","subject":"s","text":"t"}`, "to"},
		{"/api/v1/campaigns", `{"name":"N","from":"zoë@example.com","subject":"s","contactBookId":"` + bookID + `","html":` + jsonString(campaignHTML) + `}`, "from"},
		{"/api/v1/campaigns", `{"name":"N","from":"a@example.com","subject":"s","contactBookId":"` + bookID + `","html":` + jsonString(campaignHTML) + `,"cc":["a@bücher.de"]}`, "cc[0]"},
		{"/api/v1/suppressions", `{"email":"zoë@example.org","reason":"MANUAL"}`, "email"},
		{"/api/v1/contactBooks/" + bookID + "/contacts", `{"email":"zoë@example.org"}`, "email"},
	} {
		refused(c.path+" "+c.field, e.raw("POST", c.path, c.body), c.field+`: "`)
		if r := e.raw("POST", c.path, c.body); !bytes.Contains(r.body, []byte("non-ASCII addresses cannot be sent")) {
			t.Errorf("%s %s: %s, want the reason", c.path, c.field, r.body)
		}
	}
	// The scheme of Authorization is case-insensitive.
	req, _ := http.NewRequest("GET", e.srv.URL+"/api/v1/domains", nil)
	req.Header.Set("Authorization", "bearer "+e.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf(`"bearer <key>" = %d`, resp.StatusCode)
	}
}

// TestCampaignBatchSizeZero: batchSize is 1 to 100,000 when given; 0 is not "the default".
func TestCampaignBatchSizeZero(t *testing.T) {
	e := newEnv(t)
	bookID := e.book(`{"email":"ann@example.org"}`)
	create := `{"name":"N","from":"news@example.com","subject":"s","contactBookId":"` + bookID + `","html":` + jsonString(campaignHTML)
	r := e.do("POST", "/api/v1/campaigns", create+`,"batchSize":0}`)
	if code, msg := r.errorOf(t); r.status != 400 || code != "BAD_REQUEST" || !strings.HasPrefix(msg, "batchSize") {
		t.Errorf("create with batchSize 0 = %d %s", r.status, r.body)
	}
	var c campaignOut
	e.mustDo("POST", "/api/v1/campaigns", create+`,"batchSize":null}`, &c)
	r = e.do("POST", "/api/v1/campaigns/"+c.ID+"/schedule", `{"scheduledAt":"tomorrow 9am","batchSize":0}`)
	if code, msg := r.errorOf(t); r.status != 400 || code != "BAD_REQUEST" || !strings.HasPrefix(msg, "batchSize") {
		t.Errorf("schedule with batchSize 0 = %d %s", r.status, r.body)
	}
	if got := e.campaign(c.ID); got.Status != "DRAFT" {
		t.Errorf("a refused schedule changed the campaign: %s", got.Status)
	}
}
