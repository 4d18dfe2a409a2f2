package mail_test

import (
	"bytes"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
	"testing"

	"github.com/mailroom/mailroom/pkg/email"
	mailroom "github.com/mailroom/mailroom/pkg/mail"
)

// TestAttachmentNamesAsTheMessageCarriesThem: email.AttachmentName (what the console shows,
// without linking the MIME library) names each attachment as the built message does.
func TestAttachmentNamesAsTheMessageCarriesThem(t *testing.T) {
	names := []string{"report.pdf", "", "../../etc/passwd", `a"b.txt`, "c:\\x\\y.doc", "q?.csv", "pipe|<tag>.txt",
		"tab\there.txt", "bell\x07.bin", "del\x7f.bin", "résumé.pdf", "日本語.txt", "spaces and (parens).txt"}
	m := mailroom.Message{From: "a@example.com", To: []string{"b@example.org"}, Subject: "s", Text: "t"}
	for _, n := range names {
		m.Attachments = append(m.Attachments, mailroom.Attachment{Filename: n, Data: []byte("x")})
	}
	raw, err := mailroom.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	var got []string
	dec := new(mime.WordDecoder)
	for {
		p, err := mr.NextRawPart()
		if err != nil {
			break
		}
		_, dp, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
		if err != nil || dp["filename"] == "" {
			continue // the body
		}
		name, err := dec.DecodeHeader(dp["filename"])
		if err != nil {
			t.Fatalf("filename %q: %v", dp["filename"], err)
		}
		got = append(got, name)
	}
	if len(got) != len(names) {
		t.Fatalf("%d attachments in the message, want %d:\n%s", len(got), len(names), raw)
	}
	for i, n := range names {
		if want := email.AttachmentName(n); got[i] != want {
			t.Errorf("attachment %q: the message names it %q, email.AttachmentName %q", n, got[i], want)
		}
	}
	if strings.Contains(strings.Join(got, ""), "/") {
		t.Errorf("a name with a slash: %q", got)
	}
}
