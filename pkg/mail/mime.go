package mail

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"path/filepath"
	"slices"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// EmailIDHeader carries our email id on every message, so that provider events (which echo the
// headers) can be matched back to the email without a lookup by provider message id.
const EmailIDHeader = "X-Usesend-Email-ID"

// maxHeaderLine is where custom header values are folded, the same width go-mail uses for its own.
const maxHeaderLine = 76

// Build renders m as an RFC 5322 / MIME message: text only, html only, or multipart/alternative,
// wrapped in multipart/mixed when there are attachments. Bcc never appears in the headers: it
// is envelope only (Message.Recipients). A missing Message-ID is generated on the From domain so
// that replies thread even when the provider keeps ours.
func Build(m Message) ([]byte, error) {
	return build(m, time.Now())
}

// build is Build with the clock passed in, so golden tests get a fixed Date.
func build(m Message, now time.Time) ([]byte, error) {
	for _, h := range m.Headers {
		if err := checkHeader(h); err != nil {
			return nil, err
		}
	}
	for name, v := range map[string]string{"subject": m.Subject, "messageId": m.MessageID, "inReplyTo": m.InReplyTo} {
		if strings.ContainsAny(v, "\r\n") {
			return nil, fmt.Errorf("build message: %s contains a line break", name)
		}
	}

	// The default User-Agent names the library version, which would change every golden file on
	// upgrade and tells recipients nothing useful.
	msg := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	if err := msg.From(m.From); err != nil {
		return nil, fmt.Errorf("build message: from: %w", err)
	}
	if len(m.To) > 0 {
		if err := msg.To(m.To...); err != nil {
			return nil, fmt.Errorf("build message: to: %w", err)
		}
	}
	if len(m.CC) > 0 {
		if err := msg.Cc(m.CC...); err != nil {
			return nil, fmt.Errorf("build message: cc: %w", err)
		}
	}
	if len(m.ReplyTo) > 0 {
		if err := msg.SetAddrHeader(gomail.HeaderReplyTo, m.ReplyTo...); err != nil {
			return nil, fmt.Errorf("build message: reply-to: %w", err)
		}
	}
	msg.Subject(m.Subject)
	msg.SetDateWithValue(now)

	messageID := strings.Trim(m.MessageID, "<>")
	if messageID == "" {
		id, err := newMessageID(msg.GetFrom()[0].Address)
		if err != nil {
			return nil, fmt.Errorf("build message: %w", err)
		}
		messageID = id
	}
	msg.SetMessageIDWithValue(messageID)
	if m.InReplyTo != "" && threadID(m.InReplyTo) {
		// The caller's own In-Reply-To or References (custom headers) win over the reply's.
		ref := "<" + strings.Trim(m.InReplyTo, "<>") + ">"
		if !hasHeader(m.Headers, "In-Reply-To") {
			msg.SetGenHeader(gomail.HeaderInReplyTo, ref)
		}
		if !hasHeader(m.Headers, "References") {
			// Each id once, in ASCII (one non-ASCII id would have the whole header encoded,
			// which no client threads by).
			thread := make([]string, 0, len(m.References)+1)
			for _, r := range m.References {
				r = "<" + strings.Trim(r, "<> ") + ">"
				if threadID(r) && !slices.Contains(thread, r) && r != ref {
					thread = append(thread, r)
				}
			}
			msg.SetGenHeader(gomail.HeaderReferences, strings.Join(append(thread, ref), " "))
		}
	}
	if m.EmailID != "" {
		msg.SetGenHeader(gomail.Header(EmailIDHeader), m.EmailID)
		if !hasHeader(m.Headers, "X-Entity-Ref-ID") {
			// As upstream: a value of its own on every message keeps Gmail from folding
			// messages of one subject into one thread and hiding their repeated parts. The
			// email's id is such a value, and the same on a retry.
			msg.SetGenHeader(gomail.Header("X-Entity-Ref-ID"), m.EmailID)
		}
	}

	switch {
	case m.Text != "" && m.HTML != "":
		msg.SetBodyString(gomail.TypeTextPlain, m.Text, bodyEncoding(m.Text))
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML, bodyEncoding(m.HTML))
	case m.HTML != "":
		msg.SetBodyString(gomail.TypeTextHTML, m.HTML, bodyEncoding(m.HTML))
	default:
		// A message with neither body still needs one part to be valid MIME.
		msg.SetBodyString(gomail.TypeTextPlain, m.Text, bodyEncoding(m.Text))
	}
	for _, a := range m.Attachments {
		name := a.Filename
		if name == "" {
			name = "attachment"
		}
		if err := msg.AttachReader(name, bytes.NewReader(a.Data),
			gomail.WithFileContentType(gomail.ContentType(attachmentType(name))),
			gomail.WithFileEncoding(gomail.EncodingB64)); err != nil {
			return nil, fmt.Errorf("build message: attachment %q: %w", name, err)
		}
	}

	var buf bytes.Buffer
	if _, err := msg.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("build message: write: %w", err)
	}
	return insertHeaders(buf.Bytes(), m.Headers), nil
}

// bodyEncoding is quoted-printable for a body mostly in ASCII (readable in the raw message, and
// the smaller there), base64 where quoted-printable would be longer by more than qpSlack: a
// body in another script takes up to three times its bytes in quoted-printable, against
// base64's four thirds, so a message's size stays within what the API bounds it by
// (email.Request.Size, whose header allowance covers the slack).
func bodyEncoding(s string) gomail.PartOption {
	if qpLen(s) > b64Len(len(s))+qpSlack {
		return gomail.WithPartEncoding(gomail.EncodingB64)
	}
	return gomail.WithPartEncoding(gomail.EncodingQP)
}

// qpSlack is how much longer than base64 a body's quoted-printable may be and still be chosen:
// a short greeting stays readable in the raw message.
const qpSlack = 512

// qpLen bounds s's quoted-printable length from above: a byte other than printable ASCII, space
// or tab takes three, and so does a space or tab that ends a line; a line break takes two
// (CRLF), and a soft line break ("=" CRLF) ends each 73 characters of a line or fewer (75 a
// line, less an escape that does not fit whole).
func qpLen(s string) int {
	n, line := 0, 0
	endLine := func() { n, line = n+line+line/73*3, 0 }
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\n':
			endLine()
			n += 2
		case c == '\r' && i+1 < len(s) && s[i+1] == '\n':
		case c == ' ' || c == '\t':
			if i+1 == len(s) || s[i+1] == '\n' || s[i+1] == '\r' {
				line += 3
			} else {
				line++
			}
		case c >= 33 && c <= 126 && c != '=':
			line++
		default:
			line += 3
		}
	}
	endLine()
	return n
}

// b64Len is the base64 length of n bytes in lines of 76 characters with CRLF.
func b64Len(n int) int {
	enc := (n + 2) / 3 * 4
	return enc + (enc+75)/76*2
}

// hasHeader reports whether headers hold one named name (case-insensitive).
func hasHeader(headers []Header, name string) bool {
	for _, h := range headers {
		if strings.EqualFold(h.Name, name) {
			return true
		}
	}
	return false
}

// insertHeaders appends the custom headers, in the caller's order and with repeats kept, at the
// end of the header block. go-mail keeps generic headers in a map written in sorted order, which
// would lose both the order and repeated names.
func insertHeaders(raw []byte, headers []Header) []byte {
	if len(headers) == 0 {
		return raw
	}
	end := bytes.Index(raw, []byte("\r\n\r\n"))
	if end < 0 {
		return raw
	}
	var b bytes.Buffer
	b.Grow(len(raw) + 128*len(headers))
	b.Write(raw[:end+2])
	for _, h := range headers {
		b.WriteString(foldHeader(h.Name, mime.QEncoding.Encode("UTF-8", h.Value)))
	}
	b.Write(raw[end+2:])
	return b.Bytes()
}

// foldHeader renders "Name: value\r\n", folding at spaces near 76 columns (RFC 5322 2.2.3).
// Values without spaces stay on one line; RFC 5322 allows up to 998 characters.
func foldHeader(name, value string) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteString(":")
	col := len(name) + 1
	for i, word := range strings.Split(value, " ") {
		if i > 0 && col+1+len(word) > maxHeaderLine {
			b.WriteString("\r\n")
			col = 0
		}
		b.WriteString(" ")
		b.WriteString(word)
		col += 1 + len(word)
	}
	b.WriteString("\r\n")
	return b.String()
}

// checkHeader refuses what would let a header value inject other headers or break the block.
func checkHeader(h Header) error {
	if h.Name == "" {
		return errors.New("build message: empty header name")
	}
	for i := 0; i < len(h.Name); i++ {
		c := h.Name[i]
		if c <= ' ' || c >= 0x7f || c == ':' {
			return fmt.Errorf("build message: invalid header name %q", h.Name)
		}
	}
	if strings.ContainsAny(h.Value, "\r\n") {
		return fmt.Errorf("build message: header %s: value contains a line break", h.Name)
	}
	return nil
}

// newMessageID makes a Message-ID (without angle brackets) on the domain of the From address.
func newMessageID(from string) (string, error) {
	domain := "localhost"
	from = AddressOnly(from)
	if at := strings.LastIndexByte(from, '@'); at >= 0 && at < len(from)-1 {
		domain = from[at+1:]
	}
	var r [16]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("message id: %w", err)
	}
	return hex.EncodeToString(r[:]) + "@" + domain, nil
}

// attachmentTypes is our own table of common attachment types, so that the Content-Type of an
// attachment does not depend on the mime.types files of the machine that renders it.
var attachmentTypes = map[string]string{
	".pdf":  "application/pdf",
	".png":  "image/png",
	".jpg":  "image/jpeg",
	".jpeg": "image/jpeg",
	".gif":  "image/gif",
	".webp": "image/webp",
	".svg":  "image/svg+xml",
	".txt":  "text/plain",
	".csv":  "text/csv",
	".htm":  "text/html",
	".html": "text/html",
	".json": "application/json",
	".xml":  "application/xml",
	".ics":  "text/calendar",
	".zip":  "application/zip",
	".gz":   "application/gzip",
	".doc":  "application/msword",
	".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	".xls":  "application/vnd.ms-excel",
	".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	".ppt":  "application/vnd.ms-powerpoint",
	".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
	".mp3":  "audio/mpeg",
	".mp4":  "video/mp4",
	".wav":  "audio/wav",
}

// attachmentType picks the Content-Type of an attachment from its file name extension.
func attachmentType(name string) string {
	ext := strings.ToLower(filepath.Ext(name))
	if t, ok := attachmentTypes[ext]; ok {
		return t
	}
	t, _, err := mime.ParseMediaType(mime.TypeByExtension(ext))
	// message/* and multipart/* must not be base64 encoded (RFC 2046), and attachments always are.
	if err != nil || strings.HasPrefix(t, "message/") || strings.HasPrefix(t, "multipart/") {
		return "application/octet-stream"
	}
	return t
}

// threadID reports whether s (with or without its angle brackets) is a message id a thread
// header may carry as it is: printable ASCII without spaces or brackets inside. Anything else
// would have the whole header encoded, which no client threads by.
func threadID(s string) bool {
	s = strings.Trim(s, "<>")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] >= 0x7f || s[i] == '<' || s[i] == '>' {
			return false
		}
	}
	return true
}
