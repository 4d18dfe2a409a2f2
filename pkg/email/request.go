package email

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"path"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/template"
)

// Limits of one send request.
const (
	MaxBatch        = 100
	MaxAttachments  = 10
	MaxRecipients   = 50       // SES: at most 50 recipients per message
	MaxMessageBytes = 40 << 20 // SES v2: whole message after encoding
	// MaxRenderedBytes bounds what the templates of one request (a batch) render to in all,
	// before any is rendered.
	MaxRenderedBytes = 64 << 20
	// MaxVariables and MaxVariablesBytes cap a send's template variables (names and values).
	MaxVariables      = 100
	MaxVariablesBytes = 64 << 10
	MaxSubjectBytes   = 998
	MaxHeaderBytes    = 998
	MaxIdempotencyKey = 256
	MaxIDLength       = 128 // ids we never issue longer; also far below DynamoDB's key limits
	// MaxFilenameBytes bounds an attachment's name: it goes into two header lines of the
	// message, encoded (up to about 3.6 characters a byte) beside its content type, and each
	// must stay within RFC 5322's 998 characters.
	MaxFilenameBytes = 200
)

// Request is one validated, normalised send request. Its JSON form (fields in a fixed order,
// maps with sorted keys) is the canonical form the idempotency fingerprint is taken of.
type Request struct {
	From        string            `json:"from"`
	To          []string          `json:"to"`
	CC          []string          `json:"cc,omitempty"`
	BCC         []string          `json:"bcc,omitempty"`
	ReplyTo     []string          `json:"replyTo,omitempty"`
	Subject     *string           `json:"subject,omitempty"`
	TemplateID  string            `json:"templateId,omitempty"`
	Variables   map[string]string `json:"variables,omitempty"`
	Text        *string           `json:"text,omitempty"`
	HTML        *string           `json:"html,omitempty"`
	Headers     []store.Header    `json:"headers,omitempty"`
	Attachments []Attachment      `json:"attachments,omitempty"`
	ScheduledAt *time.Time        `json:"scheduledAt,omitempty"`
	InReplyToID string            `json:"inReplyToId,omitempty"`
}

// Attachment as received (content base64) plus its decoded size.
type Attachment struct {
	Filename string `json:"filename"`
	Content  string `json:"content"`
	size     int
}

// reservedHeaders are set by Mailroom itself; a caller may not set them. In-Reply-To and
// References are the caller's to set (a reply to a message Mailroom never sent has no
// inReplyToId): they then replace what inReplyToId would give, as in useSend.
var reservedHeaders = map[string]bool{
	"from": true, "to": true, "cc": true, "bcc": true, "subject": true, "reply-to": true,
	"sender": true, "date": true, "message-id": true, "mime-version": true, "content-type": true,
	"content-transfer-encoding": true, "x-usesend-email-id": true, "return-path": true,
	"dkim-signature": true,
	// The MIME structure is Mailroom's too: on the top level these would make mail clients
	// show the whole body as an attachment, or as part of another message.
	"content-disposition": true, "content-id": true, "content-description": true, "content-location": true,
}

// blockedExtensions are attachment types SES refuses to send.
var blockedExtensions = map[string]bool{}

func init() {
	for _, e := range strings.Fields(`ade adp app asp bas bat cer chm cmd com cpl crt csh der exe fxp
		gadget hlp hta inf ins isp its js jse ksh lib lnk mad maf mag mam maq mar mas mat mau mav maw
		mda mdb mde mdt mdw mdz msc msh msh1 msh2 mshxml msh1xml msh2xml msi msp mst ops pcd pif plg
		prf prg reg scf scr sct shb shs sys ps1 ps1xml ps2 ps2xml psc1 psc2 tmp url vb vbe vbs vps
		vsmacros vss vst vsw vxd ws wsc wsf wsh xnk`) {
		blockedExtensions[e] = true
	}
}

// ErrMalformedJSON is the answer to a body that is not JSON at all: COMPAT.md fixes its
// message, which clients may compare whole, so it does not say where the syntax broke.
var ErrMalformedJSON = fault.Field("", "Malformed JSON in request body")

// DecodeRequest decodes and validates one send request.
func DecodeRequest(body []byte) (Request, error) {
	return decodeRequest(body, "")
}

// DecodeBatch decodes and validates a batch: a JSON array of 1..100 send requests. Every element
// is validated before anything happens; a bad one fails the whole batch, and the error names
// each bad element by index.
func DecodeBatch(body []byte) ([]Request, error) {
	reqs, badAt, err := DecodeBatchEach(body)
	if err != nil {
		return nil, err
	}
	if err := fault.Join(slices.DeleteFunc(slices.Clone(badAt), func(e error) bool { return e == nil })); err != nil {
		return nil, err
	}
	return reqs, nil
}

// DecodeBatchEach decodes a batch as DecodeBatch does, but returns each element's error apart
// (badAt[i], nil for a good element) with the good elements decoded, so that the caller can
// check those against the store too (Service.Refuse) and name every bad element at once; err
// is for the body as a whole (not JSON, not an array, empty or too long).
func DecodeBatchEach(body []byte) (reqs []Request, badAt []error, err error) {
	var items []json.RawMessage
	if err := json.Unmarshal(body, &items); err != nil {
		if !json.Valid(body) {
			return nil, nil, ErrMalformedJSON
		}
		return nil, nil, fault.Field("body", "must be an array of emails")
	}
	if len(items) == 0 {
		return nil, nil, fault.Field("body", "at least 1 email is required")
	}
	if len(items) > MaxBatch {
		return nil, nil, fault.Field("body", "at most %d emails per batch", MaxBatch)
	}
	out := make([]Request, len(items))
	badAt = make([]error, len(items))
	for i, raw := range items {
		out[i], badAt[i] = decodeRequest(raw, fmt.Sprintf("[%d].", i)) // an element of valid JSON is valid JSON
	}
	return out, badAt, nil
}

// sendFields are the fields of a send request: those of upstream's OpenAPI document.
var sendFields = []string{"to", "from", "subject", "templateId", "variables", "replyTo", "cc", "bcc",
	"text", "html", "headers", "attachments", "scheduledAt", "inReplyToId"}

func decodeRequest(body []byte, at string) (Request, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		if !json.Valid(body) {
			return Request{}, ErrMalformedJSON
		}
		field := strings.TrimSuffix(at, ".")
		if field == "" {
			field = "body" // a single send's body; a batch's element is named by its index
		}
		return Request{}, fault.Field(field, "must be an object")
	}
	if fields == nil { // null
		return Request{}, fault.Field(cmp.Or(strings.TrimSuffix(at, "."), "body"), "must be an object")
	}
	// A key given twice anywhere in it (a header, a variable, an attachment's filename).
	if err := fault.DuplicateKeys(at, body); err != nil {
		return Request{}, err
	}
	// A field that is not one of the send's is refused, not dropped: a misspelt "reply_to"
	// or "htm" would otherwise send something else than was meant. One that is null sets
	// nothing, so it is let through (usesend-js sends "react": null when given one).
	if err := fault.UnknownFields(at, fault.SetKeys(fields), sendFields); err != nil {
		return Request{}, err
	}
	d := decoder{fields: fields, at: at}
	var r Request
	r.To = d.addresses("to", true)
	r.From = d.from()
	r.CC = d.addresses("cc", false)
	r.BCC = d.addresses("bcc", false)
	r.ReplyTo = d.addresses("replyTo", false)
	r.Subject = d.optString("subject", MaxSubjectBytes, true)
	r.TemplateID = d.id("templateId")
	r.Variables = d.variables()
	r.Text = d.optString("text", 0, false)
	r.HTML = d.html()
	r.Headers = d.headers()
	r.Attachments = d.attachments()
	r.ScheduledAt = d.time("scheduledAt")
	r.InReplyToID = d.id("inReplyToId")
	if d.err != nil {
		return Request{}, d.err
	}
	if r.Subject == nil && r.TemplateID == "" {
		return Request{}, fault.Field(at+"subject", "is required unless templateId is given")
	}
	if r.Text == nil && r.HTML == nil && r.TemplateID == "" {
		return Request{}, fault.Field(at+"html", "html or text is required unless templateId is given")
	}
	if n := len(r.To) + len(r.CC) + len(r.BCC); n > MaxRecipients {
		return Request{}, fault.Field(at+"to", "at most %d recipients in to, cc and bcc together", MaxRecipients)
	}
	if len(r.ReplyTo) > MaxRecipients {
		// Not recipients, but a header every recipient gets: bounded the same way.
		return Request{}, fault.Field(at+"replyTo", "at most %d addresses", MaxRecipients)
	}
	if r.Size() > MaxMessageBytes {
		// Named by what makes a message that large.
		return Request{}, fault.New(fault.TooLarge, "%s%s: message too large: at most %d MB after encoding", at, r.largestPart(), MaxMessageBytes>>20)
	}
	return r, nil
}

// largestPart names the largest of the fields a message's size comes from: attachments (all
// together), html, text, headers or subject.
func (r Request) largestPart() string {
	field, most := "subject", length(r.Subject)
	headers, attachments := 0, 0
	for _, h := range r.Headers {
		headers += len(h.Name) + len(h.Value)
	}
	for _, a := range r.Attachments {
		attachments += a.size
	}
	for _, p := range []struct {
		name string
		n    int
	}{{"text", length(r.Text)}, {"html", length(r.HTML)}, {"headers", headers}, {"attachments", attachments}} {
		if p.n > most {
			field, most = p.name, p.n
		}
	}
	return field
}

// Size estimates the encoded message size: base64 bodies with line breaks, plus headers.
func (r Request) Size() int {
	return r.sizeWith(length(r.Subject), length(r.Text), length(r.HTML))
}

// length is the length of an optional string (0 when absent).
func length(p *string) int {
	if p == nil {
		return 0
	}
	return len(*p)
}

// sizeWith is Size for a subject, text and html of these lengths (a template's, rendered).
func (r Request) sizeWith(subject, text, html int) int {
	n := 4096 + subject // headers Mailroom adds
	n += (text + html) * 4 / 3 * 78 / 76
	for _, h := range r.Headers {
		n += len(h.Name) + len(h.Value) + 4
	}
	for _, a := range r.Attachments {
		n += len(a.Filename) + 200 + a.size*4/3*78/76
	}
	return n
}

// decoder decodes fields one by one so that each error names its field; it keeps the first.
type decoder struct {
	fields map[string]json.RawMessage
	at     string
	err    error
}

func (d *decoder) fail(field, format string, args ...any) {
	if d.err == nil {
		d.err = fault.Field(d.at+field, format, args...)
	}
}

// raw returns the field's JSON, or nil when absent or null.
func (d *decoder) raw(field string) json.RawMessage {
	v, ok := d.fields[field]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return nil
	}
	return v
}

// id decodes an identifier: a string of at most MaxIDLength bytes.
func (d *decoder) id(field string) string {
	s := d.str(field)
	if len(s) > MaxIDLength {
		d.fail(field, "at most %d characters", MaxIDLength)
		return ""
	}
	return s
}

func (d *decoder) str(field string) string {
	v := d.raw(field)
	if v == nil {
		return ""
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		d.fail(field, "must be a string")
	}
	return s
}

// html decodes the html field: a boolean (which useSend's SMTP proxy sends for a message
// without one) counts as absent, and so does the string "true" or "false", which is what
// upstream's schema makes of that boolean before it drops it; anything else is an optString.
func (d *decoder) html() *string {
	switch string(bytes.TrimSpace(d.raw("html"))) {
	case "true", "false", `"true"`, `"false"`:
		return nil
	}
	return d.optString("html", 0, false)
}

// optString decodes a string that must be non-empty when present.
func (d *decoder) optString(field string, max int, single bool) *string {
	v := d.raw(field)
	if v == nil {
		return nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		d.fail(field, "must be a string")
		return nil
	}
	switch {
	case s == "":
		d.fail(field, "must not be empty")
	case max > 0 && len(s) > max:
		d.fail(field, "at most %d bytes", max)
	case single && strings.ContainsAny(s, "\r\n"):
		d.fail(field, "must not contain line breaks")
	case single && template.HasControl(s):
		d.fail(field, "must not contain control characters")
	case !utf8.ValidString(s):
		d.fail(field, "must be valid UTF-8")
	}
	return &s
}

// addresses decodes a string or an array of strings, each a valid address.
func (d *decoder) addresses(field string, required bool) []string {
	v := d.raw(field)
	if v == nil {
		if required {
			d.fail(field, "is required")
		}
		return nil
	}
	var list []string
	if err := json.Unmarshal(v, &list); err != nil {
		var one string
		if err := json.Unmarshal(v, &one); err != nil {
			d.fail(field, "must be a string or an array of strings")
			return nil
		}
		list = []string{one}
	}
	if len(list) == 0 && required {
		d.fail(field, "at least one address is required")
	}
	out := make([]string, 0, len(list))
	for i, a := range list {
		norm, err := ParseAddress(a)
		if err != nil {
			name := field
			if len(list) > 1 {
				name = fmt.Sprintf("%s[%d]", field, i)
			}
			d.failAddress(name, a, err)
			return nil
		}
		out = append(out, norm)
	}
	return out
}

func (d *decoder) from() string {
	v := d.raw("from")
	if v == nil {
		d.fail("from", "is required")
		return ""
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		d.fail("from", "must be a string")
		return ""
	}
	norm, err := ParseAddress(s)
	if err != nil {
		d.failAddress("from", s, err)
	}
	return norm
}

// failAddress refuses the address a of field, saying why when it is not simply malformed.
func (d *decoder) failAddress(field, a string, err error) {
	if d.err == nil {
		d.err = AddressError(d.at+field, a, err)
	}
}

// AddressError is the 400 for the address a of field that ParseAddress refused with err: it
// says why when the address is not simply malformed.
func AddressError(field, a string, err error) error {
	if errors.Is(err, ErrNonASCIIAddress) {
		return fault.Field(field, "%q: %v", a, err)
	}
	return fault.Field(field, "invalid email address %q", a)
}

// ErrNonASCIIAddress refuses an address with non-ASCII characters (in its name they are fine):
// SES takes 7-bit addresses only (no SMTPUTF8), and such an email would be accepted only to fail
// when sent. A domain can be written in its ASCII (punycode) form instead.
var ErrNonASCIIAddress = errors.New("non-ASCII addresses cannot be sent through SES (no SMTPUTF8); write an internationalised domain in its xn-- (punycode) form")

func (d *decoder) variables() map[string]string {
	v := d.raw("variables")
	if v == nil {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		d.fail("variables", "must be an object")
		return nil
	}
	if len(m) > MaxVariables {
		d.fail("variables", "at most %d variables", MaxVariables)
		return nil
	}
	total := 0
	for k, raw := range m {
		total += len(k) + len(raw)
	}
	if total > MaxVariablesBytes {
		d.fail("variables", "at most %d KB of names and values", MaxVariablesBytes>>10)
		return nil
	}
	out := make(map[string]string, len(m))
	for k, raw := range m {
		// Strings only, as upstream's schema says (a number or boolean is a 400 naming it),
		// and not null (a template would render it as nothing where leaving it out is a 400).
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			d.fail("variables."+k, "must be a string")
			return nil
		}
		out[k] = s
	}
	return out
}

func (d *decoder) headers() []store.Header {
	v := d.raw("headers")
	if v == nil {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		d.fail("headers", "must be an object of strings")
		return nil
	}
	out := make([]store.Header, 0, len(m))
	seen := make(map[string]bool, len(m))
	for name, raw := range m {
		var value string
		if err := json.Unmarshal(raw, &value); err != nil {
			d.fail("headers."+name, "must be a string")
			return nil
		}
		switch {
		case !validHeaderName(name):
			d.fail("headers", "invalid header name %q", name)
		case reservedHeaders[strings.ToLower(name)]:
			d.fail("headers."+name, "is set by Mailroom and cannot be overridden")
		case strings.HasPrefix(strings.ToLower(name), "x-ses-"):
			// SES acts on X-SES-* headers of a raw message (configuration set, ARNs).
			d.fail("headers."+name, "X-SES-* headers are reserved")
		case seen[strings.ToLower(name)]:
			d.fail("headers."+name, "given twice (header names are case-insensitive)")
		case value == "":
			d.fail("headers."+name, "must not be empty")
		case strings.ContainsAny(value, "\r\n\x00"):
			d.fail("headers."+name, "must not contain CR, LF or NUL")
		case len(name)+len(value) > MaxHeaderBytes:
			d.fail("headers."+name, "too long: at most %d bytes", MaxHeaderBytes)
		case !utf8.ValidString(value):
			d.fail("headers."+name, "must be valid UTF-8")
		}
		if d.err != nil {
			return nil
		}
		seen[strings.ToLower(name)] = true
		out = append(out, store.Header{Name: name, Value: value})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// validHeaderName: RFC 5322 field-name, printable ASCII without colon.
func validHeaderName(s string) bool {
	if s == "" || len(s) > 76 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 33 || c > 126 || c == ':' {
			return false
		}
	}
	return true
}

// attachmentFields are an attachment's fields in upstream's OpenAPI document.
var attachmentFields = []string{"filename", "content"}

func (d *decoder) attachments() []Attachment {
	v := d.raw("attachments")
	if v == nil {
		return nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(v, &list); err != nil {
		d.fail("attachments", "must be an array")
		return nil
	}
	if len(list) > MaxAttachments {
		d.fail("attachments", "at most %d items", MaxAttachments)
		return nil
	}
	out := make([]Attachment, 0, len(list))
	for i, raw := range list {
		var a struct {
			Filename *string `json:"filename"`
			Content  *string `json:"content"`
		}
		at := fmt.Sprintf("attachments[%d]", i)
		var keys map[string]json.RawMessage
		if json.Unmarshal(raw, &keys) != nil || json.Unmarshal(raw, &a) != nil {
			d.fail(at, "must be an object with string filename and content")
			return nil
		}
		// As the send's own fields: a contentType or a path would otherwise be dropped silently.
		if err := fault.UnknownFields(d.at+at+".", fault.SetKeys(keys), attachmentFields); err != nil {
			if d.err == nil {
				d.err = err
			}
			return nil
		}
		switch {
		case a.Filename == nil || *a.Filename == "":
			d.fail(at+".filename", "is required")
		case len(*a.Filename) > MaxFilenameBytes:
			d.fail(at+".filename", "at most %d bytes", MaxFilenameBytes)
		case strings.ContainsAny(*a.Filename, "\r\n\x00/\\\""):
			d.fail(at+".filename", "must not contain line breaks, quotes or path separators")
		case blockedExtensions[blockedExt(*a.Filename)]:
			d.fail(at+".filename", "file type .%s is not allowed", blockedExt(*a.Filename))
		case a.Content == nil || *a.Content == "":
			d.fail(at+".content", "is required")
		}
		if d.err != nil {
			return nil
		}
		n, err := base64Size(*a.Content)
		if err != nil {
			d.fail(at+".content", "must be base64")
			return nil
		}
		out = append(out, Attachment{Filename: *a.Filename, Content: *a.Content, size: n})
	}
	return out
}

// base64Size checks content is standard base64 (line breaks allowed, padding optional) and
// returns its decoded size.
func base64Size(s string) (int, error) {
	b, err := DecodeAttachment(s)
	return len(b), err
}

// DecodeAttachment returns the bytes of a validated attachment's content.
func DecodeAttachment(content string) ([]byte, error) {
	clean := strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == ' ' {
			return -1
		}
		return r
	}, content)
	if !strings.HasSuffix(clean, "=") && len(clean)%4 != 0 {
		return base64.RawStdEncoding.DecodeString(clean)
	}
	return base64.StdEncoding.DecodeString(clean)
}

func (d *decoder) time(field string) *time.Time {
	present := d.raw(field) != nil
	s := d.str(field)
	if d.err != nil {
		return nil
	}
	if s == "" {
		if present { // "" is no time: a form's empty field would otherwise send at once
			d.fail(field, "must be an RFC 3339 date-time (leave it out, or null, to send now)")
		}
		return nil
	}
	t, err := ParseTime(s)
	if err != nil {
		d.fail(field, "%s", err.Error())
		return nil
	}
	return &t
}

// ParseTime reads an email's scheduledAt: RFC 3339, or the same without its seconds
// (2026-01-02T15:04Z, which JavaScript's Date reads too), in UTC. A time without a zone is
// refused: a client would mean its own, which the server cannot know. RFC 3339 lets "T" and
// "Z" be written in lower case (2026-01-02t15:04:05z); Go's layouts do not.
func ParseTime(s string) (time.Time, error) {
	// Upper-cased, nothing but the letters T and Z changes (pkg/naturaldate, which reads a
	// campaign's, is not linked by the functions that send).
	s = strings.ToUpper(s)
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04Z07:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			// Go takes an offset of +24:00 or +23:60; RFC 3339 (and JavaScript) do not.
			if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
				break
			}
			return t.UTC(), nil
		}
	}
	return time.Time{}, errors.New("must be an RFC 3339 date-time with a time zone, e.g. 2026-01-02T15:04:05Z")
}

// ParseAddress validates "a@b.c" or "Name <a@b.c>" and returns it in a normal form. The domain
// must have a dot, as every deliverable domain does.
func ParseAddress(s string) (string, error) {
	if strings.ContainsAny(s, "\r\n\x00") || len(s) > 320 {
		return "", fmt.Errorf("invalid address")
	}
	a, err := mail.ParseAddress(strings.TrimSpace(s))
	if err != nil {
		return "", err
	}
	at := strings.LastIndexByte(a.Address, '@')
	if at <= 0 {
		return "", fmt.Errorf("invalid address")
	}
	for i := 0; i < len(a.Address); i++ {
		if a.Address[i] >= 0x80 {
			return "", ErrNonASCIIAddress
		}
	}
	if !dotAtom(a.Address[:at]) {
		// A quoted local part ("x@paypal.com"@example.com) is unquoted by the parser and
		// would be stored, shown and sent as something else than it is.
		return "", fmt.Errorf("invalid address: only plain local parts (no quotes) are accepted")
	}
	domain := a.Address[at+1:]
	if !strings.Contains(domain, ".") || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") ||
		strings.Contains(domain, "..") || strings.ContainsAny(a.Address, " ") {
		return "", fmt.Errorf("invalid address")
	}
	// What no mail server takes (RFC 5321 4.5.3.1, RFC 1035 2.3.4): such an email would be
	// accepted here only to fail at SES.
	labels := strings.Split(domain, ".")
	if at > 64 || len(a.Address) > 254 || slices.ContainsFunc(labels, badLabel) || allDigits(labels[len(labels)-1]) {
		// No top-level domain is all digits (RFC 3696 2): a@example.123, or an IP address
		// written without a domain literal's brackets.
		return "", fmt.Errorf("invalid address")
	}
	if a.Name == "" {
		return a.Address, nil
	}
	// Keep the caller's spelling of the name (a.String() would RFC 2047-encode it).
	return strings.TrimSpace(s), nil
}

func allDigits(l string) bool {
	return l != "" && strings.Trim(l, "0123456789") == ""
}

// badLabel reports a domain label no host name has (RFC 1035 2.3.1, RFC 1123 2.1): more than
// 63 characters, or other than letters, digits and inner hyphens.
func badLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return true
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return true
		}
	}
	return false
}

// blockedExt is the extension a mail client would see in name, lower-cased: trailing dots and
// spaces are dropped first, as Windows does ("a.exe." opens as a.exe).
func blockedExt(name string) string {
	return strings.ToLower(strings.TrimPrefix(path.Ext(strings.TrimRight(name, ". ")), "."))
}

// dotAtom reports a local part that needs no quoting (RFC 5322 dot-atom).
func dotAtom(local string) bool {
	if local == "" || strings.HasPrefix(local, ".") || strings.HasSuffix(local, ".") || strings.Contains(local, "..") {
		return false
	}
	for _, c := range local {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.ContainsRune(".!#$%&'*+-/=?^_`{|}~", c):
		default:
			return false
		}
	}
	return true
}

// AddressOnly returns the bare address of a validated address. (pkg/mail has the same for
// the mailers; importing it here would link its MIME library into every function.)
func AddressOnly(s string) string {
	a, err := mail.ParseAddress(s)
	if err != nil {
		return s
	}
	return a.Address
}

// DomainOf returns the lower-cased domain of a validated address.
func DomainOf(s string) string {
	addr := AddressOnly(s)
	return strings.ToLower(addr[strings.LastIndexByte(addr, '@')+1:])
}

// AttachmentName is the file name a message carries for an attachment named name: empty is
// "attachment", and a control character or one of "/:<>?\| is "_", as the MIME library writes
// it (pkg/mail's test holds the two to the same names). The console shows this name, the one
// the recipient sees.
func AttachmentName(name string) string {
	if name == "" {
		return "attachment"
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 32 || c == 127 || strings.IndexByte(`"/:<>?\|`, c) >= 0 {
			c = '_'
		}
		b.WriteByte(c)
	}
	return b.String()
}
