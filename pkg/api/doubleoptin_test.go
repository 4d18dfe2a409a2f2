package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

// confirmLinkIn finds the double opt-in link in a message.
var confirmLinkIn = regexp.MustCompile(`href="(http[^"]*/subscribe/([A-Za-z0-9._-]+))"`)

// awaitOutbox waits until addr has n messages in the outbox, and returns them.
func (e *env) awaitOutbox(addr string, n int) []string {
	e.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		msgs := e.outboxFor(addr)
		if len(msgs) >= n || time.Now().After(deadline) {
			if len(msgs) != n {
				e.t.Fatalf("%s has %d messages, want %d", addr, len(msgs), n)
			}
			return msgs
		}
	}
}

func page(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDoubleOptIn: in a book with double opt-in, a new contact waits unsubscribed for its
// confirmation email, whose link's GET shows a button and whose POST subscribes it; campaigns
// leave waiting contacts out; adding a waiting contact again sends a new email; a contact added
// as unsubscribed gets none; links expire after 7 days; unsubscribe and confirmation links are
// not each other's.
func TestDoubleOptIn(t *testing.T) {
	e := newEnv(t)
	var book struct {
		ID                                     string
		DoubleOptInEnabled                     bool
		DoubleOptInSubject, DoubleOptInContent *string
	}
	e.mustDo("POST", "/api/v1/contactBooks", `{"name":"Newsletter","doubleOptInEnabled":true}`, &book)
	if !book.DoubleOptInEnabled || book.DoubleOptInSubject == nil || *book.DoubleOptInSubject != "Please confirm your subscription" ||
		book.DoubleOptInContent == nil || !strings.Contains(*book.DoubleOptInContent, "{{doubleOptInUrl}}") {
		t.Fatalf("a book enabling double opt-in gets the default email: %+v", book)
	}
	contacts := "/api/v1/contactBooks/" + book.ID + "/contacts"
	subscribed := func(addr string) bool {
		var list []struct{ Subscribed bool }
		e.mustDo("GET", contacts+"?emails="+addr, "", &list)
		if len(list) != 1 {
			t.Fatalf("%s: %d contacts", addr, len(list))
		}
		return list[0].Subscribed
	}
	e.mustDo("POST", contacts, `{"email":"ann@example.org","firstName":"Ann"}`, nil)
	if subscribed("ann@example.org") {
		t.Fatal("ann is subscribed before confirming")
	}
	msg := decodeQP(e.awaitOutbox("ann@example.org", 1)[0])
	if !strings.Contains(msg, "Subject: Please confirm your subscription") || !strings.Contains(msg, "From: <hello@example.com>") {
		t.Errorf("the confirmation email's subject or from:\n%.400s", msg)
	}
	m := confirmLinkIn.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("no confirmation link in:\n%s", msg)
	}
	link, token := m[1], m[2]
	// A SENDING key reads the email with its link redacted: with it, it could subscribe ann.
	var list struct{ Data []struct{ ID string } }
	e.mustDo("GET", "/api/v1/emails", "", &list)
	sending := e.keyFor(store.PermissionSending, 0)
	if r := e.request(sending, "GET", "/api/v1/emails", nil); r.status != 200 || strings.Contains(string(r.body), token) {
		t.Errorf("a SENDING key lists the emails: %d, with the confirmation token: %v", r.status, strings.Contains(string(r.body), token))
	}
	for _, em := range list.Data {
		r := e.request(sending, "GET", "/api/v1/emails/"+em.ID, nil)
		if r.status != 200 || strings.Contains(string(r.body), token) {
			t.Errorf("a SENDING key reads email %s: %d, with the confirmation token: %v", em.ID, r.status, strings.Contains(string(r.body), token))
		}
	}
	if code, body := page(t, "GET", link); code != 200 || !strings.Contains(body, ">Confirm</button>") {
		t.Errorf("GET link = %d %s", code, body)
	}
	if subscribed("ann@example.org") {
		t.Fatal("a GET of the link subscribed ann")
	}
	for range 2 {
		if code, body := page(t, "POST", link); code != 200 || !strings.Contains(body, "Subscription confirmed") {
			t.Errorf("POST link = %d %s", code, body)
		}
	}
	if !subscribed("ann@example.org") {
		t.Fatal("ann is not subscribed after confirming")
	}
	// The links are not each other's: a confirmation link does not unsubscribe, and a tampered
	// one is not valid.
	if code, _ := page(t, "POST", strings.Replace(link, "/subscribe/", "/unsubscribe/", 1)); code != 404 || !subscribed("ann@example.org") {
		t.Errorf("the confirmation link at /unsubscribe = %d", code)
	}
	if code, _ := page(t, "POST", strings.Replace(link, token, "x"+token, 1)); code != 404 {
		t.Errorf("a tampered link = %d", code)
	}

	// bob waits; adding him again sends a new email; carl, added unsubscribed, gets none; a
	// bulk import sends one email per new contact.
	e.mustDo("POST", contacts, `{"email":"bob@example.org"}`, nil)
	e.mustDo("PUT", contacts+"/any", `{"email":"bob@example.org","subscribed":true}`, nil)
	e.awaitOutbox("bob@example.org", 2)
	e.mustDo("POST", contacts, `{"email":"carl@example.org","subscribed":false}`, nil)
	e.mustDo("POST", contacts+"/bulk", `[{"email":"dee@example.org"},{"email":"eve@example.org"},{"email":"ann@example.org"}]`, nil)
	e.awaitOutbox("dee@example.org", 1)
	e.awaitOutbox("eve@example.org", 1)
	if subscribed("bob@example.org") || subscribed("carl@example.org") || subscribed("dee@example.org") || !subscribed("ann@example.org") {
		t.Error("only ann should be subscribed")
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(e.outboxFor("carl@example.org")); n != 0 {
		t.Errorf("carl, added unsubscribed, got %d emails", n)
	}
	if n := len(e.outboxFor("ann@example.org")); n != 1 {
		t.Errorf("ann, subscribed, got %d emails after the bulk import, want her one confirmation", n)
	}

	// A campaign goes to ann alone: the contacts waiting are not subscribed.
	var c campaignOut
	e.mustDo("POST", "/api/v1/campaigns", `{"name":"News","from":"news@example.com","subject":"Hi","contactBookId":"`+book.ID+
		`","html":`+jsonString(campaignHTML)+`,"sendNow":true}`, &c)
	if c = e.awaitCampaign(c.ID, func(c campaignOut) bool { return c.Status == "SENT" }); c.Total != 1 {
		t.Errorf("campaign total %d, want 1 (ann)", c.Total)
	}

	// A link confirms the address it went to: after fay's address changes to gus's, her link
	// subscribes nobody.
	var fay struct{ ContactID string }
	e.mustDo("POST", contacts, `{"email":"fay@example.org"}`, &fay)
	fays := confirmLinkIn.FindStringSubmatch(decodeQP(e.awaitOutbox("fay@example.org", 1)[0]))
	e.mustDo("PATCH", contacts+"/"+fay.ContactID, `{"email":"gus@example.org"}`, nil)
	if code, _ := page(t, "POST", fays[1]); code != 404 || subscribed("gus@example.org") {
		t.Errorf("fay's link after her address changed = %d; gus subscribed: %v", code, subscribed("gus@example.org"))
	}

	// Seven days on, bob's links have expired.
	bobs := confirmLinkIn.FindStringSubmatch(decodeQP(e.outboxFor("bob@example.org")[0]))
	e.clock.Add(7*24*time.Hour + time.Minute)
	if code, body := page(t, "POST", bobs[1]); code != 410 || !strings.Contains(body, "expired") || subscribed("bob@example.org") {
		t.Errorf("an expired link = %d %s", code, body)
	}

	// A key restricted to a domain sets a double opt-in email only from its own domain: with
	// one from another domain of the team, it could send what it likes from there.
	var other struct{ ID int64 }
	e.mustDo("POST", "/api/v1/domains", `{"name":"other.example"}`, &other)
	restricted := e.keyFor(store.PermissionFull, other.ID)
	for body, want := range map[string]int{
		`{"name":"R","doubleOptInEnabled":true,"doubleOptInFrom":"ceo@example.com"}`:    403,
		`{"name":"R","doubleOptInEnabled":true}`:                                        403,
		`{"name":"R","doubleOptInEnabled":true,"doubleOptInFrom":"news@other.example"}`: 200,
		`{"name":"R"}`: 200,
	} {
		if r := e.request(restricted, "POST", "/api/v1/contactBooks", []byte(body)); r.status != want {
			t.Errorf("a restricted key's book %s = %d %s, want %d", body, r.status, r.body, want)
		}
	}
	if r := e.request(restricted, "PATCH", "/api/v1/contactBooks/"+book.ID, []byte(`{"doubleOptInSubject":"Wire transfer"}`)); r.status != 403 {
		t.Errorf("a restricted key rewrites the team's double opt-in email: %d %s", r.status, r.body)
	}
	// Nor does it make the book mail a confirmation from another domain (example.com, the
	// team's oldest) to an address it chooses: adding a contact there is refused, one by one or
	// in bulk, before anything is written. In a book whose confirmations go out from its own
	// domain it adds contacts as any key.
	for _, add := range []struct{ method, path, body string }{
		{"POST", contacts, `{"email":"victim@example.net"}`},
		{"PUT", contacts + "/ct_any", `{"email":"victim@example.net"}`},
		{"POST", contacts + "/bulk", `[{"email":"victim@example.net"}]`},
	} {
		if r := e.request(restricted, add.method, add.path, []byte(add.body)); r.status != 403 || !strings.Contains(string(r.body), "only send from its own domain") {
			t.Errorf("a restricted key's %s %s in a book mailing from another domain = %d %s", add.method, add.path, r.status, r.body)
		}
	}
	var none []struct{ ID string }
	if e.mustDo("GET", contacts+"?emails=victim@example.net", "", &none); len(none) != 0 || len(e.outboxFor("victim@example.net")) != 0 {
		t.Errorf("a refused contact was written (%d) or mailed", len(none))
	}
	// A write that mails nobody goes through: a contact that says subscribed: false (alone or
	// in bulk), an update of a subscribed contact.
	var sub struct{ ContactID string }
	e.mustDo("POST", contacts, `{"email":"sub@example.net"}`, &sub)
	e.mustDo("PATCH", contacts+"/"+sub.ContactID, `{"subscribed":true}`, nil)
	for _, add := range []struct{ method, path, body string }{
		{"POST", contacts, `{"email":"quiet@example.net","subscribed":false}`},
		{"PUT", contacts + "/ct_any", `{"email":"sub@example.net","firstName":"Sue"}`},
		{"POST", contacts + "/bulk", `[{"email":"q1@example.net","subscribed":false},{"email":"q2@example.net","subscribed":false}]`},
	} {
		if r := e.request(restricted, add.method, add.path, []byte(add.body)); r.status != 200 {
			t.Errorf("a restricted key's %s %s %s, which mails nobody = %d %s", add.method, add.path, add.body, r.status, r.body)
		}
	}
	if r := e.request(restricted, "POST", contacts+"/bulk", []byte(`[{"email":"q3@example.net","subscribed":false},{"email":"q4@example.net"}]`)); r.status != 403 {
		t.Errorf("a restricted key's bulk import with a contact it may mail = %d %s", r.status, r.body)
	}
	if e.mustDo("GET", contacts+"?emails=q3@example.net", "", &none); len(none) != 0 {
		t.Errorf("a refused bulk import was written in part")
	}
	var own struct{ ID string }
	if r := e.request(restricted, "POST", "/api/v1/contactBooks", []byte(`{"name":"Own","doubleOptInEnabled":true,"doubleOptInFrom":"news@other.example"}`)); r.status != 200 {
		t.Fatalf("own book = %d %s", r.status, r.body)
	} else if err := json.Unmarshal(r.body, &own); err != nil {
		t.Fatal(err)
	}
	if r := e.request(restricted, "POST", "/api/v1/contactBooks/"+own.ID+"/contacts", []byte(`{"email":"fan@example.net"}`)); r.status != 200 {
		t.Errorf("a restricted key's contact in its own domain's book = %d %s", r.status, r.body)
	}

	// The book's double opt-in email is checked when set.
	for body, want := range map[string]string{
		`{"doubleOptInFrom":"news@unverified.example"}`:  "doubleOptInFrom: domain unverified.example is not a verified domain",
		`{"doubleOptInContent":"<p>Please confirm</p>"}`: "doubleOptInContent: must include the {{doubleOptInUrl}} placeholder",
		`{"doubleOptInContent":"{\"type\":\"doc\",\"content\":[{\"type\":\"paragraph\",\"content\":[{\"type\":\"variable\",\"attrs\":{\"id\":\"doubleOptInUrl\"}}]},{\"type\":\"columns\"}]}"}`: `doubleOptInContent: node type "columns" is not supported`,
	} {
		r := e.do("PATCH", "/api/v1/contactBooks/"+book.ID, body)
		if _, msg := r.errorOf(t); r.status != 400 || !strings.HasPrefix(msg, want) {
			t.Errorf("PATCH %s = %d %q, want 400 %q", body, r.status, msg, want)
		}
	}
}

// TestDoubleOptInRetriedImport: a bulk import (or an upsert) retried with its Idempotency-Key,
// as after a timeout or a crash of the server, mails each waiting contact one confirmation;
// without a key, adding waiting contacts again sends new ones, as documented, and so does the
// key used again after a day. A bad key is a 400.
func TestDoubleOptInRetriedImport(t *testing.T) {
	e := newEnv(t)
	var book struct{ ID string }
	e.mustDo("POST", "/api/v1/contactBooks", `{"name":"Newsletter","doubleOptInEnabled":true}`, &book)
	contacts := "/api/v1/contactBooks/" + book.ID + "/contacts"
	bulk := `[{"email":"a@example.org"},{"email":"b@example.org"}]`
	for range 3 {
		e.mustDo("POST", contacts+"/bulk", bulk, nil, "Idempotency-Key", "import-1")
		e.mustDo("POST", contacts, `{"email":"c@example.org"}`, nil, "Idempotency-Key", "add-c")
	}
	count := func() int {
		var list struct{ Count int }
		e.mustDo("GET", "/api/v1/emails", "", &list)
		return list.Count
	}
	if n := count(); n != 3 {
		t.Errorf("3 imports of 3 contacts with their keys wrote %d confirmations, want 3", n)
	}
	e.mustDo("POST", contacts+"/bulk", bulk, nil)
	if n := count(); n != 5 {
		t.Errorf("an import without a key wrote %d confirmations in all, want 5 (a new one each)", n-3)
	}
	// A key is a request's for a day: used again after it, it is a new request.
	e.clock.Add(25 * time.Hour)
	e.mustDo("POST", contacts+"/bulk", bulk, nil, "Idempotency-Key", "import-1")
	if n := count(); n != 7 {
		t.Errorf("the key used again a day later wrote %d confirmations, want 2", n-5)
	}
	if r := e.do("POST", contacts+"/bulk", bulk, "Idempotency-Key", strings.Repeat("k", 257)); r.status != 400 {
		t.Errorf("a 257-character key = %d, want 400", r.status)
	}
}

// TestDoubleOptInContentAsUpstreamWritesIt: an editor document as upstream's checks take it
// (JSON spaced as any encoder writes it, the button's address the bare name doubleOptInUrl) is
// accepted, and its button carries the confirmation link.
func TestDoubleOptInContentAsUpstreamWritesIt(t *testing.T) {
	e := newEnv(t)
	content := `{"type": "doc", "content": [{"type": "paragraph", "content": [{"type": "text", "text": "Hi {{firstName,fallback=there}}"}]},` +
		` {"type": "button", "attrs": {"text": "Confirm", "url": "doubleOptInUrl"}}]}`
	var book struct{ ID string }
	e.mustDo("POST", "/api/v1/contactBooks", `{"name":"Spaced","doubleOptInEnabled":true,"doubleOptInContent":`+jsonString(content)+`}`, &book)
	e.mustDo("POST", "/api/v1/contactBooks/"+book.ID+"/contacts", `{"email":"fan@example.net"}`, nil)
	msg := decodeQP(e.awaitOutbox("fan@example.net", 1)[0])
	if m := confirmLinkIn.FindStringSubmatch(msg); m == nil || !strings.Contains(msg, `href="`+m[1]+`"`) || !strings.Contains(msg, "Hi there") {
		t.Errorf("the button does not carry the confirmation link:\n%s", msg)
	}
}
