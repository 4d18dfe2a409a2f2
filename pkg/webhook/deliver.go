package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Limits of a call.
const (
	Timeout         = 10 * time.Second // per attempt, connection to last byte
	MaxResponseRead = 64 << 10         // of a response body, the rest unread
	MaxExcerpt      = 1 << 10          // of it, kept in the delivery log
	RetryFor        = 24 * time.Hour   // attempts go on at least this long after the event
	DisableAfter    = 50               // consecutive failed calls …
	DisableSpan     = time.Hour        // … over at least this long disable the webhook
)

// Policy says where calls may go: on AWS only https to public addresses; the local server
// also allows http and loopback (it is a development tool), never other private addresses.
type Policy struct {
	AllowLocal bool
	// Resolve looks a host name up (net.DefaultResolver.LookupNetIP unless set).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
}

// ErrURL is a URL a webhook may not call; its message says why.
type ErrURL struct{ Reason string }

func (e *ErrURL) Error() string { return "url: " + e.Reason }

// blocked are the ranges no call may reach besides loopback, private, link-local (the
// metadata service, 169.254.169.254 and fd00:ec2::254, is in those) and unspecified ones.
var blocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),   // NAT64 of any IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64 (RFC 8215)
	netip.MustParsePrefix("::/96"),          // IPv4-compatible (deprecated): ::127.0.0.1
	netip.MustParsePrefix("2002::/16"),      // 6to4: an IPv4 address inside
	netip.MustParsePrefix("2001::/32"),      // Teredo: an IPv4 address inside
	// Documentation, discard, retired and translated ranges (IANA's special-purpose
	// registries): no receiver of anyone's is there.
	netip.MustParsePrefix("192.0.2.0/24"),    // TEST-NET-1
	netip.MustParsePrefix("198.51.100.0/24"), // TEST-NET-2
	netip.MustParsePrefix("203.0.113.0/24"),  // TEST-NET-3
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast (deprecated)
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("3fff::/20"),       // documentation (RFC 9637)
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated)
	netip.MustParsePrefix("::ffff:0:0:0/96"), // IPv4-translated (RFC 2765): an IPv4 address inside
}

// allowedAddr reports whether a call may connect to a.
func (p Policy) allowedAddr(a netip.Addr) error {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		if p.AllowLocal {
			return nil
		}
		return &ErrURL{"resolves to a loopback address"}
	case a.IsPrivate(), a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast(),
		a.IsMulticast(), a.IsUnspecified():
		return &ErrURL{"resolves to a private, link-local or reserved address"}
	}
	for _, b := range blocked {
		if b.Contains(a) {
			return &ErrURL{"resolves to a reserved address"}
		}
	}
	return nil
}

// CanonicalURL is raw with what a request line cannot carry as it is percent-encoded: a
// path or a query with spaces, non-ASCII letters or other characters outside RFC 3986 (Go's
// client encodes a path itself but sends a query as it is, so the receiver would get a
// malformed request). Escapes already there are kept; a URL that does not parse
// is returned unchanged, for Check to refuse.
func CanonicalURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.RawQuery = escapeURIPart(u.RawQuery)
	return u.String()
}

// escapeURIPart percent-encodes every byte of s that RFC 3986 allows in no query,
// leaving '%' (an escape already made) as it is.
func escapeURIPart(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			strings.IndexByte("-._~!$&'()*+,;=:@/?%", c) >= 0:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// Check parses a webhook URL and resolves its host: the scheme, the absence of credentials,
// and every address the name resolves to must be allowed (locally, a name that does not
// resolve is taken). Calls check the address again at
// connection time (Client), so a name that later resolves elsewhere is caught there.
func (p Policy) Check(ctx context.Context, raw string) error {
	if len(raw) > 2048 {
		return &ErrURL{"longer than 2048 characters"}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || !u.IsAbs() {
		return &ErrURL{"not an absolute URL"}
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && p.AllowLocal:
	case p.AllowLocal:
		return &ErrURL{"must be https or http"}
	default:
		return &ErrURL{"must be https"}
	}
	if u.User != nil {
		return &ErrURL{"must not carry credentials"}
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		return p.allowedAddr(a)
	}
	resolve := p.Resolve
	if resolve == nil {
		resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	addrs, err := resolve(ctx, host)
	if err != nil || len(addrs) == 0 {
		if p.AllowLocal {
			// A development machine may have no DNS (or the name is for later): the calls
			// check each address they connect to, and their failures are in the call log.
			return nil
		}
		return &ErrURL{"host does not resolve"}
	}
	for _, a := range addrs {
		if err := p.allowedAddr(a); err != nil {
			return err
		}
	}
	return nil
}

// Client is the HTTP client of calls: Timeout, no redirects, no proxy, and every connection
// checked against the policy after DNS resolution.
func (p Policy) Client() *http.Client {
	d := &net.Dialer{Timeout: Timeout, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &ErrURL{"unexpected address"}
		}
		return p.allowedAddr(ap.Addr())
	}}
	return &http.Client{
		Timeout: Timeout,
		Transport: &http.Transport{Proxy: nil, DialContext: d.DialContext, TLSHandshakeTimeout: Timeout,
			ResponseHeaderTimeout: Timeout, MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Result is what one attempt got: the status (0 when there was no response), an excerpt of
// the response body, and the error that kept it from a 2xx.
type Result struct {
	Status  int
	Excerpt string
	Err     error
}

// OK: the receiver took the call.
func (r Result) OK() bool { return r.Err == nil && r.Status >= 200 && r.Status < 300 }

// Post makes one attempt: a POST of body with the headers of Headers.
func Post(ctx context.Context, c *http.Client, rawURL, secret, previous string, sentAt time.Time, body []byte, eventType, callID string, attempt int) Result {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, CanonicalURL(rawURL), strings.NewReader(string(body)))
	if err != nil {
		return Result{Err: &ErrURL{"not a URL a request can go to"}}
	}
	Headers(req.Header, secret, previous, sentAt, body, eventType, callID, attempt)
	req.Header.Set("User-Agent", "UseSend-Webhook/1.0") // upstream's: a receiver may allow-list it
	resp, err := c.Do(req)
	if err != nil {
		var u *ErrURL
		if errors.As(err, &u) {
			return Result{Err: u}
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Result{Err: fmt.Errorf("no response within %s", Timeout)}
		}
		return Result{Err: errors.New("the receiver could not be reached")}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseRead))
	r := Result{Status: resp.StatusCode, Excerpt: excerpt(b)}
	if !r.OK() {
		r.Err = fmt.Errorf("the receiver answered %d", resp.StatusCode)
	}
	return r
}

// excerpt is the start of a response body, cut on a character boundary.
func excerpt(b []byte) string {
	if len(b) <= MaxExcerpt {
		return strings.ToValidUTF8(string(b), "?")
	}
	return strings.ToValidUTF8(string(b[:MaxExcerpt]), "?") + "…"
}

// NextAttempt is when a call that failed its attempt-th attempt (from 1) at failedAt tries
// again: exponential from 5 s, doubling up to an hour, with full jitter in the upper half.
// Calls go on until RetryFor after the event (createdAt); ok is false when this was the last.
func NextAttempt(createdAt, failedAt time.Time, attempt int) (time.Time, bool) {
	if failedAt.Sub(createdAt) >= RetryFor {
		return time.Time{}, false
	}
	base := 5 * time.Second << min(attempt-1, 10)
	base = min(base, time.Hour)
	wait := base/2 + rand.N(base/2+1)
	return failedAt.Add(wait), true
}

// ShouldDisable reports whether a webhook whose failures run since firstFailure, failures of
// them in a row, is disabled.
func ShouldDisable(failures int, firstFailure, now time.Time) bool {
	return failures >= DisableAfter && now.Sub(firstFailure) >= DisableSpan
}
