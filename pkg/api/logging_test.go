package api_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/store/bolt"
)

// TestDebugLogsNoLinkToken: at LOG_LEVEL=debug a request line names the path, but a public
// route's path holds its credential (a signed unsubscribe or confirmation token): the line
// names the route instead.
func TestDebugLogsNoLinkToken(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var logs bytes.Buffer
	s := api.NewServices(api.Deps{Store: st, Now: time.Now, AuthCacheTTL: time.Minute,
		Signer: campaign.Signer{Keys: campaign.SingleKey(strings.Repeat("k", 32))},
		Log:    slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	h := s.Handler()
	const token = "3.k1.c2VjcmV0LXRva2VuLW9mLWEtcmVjaXBpZW50"
	for _, path := range []string{"/unsubscribe/" + token, "/subscribe/" + token} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v1/emails/em123", nil))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v1/typo", nil))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("PUT", "/unsubscribe/"+token, nil))
	out := logs.String()
	if strings.Contains(out, token) {
		t.Errorf("a link's token is in the log:\n%s", out)
	}
	// Other routes' paths are logged as they came (they hold ids, not credentials).
	for _, want := range []string{`"path":"/unsubscribe/{token}"`, `"path":"/subscribe/{token}"`, `"path":"/api/v1/emails/em123"`,
		`"path":"/api/v1/typo"`} {
		if !strings.Contains(out, want) {
			t.Errorf("no request line with %s:\n%s", want, out)
		}
	}
	// Every answer of 400 or more names its code, the link pages for people (a link not valid:
	// 404 written by the page itself) as the API's errors.
	lines := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var l struct {
			Msg, Route, Code string
			Status           int
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Msg != "request" {
			continue
		}
		lines++
		want := map[int]string{401: "UNAUTHORIZED", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}[l.Status]
		if l.Status >= 400 && l.Code != want {
			t.Errorf("%s answered %d with code %q in its line, want %q", l.Route, l.Status, l.Code, want)
		}
	}
	if lines != 5 {
		t.Errorf("%d request lines, want 5:\n%s", lines, out)
	}
}
