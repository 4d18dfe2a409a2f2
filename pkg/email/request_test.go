package email

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/fault"
)

func TestDecodeRequestValid(t *testing.T) {
	body := `{"to":["A <a@x.io>","b@x.io"],"from":"Me <me@example.com>","subject":"Hi",
		"html":"<b>x</b>","text":"x","cc":"c@x.io","bcc":["d@x.io"],"replyTo":"r@x.io",
		"headers":{"X-B":"2","X-A":"1"},"attachments":[{"filename":"a.txt","content":"aGVsbG8="}],
		"scheduledAt":"2030-01-02T03:04:05+02:00","inReplyToId":"em123"}`
	r, err := DecodeRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.To, "|"); got != "A <a@x.io>|b@x.io" {
		t.Errorf("to = %q", got)
	}
	if r.CC[0] != "c@x.io" || r.BCC[0] != "d@x.io" || r.ReplyTo[0] != "r@x.io" {
		t.Errorf("cc/bcc/replyTo = %v %v %v", r.CC, r.BCC, r.ReplyTo)
	}
	if r.Headers[0].Name != "X-A" || r.Headers[1].Name != "X-B" {
		t.Errorf("headers not sorted: %v", r.Headers)
	}
	if r.ScheduledAt == nil || r.ScheduledAt.Hour() != 1 || r.ScheduledAt.Location().String() != "UTC" {
		t.Errorf("scheduledAt = %v, want 01:04:05 UTC", r.ScheduledAt)
	}
	if r.Attachments[0].size != 5 {
		t.Errorf("attachment size = %d", r.Attachments[0].size)
	}
	// The threading headers are the caller's, for a reply to a message Mailroom did not send.
	r, err = DecodeRequest([]byte(`{"to":"a@x.io","from":"me@example.com","subject":"Re: hi","text":"t",
		"headers":{"In-Reply-To":"<abc@mail.example.org>","References":"<root@mail.example.org> <abc@mail.example.org>"}}`))
	if err != nil || len(r.Headers) != 2 || r.Headers[0].Name != "In-Reply-To" || r.Headers[1].Name != "References" {
		t.Errorf("threading headers = %+v, %v", r.Headers, err)
	}
	// A name may be in any script (the message encodes it); a domain in its punycode form.
	r, err = DecodeRequest([]byte(`{"to":"Zoë Ng <zoe@xn--bcher-kva.de>","from":"Jürgen <j@example.com>","subject":"s","text":"t"}`))
	if err != nil || r.To[0] != "Zoë Ng <zoe@xn--bcher-kva.de>" || r.From != "Jürgen <j@example.com>" {
		t.Errorf("non-ASCII names = %+v, %v", r, err)
	}
}

// TestDecodeRequestHTMLBooleanIsAbsent: html false or true, as a boolean or as the string
// upstream's schema makes of it, is no html (upstream's send-email.ts and batch-email.ts).
func TestDecodeRequestHTMLBooleanIsAbsent(t *testing.T) {
	for _, html := range []string{`false`, `true`, `"false"`, ` "true" `} {
		r, err := DecodeRequest([]byte(`{"to":"a@x.io","from":"me@example.com","subject":"s","text":"t","html":` + html + `}`))
		if err != nil {
			t.Fatal(html, err)
		}
		if r.HTML != nil {
			t.Errorf("html %s = %q, want absent", html, *r.HTML)
		}
	}
	// With no text either, there is nothing to send.
	if _, err := DecodeRequest([]byte(`{"to":"a@x.io","from":"me@example.com","subject":"s","html":"true"}`)); err == nil {
		t.Error(`html "true" alone was accepted`)
	}
	// Any other string is the html.
	r, err := DecodeRequest([]byte(`{"to":"a@x.io","from":"me@example.com","subject":"s","html":"True"}`))
	if err != nil || r.HTML == nil || *r.HTML != "True" {
		t.Errorf(`html "True" = %v, %v`, r.HTML, err)
	}
}

func TestDecodeRequestErrors(t *testing.T) {
	att := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = `{"filename":"f.txt","content":"aGk="}`
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	base := `"from":"me@example.com","subject":"s","text":"t"`
	cases := []struct {
		name, body, want string
		kind             fault.Kind
	}{
		{"malformed", `{"to":`, "Malformed JSON in request body", fault.Invalid},
		{"not object", `[1]`, "body: must be an object", fault.Invalid},
		{"missing to", `{` + base + `}`, "to: is required", fault.Invalid},
		{"to wrong type", `{"to":5,` + base + `}`, "to: must be a string or an array of strings", fault.Invalid},
		{"bad address", `{"to":"nope",` + base + `}`, `to: invalid email address "nope"`, fault.Invalid},
		{"hyphen label", `{"to":"a@-example.org",` + base + `}`, `to: invalid email address "a@-example.org"`, fault.Invalid},
		{"digits TLD", `{"to":"a@example.123",` + base + `}`, `to: invalid email address "a@example.123"`, fault.Invalid},
		{"bare IP", `{"to":"a@192.0.2.1",` + base + `}`, `to: invalid email address "a@192.0.2.1"`, fault.Invalid},
		{"underscore label", `{"to":"a@ex_ample.org",` + base + `}`, `to: invalid email address`, fault.Invalid},
		{"bad address in list", `{"to":["a@x.io","b@"],` + base + `}`, `to[1]: invalid email address`, fault.Invalid},
		{"no dot domain", `{"to":"a@localhost",` + base + `}`, `to: invalid email address`, fault.Invalid},
		{"non-ASCII domain", `{"to":"a@bücher.de",` + base + `}`, `to: "a@bücher.de": non-ASCII addresses cannot be sent`, fault.Invalid},
		{"non-ASCII local part", `{"to":["a@x.io","jürgen@x.io"],` + base + `}`, `to[1]: "jürgen@x.io": non-ASCII`, fault.Invalid},
		{"non-ASCII from", `{"to":"a@x.io","from":"Zoë <zoë@example.com>","subject":"s","text":"t"}`, `from: "Zoë <zoë@example.com>": non-ASCII`, fault.Invalid},
		{"replyTo over 50", `{"to":"a@x.io",` + base + `,"replyTo":[` + strings.Repeat(`"r@x.io",`, 50) + `"r@x.io"]}`, "replyTo: at most 50 addresses", fault.Invalid},
		{"missing from", `{"to":"a@x.io","subject":"s","text":"t"}`, "from: is required", fault.Invalid},
		{"subject missing", `{"to":"a@x.io","from":"me@example.com","text":"t"}`, "subject: is required unless templateId", fault.Invalid},
		{"subject empty", `{"to":"a@x.io","from":"me@example.com","subject":"","text":"t"}`, "subject: must not be empty", fault.Invalid},
		{"subject CRLF", `{"to":"a@x.io","from":"me@example.com","subject":"a\r\nBcc: x@y.z","text":"t"}`, "subject: must not contain line breaks", fault.Invalid},
		{"no body", `{"to":"a@x.io","from":"me@example.com","subject":"s"}`, "html: html or text is required", fault.Invalid},
		{"text wrong type", `{"to":"a@x.io","from":"me@example.com","subject":"s","text":3}`, "text: must be a string", fault.Invalid},
		{"header CRLF", `{"to":"a@x.io",` + base + `,"headers":{"X-A":"1\r\nBcc: e@v.il"}}`, "headers.X-A: must not contain CR, LF or NUL", fault.Invalid},
		{"header name", `{"to":"a@x.io",` + base + `,"headers":{"X A":"1"}}`, `headers: invalid header name "X A"`, fault.Invalid},
		{"header reserved", `{"to":"a@x.io",` + base + `,"headers":{"From":"x@y.z"}}`, "headers.From: is set by Mailroom", fault.Invalid},
		{"header x-ses", `{"to":"a@x.io",` + base + `,"headers":{"X-SES-CONFIGURATION-SET":"other"}}`, "X-SES-* headers are reserved", fault.Invalid},
		{"header twice", `{"to":"a@x.io",` + base + `,"headers":{"X-Foo":"1","x-foo":"2"}}`, "given twice", fault.Invalid},
		{"long templateId", `{"to":"a@x.io",` + base + `,"templateId":"` + strings.Repeat("t", 129) + `"}`, "templateId: at most 128 characters", fault.Invalid},
		{"header reserved id", `{"to":"a@x.io",` + base + `,"headers":{"x-usesend-email-id":"1"}}`, "is set by Mailroom", fault.Invalid},
		{"header content-disposition", `{"to":"a@x.io",` + base + `,"headers":{"Content-Disposition":"attachment; filename=x"}}`, "headers.Content-Disposition: is set by Mailroom", fault.Invalid},
		{"header content-id", `{"to":"a@x.io",` + base + `,"headers":{"content-id":"<x@y>"}}`, "headers.content-id: is set by Mailroom", fault.Invalid},
		{"11 attachments", `{"to":"a@x.io",` + base + `,"attachments":` + att(11) + `}`, "attachments: at most 10 items", fault.Invalid},
		{"attachment base64", `{"to":"a@x.io",` + base + `,"attachments":[{"filename":"a.txt","content":"!!"}]}`, "attachments[0].content: must be base64", fault.Invalid},
		{"attachment exe", `{"to":"a@x.io",` + base + `,"attachments":[{"filename":"a.exe","content":"aGk="}]}`, "attachments[0].filename: file type .exe is not allowed", fault.Invalid},
		{"attachment no name", `{"to":"a@x.io",` + base + `,"attachments":[{"content":"aGk="}]}`, "attachments[0].filename: is required", fault.Invalid},
		{"attachment long name", `{"to":"a@x.io",` + base + `,"attachments":[{"filename":"` + strings.Repeat("a", 197) + `.pdf","content":"aGk="}]}`, "attachments[0].filename: at most 200 bytes", fault.Invalid},
		{"scheduledAt format", `{"to":"a@x.io",` + base + `,"scheduledAt":"tomorrow"}`, "scheduledAt: must be an RFC 3339", fault.Invalid},
		{"variables type", `{"to":"a@x.io",` + base + `,"variables":{"a":{"b":1}}}`, "variables.a: must be a string", fault.Invalid},
		{"variables number", `{"to":"a@x.io",` + base + `,"variables":{"n":3}}`, "variables.n: must be a string", fault.Invalid},
		{"variables boolean", `{"to":"a@x.io",` + base + `,"variables":{"ok":true}}`, "variables.ok: must be a string", fault.Invalid},
		{"text boolean", `{"to":"a@x.io","from":"me@example.com","subject":"s","html":"<b>x</b>","text":true}`, "text: must be a string", fault.Invalid},
		{"too many recipients", `{"to":[` + strings.TrimSuffix(strings.Repeat(`"a@x.io",`, 51), ",") + `],` + base + `}`, "to: at most 50 recipients", fault.Invalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeRequest([]byte(c.body))
			fe, ok := fault.As(err)
			if !ok {
				t.Fatalf("err = %v, want a fault", err)
			}
			if fe.Kind != c.kind || !strings.Contains(fe.Message, c.want) {
				t.Errorf("got (%d) %q, want (%d) containing %q", fe.Kind, fe.Message, c.kind, c.want)
			}
		})
	}
}

func TestDecodeRequestTooLarge(t *testing.T) {
	big := base64.StdEncoding.EncodeToString(make([]byte, 8<<20))
	parts := make([]string, 5)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"filename":"f%d.bin","content":"%s"}`, i, big)
	}
	body := `{"to":"a@x.io","from":"me@example.com","subject":"s","text":"t","attachments":[` + strings.Join(parts, ",") + `]}`
	_, err := DecodeRequest([]byte(body))
	if fe, ok := fault.As(err); !ok || fe.Kind != fault.TooLarge || !strings.HasPrefix(fe.Message, "attachments: ") {
		t.Fatalf("err = %v, want TooLarge naming attachments", err)
	}
	// A body alone that large is named: text when it is the text.
	text := strings.Repeat("x", 31<<20)
	_, err = DecodeRequest([]byte(`{"to":"a@x.io","from":"me@example.com","subject":"s","text":"` + text + `"}`))
	if fe, ok := fault.As(err); !ok || fe.Kind != fault.TooLarge || !strings.HasPrefix(fe.Message, "text: ") {
		t.Fatalf("a 31 MB text: %v, want TooLarge naming text", err)
	}
}

func TestDecodeBatch(t *testing.T) {
	one := `{"to":"a@x.io","from":"me@example.com","subject":"s","text":"t"}`
	if rs, err := DecodeBatch([]byte("[" + one + "," + one + "]")); err != nil || len(rs) != 2 {
		t.Fatalf("valid batch: %v %d", err, len(rs))
	}
	items := make([]string, 101)
	for i := range items {
		items[i] = one
	}
	cases := map[string]string{
		"[]":                                 "body: at least 1 email",
		"[" + strings.Join(items, ",") + "]": "body: at most 100 emails",
		`{"to":"a@x.io"}`:                    "body: must be an array",
		"[" + one + `,{"to":"bad"}]`:         "[1].to: invalid email address",
		"[":                                  "Malformed JSON",
	}
	for body, want := range cases {
		_, err := DecodeBatch([]byte(body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeBatch(%.30q) = %v, want %q", body, err, want)
		}
	}
}

func TestAdvance(t *testing.T) {
	cases := []struct{ cur, next, want string }{
		{"", "QUEUED", "QUEUED"},
		{"SCHEDULED", "CANCELLED", "CANCELLED"},
		{"QUEUED", "SENT", "SENT"},
		{"DELIVERED", "SENT", "DELIVERED"},
		{"OPENED", "DELIVERED", "OPENED"},
		{"BOUNCED", "COMPLAINED", "COMPLAINED"},
		{"CLICKED", "OPENED", "CLICKED"},
		{"SENT", "bogus", "SENT"},
	}
	for _, c := range cases {
		if got := Advance(c.cur, c.next); got != c.want {
			t.Errorf("Advance(%q, %q) = %q, want %q", c.cur, c.next, got, c.want)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"to":"a@x.io","from":"me@example.com","subject":"s","text":"t"}`))
	f.Add([]byte(`{"to":["a@x.io"],"from":"A <me@example.com>","templateId":"t","variables":{"a":1},"headers":{"X":"y"},"attachments":[{"filename":"a","content":"aGk"}]}`))
	f.Add([]byte(`[{"to":"a@x.io"}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeRequest(body)
		if err != nil {
			if _, ok := fault.As(err); !ok {
				t.Fatalf("non-fault error %v", err)
			}
			return
		}
		// Whatever is accepted is safe to put in headers.
		for _, s := range append(append([]string{r.From}, r.To...), deref(r.Subject)) {
			if strings.ContainsAny(s, "\r\n") {
				t.Fatalf("accepted CR/LF in %q", s)
			}
		}
		if len(r.To) == 0 {
			t.Fatal("accepted a request without recipients")
		}
	})
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add([]byte(`[{"to":"a@x.io","from":"me@example.com","subject":"s","text":"t"}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rs, err := DecodeBatch(body)
		if err == nil && (len(rs) == 0 || len(rs) > MaxBatch) {
			t.Fatalf("accepted a batch of %d", len(rs))
		}
	})
}

// TestMalformedJSON: a body that is not JSON gets COMPAT's message, whole.
func TestMalformedJSON(t *testing.T) {
	for _, body := range []string{"{\n  \"to\": x}", `{"to":`, `{"a":1,}`} {
		if _, err := DecodeRequest([]byte(body)); err == nil || err.Error() != "Malformed JSON in request body" {
			t.Errorf("%q: %v, want COMPAT's message", body, err)
		}
	}
	if _, err := DecodeBatch([]byte(`[{"to":`)); err == nil || err.Error() != "Malformed JSON in request body" {
		t.Errorf("batch: %v, want COMPAT's message", err)
	}
}

// TestAddressLengths: an address no mail server takes is refused: a local part over 64
// characters, a domain label over 63, a whole address over 254.
func TestAddressLengths(t *testing.T) {
	ok := strings.Repeat("a", 64) + "@" + strings.Repeat("b", 63) + ".example.org"
	if _, err := ParseAddress(ok); err != nil {
		t.Errorf("%s: %v", ok, err)
	}
	for _, a := range []string{
		strings.Repeat("a", 65) + "@example.org",
		"a@" + strings.Repeat("b", 64) + ".com",
		"a@" + strings.Repeat(strings.Repeat("c", 60)+".", 5) + "org",
	} {
		if _, err := ParseAddress(a); err == nil {
			t.Errorf("%.40s… (%d characters) was taken", a, len(a))
		}
	}
}

// TestUnknownNullFields: an unknown field set to null sets nothing and is let through (usesend-js
// sends "react": null when given one); with a value it is still refused, named, with its hint,
// in the send and in each attachment.
func TestUnknownNullFields(t *testing.T) {
	base := `"to":"a@x.io","from":"me@example.com","subject":"Hi","text":"t"`
	if _, err := DecodeRequest([]byte(`{` + base + `,"react":null,"reply_to":null}`)); err != nil {
		t.Fatalf("null unknown fields: %v", err)
	}
	for body, want := range map[string]string{
		`{` + base + `,"react":"<Email/>"}`:     "react: unknown field",
		`{` + base + `,"reply_to":"r@x.io"}`:    `reply_to: unknown field; did you mean "replyTo"?`,
		`{` + base + `,"react":null,"x":false}`: "x: unknown field",
		// An attachment's fields are the send's too: its type would otherwise be dropped.
		`{` + base + `,"attachments":[{"filename":"a.txt","content":"aGk=","contentType":"text/csv"}]}`:           "attachments[0].contentType: unknown field",
		`{` + base + `,"attachments":[{"filename":"a.txt","content":"aGk=","content_type":null,"Filename":"b"}]}`: `attachments[0].Filename: unknown field; did you mean "filename"?`,
	} {
		if _, err := DecodeRequest([]byte(body)); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

// TestDecodeRequestShapes: a field named twice, a null element and a control character in the
// subject are each a 400 naming the field, not a silent choice of one value or an odd header.
func TestDecodeRequestShapes(t *testing.T) {
	base := `"from":"me@example.com","subject":"Hi","text":"t"`
	for body, want := range map[string]string{
		`{` + base + `,"to":"a@x.io","to":"b@x.io"}`:                              "to: given more than once",
		`{"to":"a@x.io","from":"me@example.com","subject":"a\u0000b","text":"t"}`: "subject: must not contain control characters",
		`null`: "body: must be an object",
		`{` + base + `,"to":"a@x.io","headers":{"X-A":"1","X-A":"2"}}`:                                          "headers.X-A: given more than once",
		`{` + base + `,"to":"a@x.io","variables":{"name":"a","name":"b"}}`:                                      "variables.name: given more than once",
		`{` + base + `,"to":"a@x.io","variables":{"name":null}}`:                                                "variables.name: must be a string",
		`{` + base + `,"to":"a@x.io","attachments":[{"filename":"a.txt","filename":"b.txt","content":"aGk="}]}`: "attachments[0].filename: given more than once",
	} {
		if _, err := DecodeRequest([]byte(body)); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
	if _, err := DecodeRequest([]byte(`{"to":"a@x.io","from":"me@example.com","subject":"a\tb","text":"t"}`)); err != nil {
		t.Errorf("a tab in the subject: %v", err)
	}
	_, badAt, err := DecodeBatchEach([]byte(`[null,{` + base + `,"to":"a@x.io","to":"b@x.io"}]`))
	if err != nil || len(badAt) != 2 || badAt[0] == nil || badAt[0].Error() != "[0]: must be an object" ||
		badAt[1] == nil || badAt[1].Error() != "[1].to: given more than once" {
		t.Errorf("batch: %v, %v; want [0] not an object and [1].to given twice", badAt, err)
	}
}

// TestScheduledAtForms: RFC 3339 and the same without seconds (JavaScript's Date reads both)
// are taken, in UTC; a time without a zone is refused, naming the field.
func TestScheduledAtForms(t *testing.T) {
	base := `{"to":"a@x.io","from":"me@example.com","subject":"Hi","text":"t","scheduledAt":`
	for in, want := range map[string]string{
		`"2030-01-02T03:04:05Z"`:    "2030-01-02T03:04:05Z",
		`"2030-01-02T03:04Z"`:       "2030-01-02T03:04:00Z",
		`"2030-01-02T05:04+02:00"`:  "2030-01-02T03:04:00Z",
		`"2030-01-02T03:04:05.25Z"`: "2030-01-02T03:04:05.25Z",
		`"2030-01-02t03:04:05z"`:    "2030-01-02T03:04:05Z", // RFC 3339 §5.6: either case
	} {
		r, err := DecodeRequest([]byte(base + in + `}`))
		if err != nil || r.ScheduledAt == nil || r.ScheduledAt.Format(time.RFC3339Nano) != want {
			t.Errorf("%s: %v, %v; want %s", in, r.ScheduledAt, err, want)
		}
	}
	// No zone, or an offset RFC 3339 has not (Go's parser takes it, JavaScript's Date does not).
	for _, in := range []string{`"2030-01-02T03:04"`, `"2030-01-02T03:04:05+24:00"`, `"2030-01-02T03:04:05-23:60"`} {
		if _, err := DecodeRequest([]byte(base + in + `}`)); err == nil || !strings.HasPrefix(err.Error(), "scheduledAt: must be an RFC 3339 date-time with a time zone") {
			t.Errorf("%s: %v", in, err)
		}
	}
	if r, err := DecodeRequest([]byte(base + `"2030-01-02T03:04:05-23:59"}`)); err != nil || r.ScheduledAt.Format(time.RFC3339) != "2030-01-03T03:03:05Z" {
		t.Errorf("-23:59: %v %v", r.ScheduledAt, err)
	}
}
