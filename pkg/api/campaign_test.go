package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/contact"
	"github.com/mailroom/mailroom/pkg/naturaldate"
	"github.com/mailroom/mailroom/pkg/store"
)

type campaignOut struct {
	ID                                                                                      string
	Status                                                                                  string
	ScheduledAt                                                                             *string
	BatchSize, BatchWindowMinutes                                                           int
	Total, Sent, Delivered, Opened, Clicked, Unsubscribed, Bounced, HardBounced, Complained int64
	ReplyTo, CC, BCC                                                                        []string
	PreviewText, ContactBookID, HTML, Content                                               *string
}

// book makes a contact book with the given contacts (JSON objects) and returns its id.
func (e *env) book(contacts ...string) string {
	e.t.Helper()
	var b struct{ ID string }
	e.mustDo("POST", "/api/v1/contactBooks", `{"name":"Newsletter","variables":["company"]}`, &b)
	if len(contacts) > 0 {
		e.mustDo("POST", "/api/v1/contactBooks/"+b.ID+"/contacts/bulk", "["+strings.Join(contacts, ",")+"]", nil)
	}
	return b.ID
}

func (e *env) campaign(id string) campaignOut {
	e.t.Helper()
	var c campaignOut
	e.mustDo("GET", "/api/v1/campaigns/"+id, "", &c)
	return c
}

func (e *env) awaitCampaign(id string, done func(campaignOut) bool) campaignOut {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c := e.campaign(id)
		if done(c) {
			return c
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("campaign %s never got there: %+v", id, c)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// outboxFor returns the messages in the outbox addressed to addr.
func (e *env) outboxFor(addr string) []string {
	e.t.Helper()
	files, _ := filepath.Glob(filepath.Join(e.app.OutboxDir, "*.eml"))
	var out []string
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if strings.Contains(strings.ToLower(string(b)), "to: ") && strings.Contains(strings.ToLower(headerBlock(string(b))), strings.ToLower(addr)) {
			out = append(out, string(b))
		}
	}
	return out
}

func headerBlock(msg string) string {
	head, _, _ := strings.Cut(msg, "\r\n\r\n")
	for _, l := range strings.Split(head, "\r\n") {
		if strings.HasPrefix(strings.ToLower(l), "to:") {
			return l
		}
	}
	return ""
}

const campaignHTML = `<p>Hi {{firstName}} from {{company,fallback=your team}}</p><a href="{{usesend_unsubscribe_url}}">unsubscribe</a>`

func TestCampaignEndToEnd(t *testing.T) {
	e := newEnv(t)
	bookID := e.book(
		`{"email":"ann@example.org","firstName":"Ann","properties":{"company":"Acme"}}`,
		`{"email":"bob@example.org","firstName":"Bob"}`,
		`{"email":"cid@example.org","firstName":"Cid"}`,
		`{"email":"dan@example.org","firstName":"Dan","subscribed":false}`,
	)
	// An import without "subscribed" must not re-subscribe Dan.
	e.mustDo("POST", "/api/v1/contactBooks/"+bookID+"/contacts", `{"email":"DAN@example.org","lastName":"Doe"}`, nil)
	// A later value of the book's variable, spelt in another case, replaces Ann's first one.
	e.mustDo("POST", "/api/v1/contactBooks/"+bookID+"/contacts", `{"email":"ann@example.org","properties":{"Company":"Initech"}}`, nil)
	var c campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"Launch","from":"News <news@example.com>","subject":"Hi {{firstName}}",
		"previewText":"Big news","contactBookId":"`+bookID+`","html":`+jsonString(campaignHTML)+`,"sendNow":true,"batchSize":2,
		"replyTo":"reply@example.com"}`, &c)
	if c.BatchSize != 2 || c.ReplyTo[0] != "reply@example.com" || c.CC == nil || c.PreviewText == nil {
		t.Errorf("created %+v", c)
	}
	c = e.awaitCampaign(c.ID, func(c campaignOut) bool { return c.Status == "SENT" && c.Delivered == 3 })
	if c.Total != 3 || c.Sent != 3 || c.Unsubscribed != 0 {
		t.Errorf("counters %+v", c)
	}
	var link string
	for name, want := range map[string]string{"ann": "Hi Ann from Initech", "bob": "Hi Bob from your team", "cid": "Hi Cid from your team"} {
		msgs := e.outboxFor(name + "@example.org")
		if len(msgs) != 1 {
			t.Fatalf("%s has %d messages, want 1", name, len(msgs))
		}
		m := msgs[0]
		for _, h := range []string{"Subject: Hi " + strings.ToUpper(name[:1]) + name[1:], "List-Unsubscribe: <http", "List-Unsubscribe-Post: List-Unsubscribe=One-Click", "Precedence: bulk"} {
			if !strings.Contains(m, h) {
				t.Errorf("%s's message lacks %q", name, h)
			}
		}
		if !strings.Contains(decodeQP(m), want) || !strings.Contains(decodeQP(m), "Big news") {
			t.Errorf("%s's message is not personalised (%q)", name, want)
		}
		// A text part made from the html, as upstream gives campaign emails, with the link's
		// address after its words.
		if !strings.Contains(m, "Content-Type: text/plain") || !strings.Contains(decodeQP(m), want+"\r\n\r\nunsubscribe [http") {
			t.Errorf("%s's message has no text part from its html", name)
		}
		if name == "bob" {
			link = regexp.MustCompile(`List-Unsubscribe: <([^>]+)>`).FindStringSubmatch(m)[1]
		}
	}
	if msgs := e.outboxFor("dan@example.org"); len(msgs) != 0 {
		t.Errorf("the unsubscribed contact got %d messages", len(msgs))
	}
	// Each email's to is its contact's bare address (not "Ann" <ann@…>), as upstream's.
	var list struct{ Data []struct{ To []string } }
	e.mustDo("GET", "/api/v1/emails", "", &list)
	var tos []string
	for _, em := range list.Data {
		tos = append(tos, em.To...)
	}
	slices.Sort(tos)
	if !slices.Equal(tos, []string{"ann@example.org", "bob@example.org", "cid@example.org"}) {
		t.Errorf("the campaign emails' to = %q, want the contacts' bare addresses", tos)
	}

	// The one-click link: GET only shows a form; POST unsubscribes, once.
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `<form method="post">`) {
		t.Errorf("GET link = %d %s", resp.StatusCode, body)
	}
	// Not to be framed by another site, and its token not handed on as a referrer.
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") ||
		resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("the link's page headers: %v", resp.Header)
	}
	if c := e.campaign(c.ID); c.Unsubscribed != 0 {
		t.Error("a GET unsubscribed someone")
	}
	for range 2 {
		resp, err := http.Post(link, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("one-click POST = %v %v", resp, err)
		}
		resp.Body.Close()
	}
	if c := e.campaign(c.ID); c.Unsubscribed != 1 {
		t.Errorf("unsubscribed = %d after two clicks, want 1", c.Unsubscribed)
	}
	var contacts []struct {
		Email      string
		Subscribed bool
	}
	e.mustDo("GET", "/api/v1/contactBooks/"+bookID+"/contacts?emails=bob@example.org", "", &contacts)
	if len(contacts) != 1 || contacts[0].Subscribed {
		t.Errorf("bob after unsubscribing: %+v", contacts)
	}
	tampered := strings.Replace(link, "/unsubscribe/", "/unsubscribe/x", 1)
	if resp, _ := http.Post(tampered, "text/plain", nil); resp.StatusCode != 404 {
		t.Errorf("tampered link = %d", resp.StatusCode)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// decodeQP undoes quoted-printable soft breaks and =3D enough to search a body.
func decodeQP(s string) string {
	return strings.NewReplacer("=\r\n", "", "=3D", "=").Replace(s)
}

// TestCampaignFromEditorContent: a campaign's content in the email editor's JSON (what
// useSend's SDKs send as content) is rendered to html, personalised per contact like an html
// body; a document the editor cannot have made is a 400 naming content.
func TestCampaignFromEditorContent(t *testing.T) {
	e := newEnv(t)
	bookID := e.book(`{"email":"ann@example.org","firstName":"Ann"}`, `{"email":"bob@example.org"}`)
	content := `{"type":"doc","content":[
		{"type":"heading","attrs":{"level":1},"content":[{"type":"text","text":"Spring news"}]},
		{"type":"paragraph","content":[{"type":"text","text":"Hello "},{"type":"variable","attrs":{"id":"firstName","fallback":"Tom & Jerry"}},{"type":"text","text":"!"}]},
		{"type":"button","attrs":{"text":"Read more","url":"https://example.com/news","buttonColor":"#000000","textColor":"#ffffff"}},
		{"type":"unsubscribeFooter","content":[{"type":"paragraph","content":[{"type":"text","text":"Unsubscribe","marks":[{"type":"link","attrs":{"href":"{{usesend_unsubscribe_url}}"}}]}]}]}]}`
	var c campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"Editor","from":"news@example.com","subject":"News","contactBookId":"`+bookID+`",
		"content":`+jsonString(content)+`,"sendNow":true}`, &c)
	c = e.awaitCampaign(c.ID, func(c campaignOut) bool { return c.Status == "SENT" && c.Sent == 2 })
	if c.Content == nil || !strings.Contains(*c.Content, `"type":"doc"`) || c.HTML == nil || !strings.Contains(*c.HTML, "<h1") {
		t.Errorf("the campaign keeps its content and shows its html: content %v, html %v", c.Content != nil, c.HTML != nil)
	}
	for addr, hello := range map[string]string{"ann@example.org": "Hello Ann!", "bob@example.org": "Hello Tom &amp; Jerry!"} {
		msgs := e.outboxFor(addr)
		if len(msgs) != 1 {
			t.Fatalf("%s has %d messages", addr, len(msgs))
		}
		body := decodeQP(msgs[0])
		for _, want := range []string{hello, ">Spring news</h1>", `<a href="https://example.com/news"`, ">Read more</a>", `<a href="http`} {
			if !strings.Contains(body, want) {
				t.Errorf("%s's message lacks %q", addr, want)
			}
		}
		if strings.Contains(body, `"type"`) || strings.Contains(body, "{{") {
			t.Errorf("%s's message shows the document or a placeholder", addr)
		}
	}
	for doc, want := range map[string]string{
		`{"type":"doc","content":[{"type":"columns"}]}`:                                                `content: node type "columns" is not supported`,
		`{"type":"doc","content":[{"type":"paragraph","content":[{"type":"text","text":"no link"}]}]}`: "content: must contain the unsubscribe link placeholder",
		`{"type":"doc"`:  "content: invalid JSON",
		`{"content":[]}`: "content: not an email editor document",
	} {
		r := e.do("POST", "/api/v1/campaigns", `{"name":"Bad","from":"news@example.com","subject":"News","contactBookId":"`+bookID+`","content":`+jsonString(doc)+`}`)
		if _, msg := r.errorOf(t); r.status != 400 || !strings.Contains(msg, want) {
			t.Errorf("content %s = %d %q, want 400 %q", doc, r.status, msg, want)
		}
	}
	// html in content that starts with a placeholder is html, as before.
	var h campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"Html","from":"news@example.com","subject":"News","contactBookId":"`+bookID+
		`","content":`+jsonString(`{{firstName}}, hello. <a href="{{usesend_unsubscribe_url}}">u</a>`)+`}`, &h)
}

func TestCampaignScheduleNaturalLanguage(t *testing.T) {
	e := newEnv(t)
	bookID := e.book(`{"email":"ann@example.org"}`)
	var c campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"Later","from":"news@example.com","subject":"s","contactBookId":"`+bookID+`","html":`+jsonString(campaignHTML)+`,"scheduledAt":"tomorrow 9am"}`, &c)
	want, _ := naturaldate.Parse("tomorrow 9am", e.clock.Now())
	if c.Status != "SCHEDULED" || c.ScheduledAt == nil || !strings.HasPrefix(*c.ScheduledAt, want.Format("2006-01-02T15:04:05")) || want.Hour() != 9 {
		t.Errorf("scheduled %+v, want %s", c, want)
	}
	// Paused before its start and resumed, it waits for its time again.
	e.mustDo("POST", "/api/v1/campaigns/"+c.ID+"/pause", "", nil)
	e.mustDo("POST", "/api/v1/campaigns/"+c.ID+"/resume", "", nil)
	time.Sleep(200 * time.Millisecond) // a wrongly immediate start would have run by now
	if got := e.campaign(c.ID); got.Status != "SCHEDULED" || got.Total != 0 {
		t.Errorf("resumed before its start: %s, total %d", got.Status, got.Total)
	}
	// A draft, then the schedule endpoint.
	var d campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"Draft","from":"news@example.com","subject":"s","contactBookId":"`+bookID+`","html":`+jsonString(campaignHTML)+`}`, &d)
	if d.Status != "DRAFT" {
		t.Fatalf("draft status %s", d.Status)
	}
	var ok struct{ Success bool }
	e.mustDo("POST", "/api/v1/campaigns/"+d.ID+"/schedule", `{"scheduledAt":"next monday 10:00"}`, &ok)
	if !ok.Success {
		t.Error("schedule answered no success")
	}
	if got := e.campaign(d.ID); got.Status != "SCHEDULED" || !strings.Contains(*got.ScheduledAt, "T10:00:00") {
		t.Errorf("after schedule: %+v", got)
	}
	// An ISO 8601 time without a zone (what Python's datetime.isoformat() gives) is UTC.
	later := time.Now().UTC().AddDate(0, 0, 3).Truncate(time.Second)
	e.mustDo("POST", "/api/v1/campaigns/"+d.ID+"/schedule", `{"scheduledAt":"`+later.Format("2006-01-02T15:04:05")+`"}`, &ok)
	if got := e.campaign(d.ID); got.ScheduledAt == nil || !strings.HasPrefix(*got.ScheduledAt, later.Format("2006-01-02T15:04:05")) {
		t.Errorf("after an ISO 8601 schedule without a zone: %+v, want %s UTC", got, later.Format("2006-01-02T15:04:05"))
	}
	r := e.do("POST", "/api/v1/campaigns/"+d.ID+"/schedule", `{"scheduledAt":"whenever"}`)
	if _, msg := r.errorOf(t); r.status != 400 || !strings.Contains(msg, "tomorrow 9am") {
		t.Errorf("unparseable time = %d %s", r.status, msg)
	}
	// A body of null is no object (it decoded as {}: the campaign started at once).
	r = e.do("POST", "/api/v1/campaigns/"+d.ID+"/schedule", `null`)
	if _, msg := r.errorOf(t); r.status != 400 || msg != "body: must be a JSON object" {
		t.Errorf("a null schedule = %d %s", r.status, msg)
	}
	if got := e.campaign(d.ID); got.Status != "SCHEDULED" || got.ScheduledAt == nil || !strings.HasPrefix(*got.ScheduledAt, later.Format("2006-01-02T15:04:05")) {
		t.Errorf("after a null schedule: %+v", got)
	}
	// The SDKs' sendNow (their types offer it for schedule too) starts now, before scheduledAt.
	var n campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"Now","from":"news@example.com","subject":"s","contactBookId":"`+bookID+`","html":`+jsonString(campaignHTML)+`}`, &n)
	e.mustDo("POST", "/api/v1/campaigns/"+n.ID+"/schedule", `{"sendNow":true,"scheduledAt":"next monday 10:00"}`, &ok)
	if got := e.awaitCampaign(n.ID, func(c campaignOut) bool { return c.Status == "SENT" }); got.Total != 1 {
		t.Errorf("sendNow: %+v", got)
	}
	var list struct {
		Campaigns []struct{ ID, Status string }
		TotalPage int
	}
	e.mustDo("GET", "/api/v1/campaigns?status=SCHEDULED&search=LATER", "", &list)
	if len(list.Campaigns) != 1 || list.Campaigns[0].ID != c.ID || list.TotalPage != 1 {
		t.Errorf("list = %+v", list)
	}
	e.mustDo("DELETE", "/api/v1/campaigns/"+c.ID, "", nil)
	if r := e.do("GET", "/api/v1/campaigns/"+c.ID, ""); r.status != 404 {
		t.Errorf("deleted campaign = %d", r.status)
	}
}

func TestCampaignPauseAndResume(t *testing.T) {
	e := newEnv(t)
	bookID := e.book(`{"email":"a@example.org"}`, `{"email":"b@example.org"}`, `{"email":"c@example.org"}`)
	var c campaignOut
	// One contact a batch, a minute between batches.
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"Slow","from":"news@example.com","subject":"s","contactBookId":"`+bookID+`","html":`+jsonString(campaignHTML)+`,"sendNow":true,"batchSize":1,"batchWindowMinutes":1}`, &c)
	awaitSteps(t, e, c.ID, 1)
	// Its total is its audience from the start (as upstream counts it when sending starts),
	// not the emails written so far: progress reads 1 of 3, not 1 of 1.
	if got := e.campaign(c.ID); got.Total != 3 || written(t, e, c.ID) != 1 {
		t.Fatalf("after the first batch: total %d, %d written; want 3 and 1", got.Total, written(t, e, c.ID))
	}
	e.mustDo("POST", "/api/v1/campaigns/"+c.ID+"/pause", "", nil)
	if got := e.campaign(c.ID); got.Status != "PAUSED" {
		t.Fatalf("after pause: %s", got.Status)
	}
	// The window's schedule fires while paused: nothing happens.
	fire(t, e, c.ID, 1)
	if got := e.campaign(c.ID); written(t, e, c.ID) != 1 || got.Status != "PAUSED" {
		t.Fatalf("a paused campaign advanced: %+v", got)
	}
	// Paused once under way, it is resumed, not scheduled again.
	if r := e.do("POST", "/api/v1/campaigns/"+c.ID+"/schedule", `{"scheduledAt":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`); r.status != 400 || !strings.Contains(string(r.body), "resume it") {
		t.Errorf("schedule a campaign paused mid-send = %d %s, want a 400 saying to resume it", r.status, r.body)
	}
	// A retried pause (as upstream answers it) succeeds and changes nothing.
	if r := e.do("POST", "/api/v1/campaigns/"+c.ID+"/pause", ""); r.status != 200 || e.campaign(c.ID).Status != "PAUSED" {
		t.Errorf("pause twice = %d %s, campaign %s; want 200, still PAUSED", r.status, r.body, e.campaign(c.ID).Status)
	}
	e.mustDo("POST", "/api/v1/campaigns/"+c.ID+"/resume", "", nil)
	awaitSteps(t, e, c.ID, 2) // the resumed step has moved the cursor
	if got := e.campaign(c.ID); got.Status != "RUNNING" || written(t, e, c.ID) != 2 {
		t.Fatalf("after resume: %s, %d written; want RUNNING, 2", got.Status, written(t, e, c.ID))
	}
	// So does a retried resume: no second step, the cursor where it was.
	if r := e.do("POST", "/api/v1/campaigns/"+c.ID+"/resume", ""); r.status != 200 {
		t.Errorf("resume twice = %d %s; want 200", r.status, r.body)
	}
	if got := e.campaign(c.ID); got.Status != "RUNNING" || written(t, e, c.ID) != 2 {
		t.Fatalf("after a second resume: %s, %d written; want RUNNING, 2", got.Status, written(t, e, c.ID))
	}
	fire(t, e, c.ID, 2) // the window passed: the last contact, and the book is done
	fire(t, e, c.ID, 2) // a repeated schedule is a no-op
	got := e.awaitCampaign(c.ID, func(c campaignOut) bool { return c.Status == "SENT" })
	if got.Total != 3 {
		t.Errorf("total %d, want 3", got.Total)
	}
	for _, action := range []string{"resume", "pause"} {
		if r := e.do("POST", "/api/v1/campaigns/"+c.ID+"/"+action, ""); r.status != 400 {
			t.Errorf("%s a sent campaign = %d", action, r.status)
		}
	}
}

// awaitSteps waits until the campaign has recorded n finished batch steps (its counters move
// before its cursor does).
func awaitSteps(t *testing.T, e *env, id string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := e.app.Store.GetCampaign(context.Background(), e.teamID, id)
		if err == nil && c.BatchesDone >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("campaign %s: %d steps done, want %d (%v)", id, c.BatchesDone, n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// written is the number of emails the campaign has written (its counted total).
func written(t *testing.T, e *env, id string) int64 {
	t.Helper()
	c, err := e.app.Store.GetCampaign(context.Background(), e.teamID, id)
	if err != nil {
		t.Fatal(err)
	}
	return c.Counters[store.CountTotal]
}

// fire delivers a campaign schedule's payload to the batch target, as the scheduler would.
func fire(t *testing.T, e *env, id string, step int) {
	t.Helper()
	payload, _ := json.Marshal(campaign.Payload{CampaignID: id, TeamID: e.teamID, Step: step})
	if err := e.app.Services.Campaigns.Fire(context.Background(), payload); err != nil {
		t.Fatal(err)
	}
}

// TestCampaignStepRetriedConcurrently: the same step run by many goroutines at once (a
// retried Lambda, a duplicate schedule) writes one email per contact.
func TestCampaignStepRetriedConcurrently(t *testing.T) {
	e := newEnv(t)
	var contacts []string
	for i := range 30 {
		contacts = append(contacts, fmt.Sprintf(`{"email":"c%02d@example.org"}`, i))
	}
	bookID := e.book(contacts...)
	var c campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"Race","from":"news@example.com","subject":"s","contactBookId":"`+bookID+`","html":`+jsonString(campaignHTML)+`,"batchSize":100}`, &c)
	// Make it RUNNING at step 0 without the scheduler: start it, then race the step.
	if _, err := e.app.Store.UpdateCampaign(context.Background(), e.teamID, c.ID, func(x *store.Campaign) error {
		x.Status = store.CampaignRunning
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fire(t, e, c.ID, 0)
		}()
	}
	wg.Wait()
	got := e.awaitCampaign(c.ID, func(c campaignOut) bool { return c.Status == "SENT" && c.Sent == 30 })
	if got.Total != 30 {
		t.Errorf("total = %d, want one email per contact (30)", got.Total)
	}
	var page struct{ Count int }
	e.mustDo("GET", "/api/v1/emails?limit=1", "", &page)
	if page.Count != 30 {
		t.Errorf("%d emails written, want 30", page.Count)
	}
}

func TestCampaignValidation(t *testing.T) {
	e := newEnv(t)
	full := e.book(`{"email":"a@example.org"}`)
	empty := e.book(`{"email":"gone@example.org","subscribed":false}`)
	base := `"name":"n","from":"news@example.com","subject":"s"`
	cases := map[string]string{
		`{` + base + `,"contactBookId":"` + full + `","html":"<p>no link</p>"}`:                                                  "html: must contain the unsubscribe",
		`{` + base + `,"contactBookId":"` + full + `"}`:                                                                          "html: html or content is required",
		`{"name":"n","subject":"s","contactBookId":"` + full + `","html":` + jsonString(campaignHTML) + `}`:                      "from: is required",
		`{` + base + `,"contactBookId":"nope","html":` + jsonString(campaignHTML) + `}`:                                          "contactBookId:",
		`{` + base + `,"contactBookId":"` + full + `","html":` + jsonString(campaignHTML) + `,"batchSize":100001}`:               "batchSize:",
		`{"name":"n","from":"x@other.com","subject":"s","contactBookId":"` + full + `","html":` + jsonString(campaignHTML) + `}`: "from: domain other.com",
		`{` + base + `,"contactBookId":"` + empty + `","html":` + jsonString(campaignHTML) + `,"sendNow":true}`:                  "contactBookId: the contact book has no subscribed contacts",
		`{` + base + `,"contactBookId":"` + full + `","html":` + jsonString(campaignHTML) + `,"scheduledAt":"someday maybe"}`:    "scheduledAt: could not understand",
	}
	for body, want := range cases {
		r := e.do("POST", "/api/v1/campaigns", body)
		if _, msg := r.errorOf(t); r.status != 400 || !strings.HasPrefix(msg, want) {
			t.Errorf("%s\n = %d %s, want %q", body, r.status, msg, want)
		}
	}
	var list struct{ Campaigns []any }
	e.mustDo("GET", "/api/v1/campaigns", "", &list)
	if len(list.Campaigns) != 0 {
		t.Errorf("refused campaigns left %d behind", len(list.Campaigns))
	}
	sending := e.keyFor(store.PermissionSending, 0)
	if r := e.request(sending, "GET", "/api/v1/campaigns", nil); r.status != 403 {
		t.Errorf("SENDING key listed campaigns: %d", r.status)
	}
}

func TestContactsAPI(t *testing.T) {
	e := newEnv(t)
	bookID := e.book()
	var created struct{ ContactID string }
	e.mustDo("POST", "/api/v1/contactBooks/"+bookID+"/contacts", `{"email":"Ann <ANN@example.org>","firstName":"Ann","properties":{"plan":"pro"}}`, &created)
	var again struct{ ContactID string }
	e.mustDo("PUT", "/api/v1/contactBooks/"+bookID+"/contacts/"+created.ContactID, `{"email":"ann@example.org","lastName":"Lee"}`, &again)
	if again.ContactID != created.ContactID {
		t.Errorf("PUT by the same email made another contact")
	}
	var ct struct {
		Email, FirstName, LastName string
		Subscribed                 bool
		Properties                 map[string]string
	}
	e.mustDo("GET", "/api/v1/contactBooks/"+bookID+"/contacts/"+created.ContactID, "", &ct)
	if ct.Email != "ann@example.org" || ct.FirstName != "Ann" || ct.LastName != "Lee" || !ct.Subscribed || ct.Properties["plan"] != "pro" {
		t.Errorf("contact %+v", ct)
	}
	e.mustDo("PATCH", "/api/v1/contactBooks/"+bookID+"/contacts/"+created.ContactID, `{"subscribed":false}`, nil)
	var book struct {
		Count struct{ Contacts int } `json:"_count"`
	}
	e.mustDo("GET", "/api/v1/contactBooks/"+bookID, "", &book)
	if book.Count.Contacts != 1 {
		t.Errorf("book count %d", book.Count.Contacts)
	}
	var bulk []string
	for i := range 1001 {
		bulk = append(bulk, fmt.Sprintf(`{"email":"u%d@example.org"}`, i))
	}
	if r := e.do("POST", "/api/v1/contactBooks/"+bookID+"/contacts/bulk", "["+strings.Join(bulk, ",")+"]"); r.status != 400 {
		t.Errorf("1001 contacts = %d", r.status)
	}
	if r := e.do("POST", "/api/v1/contactBooks/"+bookID+"/contacts/bulk", `[{"email":"ok@example.org"},{"email":"bad"}]`); r.status != 400 {
		t.Errorf("bulk with a bad element = %d", r.status)
	}
	// Every bad element is named, those that do not decode and those that do not validate,
	// the first 20 of them.
	r := e.do("POST", "/api/v1/contactBooks/"+bookID+"/contacts/bulk", `[{"email":"bad"},{"email":"ok@example.org","firstName":1},3]`)
	if _, msg := r.errorOf(t); r.status != 400 || !strings.Contains(msg, "[0].email") || !strings.Contains(msg, "[1].firstName") || !strings.Contains(msg, "[2]") {
		t.Errorf("bulk with three bad elements: %d %q", r.status, msg)
	}
	var many []string
	for i := range 25 {
		many = append(many, fmt.Sprintf(`{"email":"bad%d"}`, i))
	}
	r = e.do("POST", "/api/v1/contactBooks/"+bookID+"/contacts/bulk", "["+strings.Join(many, ",")+"]")
	if _, msg := r.errorOf(t); r.status != 400 || !strings.Contains(msg, "[19].email") || strings.Contains(msg, "[20]") || !strings.HasSuffix(msg, "; and 5 more") {
		t.Errorf("bulk with 25 bad elements: %d %q", r.status, msg)
	}
	// An empty list adds nothing and is no error (upstream's schema has no minimum); null is no list.
	var res struct{ Count int }
	if e.mustDo("POST", "/api/v1/contactBooks/"+bookID+"/contacts/bulk", `[]`, &res); res.Count != 0 {
		t.Errorf("bulk of nothing: count %d", res.Count)
	}
	if r := e.do("POST", "/api/v1/contactBooks/"+bookID+"/contacts/bulk", `null`); r.status != 400 {
		t.Errorf("bulk of null = %d", r.status)
	}
	e.mustDo("POST", "/api/v1/contactBooks/"+bookID+"/contacts/bulk", "["+strings.Join(bulk[:5], ",")+"]", &res)
	if res.Count != 5 {
		t.Errorf("bulk count %d", res.Count)
	}
	var list []struct{ ID, Email string }
	e.mustDo("GET", "/api/v1/contactBooks/"+bookID+"/contacts?limit=2&page=2", "", &list)
	if len(list) != 2 || list[0].Email != "u1@example.org" {
		t.Errorf("page 2 = %+v", list) // email order: ann, u0, u1, u2, u3, u4
	}
	// Without a limit a list holds up to 5000 contacts (useSend's default, which its Python
	// SDK's contacts.list relies on), not a page of 50.
	e.mustDo("POST", "/api/v1/contactBooks/"+bookID+"/contacts/bulk", "["+strings.Join(bulk[5:120], ",")+"]", &res)
	e.mustDo("GET", "/api/v1/contactBooks/"+bookID+"/contacts", "", &list)
	if len(list) != 121 {
		t.Errorf("a list without a limit holds %d contacts, want all 121", len(list))
	}
	// A page whose answer would pass Lambda's 6 MB is refused, naming limit: contacts with 50
	// properties of 2 KB take about 100 KB each.
	props := map[string]string{}
	for i := range contact.MaxProperties {
		props[fmt.Sprintf("p%02d", i)] = strings.Repeat("x", contact.MaxValue)
	}
	for i := range 60 {
		if _, err := e.app.Services.Contacts.Upsert(context.Background(), e.teamID, bookID, contact.Fields{
			Email: new(fmt.Sprintf("big%02d@example.org", i)), Properties: props}); err != nil {
			t.Fatal(err)
		}
	}
	if r := e.do("GET", "/api/v1/contactBooks/"+bookID+"/contacts", ""); r.status != 400 {
		t.Errorf("a 6 MB page = %d, want 400", r.status)
	} else if _, msg := r.errorOf(t); !strings.HasPrefix(msg, "limit: ") {
		t.Errorf("a 6 MB page: %q, want it to name limit", msg)
	}
	e.mustDo("GET", "/api/v1/contactBooks/"+bookID+"/contacts?limit=20", "", &list)
	if len(list) != 20 {
		t.Errorf("a smaller page holds %d contacts, want 20", len(list))
	}
	if r := e.do("GET", "/api/v1/contactBooks/"+bookID+"/contacts?limit=5001", ""); r.status != 400 {
		t.Errorf("limit 5001 = %d, want 400", r.status)
	} else if _, msg := r.errorOf(t); !strings.Contains(msg, "limit") || !strings.Contains(msg, "5000") {
		t.Errorf("limit 5001: %q, want it to name limit and 5000", msg)
	}
	ids := []string{}
	e.mustDo("GET", "/api/v1/contactBooks/"+bookID+"/contacts?emails=u0@example.org,u1@example.org", "", &list)
	for _, c := range list {
		ids = append(ids, `"`+c.ID+`"`)
	}
	var del struct {
		Success bool
		Count   int
	}
	e.mustDo("DELETE", "/api/v1/contactBooks/"+bookID+"/contacts/bulk", `{"contactIds":[`+strings.Join(ids, ",")+`]}`, &del)
	if !del.Success || del.Count != 2 {
		t.Errorf("bulk delete = %+v", del)
	}
	e.mustDo("DELETE", "/api/v1/contactBooks/"+bookID+"/contacts/"+created.ContactID, "", nil)
	if r := e.do("GET", "/api/v1/contactBooks/"+bookID+"/contacts/"+created.ContactID, ""); r.status != 404 {
		t.Errorf("deleted contact = %d", r.status)
	}
	other, _ := e.newTeam("other", store.PermissionFull, 0)
	if r := e.request(other, "GET", "/api/v1/contactBooks/"+bookID+"/contacts", nil); r.status != 404 {
		t.Errorf("another team's book = %d", r.status)
	}
	// Deleting a book removes its contacts in the background.
	e.mustDo("DELETE", "/api/v1/contactBooks/"+bookID, "", nil)
	e.app.Periodic(context.Background())
	if n, _ := e.app.Services.Contacts.PurgeDeletedBooks(context.Background()); n != 0 {
		t.Errorf("contacts left after the purge: %d more removed", n)
	}
	if r := e.do("GET", "/api/v1/contactBooks/"+bookID, ""); r.status != 404 {
		t.Errorf("deleted book = %d", r.status)
	}
}

// TestUnsubscribeAfterReimport: a contact deleted and imported again has a new id; the link in
// an email sent before must still unsubscribe it.
func TestUnsubscribeAfterReimport(t *testing.T) {
	e := newEnv(t)
	bookID := e.book(`{"email":"ann@example.org","firstName":"Ann"}`)
	var c campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"n","from":"news@example.com","subject":"s","contactBookId":"`+bookID+`","html":`+jsonString(campaignHTML)+`,"sendNow":true}`, &c)
	e.awaitCampaign(c.ID, func(c campaignOut) bool { return c.Status == "SENT" && c.Sent == 1 })
	link := regexp.MustCompile(`List-Unsubscribe: <([^>]+)>`).FindStringSubmatch(e.outboxFor("ann@example.org")[0])[1]
	var list []struct{ ID string }
	e.mustDo("GET", "/api/v1/contactBooks/"+bookID+"/contacts", "", &list)
	e.mustDo("DELETE", "/api/v1/contactBooks/"+bookID+"/contacts/"+list[0].ID, "", nil)
	e.mustDo("POST", "/api/v1/contactBooks/"+bookID+"/contacts", `{"email":"ann@example.org"}`, nil)
	resp, err := http.Post(link, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST link: %v %v", resp, err)
	}
	resp.Body.Close()
	var contacts []struct{ Subscribed bool }
	e.mustDo("GET", "/api/v1/contactBooks/"+bookID+"/contacts?emails=ann@example.org", "", &contacts)
	if len(contacts) != 1 || contacts[0].Subscribed {
		t.Errorf("the re-imported contact is still subscribed: %+v", contacts)
	}
}

// TestCampaignWhoseBookIsDeletedPauses: a step that cannot succeed pauses the campaign instead
// of failing again at every retry.
func TestCampaignWhoseBookIsDeletedPauses(t *testing.T) {
	e := newEnv(t)
	bookID := e.book(`{"email":"a@example.org"}`, `{"email":"b@example.org"}`, `{"email":"c@example.org"}`)
	var c campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"n","from":"news@example.com","subject":"s","contactBookId":"`+bookID+`","html":`+jsonString(campaignHTML)+`,"sendNow":true,"batchSize":1,"batchWindowMinutes":60}`, &c)
	awaitSteps(t, e, c.ID, 1)
	e.mustDo("DELETE", "/api/v1/contactBooks/"+bookID, "", nil)
	fire(t, e, c.ID, 1)
	if got := e.campaign(c.ID); got.Status != "PAUSED" || written(t, e, c.ID) != 1 {
		t.Errorf("after its book was deleted: %s, %d written; want PAUSED, 1", got.Status, written(t, e, c.ID))
	}
}

// TestCampaignStartFiredEarlyRearmsUnderANewName: a start that fires 50 s before the
// campaign's time sends nothing and puts one schedule back for that time under a new name;
// that one starts the campaign. Deleting the campaign removes a pending start.
func TestCampaignStartFiredEarlyRearmsUnderANewName(t *testing.T) {
	e := newEnv(t)
	bookID := e.book(`{"email":"ann@example.org"}`)
	at := e.clock.Now().Add(time.Hour).UTC().Truncate(time.Second)
	var c campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"Later","from":"news@example.com","subject":"s","contactBookId":"`+bookID+`","html":`+jsonString(campaignHTML)+`,"scheduledAt":"`+at.Format(time.RFC3339)+`"}`, &c)
	get := e.schedule
	start, ok := get(campaign.ScheduleName(c.ID, 0, 0))
	if !ok || !start.At.Equal(at) {
		t.Fatalf("start schedule = %+v %v, want one at %s", start, ok, at)
	}
	e.clock.Add(time.Hour - 50*time.Second)
	if err := e.app.Services.Campaigns.Fire(context.Background(), start.Payload); err != nil {
		t.Fatal(err)
	}
	if got := e.campaign(c.ID); got.Status != "SCHEDULED" || got.Total != 0 {
		t.Fatalf("an early start ran: %s, total %d", got.Status, got.Total)
	}
	rearmed, ok := get(campaign.ScheduleName(c.ID, 0, 1))
	if !ok || !rearmed.At.Equal(at) {
		t.Fatalf("re-armed start = %+v %v, want one at %s under a new name", rearmed, ok, at)
	}
	if _, ok := get(campaign.ScheduleName(c.ID, 0, 2)); ok {
		t.Fatal("re-armed twice")
	}
	e.clock.Add(50 * time.Second)
	if err := e.app.Services.Campaigns.Fire(context.Background(), rearmed.Payload); err != nil {
		t.Fatal(err)
	}
	if got := e.campaign(c.ID); got.Status != "SENT" || got.Total != 1 {
		t.Fatalf("after the on-time start: %s, total %d; want SENT, 1", got.Status, got.Total)
	}

	// A scheduled campaign deleted before its start: its start schedule goes with it.
	var d campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"Gone","from":"news@example.com","subject":"s","contactBookId":"`+bookID+`","html":`+jsonString(campaignHTML)+`,"scheduledAt":"`+at.Add(time.Hour).Format(time.RFC3339)+`"}`, &d)
	if _, ok := get(campaign.ScheduleName(d.ID, 0, 0)); !ok {
		t.Fatal("no start schedule")
	}
	e.mustDo("DELETE", "/api/v1/campaigns/"+d.ID, "", nil)
	if _, ok := get(campaign.ScheduleName(d.ID, 0, 0)); ok {
		t.Error("the deleted campaign's start schedule is still pending")
	}
}

// A whole number written as a float (Python's 500.0) is the integer; a fraction is still a 400.
func TestIntegerFieldsTakeWholeFloats(t *testing.T) {
	e := newEnv(t)
	book := e.book()
	body := func(size string) string {
		return `{"name":"Floats","from":"news@example.com","subject":"News","contactBookId":"` + book +
			`","html":"<p>1.5 <a href=\"{{usesend_unsubscribe_url}}\">Unsubscribe</a></p>","batchSize":` + size + `}`
	}
	var c campaignOut
	e.mustDo("POST", "/api/v1/campaigns", body("500.0"), &c)
	if c.BatchSize != 500 || c.HTML == nil || !strings.Contains(*c.HTML, "<p>1.5 ") {
		t.Errorf("batchSize 500.0: %+v", c)
	}
	e.mustDo("POST", "/api/v1/campaigns", body("5e2"), &c)
	if c.BatchSize != 500 {
		t.Errorf("batchSize 5e2: %d", c.BatchSize)
	}
	if r := e.do("POST", "/api/v1/campaigns", body("500.5")); r.status != 400 {
		t.Errorf("batchSize 500.5 = %d, want 400", r.status)
	}
}

// An empty scheduledAt is a 400, on create and on schedule: not a draft, nor a start now.
func TestCampaignEmptyScheduledAt(t *testing.T) {
	e := newEnv(t)
	book := e.book()
	create := `{"name":"Empty","from":"news@example.com","subject":"News","contactBookId":"` + book +
		`","html":"<a href=\"{{usesend_unsubscribe_url}}\">Unsubscribe</a>","scheduledAt":""}`
	if r := e.do("POST", "/api/v1/campaigns", create); r.status != 400 || !strings.Contains(string(r.body), "scheduledAt:") {
		t.Errorf("create with scheduledAt \"\" = %d %s", r.status, r.body)
	}
	var c campaignOut
	e.mustDo("POST", "/api/v1/campaigns", strings.Replace(create, `,"scheduledAt":""`, "", 1), &c)
	if r := e.do("POST", "/api/v1/campaigns/"+c.ID+"/schedule", `{"scheduledAt":""}`); r.status != 400 || !strings.Contains(string(r.body), "scheduledAt:") {
		t.Errorf("schedule with scheduledAt \"\" = %d %s", r.status, r.body)
	}
	if got := e.campaign(c.ID); got.Status != "DRAFT" {
		t.Errorf("after the refused schedule the campaign is %s", got.Status)
	}
}

// A campaign's scheduledAt with a fraction of a second rounds up, as an email's does.
func TestCampaignScheduledAtRoundsUp(t *testing.T) {
	e := newEnv(t)
	book := e.book(`{"email":"a@example.org"}`)
	at := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	var c campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"Later","from":"news@example.com","subject":"News","contactBookId":"`+book+
		`","html":"<a href=\"{{usesend_unsubscribe_url}}\">Unsubscribe</a>","scheduledAt":"`+at.Add(950*time.Millisecond).Format(time.RFC3339Nano)+`"}`, &c)
	if c.ScheduledAt == nil || !strings.HasPrefix(*c.ScheduledAt, at.Add(time.Second).Format("2006-01-02T15:04:05")) {
		t.Errorf("scheduledAt %v, want %s rounded up", c.ScheduledAt, at.Add(950*time.Millisecond))
	}
}

// TestCampaignEmailsOfADeletedBookAreSettled: a campaign whose contact book is deleted cannot
// resume, so its emails are not held for ever: one the worker meets afterwards is SUPPRESSED
// (the book was deleted, though its contacts are still being removed), and one it held while
// the campaign was paused is released by the housekeeping and then SUPPRESSED. Nothing is
// mailed and nothing stays QUEUED.
func TestCampaignEmailsOfADeletedBookAreSettled(t *testing.T) {
	e := newEnvAt(t, t.TempDir(), 0) // no delivery goroutines: the test delivers
	ctx := context.Background()
	bookID := e.book(`{"email":"a@example.org"}`, `{"email":"b@example.org"}`, `{"email":"c@example.org"}`)
	var c campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"n","from":"news@example.com","subject":"s","contactBookId":"`+bookID+`","html":`+jsonString(campaignHTML)+`,"sendNow":true,"batchSize":2,"batchWindowMinutes":60}`, &c)
	awaitSteps(t, e, c.ID, 1)
	var list struct{ Data []struct{ ID string } }
	e.mustDo("GET", "/api/v1/emails", "", &list)
	if len(list.Data) != 2 {
		t.Fatalf("%d emails written, want 2", len(list.Data))
	}
	held, later := list.Data[0].ID, list.Data[1].ID

	e.mustDo("POST", "/api/v1/campaigns/"+c.ID+"/pause", "", nil)
	if err := e.app.Worker.Deliver(ctx, held); err != nil {
		t.Fatal(err)
	}
	if em, _ := e.app.Store.GetEmail(ctx, held); !em.Held || em.Status != store.StatusQueued {
		t.Fatalf("paused campaign's email: %s held %v, want QUEUED and held", em.Status, em.Held)
	}
	e.mustDo("DELETE", "/api/v1/contactBooks/"+bookID, "", nil)
	if err := e.app.Worker.Deliver(ctx, later); err != nil {
		t.Fatal(err)
	}
	if n, err := e.app.Services.Campaigns.SettleDeletedBooks(ctx); err != nil || n != 1 {
		t.Fatalf("SettleDeletedBooks: %d, %v; want the held email released", n, err)
	}
	if err := e.app.Worker.Deliver(ctx, held); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{held, later} {
		d := e.get(id)
		last := d.EmailEvents[len(d.EmailEvents)-1]
		if d.LatestStatus != "SUPPRESSED" || !strings.Contains(string(last.Data), "contact book was deleted") {
			t.Errorf("%s: %s, last event %s %s; want SUPPRESSED, the book deleted", id, d.LatestStatus, last.Status, last.Data)
		}
	}
	if n, err := e.app.Services.Campaigns.SettleDeletedBooks(ctx); err != nil || n != 0 {
		t.Errorf("SettleDeletedBooks again: %d, %v; want nothing left", n, err)
	}
	if files, _ := filepath.Glob(filepath.Join(e.app.OutboxDir, "*.eml")); len(files) != 0 {
		t.Errorf("%d messages mailed, want none", len(files))
	}
}

// A campaign email's hard bounce or complaint unsubscribes the contact, in every book of the
// team that has the address, with the reason, and the campaign counts it unsubscribed, as
// upstream does; a soft bounce or a send outside a campaign unsubscribes nobody.
func TestCampaignBounceAndComplaintUnsubscribe(t *testing.T) {
	e := newEnv(t)
	bookID := e.book(`{"email":"bounce@simulator.amazonses.com"}`, `{"email":"complaint@simulator.amazonses.com"}`,
		`{"email":"ooto@simulator.amazonses.com"}`, `{"email":"success@simulator.amazonses.com"}`)
	other := e.book(`{"email":"complaint@simulator.amazonses.com"}`, `{"email":"success@simulator.amazonses.com"}`)
	// A single send's complaint suppresses the address but unsubscribes nobody (upstream's
	// rule is for campaign emails).
	third := e.book(`{"email":"complaint+single@simulator.amazonses.com"}`)
	e.send(`{"to":"complaint+single@simulator.amazonses.com","from":"hello@example.com","subject":"s","text":"t"}`)

	var c campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"B","from":"news@example.com","subject":"s","contactBookId":"`+bookID+`","html":`+jsonString(campaignHTML)+`,"sendNow":true}`, &c)
	c = e.awaitCampaign(c.ID, func(c campaignOut) bool { return c.Status == "SENT" && c.Complained == 1 && c.HardBounced == 1 })
	c = e.awaitCampaign(c.ID, func(c campaignOut) bool { return c.Unsubscribed == 2 })
	if c.Bounced != 1 || c.Delivered != 3 { // the complaint was delivered first
		t.Errorf("counters %+v, want 1 bounced, 3 delivered", c)
	}
	type contactOut struct {
		Email             string
		Subscribed        bool
		UnsubscribeReason *string
	}
	reasons := func(book string) map[string]string {
		var list []contactOut
		e.mustDo("GET", "/api/v1/contactBooks/"+book+"/contacts", "", &list)
		got := map[string]string{}
		for _, ct := range list {
			r := "null"
			if ct.UnsubscribeReason != nil {
				r = *ct.UnsubscribeReason
			}
			if ct.Subscribed != (ct.UnsubscribeReason == nil) {
				t.Errorf("%s: subscribed %v with reason %s", ct.Email, ct.Subscribed, r)
			}
			got[ct.Email] = r
		}
		return got
	}
	for book, want := range map[string]map[string]string{
		bookID: {"bounce@simulator.amazonses.com": "BOUNCED", "complaint@simulator.amazonses.com": "COMPLAINED",
			"ooto@simulator.amazonses.com": "null", "success@simulator.amazonses.com": "null"},
		other: {"complaint@simulator.amazonses.com": "COMPLAINED", "success@simulator.amazonses.com": "null"},
		third: {"complaint+single@simulator.amazonses.com": "null"},
	} {
		if got := reasons(book); !maps.Equal(got, want) {
			t.Errorf("book %s: %v, want %v", book, got, want)
		}
	}
	// The reason follows the contact: a PATCH that unsubscribes says UNSUBSCRIBED, one that
	// subscribes again clears it.
	var list []struct{ ID, Email string }
	e.mustDo("GET", "/api/v1/contactBooks/"+other+"/contacts", "", &list)
	for _, ct := range list {
		if ct.Email != "success@simulator.amazonses.com" {
			continue
		}
		path := "/api/v1/contactBooks/" + other + "/contacts/" + ct.ID
		var got contactOut
		e.mustDo("PATCH", path, `{"subscribed":false}`, nil)
		if e.mustDo("GET", path, "", &got); got.UnsubscribeReason == nil || *got.UnsubscribeReason != "UNSUBSCRIBED" {
			t.Errorf("after unsubscribing: %+v, want UNSUBSCRIBED", got)
		}
		e.mustDo("PATCH", path, `{"subscribed":true}`, nil)
		if e.mustDo("GET", path, "", &got); got.UnsubscribeReason != nil || !got.Subscribed {
			t.Errorf("after subscribing again: %+v, want subscribed, reason null", got)
		}
	}
}

// A campaign paused before its start is scheduled again for a new time (the schedule call
// resumes it), as upstream schedules a campaign of any status.
func TestCampaignPausedBeforeItsStartIsScheduledAgain(t *testing.T) {
	e := newEnv(t)
	bookID := e.book(`{"email":"a@example.org"}`)
	first := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	var c campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"Later","from":"news@example.com","subject":"s","contactBookId":"`+bookID+`","html":`+jsonString(campaignHTML)+`,"scheduledAt":"`+first.Format(time.RFC3339)+`"}`, &c)
	e.mustDo("POST", "/api/v1/campaigns/"+c.ID+"/pause", "", nil)
	second := first.Add(time.Hour)
	e.mustDo("POST", "/api/v1/campaigns/"+c.ID+"/schedule", `{"scheduledAt":"`+second.Format(time.RFC3339)+`"}`, nil)
	got := e.campaign(c.ID)
	if got.Status != "SCHEDULED" || got.ScheduledAt == nil || *got.ScheduledAt != second.Format("2006-01-02T15:04:05.000Z") {
		at := "<nil>"
		if got.ScheduledAt != nil {
			at = *got.ScheduledAt
		}
		t.Errorf("after pause and schedule: %s at %s, want SCHEDULED at %s", got.Status, at, second.Format(time.RFC3339))
	}
	if written(t, e, c.ID) != 0 {
		t.Error("the campaign sent before its new time")
	}
}

// TestCampaignPlaceholdersAsUpstream: a variable the book declares renders empty for a contact
// without it, a name neither declared nor on the contact stays as written (upstream's
// replaceContactVariables), and contact. goes before any name.
func TestCampaignPlaceholdersAsUpstream(t *testing.T) {
	e := newEnv(t)
	// Eve was added before the book declared company: she has no such property.
	var b struct{ ID string }
	e.mustDo("POST", "/api/v1/contactBooks", `{"name":"Later"}`, &b)
	bookID := b.ID
	e.mustDo("POST", "/api/v1/contactBooks/"+bookID+"/contacts", `{"email":"eve@example.org","firstName":"Eve"}`, nil)
	e.mustDo("PATCH", "/api/v1/contactBooks/"+bookID, `{"variables":["company"]}`, nil)
	html := `<p>[{{company}}] [{{typo}}] [{{contact.firstName}}] [{{nick,fallback=friend}}]</p><a href="{{usesend_unsubscribe_url}}">u</a>`
	var c campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"P","from":"news@example.com","subject":"Hi {{contact.firstName}}","contactBookId":"`+bookID+
		`","html":`+jsonString(html)+`,"sendNow":true}`, &c)
	e.awaitCampaign(c.ID, func(c campaignOut) bool { return c.Status == "SENT" && c.Delivered == 1 })
	msgs := e.outboxFor("eve@example.org")
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	if m := decodeQP(msgs[0]); !strings.Contains(m, "[] [{{typo}}] [Eve] [friend]") || !strings.Contains(m, "Subject: Hi Eve") {
		t.Errorf("the placeholders are not rendered as upstream's:\n%s", m)
	}
}
