// Package jsonout writes JSON as Mailroom answers and posts it, and measures it: without the
// HTML escaping of encoding/json (an answer or a webhook call is read as JSON, never embedded
// in a page, and an email's html keeps its < > & one byte each instead of six), the length
// a string takes encoded either way, counted without writing it, and its times as upstream
// writes them (JavaScript's toISOString).
package jsonout

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"time"
	"unicode/utf8"
)

// TimeFormat is how every time in an answer or a webhook call is written: UTC, milliseconds,
// as JavaScript's toISOString writes it (and so upstream), "2026-11-27T13:33:26.226Z".
const TimeFormat = "2006-01-02T15:04:05.000Z"

// Time is t in TimeFormat.
func Time(t time.Time) string { return t.UTC().Format(TimeFormat) }

// Marshal is json.Marshal without its HTML escaping.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// MaxInvocationBody is what an API answer's body may take in a Lambda function's invocation
// response: Lambda's 6 MB (6,291,456 bytes) less room for the status, the headers and the
// envelope around them.
const MaxInvocationBody = 6<<20 - 64<<10

// InvocationLen is the length of body in a Lambda function's invocation response, and whether
// that is as base64: the shorter of its two forms there, a JSON string (aws-lambda-go writes it
// without HTML escaping) and base64, which lambdafn.HTTP sends when it is shorter.
func InvocationLen(body string) (n int, asBase64 bool) {
	quoted, b64 := QuotedLen(body, false), base64.StdEncoding.EncodedLen(len(body))
	if quoted <= b64 {
		return quoted, false
	}
	return b64, true
}

// QuotedLen is the length of s as a JSON string, quotes included: as Marshal writes it, or with
// escapeHTML as json.Marshal does (< > & as \u003c and the like). An invalid byte is written
// \ufffd, six bytes; a real U+FFFD, written as it is, is counted so too.
func QuotedLen(s string, escapeHTML bool) int {
	n := 2
	for _, r := range s {
		switch {
		case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f':
			n += 2
		case r < 0x20 || r == '\u2028' || r == '\u2029' || r == utf8.RuneError:
			n += 6
		case escapeHTML && (r == '<' || r == '>' || r == '&'):
			n += 6
		default:
			n += utf8.RuneLen(r)
		}
	}
	return n
}
