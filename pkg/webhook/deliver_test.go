package webhook

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestURLPolicy: https only on AWS; loopback and http only locally; private, link-local,
// metadata and reserved addresses never, by literal or by what a name resolves to.
func TestURLPolicy(t *testing.T) {
	ctx := context.Background()
	names := map[string][]netip.Addr{
		"hooks.example.com":   {netip.MustParseAddr("93.184.216.34")},
		"internal.example":    {netip.MustParseAddr("10.1.2.3")},
		"mixed.example":       {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("169.254.169.254")},
		"localhost.example":   {netip.MustParseAddr("127.0.0.1")},
		"mapped.example":      {netip.MustParseAddr("::ffff:192.168.0.1")},
		"metadata-v6.example": {netip.MustParseAddr("fd00:ec2::254")},
	}
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := names[host]; ok {
			return a, nil
		}
		return nil, errors.New("no such host")
	}
	aws, local := Policy{Resolve: resolve}, Policy{AllowLocal: true, Resolve: resolve}
	for raw, want := range map[string][2]bool{ // allowed on AWS, allowed locally
		"https://hooks.example.com/mailroom":   {true, true},
		"http://hooks.example.com/mailroom":    {false, true},
		"https://internal.example/x":           {false, false},
		"https://mixed.example/x":              {false, false},
		"https://localhost.example/x":          {false, true},
		"http://127.0.0.1:8080/x":              {false, true},
		"https://[::1]/x":                      {false, true},
		"https://169.254.169.254/latest":       {false, false},
		"https://metadata-v6.example/":         {false, false},
		"https://mapped.example/":              {false, false},
		"https://100.64.1.1/":                  {false, false},
		"https://0.0.0.0/":                     {false, false},
		"https://[::7f00:1]/":                  {false, false}, // IPv4-compatible ::127.0.0.1
		"https://[2002:7f00:1::]/":             {false, false},
		"https://[64:ff9b:1::a9fe:a9fe]/":      {false, false},
		"https://[2001:0:a9fe:a9fe::]/":        {false, false},
		"https://192.0.2.10/":                  {false, false}, // documentation
		"https://198.51.100.10/":               {false, false},
		"https://203.0.113.10/":                {false, false},
		"https://192.88.99.1/":                 {false, false},
		"https://[2001:db8::1]/":               {false, false},
		"https://[fec0::1]/":                   {false, false},
		"https://[100::1]/":                    {false, false},
		"https://[::ffff:0:a9fe:a9fe]/":        {false, false}, // IPv4-translated 169.254.169.254
		"https://user:pw@hooks.example.com/":   {false, false},
		"ftp://hooks.example.com/":             {false, false},
		"/relative":                            {false, false},
		"https://unknown.example/":             {false, true}, // locally: no DNS is no reason
		"http://unknown.example/":              {false, true},
		"https://" + strings.Repeat("a", 2100): {false, false},
	} {
		if got := aws.Check(ctx, raw) == nil; got != want[0] {
			t.Errorf("AWS %s: allowed %v, want %v", raw, got, want[0])
		}
		if got := local.Check(ctx, raw) == nil; got != want[1] {
			t.Errorf("local %s: allowed %v, want %v", raw, got, want[1])
		}
	}
	// The scheme's message says what the server takes.
	if err := aws.Check(ctx, "ftp://hooks.example.com/"); err == nil || !strings.HasSuffix(err.Error(), "must be https") {
		t.Errorf("AWS ftp: %v, want must be https", err)
	}
	if err := local.Check(ctx, "ftp://hooks.example.com/"); err == nil || !strings.HasSuffix(err.Error(), "must be https or http") {
		t.Errorf("local ftp: %v, want must be https or http", err)
	}
}

// TestPost: one attempt signs the body, reads at most 64 KB of the answer and keeps 1 KB; a
// non-2xx is a failure; no redirect is followed; a loopback receiver is refused at connection
// time unless local addresses are allowed.
func TestPost(t *testing.T) {
	var got http.Header
	var gotBody string
	status := 200
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(strings.Repeat("x", 100<<10)))
	}))
	defer srv.Close()
	secret, _ := NewSecret()
	local := Policy{AllowLocal: true}.Client()
	at := time.Now()
	body := []byte(`{"id":"whc_1"}`)
	r := Post(context.Background(), local, srv.URL+"/hook", secret, "", at, body, "email.sent", "whc_1", 1)
	if !r.OK() || gotBody != string(body) || got.Get(HeaderSignature) != Sign(secret, at.UnixMilli(), body) || got.Get(HeaderRetry) != "false" {
		t.Fatalf("attempt: %+v; headers %v", r, got)
	}
	if len(r.Excerpt) != MaxExcerpt+len("…") {
		t.Errorf("excerpt of %d bytes", len(r.Excerpt))
	}
	status = 500
	if r := Post(context.Background(), local, srv.URL+"/hook", secret, "", at, body, "email.sent", "whc_1", 2); r.OK() || r.Status != 500 || r.Err == nil {
		t.Errorf("a 500: %+v", r)
	}
	if r := Post(context.Background(), local, srv.URL+"/redirect", secret, "", at, body, "email.sent", "whc_1", 1); r.OK() || r.Status != http.StatusFound {
		t.Errorf("a redirect was followed: %+v", r)
	}
	var u *ErrURL
	if r := Post(context.Background(), Policy{}.Client(), srv.URL+"/hook", secret, "", at, body, "email.sent", "whc_1", 1); !errors.As(r.Err, &u) {
		t.Errorf("a loopback receiver on AWS's policy: %+v", r)
	}
}

// TestRetrySchedule: waits grow from 5 s to at most an hour, jittered, and attempts stop once
// 24 hours have passed since the event; 50 failures in a row over an hour disable a webhook.
func TestRetrySchedule(t *testing.T) {
	created := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	at, n := created, 0
	for attempt := 1; ; attempt++ {
		next, ok := NextAttempt(created, at, attempt)
		if !ok {
			break
		}
		wait := next.Sub(at)
		base := min(5*time.Second<<min(attempt-1, 10), time.Hour)
		if wait < base/2 || wait > base {
			t.Fatalf("attempt %d waits %s, want within [%s, %s]", attempt, wait, base/2, base)
		}
		at, n = next, n+1
	}
	if at.Sub(created) < RetryFor || at.Sub(created) > RetryFor+time.Hour || n < 20 {
		t.Errorf("%d retries, the last %s after the event", n, at.Sub(created))
	}
	if ShouldDisable(49, created, created.Add(2*time.Hour)) || ShouldDisable(50, created, created.Add(59*time.Minute)) ||
		!ShouldDisable(50, created, created.Add(time.Hour)) {
		t.Error("ShouldDisable")
	}
}

// TestCanonicalURL: a URL with what a request line cannot carry (a space, a non-ASCII letter)
// in its path or query is stored as it goes on the wire, percent-encoded; escapes already made
// and everything RFC 3986 allows stay as they are.
func TestCanonicalURL(t *testing.T) {
	for raw, want := range map[string]string{
		"http://127.0.0.1:8080/ü?x=ü y":                   "http://127.0.0.1:8080/%C3%BC?x=%C3%BC%20y",
		"https://hooks.example.com/in?a=b&c=%20d&e=f/g:h": "https://hooks.example.com/in?a=b&c=%20d&e=f/g:h",
		"https://hooks.example.com/mailroom":              "https://hooks.example.com/mailroom",
		"https://hooks.example.com/?q=\"<x>\"|{}":         "https://hooks.example.com/?q=%22%3Cx%3E%22%7C%7B%7D",
	} {
		got := CanonicalURL(raw)
		if got != want {
			t.Errorf("CanonicalURL(%q) = %q, want %q", raw, got, want)
		}
		u, err := url.Parse(got)
		if err != nil {
			t.Fatal(err)
		}
		if line := u.RequestURI(); strings.ContainsFunc(line, func(r rune) bool { return r <= ' ' || r > '~' }) {
			t.Errorf("%q: request line %q carries what it cannot", raw, line)
		}
	}
}
