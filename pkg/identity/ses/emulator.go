package ses

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"time"
)

// EmulatorTransport wraps an HTTP transport for SES emulators (moto 5.2): for a BYODKIM
// identity moto writes DkimAttributes.LastKeyGenerationTimestamp as an ISO 8601 string where
// SES, and so the SDK's decoder, use epoch seconds, and the SDK then fails to decode
// CreateEmailIdentity and GetEmailIdentity. It rewrites that one field. The app installs it only
// when an endpoint override (AWS_ENDPOINT_URL) points the SDK away from AWS; real SES answers
// never match, so it would be a no-op there too.
func EmulatorTransport(next http.RoundTripper) http.RoundTripper {
	return emulatorTimestamps{next: next}
}

type emulatorTimestamps struct{ next http.RoundTripper }

var isoTimestamp = regexp.MustCompile(`"LastKeyGenerationTimestamp":\s*"([^"]+)"`)

func (m emulatorTimestamps) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := m.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	body = isoTimestamp.ReplaceAllFunc(body, func(match []byte) []byte {
		ts, err := time.Parse(time.RFC3339Nano, string(isoTimestamp.FindSubmatch(match)[1]))
		if err != nil {
			return match
		}
		return []byte(fmt.Sprintf(`"LastKeyGenerationTimestamp": %d`, ts.Unix()))
	})
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Del("Content-Length")
	return resp, nil
}
