package mail

import (
	"bytes"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var fixedDate = time.Date(2024, 3, 1, 12, 30, 0, 0, time.UTC)

var boundaryParam = regexp.MustCompile(`boundary=("?)([0-9A-Za-z'()+_,\-./:=?]+)("?)`)

// normalise replaces the random multipart boundaries with stable names, in order of appearance.
func normalise(raw []byte) []byte {
	out := string(raw)
	for i, m := range boundaryParam.FindAllStringSubmatch(string(raw), -1) {
		out = strings.ReplaceAll(out, m[2], fmt.Sprintf("BOUNDARY-%d", i+1))
	}
	return []byte(out)
}

func goldenCases() []struct {
	name string
	msg  Message
} {
	base := func() Message {
		return Message{
			EmailID:   "cm1abc234def",
			From:      "Acme <hello@acme.test>",
			To:        []string{"jane@example.com"},
			Subject:   "Your receipt",
			MessageID: "<fixed-id@acme.test>",
		}
	}
	textOnly := base()
	textOnly.Text = "Thanks for your order.\nTotal: 10 EUR\n"

	htmlOnly := base()
	htmlOnly.HTML = "<p>Thanks for your <b>order</b>.</p>"

	alternative := base()
	alternative.Text = "Thanks for your order."
	alternative.HTML = "<p>Thanks for your <b>order</b>.</p>"

	full := base()
	full.To = []string{"jane@example.com", "John Doe <john@example.com>"}
	full.CC = []string{"boss@example.com"}
	full.BCC = []string{"archive@acme.test"}
	full.ReplyTo = []string{"support@acme.test"}
	full.Text = "See attached."
	full.HTML = "<p>See attached.</p>"
	full.InReplyTo = "<previous@acme.test>"
	full.Headers = []Header{
		{Name: "X-Campaign", Value: "spring"},
		{Name: "List-Unsubscribe", Value: "<https://acme.test/unsubscribe/abc>"},
		{Name: "X-Campaign", Value: "second"},
	}
	full.Attachments = []Attachment{
		{Filename: "invoice.pdf", Data: []byte("%PDF-1.4 fake pdf content")},
		{Filename: "data.csv", Data: []byte("a,b\n1,2\n")},
		{Filename: "blob.unknownext", Data: []byte{0, 1, 2, 3, 255}},
	}

	nonASCII := base()
	nonASCII.From = "Zoë Café <zoe@acme.test>"
	nonASCII.Subject = "Grüße aus München — ünïcödé subject that is long enough to be folded"
	nonASCII.Text = "Grüße!"

	return []struct {
		name string
		msg  Message
	}{
		{"text_only", textOnly},
		{"html_only", htmlOnly},
		{"alternative", alternative},
		{"attachments", full},
		{"non_ascii_subject", nonASCII},
	}
}

func TestBuildGolden(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := build(tc.msg, fixedDate)
			if err != nil {
				t.Fatalf("build: %v", err)
			}
			got := normalise(raw)
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (run with -update to create): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s (run with -update after checking):\n%s", path, got)
			}
		})
	}
}

// leaf is one non-multipart body found by walking a parsed message.
type leaf struct {
	contentType string
	filename    string
	body        []byte
}

// walk parses a MIME entity and returns its leaves; ctypes collects every Content-Type seen.
func walk(t testing.TB, header map[string][]string, body io.Reader, ctypes *[]string) ([]leaf, error) {
	get := func(k string) string {
		if v := header[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	ct := get("Content-Type")
	if ct == "" {
		ct = "text/plain"
	}
	mediaType, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return nil, fmt.Errorf("content-type %q: %w", ct, err)
	}
	*ctypes = append(*ctypes, mediaType)
	if strings.HasPrefix(mediaType, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		var out []leaf
		for {
			p, err := mr.NextRawPart()
			if err == io.EOF {
				return out, nil
			}
			if err != nil {
				return nil, fmt.Errorf("next part: %w", err)
			}
			ls, err := walk(t, p.Header, p, ctypes)
			if err != nil {
				return nil, err
			}
			out = append(out, ls...)
		}
	}
	var r io.Reader = body
	switch strings.ToLower(get("Content-Transfer-Encoding")) {
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, body)
	case "quoted-printable":
		r = quotedprintable.NewReader(body)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	var filename string
	if cd := get("Content-Disposition"); cd != "" {
		if _, p, err := mime.ParseMediaType(cd); err == nil {
			filename = p["filename"]
		}
	}
	return []leaf{{contentType: mediaType, filename: filename, body: data}}, nil
}

// TestCallersThreadingHeadersWin: an In-Reply-To or References of the caller's own replaces
// what the reply (InReplyTo) would give, each on its own; neither appears twice.
func TestCallersThreadingHeadersWin(t *testing.T) {
	base := Message{From: "a@acme.test", To: []string{"b@example.com"}, Subject: "Re: x", Text: "t",
		InReplyTo: "<previous@acme.test>"}
	for _, c := range []struct {
		headers              []Header
		inReplyTo, reference string
	}{
		{nil, "<previous@acme.test>", "<previous@acme.test>"},
		{[]Header{{"References", "<root@other.test> <mid@other.test>"}}, "<previous@acme.test>", "<root@other.test> <mid@other.test>"},
		{[]Header{{"in-reply-to", "<mid@other.test>"}}, "<mid@other.test>", "<previous@acme.test>"},
	} {
		m := base
		m.Headers = c.headers
		_, msg := buildAndRead(t, m)
		if got := msg.Header["In-Reply-To"]; len(got) != 1 || got[0] != c.inReplyTo {
			t.Errorf("headers %v: In-Reply-To = %q, want %q once", c.headers, got, c.inReplyTo)
		}
		if got := msg.Header["References"]; len(got) != 1 || got[0] != c.reference {
			t.Errorf("headers %v: References = %q, want %q once", c.headers, got, c.reference)
		}
	}
}

// TestThreadReferences: the thread before the parent goes first in References, each id once and
// in ASCII; the parent's id ends it.
func TestThreadReferences(t *testing.T) {
	m := Message{From: "a@acme.test", To: []string{"b@example.com"}, Subject: "Re: x", Text: "t",
		InReplyTo:  "<previous@acme.test>",
		References: []string{"<root@acme.test>", "<naïve@acme.test>", "root@acme.test", "<previous@acme.test>", "<>", "<mid@acme.test>"}}
	_, msg := buildAndRead(t, m)
	got := strings.Join(strings.Fields(msg.Header.Get("References")), " ")
	if want := "<root@acme.test> <mid@acme.test> <previous@acme.test>"; got != want {
		t.Errorf("References = %q, want %q", got, want)
	}
}

func TestBuildParsesBack(t *testing.T) {
	cases := goldenCases()
	full := cases[3].msg
	raw, err := Build(full)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("net/mail cannot read the message: %v", err)
	}
	h := msg.Header
	checks := map[string]string{
		"Message-Id":         "<fixed-id@acme.test>",
		"In-Reply-To":        "<previous@acme.test>",
		"References":         "<previous@acme.test>",
		"X-Usesend-Email-Id": "cm1abc234def",
		"Subject":            "Your receipt",
		"Mime-Version":       "1.0",
	}
	for k, want := range checks {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if got := h["X-Campaign"]; len(got) != 2 || got[0] != "spring" || got[1] != "second" {
		t.Errorf("X-Campaign = %q, want both values in order", got)
	}
	if _, ok := h["Bcc"]; ok || bytes.Contains(raw, []byte("archive@acme.test")) {
		t.Error("bcc address leaked into the message")
	}
	if _, err := h.Date(); err != nil {
		t.Errorf("Date: %v", err)
	}
	to, err := h.AddressList("To")
	if err != nil || len(to) != 2 || to[1].Address != "john@example.com" || to[1].Name != "John Doe" {
		t.Errorf("To = %v, %v", to, err)
	}
	for _, k := range []string{"Cc", "Reply-To", "From"} {
		if _, err := h.AddressList(k); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}

	var ctypes []string
	leaves, err := walk(t, msg.Header, msg.Body, &ctypes)
	if err != nil {
		t.Fatal(err)
	}
	wantTypes := []string{"multipart/mixed", "multipart/alternative", "text/plain", "text/html",
		"application/pdf", "text/csv", "application/octet-stream"}
	if strings.Join(ctypes, " ") != strings.Join(wantTypes, " ") {
		t.Errorf("structure = %v, want %v", ctypes, wantTypes)
	}
	if len(leaves) != 5 {
		t.Fatalf("leaves = %d, want 5", len(leaves))
	}
	if string(leaves[0].body) != full.Text || string(leaves[1].body) != full.HTML {
		t.Errorf("bodies = %q / %q", leaves[0].body, leaves[1].body)
	}
	for i, a := range full.Attachments {
		l := leaves[2+i]
		if l.filename != a.Filename || !bytes.Equal(l.body, a.Data) {
			t.Errorf("attachment %d = %q %q, want %q %q", i, l.filename, l.body, a.Filename, a.Data)
		}
	}
}

// buildAndRead builds m and reads it back with net/mail.
func buildAndRead(t *testing.T, m Message) ([]byte, *mail.Message) {
	t.Helper()
	raw, err := Build(m)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return raw, msg
}

func TestBuildNonASCIISubjectDecodes(t *testing.T) {
	m := goldenCases()[4].msg
	raw, msg := buildAndRead(t, m)
	if strings.Contains(strings.SplitN(string(raw), "\r\n\r\n", 2)[0], "ü") {
		t.Error("raw header holds 8-bit characters")
	}
	got, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil || got != m.Subject {
		t.Errorf("subject = %q, %v; want %q", got, err, m.Subject)
	}
	from, err := msg.Header.AddressList("From")
	if err != nil || from[0].Name != "Zoë Café" {
		t.Errorf("from = %v, %v", from, err)
	}
}

func TestBuildGeneratesMessageIDOnFromDomain(t *testing.T) {
	m := Message{From: "Acme <hello@acme.test>", To: []string{"a@b.test"}, Subject: "x", Text: "y"}
	seen := map[string]bool{}
	for range 3 {
		raw, err := Build(m)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := mail.ReadMessage(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		id := msg.Header.Get("Message-Id")
		if !regexp.MustCompile(`^<[0-9a-f]{32}@acme\.test>$`).MatchString(id) {
			t.Errorf("Message-ID = %q", id)
		}
		if seen[id] {
			t.Errorf("Message-ID %q repeated", id)
		}
		seen[id] = true
	}
}

func TestBuildRejectsInjection(t *testing.T) {
	base := Message{From: "a@b.test", To: []string{"c@d.test"}, Subject: "s", Text: "t"}
	cases := map[string]func(*Message){
		"header value CRLF": func(m *Message) { m.Headers = []Header{{Name: "X-A", Value: "1\r\nBcc: x@y.test"}} },
		"header name colon": func(m *Message) { m.Headers = []Header{{Name: "X-A:", Value: "1"}} },
		"header name empty": func(m *Message) { m.Headers = []Header{{Name: "", Value: "1"}} },
		"subject LF":        func(m *Message) { m.Subject = "a\nBcc: x@y.test" },
		"bad from":          func(m *Message) { m.From = "not an address" },
		"bad to":            func(m *Message) { m.To = []string{"nope"} },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			m := base
			mutate(&m)
			if _, err := Build(m); err == nil {
				t.Error("Build accepted it")
			}
		})
	}
}

func FuzzBuild(f *testing.F) {
	f.Add("a@b.test", "c@d.test", "subject", "text", "<p>html</p>", "X-A", "v", "f.pdf", []byte("data"))
	f.Add("Zoë <z@b.test>", "Jo <j@d.test>", "Grüße", "", "<p>ü</p>", "X-Ü", "ü", "ü.txt", []byte{0xff})
	f.Add("a@b.test", "c@d.test", "", "", "", "", "", "", []byte(nil))
	f.Fuzz(func(t *testing.T, from, to, subject, text, html, hName, hValue, fileName string, data []byte) {
		m := Message{EmailID: "e1", From: from, To: []string{to}, BCC: []string{"hidden@x.test"},
			Subject: subject, Text: text, HTML: html}
		if hName != "" {
			m.Headers = []Header{{Name: hName, Value: hValue}}
		}
		if fileName != "" {
			m.Attachments = []Attachment{{Filename: fileName, Data: data}}
		}
		raw, err := Build(m)
		if err != nil {
			return
		}
		msg, err := mail.ReadMessage(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("output does not parse: %v\n%q", err, raw)
		}
		if msg.Header.Get("X-Usesend-Email-Id") != "e1" {
			t.Fatalf("email id header lost:\n%q", raw)
		}
		var ctypes []string
		if _, err := walk(t, msg.Header, msg.Body, &ctypes); err != nil {
			t.Fatalf("MIME structure does not parse: %v\n%q", err, raw)
		}
	})
}

// TestBodyInAnotherScriptStaysSmall: a body mostly outside ASCII goes base64, so the message
// is at most about four thirds of its bodies (what the API bounds a send by), where
// quoted-printable would take three times; an ASCII body stays quoted-printable. Either way
// the bodies read back as they were.
func TestBodyInAnotherScriptStaysSmall(t *testing.T) {
	for _, c := range []struct {
		name, body, cte string
	}{
		{"accents", strings.Repeat("Grüße aus München, ça va très bien — ", 3000), "base64"},
		{"cyrillic", strings.Repeat("Привет, мир! ", 5000), "base64"},
		{"ascii", strings.Repeat("Hello world, a line of plain text = fine.\n", 2000), "quoted-printable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, msg := buildAndRead(t, Message{From: "a@acme.test", To: []string{"b@example.com"}, Subject: "s", Text: c.body, HTML: "<p>" + c.body + "</p>"})
			if limit := 2*(len(c.body)+7)*4/3*78/76 + 4096; len(raw) > limit {
				t.Errorf("message of %d bytes for bodies of %d: more than %d", len(raw), 2*len(c.body)+7, limit)
			}
			if !strings.Contains(string(raw), "Content-Transfer-Encoding: "+c.cte) {
				t.Errorf("bodies not %s", c.cte)
			}
			var ctypes []string
			leaves, err := walk(t, msg.Header, msg.Body, &ctypes)
			lf := func(b []byte) string { return strings.ReplaceAll(string(b), "\r\n", "\n") } // lines go CRLF
			if err != nil || len(leaves) != 2 || lf(leaves[0].body) != c.body || lf(leaves[1].body) != "<p>"+c.body+"</p>" {
				t.Fatalf("bodies do not read back (%d parts, %v)", len(leaves), err)
			}
		})
	}
}

// TestQPLenBoundsTheEncoding: qpLen is never below the length the quoted-printable writer
// gives (lines as the message has them: CRLF).
func TestQPLenBoundsTheEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "Z", " ", "\t", "=", "\n", "\r\n", "é", "—", "中", "\x00", "~", strings.Repeat("x", 80)}
	for range 2000 {
		var b strings.Builder
		for range r.IntN(300) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		s := b.String()
		var out bytes.Buffer
		w := quotedprintable.NewWriter(&out)
		_, _ = w.Write([]byte(strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")))
		_ = w.Close()
		if got := qpLen(s); got < out.Len() {
			t.Fatalf("qpLen(%q) = %d, encoded %d", s, got, out.Len())
		}
	}
}

// TestLongAttachmentNamesStayWithinLineLimit: the longest name the API takes (200 bytes, here
// in scripts and characters that encode to three times that and more, beside the longest
// content types) keeps every line of the message within RFC 5322's 998 characters, and reads
// back.
func TestLongAttachmentNamesStayWithinLineLimit(t *testing.T) {
	var names []string
	for _, ext := range []string{".pdf", ".pptx", ".docx", ".xlsx"} {
		n := 200 - len(ext)
		names = append(names, strings.Repeat("中", n/3)+strings.Repeat("a", n%3)+ext, strings.Repeat("a", n)+ext,
			strings.Repeat("é", n/2)+strings.Repeat("a", n%2)+ext, strings.Repeat("=", n-2)+"é"+ext)
	}
	for _, name := range names {
		raw, msg := buildAndRead(t, Message{From: "a@acme.test", To: []string{"b@example.com"}, Subject: "s", Text: "t",
			Attachments: []Attachment{{Filename: name, Data: []byte("%PDF")}}})
		for i, line := range strings.Split(string(raw), "\r\n") {
			if len(line) > 998 {
				t.Errorf("%d-byte name: line %d is %d characters", len(name), i, len(line))
			}
		}
		var ctypes []string
		leaves, err := walk(t, msg.Header, msg.Body, &ctypes)
		if err != nil || len(leaves) != 2 {
			t.Fatalf("%d parts, %v", len(leaves), err)
		}
		if got, _ := new(mime.WordDecoder).DecodeHeader(leaves[1].filename); got != name {
			t.Errorf("name reads back as %q", got)
		}
	}
}

// TestEntityRefID: every message carries X-Entity-Ref-ID as upstream's do, its email's id
// unless the caller set one, then the caller's, once.
func TestEntityRefID(t *testing.T) {
	base := Message{EmailID: "em1", From: "a@acme.test", To: []string{"b@example.com"}, Subject: "s", Text: "t"}
	if _, msg := buildAndRead(t, base); msg.Header.Get("X-Entity-Ref-ID") != "em1" {
		t.Errorf("X-Entity-Ref-ID = %q, want the email's id", msg.Header.Get("X-Entity-Ref-ID"))
	}
	base.Headers = []Header{{"x-entity-ref-id", "mine"}}
	if _, msg := buildAndRead(t, base); len(msg.Header["X-Entity-Ref-Id"]) != 1 || msg.Header.Get("X-Entity-Ref-ID") != "mine" {
		t.Errorf("X-Entity-Ref-ID = %q, want the caller's once", msg.Header["X-Entity-Ref-Id"])
	}
}
