// Package hostile is the hostile-input table (issue 12): requests an attacker or a careless
// client would send, against the local server as `make run` starts it, with two teams and
// restricted keys. Each row names what it tries and what the server must answer; a row is added
// for every defect found, so none comes back.
package hostile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/config"
	"github.com/mailroom/mailroom/pkg/server"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/team"
)

// world is one running local server with two teams.
type world struct {
	url string
	// keys by name: "a" (team A, FULL), "a-sending" (team A, SENDING), "a-dom1" (team A, FULL,
	// restricted to its domain 1), "b" (team B, FULL).
	keys map[string]string
	// ids of things team A owns, for the rows that reach for them from elsewhere.
	emailA, bookA, campaignA string
	// campaignOther is team A's campaign from its other domain (2).
	campaignOther string
	// templateA renders {{v}} 20,000 times in its html and {{s}} twice in its subject.
	templateA string
}

func start(t *testing.T, configure ...func(*config.Config)) *world {
	t.Helper()
	ctx := context.Background()
	cfg := config.Config{Backend: config.BackendEmbedded, DataDir: t.TempDir(), Workers: 2,
		AuthCacheTTL: time.Minute, LogLevel: slog.LevelError + 4,
		UnsubscribeSecret: strings.Repeat("ab", 32)}
	for _, c := range configure {
		c(&cfg)
	}
	s, err := server.Start(ctx, cfg, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	w := &world{url: s.URL, keys: map[string]string{"a": s.APIKey}}
	admin := &team.Admin{Store: s.App.Store, Now: time.Now}
	for _, d := range []string{"a.example.com", "other.example.com"} {
		w.must(t, "a", "POST", "/api/v1/domains", fmt.Sprintf(`{"name":%q,"region":"us-east-1"}`, d))
	}
	teamA := int64(1)
	for name, r := range map[string]team.KeyRequest{
		"a-sending": {TeamID: teamA, Name: "sending", Permission: store.PermissionSending},
		"a-dom1":    {TeamID: teamA, Name: "domain 1", DomainID: 1},
	} {
		full, _, err := admin.CreateKey(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		w.keys[name] = full
	}
	tb, err := admin.CreateTeam(ctx, "team b")
	if err != nil {
		t.Fatal(err)
	}
	full, _, err := admin.CreateKey(ctx, team.KeyRequest{TeamID: tb.ID, Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	w.keys["b"] = full
	w.must(t, "b", "POST", "/api/v1/domains", `{"name":"b.example.net","region":"us-east-1"}`)

	w.emailA = w.must(t, "a", "POST", "/api/v1/emails", `{"from":"hi@a.example.com","to":"x@example.org","subject":"s","text":"t"}`)["emailId"].(string)
	w.bookA = w.must(t, "a", "POST", "/api/v1/contactBooks", `{"name":"news"}`)["id"].(string)
	w.templateA = w.must(t, "a", "POST", "/api/v1/templates", `{"name":"amp","subject":"{{s}} {{s}}","html":"`+
		strings.Repeat("{{v}}", 20000)+`"}`)["id"].(string)
	w.must(t, "a", "POST", "/api/v1/contactBooks/"+w.bookA+"/contacts", `{"email":"reader@example.org","firstName":"Ada"}`)
	w.campaignA = w.must(t, "a", "POST", "/api/v1/campaigns", fmt.Sprintf(`{"name":"n","from":"news@a.example.com","subject":"s",
		"contactBookId":%q,"html":"<p>hi {{usesend_unsubscribe_url}}</p>"}`, w.bookA))["id"].(string)
	w.campaignOther = w.must(t, "a", "POST", "/api/v1/campaigns", fmt.Sprintf(`{"name":"other","from":"news@other.example.com","subject":"s",
		"contactBookId":%q,"html":"<p>hi {{usesend_unsubscribe_url}}</p>"}`, w.bookA))["id"].(string)
	return w
}

func (w *world) do(t *testing.T, key, method, path, body string, headers ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, w.url+path, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := w.keys[key]; ok {
		req.Header.Set("Authorization", "Bearer "+k)
	} else if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (w *world) must(t *testing.T, key, method, path, body string) map[string]any {
	t.Helper()
	code, out := w.do(t, key, method, path, body)
	if code != 200 {
		t.Fatalf("setup %s %s: %d %s", method, path, code, out)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("setup %s %s: %s", method, path, out)
	}
	return m
}

// row is one hostile request and what it must get.
type row struct {
	name    string
	key     string // a key name of world.keys, or a literal Authorization value
	method  string
	path    string // "{email}", "{book}", "{campaign}", "{template}" are team A's; "{draft}" a new draft campaign
	body    string
	headers []string
	status  int
	// contains are substrings the error message must have (the field it names, a hint); absent
	// are ones it must not (another team's name, the whole of a long input).
	contains []string
	absent   []string
	page     bool // the answer is a page for a recipient's browser, not the API's error shape
}

func sendBody(extra string) string {
	return `{"from":"hi@a.example.com","to":"x@example.org","subject":"s","text":"t"` + extra + `}`
}

func campaignBody(extra string) string {
	return `{"name":"n","from":"news@a.example.com","subject":"s","contactBookId":"{book}","html":"<p>{{usesend_unsubscribe_url}}</p>"` + extra + `}`
}

func rows() []row {
	in := func(d time.Duration) string { return time.Now().UTC().Add(d).Format(time.RFC3339) }
	long := strings.Repeat("tomorrow ", 40)
	return []row{
		// 10. Mistakes that send the wrong mail: unknown fields, several bad elements, a past time.
		{name: "snake_case reply_to is refused with a hint", key: "a", method: "POST", path: "/api/v1/emails",
			body: sendBody(`,"reply_to":"r@example.org"`), status: 400, contains: []string{"reply_to", "replyTo"}},
		{name: "snake_case scheduled_at is refused with a hint", key: "a", method: "POST", path: "/api/v1/emails",
			body: sendBody(`,"scheduled_at":"` + in(time.Hour) + `"`), status: 400, contains: []string{"scheduled_at", "scheduledAt"}},
		{name: "a misspelt html is refused", key: "a", method: "POST", path: "/api/v1/emails",
			body: `{"from":"hi@a.example.com","to":"x@example.org","subject":"s","htm":"<p>x</p>"}`, status: 400, contains: []string{"htm"}},
		{name: "every field of the OpenAPI send body is accepted", key: "a", method: "POST", path: "/api/v1/emails",
			body: `{"from":"hi@a.example.com","to":["x@example.org"],"subject":"s","text":"t","html":"<p>t</p>","cc":"c@example.org",
				"bcc":["b@example.org"],"replyTo":"r@example.org","headers":{"X-Campaign":"1"},"variables":{"a":"b"},
				"attachments":[{"filename":"a.txt","content":"aGk="}],"scheduledAt":"` + in(time.Hour) + `"}`, status: 200},
		{name: "a batch names each bad element", key: "a", method: "POST", path: "/api/v1/emails/batch",
			body:   `[` + sendBody(`,"reply_to":"r@example.org"`) + `,` + sendBody("") + `,{"from":"hi@a.example.com","subject":"s","text":"t"}]`,
			status: 400, contains: []string{"[0]", "reply_to", "[2]", "to"}},
		{name: "an email scheduled an hour ago is refused", key: "a", method: "POST", path: "/api/v1/emails",
			body: sendBody(`,"scheduledAt":"` + in(-time.Hour) + `"`), status: 400, contains: []string{"scheduledAt"}},
		{name: "an email scheduled a minute ago is sent now (clock drift)", key: "a", method: "POST", path: "/api/v1/emails",
			body: sendBody(`,"scheduledAt":"` + in(-time.Minute) + `"`), status: 200},
		{name: "a reschedule an hour into the past is refused", key: "a", method: "PATCH", path: "/api/v1/emails/{email}",
			body: `{"scheduledAt":"` + in(-time.Hour) + `"}`, status: 400, contains: []string{"scheduledAt"}},
		{name: "a campaign with an unknown field is refused", key: "a", method: "POST", path: "/api/v1/campaigns",
			body: campaignBody(`,"send_now":true`), status: 400, contains: []string{"send_now", "sendNow"}},
		{name: "a campaign schedule with an unknown field is refused", key: "a", method: "POST", path: "/api/v1/campaigns/{draft}/schedule",
			body: `{"scheduled_at":"tomorrow 9am"}`, status: 400, contains: []string{"scheduled_at", "scheduledAt"}},
		{name: "a template with an unknown field is refused", key: "a", method: "POST", path: "/api/v1/templates",
			body: `{"name":"t","subject":"s","html":"<p>x</p>","htlm":"<p>y</p>"}`, status: 400, contains: []string{"htlm"}},

		// 1. Template amplification: sizes are checked on what the template renders to, before
		// rendering it.
		{name: "a 3 KB send that renders 60 MB is refused before rendering", key: "a", method: "POST", path: "/api/v1/emails",
			body: `{"from":"hi@a.example.com","to":"x@example.org","templateId":"{template}","variables":{"s":"x","v":"` +
				strings.Repeat("A", 3000) + `"}}`, status: 413, contains: []string{"after rendering"}},
		{name: "a batch whose templates render 90 MB in all is refused", key: "a", method: "POST", path: "/api/v1/emails/batch",
			body: `[` + strings.TrimSuffix(strings.Repeat(`{"from":"hi@a.example.com","to":"x@example.org","templateId":"{template}","variables":{"s":"x","v":"`+
				strings.Repeat("A", 1500)+`"}},`, 3), ",") + `]`, status: 413, contains: []string{"in all"}},
		{name: "a subject of 1,004 bytes after rendering is refused", key: "a", method: "POST", path: "/api/v1/emails",
			body: `{"from":"hi@a.example.com","to":"x@example.org","templateId":"{template}","variables":{"v":"x","s":"` +
				strings.Repeat("S", 501) + `"}}`, status: 400, contains: []string{"subject", "after rendering"}},
		{name: "101 variables are refused", key: "a", method: "POST", path: "/api/v1/emails",
			body:   `{"from":"hi@a.example.com","to":"x@example.org","templateId":"{template}","variables":{` + manyVars(101) + `}}`,
			status: 400, contains: []string{"variables"}},

		// 5. Body limits and field caps per route.
		{name: "a domain body of 100 KB is refused", key: "a", method: "POST", path: "/api/v1/domains",
			body: `{"name":"c.example.com","region":"us-east-1","x":"` + strings.Repeat("x", 100<<10) + `"}`, status: 413},
		{name: "a campaign html over 512 KB is refused", key: "a", method: "POST", path: "/api/v1/campaigns",
			body: campaignBody(`,"html":"<p>{{usesend_unsubscribe_url}}</p>` + strings.Repeat("x", 600<<10) + `"`), status: 400, contains: []string{"html"}},
		{name: "a campaign's cc, bcc and replyTo count in the 50 recipients", key: "a", method: "POST", path: "/api/v1/campaigns",
			body:   campaignBody(`,"cc":[` + addrs("c", 20) + `],"bcc":[` + addrs("b", 20) + `],"replyTo":[` + addrs("r", 10) + `]`),
			status: 400, contains: []string{"50"}},
		{name: "invalid UTF-8 is refused, not replaced", key: "a", method: "POST", path: "/api/v1/emails",
			body: "{\"from\":\"hi@a.example.com\",\"to\":\"x@example.org\",\"subject\":\"s\xff\",\"text\":\"t\"}", status: 400,
			contains: []string{"UTF-8"}},

		// 6. Natural-language dates name only times to come.
		{name: "a campaign for last monday is refused", key: "a", method: "POST", path: "/api/v1/campaigns/{draft}/schedule",
			body: `{"scheduledAt":"last monday"}`, status: 400, contains: []string{"scheduledAt"}},
		{name: "a campaign for 2 days ago is refused", key: "a", method: "POST", path: "/api/v1/campaigns/{draft}/schedule",
			body: `{"scheduledAt":"2 days ago"}`, status: 400, contains: []string{"scheduledAt"}},
		{name: "a campaign for Feb 30 is refused", key: "a", method: "POST", path: "/api/v1/campaigns/{draft}/schedule",
			body: `{"scheduledAt":"Feb 30"}`, status: 400, contains: []string{"scheduledAt"}},
		{name: "an ambiguous numeric date is refused, asking for RFC 3339", key: "a", method: "POST", path: "/api/v1/campaigns/{draft}/schedule",
			body: `{"scheduledAt":"03/04/2027"}`, status: 400, contains: []string{"scheduledAt", "RFC 3339"}},
		{name: "a campaign an hour in the past (RFC 3339) is refused", key: "a", method: "POST", path: "/api/v1/campaigns/{draft}/schedule",
			body: `{"scheduledAt":"` + in(-time.Hour) + `"}`, status: 400, contains: []string{"scheduledAt"}},
		{name: "a long date phrase is refused and not echoed whole", key: "a", method: "POST", path: "/api/v1/campaigns/{draft}/schedule",
			body: `{"scheduledAt":"` + long + `"}`, status: 400, contains: []string{"scheduledAt"}, absent: []string{long}},

		// 13. Addresses and attachment names that mean something else than they seem.
		{name: "a quoted local part is refused", key: "a", method: "POST", path: "/api/v1/emails",
			body: `{"from":"hi@a.example.com","to":"\"x@paypal.com\"@example.com","subject":"s","text":"t"}`, status: 400, contains: []string{"to"}},
		{name: "a blocked extension with a trailing dot is refused", key: "a", method: "POST", path: "/api/v1/emails",
			body: sendBody(`,"attachments":[{"filename":"invoice.exe.","content":"aGk="}]`), status: 400, contains: []string{"attachments"}},

		// 2. A key restricted to a domain acts on that domain only, everywhere.
		{name: "a domain key cannot create a campaign from another domain", key: "a-dom1", method: "POST", path: "/api/v1/campaigns",
			body: strings.ReplaceAll(campaignBody(`,"sendNow":true`), "news@a.example.com", "news@other.example.com"), status: 403, contains: []string{"from"}},
		{name: "a domain key creates a campaign from its domain", key: "a-dom1", method: "POST", path: "/api/v1/campaigns",
			body: campaignBody(""), status: 200},
		{name: "a domain key does not see another domain's campaign", key: "a-dom1", method: "GET", path: "/api/v1/campaigns/{campaign2}", status: 404},
		{name: "a domain key cannot schedule another domain's campaign", key: "a-dom1", method: "POST", path: "/api/v1/campaigns/{campaign2}/schedule",
			body: `{"scheduledAt":"tomorrow 9am"}`, status: 404},
		{name: "a domain key cannot pause another domain's campaign", key: "a-dom1", method: "POST", path: "/api/v1/campaigns/{campaign2}/pause", status: 404},
		{name: "a domain key cannot delete another domain's campaign", key: "a-dom1", method: "DELETE", path: "/api/v1/campaigns/{campaign2}", status: 404},
		{name: "a domain key sees its own campaign", key: "a-dom1", method: "GET", path: "/api/v1/campaigns/{campaign}", status: 200},
		{name: "a domain key cannot add a domain", key: "a-dom1", method: "POST", path: "/api/v1/domains",
			body: `{"name":"d.example.com","region":"us-east-1"}`, status: 403},
		{name: "a domain key cannot delete a domain", key: "a-dom1", method: "DELETE", path: "/api/v1/domains/2", status: 403},
		{name: "a domain key cannot change its domain's tracking", key: "a-dom1", method: "PATCH", path: "/api/v1/domains/1",
			body: `{"openTracking":true}`, status: 403},
		{name: "a domain key does not see another domain", key: "a-dom1", method: "GET", path: "/api/v1/domains/2", status: 404},
		{name: "a domain key verifies its own domain", key: "a-dom1", method: "PUT", path: "/api/v1/domains/1/verify", status: 200},
		{name: "a domain key cannot read the team's suppressions", key: "a-dom1", method: "GET", path: "/api/v1/suppressions", status: 403},
		{name: "a domain key cannot add a suppression", key: "a-dom1", method: "POST", path: "/api/v1/suppressions",
			body: `{"email":"x@example.org","reason":"MANUAL"}`, status: 403},
		{name: "a domain key cannot create a template", key: "a-dom1", method: "POST", path: "/api/v1/templates",
			body: `{"name":"t","subject":"s","html":"<p>x</p>"}`, status: 403},
		{name: "a domain key reads templates (it may send with them)", key: "a-dom1", method: "GET", path: "/api/v1/templates", status: 200},

		// 3. A domain another team holds is not handed over, and the answer says nothing of whose
		// it is (the SES adapter's own ownership checks run on moto: pkg/identity/ses).
		{name: "another team's domain cannot be registered", key: "b", method: "POST", path: "/api/v1/domains",
			body: `{"name":"a.example.com","region":"us-east-1"}`, status: 409, contains: []string{"already registered"},
			absent: []string{"team", "Team"}},

		{name: "a subdomain of another team's domain cannot be registered", key: "b", method: "POST", path: "/api/v1/domains",
			body: `{"name":"mail.a.example.com","region":"us-east-1"}`, status: 409, absent: []string{"team", "Team"}},
		{name: "a subdomain of its own domain can", key: "a", method: "POST", path: "/api/v1/domains",
			body: `{"name":"mail.a.example.com","region":"us-east-1"}`, status: 200},

		// 14. One spelling of a key.
		// (An invalid token is 403 "Invalid API token", as upstream answers it.)
		{name: "an upper-case hex secret is refused", key: "upper:a", method: "GET", path: "/api/v1/domains", status: 403,
			contains: []string{"Invalid API token"}},

		// Cases that already held, kept so they keep holding.
		{name: "another team's email is not found", key: "b", method: "GET", path: "/api/v1/emails/{email}", status: 404},
		{name: "another team's campaign is not found", key: "b", method: "GET", path: "/api/v1/campaigns/{campaign}", status: 404},
		{name: "another team's book is not found", key: "b", method: "GET", path: "/api/v1/contactBooks/{book}", status: 404},
		{name: "another team's domain is not a sender", key: "b", method: "POST", path: "/api/v1/emails",
			body: sendBody(""), status: 400, contains: []string{"from"}},
		{name: "a header injection in the subject is refused", key: "a", method: "POST", path: "/api/v1/emails",
			body: `{"from":"hi@a.example.com","to":"x@example.org","subject":"s\r\nBcc: victim@example.org","text":"t"}`, status: 400, contains: []string{"subject"}},
		{name: "a header injection in a header value is refused", key: "a", method: "POST", path: "/api/v1/emails",
			body: sendBody(`,"headers":{"X-A":"v\r\nBcc: victim@example.org"}`), status: 400, contains: []string{"headers"}},
		{name: "deep nesting is refused", key: "a", method: "POST", path: "/api/v1/emails",
			body: strings.Repeat("[", 10000) + strings.Repeat("]", 10000), status: 400},
		{name: "page 0 is refused", key: "a", method: "GET", path: "/api/v1/emails?page=0", status: 400, contains: []string{"page"}},
		{name: "a limit of 101 is refused", key: "a", method: "GET", path: "/api/v1/emails?limit=101", status: 400, contains: []string{"limit"}},
		{name: "10,000 recipients are refused", key: "a", method: "POST", path: "/api/v1/emails",
			body:   `{"from":"hi@a.example.com","to":[` + strings.TrimSuffix(strings.Repeat(`"x@example.org",`, 10000), ",") + `],"subject":"s","text":"t"}`,
			status: 400, contains: []string{"to"}},
		{name: "a SENDING key cannot read analytics", key: "a-sending", method: "GET", path: "/api/v1/analytics/email-time-series", status: 403},
		{name: "a domain key cannot read another domain's analytics", key: "a-dom1", method: "GET",
			path: "/api/v1/analytics/reputation-metrics?domainId=2", status: 404},
		{name: "another team's domain's analytics are not found", key: "b", method: "GET",
			path: "/api/v1/analytics/email-time-series?domainId=1", status: 404},
		{name: "an analytics period other than 7 or 30 days is refused", key: "a", method: "GET",
			path: "/api/v1/analytics/email-time-series?days=14", status: 400, contains: []string{"days"}},
		{name: "an analytics domainId that is not an id is refused", key: "a", method: "GET",
			path: "/api/v1/analytics/email-time-series?domainId=x", status: 400, contains: []string{"domainId"}},
		{name: "a forged unsubscribe token is refused", method: "POST", path: "/unsubscribe/eyJjIjoiY3QxIn0.AAAA", status: 404, page: true},
		{name: "a SENDING key cannot add a domain", key: "a-sending", method: "POST", path: "/api/v1/domains",
			body: `{"name":"c.example.com","region":"us-east-1"}`, status: 403},
		{name: "a domain-restricted key cannot send from another domain", key: "a-dom1", method: "POST", path: "/api/v1/emails",
			body: `{"from":"hi@other.example.com","to":"x@example.org","subject":"s","text":"t"}`, status: 403},
		{name: "no key", method: "GET", path: "/api/v1/domains", status: 401},
	}
}

func manyVars(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"v%d":"x"`, i)
	}
	return strings.Join(parts, ",")
}

func addrs(prefix string, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"%s%d@example.org"`, prefix, i)
	}
	return strings.Join(parts, ",")
}

// TestDomainKeyListsItsCampaignsOnly: a key restricted to a domain lists that domain's
// campaigns, not the team's others.
func TestDomainKeyListsItsCampaignsOnly(t *testing.T) {
	w := start(t)
	code, out := w.do(t, "a-dom1", "GET", "/api/v1/campaigns", "")
	if code != 200 || !strings.Contains(string(out), w.campaignA) || strings.Contains(string(out), w.campaignOther) {
		t.Fatalf("campaigns listed by a domain key: %d %s; want %s and not %s", code, out, w.campaignA, w.campaignOther)
	}
	if code, out := w.do(t, "a", "GET", "/api/v1/campaigns", ""); code != 200 || !strings.Contains(string(out), w.campaignOther) {
		t.Fatalf("campaigns listed by the team's key: %d %s", code, out)
	}
}

// TestListPagesAreBounded: a list page leaves out bodies over 64 KB and stops adding bodies
// past 2 MB in all (each flagged, null), so a page of newsletters stays far below Lambda's 6 MB
// response limit; the email itself has its whole body.
func TestListPagesAreBounded(t *testing.T) {
	w := start(t)
	big := strings.Repeat("<p>news</p>", 100<<10/11)
	bigID := w.must(t, "a", "POST", "/api/v1/emails", sendBody(`,"html":"`+big+`"`))["emailId"].(string)
	mid := strings.Repeat("m", 60<<10)
	for range 40 {
		w.must(t, "a", "POST", "/api/v1/emails", sendBody(`,"html":"`+mid+`"`))
	}
	code, out := w.do(t, "a", "GET", "/api/v1/emails?limit=100", "")
	if code != 200 {
		t.Fatalf("list: %d %s", code, truncate(out))
	}
	if len(out) > 3<<20 {
		t.Errorf("a page of 43 emails is %d bytes, want at most 3 MB", len(out))
	}
	var page struct {
		Data []struct {
			ID          string  `json:"id"`
			HTML        *string `json:"html"`
			HTMLOmitted bool    `json:"htmlOmitted"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out, &page); err != nil {
		t.Fatal(err)
	}
	kept, omitted := 0, 0
	for _, e := range page.Data {
		switch {
		case e.ID == bigID && (e.HTML != nil || !e.HTMLOmitted):
			t.Errorf("the 100 KB html is listed (omitted %v)", e.HTMLOmitted)
		case e.HTML == nil && e.HTMLOmitted:
			omitted++
		case e.HTML != nil && !e.HTMLOmitted:
			kept++
		case e.HTML != nil && e.HTMLOmitted:
			t.Errorf("%s: html listed and flagged omitted", e.ID)
		}
	}
	if omitted < 2 || kept < 20 {
		t.Errorf("%d bodies kept and %d omitted; want the page filled to its budget, the rest flagged", kept, omitted)
	}
	detail := w.must(t, "a", "GET", "/api/v1/emails/"+bigID, "")
	if h, _ := detail["html"].(string); h != big {
		t.Errorf("GET /emails/{id} has %d bytes of html, want the whole %d", len(h), len(big))
	}
}

// TestSendingKeyDoesNotSeeUnsubscribeLinks: a SENDING key reads a campaign email with its
// unsubscribe link redacted (with the link it could unsubscribe the campaign's recipients); a
// FULL key sees it.
func TestSendingKeyDoesNotSeeUnsubscribeLinks(t *testing.T) {
	w := start(t)
	w.must(t, "a", "POST", "/api/v1/campaigns/"+w.campaignA+"/schedule", `{}`)
	var id string
	for deadline := time.Now().Add(10 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		code, out := w.do(t, "a", "GET", "/api/v1/emails?limit=100", "")
		if code != 200 {
			t.Fatalf("list: %d %s", code, out)
		}
		var page struct {
			Data []struct {
				ID   string  `json:"id"`
				HTML *string `json:"html"`
			} `json:"data"`
		}
		_ = json.Unmarshal(out, &page)
		for _, e := range page.Data {
			if e.HTML != nil && strings.Contains(*e.HTML, "/unsubscribe/") {
				id = e.ID
			}
		}
	}
	if id == "" {
		t.Fatal("no campaign email with an unsubscribe link")
	}
	full := w.must(t, "a", "GET", "/api/v1/emails/"+id, "")
	sending := w.must(t, "a-sending", "GET", "/api/v1/emails/"+id, "")
	fh, _ := full["html"].(string)
	sh, _ := sending["html"].(string)
	if strings.Contains(fh, "/unsubscribe/redacted") || !strings.Contains(sh, "/unsubscribe/redacted") {
		t.Fatalf("FULL key html %q; SENDING key html %q; want the link for FULL only", truncate([]byte(fh)), truncate([]byte(sh)))
	}
	_, list := w.do(t, "a-sending", "GET", "/api/v1/emails?limit=100", "")
	token := fh[strings.Index(fh, "/unsubscribe/")+len("/unsubscribe/"):]
	token = token[:strings.IndexAny(token+`"<> `, `"<> `)]
	if strings.Contains(string(list), token) {
		t.Error("the SENDING key's list shows the unsubscribe token")
	}
}

// TestOldUnsubscribeLinkAfterResubscribing: a campaign's unsubscribe link unsubscribes its
// contact; once the contact subscribes again, that old link no longer unsubscribes it.
func TestOldUnsubscribeLinkAfterResubscribing(t *testing.T) {
	w := start(t)
	w.must(t, "a", "POST", "/api/v1/campaigns/"+w.campaignA+"/schedule", `{}`)
	var link string
	for deadline := time.Now().Add(10 * time.Second); link == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		_, out := w.do(t, "a", "GET", "/api/v1/emails?limit=100", "")
		if i := strings.Index(string(out), "/unsubscribe/"); i >= 0 {
			rest := string(out[i:])
			link = rest[:strings.IndexAny(rest, `"<\ `)]
		}
	}
	if link == "" {
		t.Fatal("no unsubscribe link")
	}
	if strings.Contains(link, "reader") {
		t.Errorf("the link %s shows the recipient", link)
	}
	contactID := ""
	subscribed := func() bool {
		code, out := w.do(t, "a", "GET", "/api/v1/contactBooks/"+w.bookA+"/contacts", "")
		if code != 200 {
			t.Fatalf("contacts: %d %s", code, out)
		}
		var list []struct {
			ID         string `json:"id"`
			Subscribed bool   `json:"subscribed"`
		}
		if err := json.Unmarshal(out, &list); err != nil || len(list) != 1 {
			t.Fatalf("contacts: %s", out)
		}
		contactID = list[0].ID
		return list[0].Subscribed
	}
	if code, out := w.do(t, "", "POST", link, ""); code != 200 || subscribed() {
		t.Fatalf("unsubscribe: %d %s; still subscribed %v", code, truncate(out), subscribed())
	}
	// An upsert saying subscribed leaves an unsubscribed contact unsubscribed; the contact
	// subscribes again when its book's owner sets it back with a PATCH.
	w.must(t, "a", "POST", "/api/v1/contactBooks/"+w.bookA+"/contacts", `{"email":"reader@example.org","subscribed":true}`)
	if subscribed() {
		t.Fatal("an upsert re-subscribed the contact")
	}
	w.must(t, "a", "PATCH", "/api/v1/contactBooks/"+w.bookA+"/contacts/"+contactID, `{"subscribed":true}`)
	if !subscribed() {
		t.Fatal("the contact did not subscribe again")
	}
	code, out := w.do(t, "", "POST", link, "")
	if code != 200 || !strings.Contains(string(out), "Still subscribed") || !subscribed() {
		t.Fatalf("the old link after subscribing again: %d %s; subscribed %v; want the contact left subscribed", code, truncate(out), subscribed())
	}
}

// TestRescheduleHistoryIsCapped: each reschedule is an event of the email's history; the 51st
// is refused.
func TestRescheduleHistoryIsCapped(t *testing.T) {
	w := start(t)
	at := time.Now().UTC().Add(48 * time.Hour)
	id := w.must(t, "a", "POST", "/api/v1/emails", sendBody(`,"scheduledAt":"`+at.Format(time.RFC3339)+`"`))["emailId"].(string)
	for i := range 51 {
		code, out := w.do(t, "a", "PATCH", "/api/v1/emails/"+id, `{"scheduledAt":"`+at.Add(time.Duration(i+1)*time.Minute).Format(time.RFC3339)+`"}`)
		switch {
		case i < 50 && code != 200:
			t.Fatalf("reschedule %d: %d %s", i+1, code, out)
		case i == 50 && (code != 400 || !strings.Contains(string(out), "at most 50")):
			t.Fatalf("reschedule 51: %d %s, want 400", code, out)
		}
	}
}

// TestScheduledEmailsAreCapped: a team's emails waiting in SCHEDULED are capped (each holds a
// schedule of the shared account): a request that would pass the cap is a 403 that writes
// nothing of it, sending now is not affected, and a cancelled or fired email frees its place.
func TestScheduledEmailsAreCapped(t *testing.T) {
	w := start(t, func(c *config.Config) { c.MaxScheduled = 3 })
	later := `,"scheduledAt":"` + time.Now().UTC().Add(48*time.Hour).Format(time.RFC3339) + `"`
	batch := func(n int, extra string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(sendBody(extra)+",", n), ",") + "]"
	}
	count := func() int {
		t.Helper()
		var page struct {
			Count int `json:"count"`
		}
		_, out := w.do(t, "a", "GET", "/api/v1/emails?limit=100", "")
		if err := json.Unmarshal(out, &page); err != nil {
			t.Fatal(err)
		}
		return page.Count
	}
	w.must(t, "a", "POST", "/api/v1/emails/batch", batch(2, later))
	before := count()
	code, out := w.do(t, "a", "POST", "/api/v1/emails/batch", batch(2, later))
	if code != 403 || !strings.Contains(string(out), "at most 3 scheduled emails") {
		t.Fatalf("a batch past the cap: %d %s, want 403", code, out)
	}
	if n := count(); n != before {
		t.Fatalf("the refused batch wrote %d emails", n-before)
	}
	w.must(t, "a", "POST", "/api/v1/emails/batch", batch(3, "")) // now: not capped
	third := w.must(t, "a", "POST", "/api/v1/emails", sendBody(later))["emailId"].(string)
	if code, out := w.do(t, "a", "POST", "/api/v1/emails", sendBody(later)); code != 403 {
		t.Fatalf("a fourth scheduled email: %d %s, want 403", code, out)
	}
	// Another team has its own count.
	w.must(t, "b", "POST", "/api/v1/emails", `{"from":"hi@b.example.net","to":"x@example.org","subject":"s","text":"t"`+later+`}`)
	w.must(t, "a", "POST", "/api/v1/emails/"+third+"/cancel", "")
	w.must(t, "a", "POST", "/api/v1/emails", sendBody(later))
}

func TestHostileInput(t *testing.T) {
	w := start(t)
	for _, r := range rows() {
		t.Run(r.name, func(t *testing.T) {
			draft := ""
			if strings.Contains(r.path, "{draft}") { // a campaign of its own, still a draft
				draft = w.must(t, "a", "POST", "/api/v1/campaigns", strings.ReplaceAll(campaignBody(""), "{book}", w.bookA))["id"].(string)
			}
			repl := strings.NewReplacer("{email}", w.emailA, "{book}", w.bookA, "{campaign}", w.campaignA, "{draft}", draft,
				"{template}", w.templateA, "{campaign2}", w.campaignOther)
			key := r.key
			if k, ok := strings.CutPrefix(key, "upper:"); ok {
				prefix, secret, _ := strings.Cut(w.keys[k], "_")
				id, rest, _ := strings.Cut(secret, "_")
				key = prefix + "_" + id + "_" + strings.ToUpper(rest)
			}
			code, out := w.do(t, key, r.method, repl.Replace(r.path), repl.Replace(r.body), r.headers...)
			if code != r.status {
				t.Fatalf("%s %s: %d %s, want %d", r.method, r.path, code, truncate(out), r.status)
			}
			if code == 200 || r.page {
				return
			}
			var e struct {
				Error struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(out, &e); err != nil || e.Error.Message == "" {
				t.Fatalf("error body %s is not the documented shape", truncate(out))
			}
			for _, s := range r.contains {
				if !strings.Contains(e.Error.Message, s) {
					t.Errorf("message %q does not name %q", e.Error.Message, s)
				}
			}
			for _, s := range r.absent {
				if strings.Contains(e.Error.Message, s) {
					t.Errorf("message %q contains %q", truncate([]byte(e.Error.Message)), truncate([]byte(s)))
				}
			}
		})
	}
}

// TestResponsesAreBoundedEncoded: the bounds count what a body costs encoded, not its bytes:
// html made of < > & (each six bytes as \u003c in escaped JSON) stays within a page's budget
// and a detail's, and is sent one byte a character. An email too large for one detail answer
// (a Lambda response is at most 6 MB) is read with its html left out, flagged, and its text.
func TestResponsesAreBoundedEncoded(t *testing.T) {
	w := start(t)
	marks := strings.Repeat("<>&", 20<<10) // 60 KB
	for range 35 {
		w.must(t, "a", "POST", "/api/v1/emails", sendBody(`,"html":"`+marks+`"`))
	}
	code, out := w.do(t, "a", "GET", "/api/v1/emails?limit=50", "")
	if code != 200 || len(out) > 3<<20 {
		t.Fatalf("a page of 35 emails of 60 KB html: %d, %d bytes; want 200 and at most 3 MB", code, len(out))
	}
	if strings.Contains(string(out), `\u003c`) {
		t.Errorf("the page escapes < as \\u003c")
	}

	small := w.must(t, "a", "POST", "/api/v1/emails", sendBody(`,"html":"`+strings.Repeat("<", 1<<20)+`"`))["emailId"].(string)
	code, out = w.do(t, "a", "GET", "/api/v1/emails/"+small, "")
	if code != 200 || len(out) > 1<<20+8<<10 {
		t.Errorf("an email of 1 MB html: %d, %d bytes; want 200 and about 1 MB", code, len(out))
	}

	huge := strings.Repeat("<p>a&b</p>", 460<<10) // 4.6 MB
	id := w.must(t, "a", "POST", "/api/v1/emails", sendBody(`,"html":"`+huge+`"`))["emailId"].(string)
	code, out = w.do(t, "a", "GET", "/api/v1/emails/"+id, "")
	if code != 200 || len(out) > 4<<20 {
		t.Fatalf("an email of 4.6 MB html: %d, %d bytes; want 200 and at most 4 MB", code, len(out))
	}
	var d struct {
		HTML        *string `json:"html"`
		Text        *string `json:"text"`
		HTMLOmitted bool    `json:"htmlOmitted"`
		TextOmitted bool    `json:"textOmitted"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatal(err)
	}
	if d.HTML != nil || !d.HTMLOmitted || d.Text == nil || *d.Text != "t" || d.TextOmitted {
		t.Errorf("detail: html %v omitted %v, text %v omitted %v; want the html left out (flagged) and the text",
			d.HTML != nil, d.HTMLOmitted, d.Text, d.TextOmitted)
	}
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}
