package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mailroom/mailroom/pkg/analytics"
	"github.com/mailroom/mailroom/pkg/auth"
	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/sesevent"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/team"
	"github.com/mailroom/mailroom/pkg/webhook"
)

// The mail console: pages the local server serves under /console/ for a person with an API
// key — the team's emails, live, and each email's message and history. The pages are rendered
// here from the same services as the API, with the signed-in key's principal, so a SENDING or
// domain-restricted key sees what the API would show it. Everything is embedded: no script or
// style comes from the network.

//go:embed consoleui
var consoleFiles embed.FS

// consolePages are parsed at their first use, not at start: every Lambda function links this
// package, and parsing them took half a millisecond of each one's cold start.
var consolePages = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("console").Funcs(template.FuncMap{
		"join": strings.Join,
		// subject is an email's subject, or "(no subject)" for one that shows nothing.
		"subject": subjectOrNone,
		"stamp":   func(t any) string { return timeOf(t).Format(time.RFC3339) },
		"when":    func(t any) string { return timeOf(t).Format("2006-01-02 15:04:05 UTC") },
		// bar is the width of a rate (a percentage) on a bar of width w spanning 0–full%.
		"bar": func(rate float64, w int, full float64) int { return int(min(max(rate, 0), full) * float64(w) / full) },
	}).ParseFS(consoleFiles, "consoleui/*.html"))
})

// searchMatches reports whether the console's search (lower-cased) is in the email's subject
// or one of its recipients (to, cc or bcc, as its page shows them), each on its own: a search
// does not match across the end of one and the start of the next.
func searchMatches(e store.Email, needle string) bool {
	if strings.Contains(strings.ToLower(e.Subject), needle) {
		return true
	}
	for _, list := range [][]string{e.To, e.CC, e.BCC} {
		for _, a := range list {
			if strings.Contains(strings.ToLower(a), needle) {
				return true
			}
		}
	}
	return false
}

// subjectOrNone is s, or "(no subject)" when s shows nothing (empty, or only spaces): a link
// on it would be 0 pixels wide.
func subjectOrNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(no subject)"
	}
	return s
}

// timeOf reads a template's time.Time or *time.Time, in UTC.
func timeOf(v any) time.Time {
	switch t := v.(type) {
	case time.Time:
		return t.UTC()
	case *time.Time:
		if t != nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

const (
	sessionCookie = "mailroom_console"
	sessionTTL    = 12 * time.Hour
	// consoleScan is how many of the newest emails a search or a status filter looks through.
	consoleScan = 1000
	consolePage = 50
)

// consoleCSP keeps the console's pages and the messages shown in them to this server: no
// script but the console's own, and no remote image, style or frame — a message's iframe
// (sandboxed, its srcdoc) inherits it, so its remote content stays blocked.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"connect-src 'self'; frame-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// consoleRemoteCSP is consoleCSP for an email's page asked to show the message's remote
// content: images, styles and fonts from anywhere, and still no script.
const consoleRemoteCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline' http: https:; " +
	"img-src 'self' data: http: https:; font-src http: https: data:; connect-src 'self'; frame-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// Console serves the mail console. outboxDir is the local mailer's folder (raw messages).
type Console struct {
	s         *Services
	outboxDir string
	secret    []byte // keys the CSRF tokens

	mu       sync.Mutex
	sessions map[string]consoleSession
	// Poll is how often the live view looks for changes (1 s unless set).
	Poll time.Duration
	// MaxSessions is how many sessions are held in memory (10,000 unless set); a sign-in
	// beyond ends the oldest. TeamSessions is how many one team may hold (100 unless set); a
	// sign-in beyond ends that team's oldest.
	MaxSessions, TeamSessions int
	// Scan is how many of the newest emails a search or a status filter looks through
	// (1,000 unless set; a multiple of 100). The live view of such a page looks every 3 Polls.
	Scan int
	// Events receives the SES events an email's page fires (the SES events handler, as the
	// outbox's are); nil hides the buttons.
	Events EventSink
	// Keys makes and revokes the team's API keys (the keys page; nil hides it).
	Keys *team.Admin
	// Sealed, when set, keeps the sessions in the browser, sealed under its keyring
	// (console_sessions.go), for a console that many processes serve; nil keeps them here.
	Sealed *campaign.Signer
	// OneShot makes the live view's stream answer at once and end, for a server that buffers
	// the answer (API Gateway in front of Lambda): the browser comes back after the stream's
	// retry delay, as every EventSource does, with the last state it was told of (its
	// Last-Event-ID), and hears "changed" when the state moved on since.
	OneShot bool
}

// EventSink takes an SES event as if SES had published it.
type EventSink interface {
	Publish(ctx context.Context, e sesevent.Event) error
}

// consoleSession is a signed-in browser: the key it signed in with (authenticated again on
// every request, so a revoked key ends it) and when it ends.
type consoleSession struct {
	team    int64
	key     string
	expires time.Time
}

// The routes whose permission a page asks about for a part of it (the page's own is page's).
var (
	listDomainsRoute       = routeOf("ListDomains")       // the emails page's domain filter
	createSuppressionRoute = routeOf("CreateSuppression") // an email's SES event buttons
	listCampaignsRoute     = routeOf("ListCampaigns")     // the campaigns' live view
)

// ConsoleHome is the console's first page, the team's emails: a path of its own under
// /console/, which an API Gateway route /console/{proxy+} covers (/console/ itself redirects).
const ConsoleHome = "/console/emails"

// ConsoleRoutes are the console's routes as API Gateway sees them, for its Lambda function:
// the pages under /console/ (the console signs its users in itself, so the gateway's authorizer
// is off), / and /console (redirects), and GET /api/v1/doc (the OpenAPI document the pages
// link to, which takes no key).
var ConsoleRoutes = []Route{
	{Method: "GET", Path: "/", Function: "Console", Public: true, Summary: "Serves the mail console"},
	{Method: "GET", Path: "/console", Function: "Console", Public: true, Summary: "Serves the mail console"},
	{Method: "ANY", Path: "/console/{proxy+}", Function: "Console", Public: true, Summary: "Serves the mail console"},
	{Method: "GET", Path: "/api/v1/doc", Function: "Console", Public: true, Summary: "Serves the mail console"},
	{Method: "GET", Path: "/healthz", Function: "Console", Public: true, Summary: "Serves the mail console"},
}

// ConsolePages are the console's pages and forms (HTML for a browser signed in with a session
// cookie, forms with a CSRF token), which the OpenAPI document lists beside the way in
// (ServedBesides); Handler serves exactly these, each with its serve. Anonymous is what each
// answers without a session (the sign-in form, mostly), Try the path a test asks for. Each page
// answers what an API route answers, to the keys that route takes (servePage).
var ConsolePages = []struct {
	Method, Path, ID, Summary, Type string
	Anonymous                       int
	Try                             string
	serve                           func(*Console) http.HandlerFunc
}{
	{"GET", "/console", "ConsoleEntry", "Sends a browser to the console's first page", "", http.StatusFound, "", func(*Console) http.HandlerFunc { return redirectHome }},
	{"GET", "/console/emails/{id}", "ConsoleEmail", "An email: rendered body (sandboxed), text, headers, attachments, the event timeline, and buttons that simulate SES events", "text/html", http.StatusUnauthorized, "/console/emails/em0", servePage("GetEmail", (*Console).email)},
	{"GET", "/console/emails/{id}/raw", "ConsoleEmailRaw", "An email's .eml", "message/rfc822", http.StatusUnauthorized, "/console/emails/em0/raw", servePage("GetEmail", (*Console).raw)},
	{"GET", "/console/events", "ConsoleEvents", "Server-sent events: what changed on the page being watched", "text/event-stream", http.StatusUnauthorized, "", servePage("ListEmails", (*Console).events)},
	// A simulated bounce or complaint suppresses the address for the whole team.
	{"POST", "/console/emails/{id}/simulate", "ConsoleSimulate", "Fires an SES-shaped event for an email (delivery delay, bounce, complaint, open, click) through the events' ingestion", "text/html", http.StatusUnauthorized, "/console/emails/em0/simulate", servePage("CreateSuppression", (*Console).simulate)},
	{"GET", "/console/domains", "ConsoleDomains", "The team's domains with their DNS records", "text/html", http.StatusUnauthorized, "", servePage("ListDomains", (*Console).domains)},
	{"GET", "/console/campaigns", "ConsoleCampaigns", "Campaigns with their progress and counters, live", "text/html", http.StatusUnauthorized, "", servePage("ListCampaigns", (*Console).campaigns)},
	{"GET", "/console/webhooks", "ConsoleWebhooks", "Webhooks and their call log", "text/html", http.StatusUnauthorized, "", servePage("ListWebhookCalls", (*Console).webhooks)},
	{"POST", "/console/webhooks/{id}/calls/{callId}/replay", "ConsoleReplay", "Sends a logged webhook call's event again", "text/html", http.StatusUnauthorized, "/console/webhooks/wh0/calls/c0/replay", servePage("ReplayWebhookCall", (*Console).replay)},
	{"GET", "/console/suppressions", "ConsoleSuppressions", "The suppression list", "text/html", http.StatusUnauthorized, "", servePage("ListSuppressions", (*Console).suppressions)},
	{"GET", "/console/analytics", "ConsoleAnalytics", "The email time series and reputation metrics, drawn", "text/html", http.StatusUnauthorized, "", servePage("GetEmailTimeSeries", (*Console).analytics)},
	{"GET", "/console/templates", "ConsoleTemplates", "Templates with a preview", "text/html", http.StatusUnauthorized, "", servePage("ListTemplates", (*Console).templates)},
	{"GET", "/console/books", "ConsoleBooks", "Contact books", "text/html", http.StatusUnauthorized, "", servePage("ListContactBooks", (*Console).books)},
	{"GET", "/console/books/{id}", "ConsoleBook", "A contact book's contacts", "text/html", http.StatusUnauthorized, "/console/books/cb0", servePage("ListContacts", (*Console).book)},
	{"GET", "/console/keys", "ConsoleKeys", "The team's API keys", "text/html", http.StatusUnauthorized, "", servePage("", (*Console).keys)},
	{"POST", "/console/keys", "ConsoleCreateKey", "Creates an API key (shown once)", "text/html", http.StatusUnauthorized, "", servePage("", (*Console).keys)},
	{"POST", "/console/keys/{id}/revoke", "ConsoleRevokeKey", "Revokes an API key", "text/html", http.StatusUnauthorized, "/console/keys/k0/revoke", servePage("", (*Console).revokeKey)},
	{"POST", "/console/session", "ConsoleSignIn", "Signs in with an API key (form field key): an HttpOnly, SameSite=Strict session cookie", "text/html", http.StatusUnauthorized, "", func(c *Console) http.HandlerFunc { return c.signIn }},
	{"POST", "/console/signout", "ConsoleSignOut", "Signs out (a redirect to the sign-in page, signed in or not)", "", http.StatusSeeOther, "", servePage("", (*Console).signOut)},
	{"GET", "/console/static/{file}", "ConsoleStatic", "The console's style sheet, script and icon", "text/css,text/javascript,image/svg+xml", http.StatusOK, "/console/static/console.css", serveStatic},
}

// servePage serves a console page by its method h behind c.page (the session, and the keys the
// API route named fn takes).
func servePage(fn string, h func(*Console, http.ResponseWriter, *http.Request, signedIn) error) func(*Console) http.HandlerFunc {
	return func(c *Console) http.HandlerFunc {
		return c.page(fn, func(w http.ResponseWriter, r *http.Request, si signedIn) error { return h(c, w, r, si) })
	}
}

// redirectHome sends a browser to the console's first page, with the query: a bookmarked
// search.
func redirectHome(w http.ResponseWriter, r *http.Request) {
	to := ConsoleHome
	if r.URL.RawQuery != "" {
		to += "?" + r.URL.RawQuery
	}
	http.Redirect(w, r, to, http.StatusFound)
}

// serveStatic serves the page's style, script and icon; no listing, and not the templates.
func serveStatic(*Console) http.HandlerFunc {
	static, _ := fs.Sub(consoleFiles, "consoleui")
	files := http.StripPrefix("/console/static/", http.FileServerFS(static))
	return func(w http.ResponseWriter, r *http.Request) {
		if f := r.PathValue("file"); !strings.HasSuffix(f, ".css") && !strings.HasSuffix(f, ".js") && f != "icon.svg" {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	}
}

// NewConsole builds the console on the services.
func NewConsole(s *Services, outboxDir string) *Console {
	c := &Console{s: s, outboxDir: outboxDir, secret: make([]byte, 32), sessions: map[string]consoleSession{}, Poll: time.Second, MaxSessions: 10000, TeamSessions: 100, Scan: consoleScan}
	_, _ = rand.Read(c.secret)
	return c
}

// Handler serves /console/ and its pages; GET / sends a browser there.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", redirectHome)
	mux.HandleFunc("GET /console/{$}", redirectHome)
	// The first page is documented with the way in (ServedBesides), the others in ConsolePages.
	mux.HandleFunc("GET "+ConsoleHome, c.page("ListEmails", c.emails))
	for _, p := range ConsolePages {
		mux.HandleFunc(p.Method+" "+p.Path, p.serve(c))
	}
	// Any other path under /console/ (or a method a page does not take): the console's own
	// error page, with its menu, for a signed-in browser.
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		si, ok := c.session(r)
		if !ok {
			http.NotFound(w, r)
			return
		}
		v := c.viewFor("Error", si)
		v.Error = "There is no such page in the console."
		c.render(w, http.StatusNotFound, "error", v)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", consoleCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		// same-origin: a form posted from a console page carries its true Origin (with
		// no-referrer it would say null), and nothing leaves for another site.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY") // frame-ancestors 'none', for browsers without it
		h.Set("Cache-Control", "no-store")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			// The console's forms are small and URL-encoded. A multipart body would be parsed
			// by the form reader, which spools its parts to temporary files without bound,
			// before the sign-in's key is looked at.
			if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); r.ContentLength != 0 && mt != "application/x-www-form-urlencoded" {
				http.Error(w, "Forms are sent as application/x-www-form-urlencoded", http.StatusUnsupportedMediaType)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
		}
		mux.ServeHTTP(w, r)
	})
}

// maxFormBody bounds a console form's body: a key, a name, a token and a few choices.
const maxFormBody = 64 << 10

// view is what every page gets.
type view struct {
	Since string // the digest of the live state the page was drawn from (liveID)
	Title string // the section (the nav's current page)
	// PageTitle names what the page shows (an email's subject, a book's name) before Title in
	// the window's title; "" for a section's own page.
	PageTitle string
	Signed    bool
	CSRF      string
	Error     string
	Notice    string // what the action the page answers did (the sign-in page after a revoke)
	Manage    bool   // the key is not a SENDING key (the nav shows what it may read)
	Admin     bool   // the key may manage the team's keys (the nav shows Keys)
	Next      string // the sign-in form's: the console page to go back to
}

// signedIn is a request's session: its id, the key's principal and its forms' CSRF token.
type signedIn struct {
	id   string
	p    auth.Principal
	csrf string
}

// page runs h for a signed-in browser whose key the API route named fn takes ("": any key);
// others get the sign-in page (or 401 for the live events and fragments, which a page's
// script asks for).
func (c *Console) page(fn string, h func(http.ResponseWriter, *http.Request, signedIn) error) http.HandlerFunc {
	var rt Route
	if fn != "" {
		rt = routeOf(fn)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		si, ok := c.session(r)
		if !ok {
			switch {
			case strings.HasPrefix(r.URL.Path, "/console/events") || r.URL.Query().Get("fragment") != "":
				// A stream, or a part of a page its script asks for: not a page to show.
				http.Error(w, "Sign in at "+ConsoleHome, http.StatusUnauthorized)
			case r.URL.Path == ConsoleHome:
				v := view{Title: "Sign in"}
				if r.URL.RawQuery != "" { // a bookmarked search comes back with its filters
					v.Next = r.URL.RequestURI()
				}
				c.render(w, http.StatusOK, "signin", v)
			case r.URL.Path == "/console/signout":
				// Signed out already (in another tab, or the session ended): what was asked
				// is done, and the browser goes to the sign-in page.
				clearSessionCookie(w, r)
				http.Redirect(w, r, ConsoleHome, http.StatusSeeOther)
			case r.Method == http.MethodGet || r.Method == http.MethodHead:
				// No session (never signed in, expired, revoked, or the server restarted): the
				// sign-in form, which comes back here.
				c.render(w, http.StatusUnauthorized, "signin", view{Title: "Sign in", Next: r.URL.RequestURI()})
			default:
				c.render(w, http.StatusUnauthorized, "signin", view{Title: "Sign in",
					Error: "Your session ended before this was sent: sign in, then do it again."})
			}
			return
		}
		err := rt.permits(si.p)
		if err == nil {
			err = h(w, r, si)
		}
		if err != nil {
			status, _, msg := errorOf(err)
			if status >= 500 {
				c.s.Log.Error("console", "path", r.URL.Path, "err", err.Error())
			}
			if strings.HasPrefix(r.URL.Path, "/console/events") || r.URL.Query().Get("fragment") != "" ||
				strings.HasSuffix(r.URL.Path, "/raw") {
				http.Error(w, msg, status) // asked by the page's script, or a download
				return
			}
			// A person's page: the message inside the console, with its navigation.
			v := c.viewFor("Error", si)
			v.Error = msg
			c.render(w, status, "error", v)
		}
	}
}

func (c *Console) session(r *http.Request) (signedIn, bool) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return signedIn{}, false
	}
	key, ok := c.sessionKey(r.Context(), ck.Value)
	if !ok {
		return signedIn{}, false
	}
	p, err := c.s.Auth.Authenticate(r.Context(), "Bearer "+key)
	if err != nil {
		return signedIn{}, false // revoked since
	}
	return signedIn{id: ck.Value, p: p, csrf: c.csrfToken(r.Context(), ck.Value)}, true
}

// sameOrigin refuses a form posted from another site (with the SameSite=Strict cookie and the
// CSRF token, the third of three checks). A browser that sends Sec-Fetch-Site (every current
// one, on https and on localhost) decides it: only "same-origin" passes, whatever the Host
// header says, so a proxy that rewrites Host (port forwarding in a cloud IDE) still works.
// Otherwise the Origin decides: a console form carries the page's origin (Referrer-Policy
// same-origin), which must be this host (or the proxy's X-Forwarded-Host); "null" comes from a
// sandboxed frame, a data: URL or a redirect across sites. A client without either header
// (curl, a script) holds no browser's cookie and is let through.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin":
		return true
	case "":
	default: // cross-site, same-site (another port or subdomain), none
		return false
	}
	o := r.Header.Get("Origin")
	switch o {
	case "":
		return true
	case "null":
		return false
	}
	u, err := url.Parse(o)
	return err == nil && u.Host != "" && (u.Host == r.Host || u.Host == r.Header.Get("X-Forwarded-Host"))
}

func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "Cross-site request refused", http.StatusForbidden)
		return
	}
	key := strings.TrimSpace(r.PostFormValue("key"))
	p, err := c.s.Auth.Authenticate(r.Context(), "Bearer "+key)
	if err != nil {
		c.render(w, http.StatusUnauthorized, "signin", view{Title: "Sign in", Error: "That API key is not valid.",
			Next: backToOrEmpty(r.PostFormValue("next"))})
		return
	}
	id, err := c.newSession(r.Context(), p.TeamID, key)
	if err != nil {
		c.s.Log.Error("console: start a session", "err", err.Error())
		http.Error(w, "The session could not be started.", http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/console/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secureRequest(r), MaxAge: int(sessionTTL.Seconds())})
	http.Redirect(w, r, backTo(r.PostFormValue("next")), http.StatusSeeOther)
}

// backTo is where a sign-in goes: the console page it was asked from (a path of this host),
// or the console's home.
func backTo(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || strings.ContainsAny(next, "\\\r\n") ||
		!strings.HasPrefix(next, "/console/") || strings.HasPrefix(u.Path, "/console/events") {
		return ConsoleHome
	}
	return next
}

// backToOrEmpty is next when a sign-in may go back there (backTo), else "": the form shown
// again after a wrong key keeps where it was going.
func backToOrEmpty(next string) string {
	if next == "" || backTo(next) != next {
		return ""
	}
	return next
}

// secureRequest: the browser came over https, to this server or to the proxy in front of it
// (API Gateway and the usual proxies say so in X-Forwarded-Proto): the cookie is then Secure.
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request, si signedIn) error {
	if err := c.checkForm(r, si); err != nil {
		return err
	}
	c.endSession(si.id)
	clearSessionCookie(w, r)
	http.Redirect(w, r, ConsoleHome, http.StatusSeeOther)
	return nil
}

// clearSessionCookie tells the browser to drop its session cookie.
func clearSessionCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/console/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secureRequest(r)})
}

func (c *Console) render(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := consolePages().ExecuteTemplate(&b, name, data); err != nil {
		c.s.Log.Error("console template", "template", name, "err", err.Error())
		http.Error(w, "Internal server error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// emailsView is the emails page.
type emailsView struct {
	view
	Q, Status, From, To string
	Domain              int64
	Domains             []store.Domain
	Statuses            []string
	Emails              []store.Email
	Shown, Total        int
	pager
	FragmentURL string
	LiveURL     string // the live view's stream, for the same filters and page
	// Limited: a search or a status filter looked through the newest Scanned emails only.
	Limited  bool
	Scanned  int
	BadDates []string // the date fields that are not dates, and so were not applied
}

// consoleStatuses are the statuses the filter offers, in an email's order of life.
var consoleStatuses = []string{store.StatusScheduled, store.StatusQueued, store.StatusSent, "DELIVERY_DELAYED", "DELIVERED",
	"OPENED", "CLICKED", "BOUNCED", "COMPLAINED", "REJECTED", "RENDERING_FAILURE", store.StatusFailed, store.StatusCancelled,
	store.StatusSuppressed}

// filter is the emails page's query.
type filter struct {
	q, status, from, to string
	domain              int64
	page                int
	start, end          *time.Time // from and to as read: the first and the last instant of their days
	badDates            []string   // the date fields that are not dates, and so are not applied
}

func parseFilter(r *http.Request) filter {
	v := r.URL.Query()
	f := filter{q: strings.TrimSpace(v.Get("q")), status: v.Get("status"), from: v.Get("from"), to: v.Get("to")}
	f.domain, _ = strconv.ParseInt(v.Get("domain"), 10, 64)
	f.page = consolePageOf(r)
	if !slices.Contains(consoleStatuses, f.status) {
		f.status = ""
	}
	day := func(name, s string, end bool) *time.Time {
		if s == "" {
			return nil
		}
		t, err := time.Parse("2006-01-02", s)
		if err != nil {
			f.badDates = append(f.badDates, name)
			return nil
		}
		if end {
			t = t.Add(24*time.Hour - time.Nanosecond)
		}
		return &t
	}
	f.start, f.end = day("From", f.from, false), day("To", f.to, true)
	return f
}

func (f filter) url(page int, fragment bool) string {
	v := f.values(page)
	if fragment {
		v.Set("fragment", "rows")
	}
	if len(v) == 0 {
		return ConsoleHome
	}
	return ConsoleHome + "?" + v.Encode()
}

// liveURL is the live view's stream for this filter and page, from the state since: changed
// when the page's list would be drawn otherwise. The unfiltered first page is the newest
// emails, the stream's default.
func (f filter) liveURL(since string) string {
	v := f.values(f.page)
	if len(v) > 0 {
		v.Set("list", "1")
	}
	v.Set("since", since)
	return "/console/events?" + v.Encode()
}

func (f filter) values(page int) url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"q": f.q, "status": f.status, "from": f.from, "to": f.to} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if f.domain != 0 {
		v.Set("domain", strconv.FormatInt(f.domain, 10))
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	return v
}

// scanned is how many of the newest emails a search looks through: Scan, in whole pages of 100.
func (c *Console) scanned() int { return max(c.Scan/100, 1) * 100 }

// list reads the page of emails f selects. Without a search or a status it is the API's list;
// with one, the newest c.Scan emails (of f's dates and domain) are looked through, and
// limited says that older ones were left out.
func (c *Console) list(ctx context.Context, p auth.Principal, f filter) (list []store.Email, total int, limited bool, err error) {
	q := email.ListQuery{Limit: consolePage, Page: f.page}
	if f.domain != 0 {
		q.DomainIDs = []int64{f.domain}
	}
	q.Start, q.End = f.start, f.end
	if f.q == "" && f.status == "" {
		list, total, err := c.s.Emails.List(ctx, p, q)
		return list, total, false, err
	}
	var matched []store.Email
	needle := strings.ToLower(f.q)
	for page := 1; page <= c.scanned()/100; page++ {
		q.Page, q.Limit = page, 100
		batch, all, err := c.s.Emails.List(ctx, p, q)
		if err != nil {
			return nil, 0, false, err
		}
		limited = all > c.scanned()
		for _, e := range batch {
			if f.status != "" && e.LatestStatus != f.status {
				continue
			}
			if needle != "" && !searchMatches(e, needle) {
				continue
			}
			matched = append(matched, e)
		}
		if len(batch) < 100 {
			break
		}
	}
	start := min((f.page-1)*consolePage, len(matched))
	return matched[start:min(start+consolePage, len(matched))], len(matched), limited, nil
}

func (c *Console) emails(w http.ResponseWriter, r *http.Request, si signedIn) error {
	f := parseFilter(r)
	list, total, limited, err := c.list(r.Context(), si.p, f)
	if err != nil {
		return err
	}
	redactFor(si.p, list)
	v := emailsView{view: c.viewFor("Emails", si), Q: f.q, Status: f.status, From: f.from,
		To: f.to, Domain: f.domain, Statuses: consoleStatuses, Emails: list, Total: total,
		Shown: len(list), FragmentURL: f.url(f.page, true), Limited: limited, Scanned: c.scanned(), BadDates: f.badDates,
		pager: newPager(f.page, len(list), total, consolePage, func(page int) string { return f.url(page, false) })}
	if listDomainsRoute.permits(si.p) == nil { // the filter's names
		if v.Domains, err = c.s.Domains.List(r.Context(), si.p.TeamID, si.p.DomainID); err != nil {
			return err
		}
	} else if v.Domains, err = c.domainsSeen(r.Context(), si.p, f.domain); err != nil {
		return err
	}
	if r.URL.Query().Get("fragment") == "rows" {
		c.render(w, http.StatusOK, "rows", v)
		return nil
	}
	v.Since = liveID(emailsState(list, total)) // the list the live view watches: this one
	v.LiveURL = f.liveURL(v.Since)
	c.render(w, http.StatusOK, "emails", v)
	return nil
}

// emailView is an email's page.
type emailView struct {
	view
	Simulate    bool   // the SES event buttons are offered
	Fired       string // the SES event the page's button just fired (?fired=), one of the buttons
	Remote      bool   // the message is shown with its remote content (?remote=1)
	E           store.Email
	Events      []consoleEvent
	HTML, Text  string
	Attachments []string
	Raw         bool
	Headers     string
}

type consoleEvent struct {
	Status    string
	CreatedAt time.Time
	Data      string
}

func (c *Console) email(w http.ResponseWriter, r *http.Request, si signedIn) error {
	e, events, err := c.s.Emails.Get(r.Context(), si.p, r.PathValue("id"))
	if err != nil {
		return err
	}
	one := []store.Email{e}
	redactFor(si.p, one)
	events = redactEvents(si.p, e, events)
	e = one[0]
	v := emailView{view: c.viewFor("Emails", si), E: e,
		Simulate: c.Events != nil && createSuppressionRoute.permits(si.p) == nil && e.MessageID != "",
		Remote:   r.URL.Query().Get("remote") == "1"}
	if fired := r.URL.Query().Get("fired"); firedTypes[fired] {
		v.Fired = fired
	}
	v.PageTitle = subjectOrNone(e.Subject)
	for _, ev := range events {
		ce := consoleEvent{Status: ev.Status, CreatedAt: ev.CreatedAt}
		if len(ev.Data) > 0 && string(ev.Data) != "null" {
			var b bytes.Buffer
			if json.Indent(&b, ev.Data, "", "  ") == nil {
				ce.Data = readableJSON(b.String())
			}
		}
		v.Events = append(v.Events, ce)
	}
	if e.Content.HTML != nil {
		v.HTML = *e.Content.HTML
		if !v.Remote {
			v.HTML = withoutFetches(v.HTML)
		}
	}
	if e.Content.Text != nil {
		v.Text = *e.Content.Text
	}
	for _, a := range e.Content.Attachments {
		v.Attachments = append(v.Attachments, email.AttachmentName(a.Filename)) // as the message names it
	}
	if raw, err := c.rawMessage(e.ID); err == nil {
		// The header block as the message has it: its order, its names' case, folded lines.
		head, _, _ := bytes.Cut(raw, []byte("\r\n\r\n"))
		v.Headers = strings.ReplaceAll(string(head), "\r\n", "\n")
		if hidesLinks(si.p, e) { // List-Unsubscribe carries the recipient's link, as the body does
			v.Headers = redactLinks(v.Headers)
		} else {
			v.Raw = true // the download (refused to a key that may not see the links)
		}
	}
	if r.URL.Query().Get("fragment") == "timeline" {
		c.render(w, http.StatusOK, "emailLive", v)
		return nil
	}
	v.Since = liveID(emailState(e, events)) // redaction keeps the status and the count
	if v.Remote {
		// The message's iframe inherits the page's policy: this page lets its images, styles
		// and fonts come from anywhere. Its scripts stay off (the sandbox, and script-src).
		w.Header().Set("Content-Security-Policy", consoleRemoteCSP)
	}
	c.render(w, http.StatusOK, "email", v)
	return nil
}

// readableJSON is JSON text with the escapes of <, > and & that encoding/json writes (\u003c,
// \u003e, \u0026) turned back into the characters, for people to read (the page escapes
// them as HTML); an escaped backslash before one ("\\u0026" is the text \u0026) is kept.
func readableJSON(s string) string {
	if !strings.Contains(s, `\u00`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			if s[i+1] == 'u' && i+6 <= len(s) {
				switch s[i+2 : i+6] {
				case "003c", "003C":
					b.WriteByte('<')
					i += 5
					continue
				case "003e", "003E":
					b.WriteByte('>')
					i += 5
					continue
				case "0026":
					b.WriteByte('&')
					i += 5
					continue
				}
			}
			b.WriteString(s[i : i+2]) // an escape, kept whole (\\ too)
			i++
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// domainsSeen are the domains a key that may not list domains (SENDING) filters its emails by:
// those of the team with an email the key sees, named as their emails' senders name them
// (nothing the API does not show it), with the one a filter names. It looks at up to
// maxSeenDomains of the team's domains, one email of each.
func (c *Console) domainsSeen(ctx context.Context, p auth.Principal, selected int64) ([]store.Domain, error) {
	all, err := c.s.Domains.List(ctx, p.TeamID, p.DomainID)
	if err != nil {
		return nil, err
	}
	var out []store.Domain
	for _, d := range all[:min(len(all), maxSeenDomains)] {
		one, _, err := c.s.Emails.List(ctx, p, email.ListQuery{Page: 1, Limit: 1, DomainIDs: []int64{d.ID}})
		if err != nil {
			return nil, err
		}
		if len(one) > 0 {
			out = append(out, store.Domain{ID: d.ID, Name: email.DomainOf(one[0].From)})
		} else if d.ID == selected {
			out = append(out, store.Domain{ID: d.ID, Name: fmt.Sprintf("domain %d", d.ID)})
		}
	}
	if selected != 0 && !slices.ContainsFunc(out, func(d store.Domain) bool { return d.ID == selected }) {
		out = append(out, store.Domain{ID: selected, Name: fmt.Sprintf("domain %d", selected)})
	}
	slices.SortFunc(out, func(a, b store.Domain) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// maxSeenDomains bounds the reads domainsSeen makes for one page.
const maxSeenDomains = 50

// rawMessage reads an email's .eml from the outbox.
func (c *Console) rawMessage(id string) ([]byte, error) {
	if c.outboxDir == "" || id == "" || strings.ContainsAny(id, `/\.`) {
		return nil, os.ErrNotExist
	}
	return os.ReadFile(filepath.Join(c.outboxDir, id+".eml"))
}

func (c *Console) raw(w http.ResponseWriter, r *http.Request, si signedIn) error {
	e, _, err := c.s.Emails.Get(r.Context(), si.p, r.PathValue("id"))
	if err != nil {
		return err
	}
	if hidesLinks(si.p, e) {
		// The raw message carries the recipient's unsubscribe link, which such a key may not see.
		return fault.New(fault.Forbidden, "This API key may not read a campaign email's raw message")
	}
	b, err := c.rawMessage(e.ID)
	if err != nil {
		http.Error(w, "This email has no message in the outbox (yet).", http.StatusNotFound)
		return nil
	}
	w.Header().Set("Content-Type", "message/rfc822")
	w.Header().Set("Content-Security-Policy", consoleCSP+"; sandbox") // should a browser render it anyway
	w.Header().Set("Content-Disposition", `attachment; filename="`+e.ID+`.eml"`)
	_, _ = w.Write(b)
	return nil
}

// liveState is what the live view watches: one email's status and history (id), the
// statuses and counters of a page of campaigns (campaigns, the page's number), or else the
// newest emails; "" when it cannot be read.
func (c *Console) liveState(ctx context.Context, si signedIn, id string, campaigns int) string {
	if campaigns > 0 {
		if listCampaignsRoute.permits(si.p) != nil {
			return ""
		}
		list, _, err := c.s.Campaigns.List(ctx, si.p.TeamID, si.p.DomainID, campaigns, "", "")
		if err != nil {
			return ""
		}
		return campaignsState(list)
	}
	if id != "" {
		e, events, err := c.s.Emails.Get(ctx, si.p, id)
		if err != nil {
			return ""
		}
		return emailState(e, events)
	}
	list, n, err := c.s.Emails.List(ctx, si.p, newestEmails)
	if err != nil {
		return ""
	}
	return emailsState(list, n)
}

// newestEmails is the list the emails page's live view watches: its first page, unfiltered.
var newestEmails = email.ListQuery{Page: 1, Limit: consolePage}

// The live states, from what a page read too (liveState reads them again for the stream).
func campaignsState(list []store.Campaign) string {
	var b strings.Builder
	for _, cp := range list {
		fmt.Fprintf(&b, "%s:%s:%d:%v ", cp.ID, cp.Status, cp.Total(), cp.Counters)
	}
	return b.String()
}

func emailState(e store.Email, events []store.Event) string {
	return fmt.Sprintf("%s %d", e.LatestStatus, len(events))
}

func emailsState(list []store.Email, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", n)
	for _, e := range list {
		fmt.Fprintf(&b, " %s:%s", e.ID, e.LatestStatus)
	}
	return b.String()
}

// liveID is a live state's digest: the stream's event id, and a page's since.
func liveID(state string) string {
	sum := sha256.Sum256([]byte(state))
	return hex.EncodeToString(sum[:12])
}

// oneShotRetry is how soon a browser asks again for a stream that answers once (OneShot).
const oneShotRetry = 3 * time.Second

// events is the live view's stream (server-sent events): "changed" whenever the newest emails
// (or, with ?email=, that email's history) differ from what the page was drawn from.
func (c *Console) events(w http.ResponseWriter, r *http.Request, si signedIn) error {
	fl, ok := w.(http.Flusher)
	if !ok && !c.OneShot {
		return errors.New("console events: no flusher")
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	id, campaigns := r.URL.Query().Get("email"), 0
	if v := r.URL.Query().Get("campaigns"); v != "" { // the page of campaigns watched
		campaigns, _ = strconv.Atoi(v)
		campaigns = max(campaigns, 1)
	}
	state := func() string { return c.liveState(r.Context(), si, id, campaigns) }
	poll, retry := c.Poll, oneShotRetry
	if r.URL.Query().Get("list") == "1" {
		// An emails page with its filters and page: its own list, so that a change to an email
		// it shows, or one that comes into its filter, redraws it. A search looks through up to
		// Scan emails each time: it looks a third as often (a fifth, on Lambda, where each look is
		// a new request).
		f := parseFilter(r)
		if f.q != "" || f.status != "" {
			poll, retry = 3*poll, 5*retry
		}
		state = func() string {
			list, n, _, err := c.list(r.Context(), si.p, f)
			if err != nil {
				return ""
			}
			return emailsState(list, n)
		}
	}
	last := state()
	// What the page was drawn from (since, its state's digest) or the last state the browser
	// was told of (Last-Event-ID, when it comes back): a change since is said at once, so a
	// change between drawing the page and opening the stream is not missed.
	seen := r.Header.Get("Last-Event-ID")
	if seen == "" {
		seen = r.URL.Query().Get("since")
	}
	now := liveID(last)
	if c.OneShot {
		// The state's digest is the event id, which the browser sends back as Last-Event-ID
		// when it comes again: an id line alone sets it without an event.
		if seen != "" && seen != now {
			fmt.Fprintf(w, "retry: %d\nid: %s\nevent: changed\ndata: {}\n\n", retry.Milliseconds(), now)
		} else {
			fmt.Fprintf(w, "retry: %d\nid: %s\n\n", retry.Milliseconds(), now)
		}
		return nil
	}
	fmt.Fprint(w, "retry: 2000\n\n")
	if seen != "" && seen != now {
		fmt.Fprint(w, "event: changed\ndata: {}\n\n")
	}
	fl.Flush()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-t.C:
		}
		if _, ok := c.session(r); !ok {
			return nil // signed out, expired or revoked since: the stream ends with the session
		}
		if now := state(); now != last {
			last = now
			fmt.Fprint(w, "event: changed\ndata: {}\n\n")
			fl.Flush()
		}
	}
}

// firedTypes are the SES event types the page's buttons fire, the ones its ?fired= may name.
var firedTypes = map[string]bool{sesevent.TypeDeliveryDelay: true, sesevent.TypeBounce: true, sesevent.TypeComplaint: true,
	sesevent.TypeOpen: true, sesevent.TypeClick: true}

// simulate fires an SES event for an email, shaped as SES publishes it, through the same
// handler as SES's own events (FULL keys: a bounce or a complaint suppresses the address for
// the whole team). The page shows what follows: the timeline, the suppression, the webhook call.
func (c *Console) simulate(w http.ResponseWriter, r *http.Request, si signedIn) error {
	if err := c.checkForm(r, si); err != nil {
		return err
	}
	if c.Events == nil {
		return fault.New(fault.Forbidden, "This console fires no events")
	}
	e, _, err := c.s.Emails.Get(r.Context(), si.p, r.PathValue("id"))
	if err != nil {
		return err
	}
	if e.MessageID == "" {
		return fault.New(fault.Conflict, "This email was not sent yet: there is nothing for SES to report")
	}
	ev, err := simulatedEvent(e, r.PostFormValue("event"), r.PostFormValue("subtype"), r.PostFormValue("url"), time.Now().UTC())
	if err != nil {
		return err
	}
	if err := c.Events.Publish(r.Context(), ev); err != nil {
		return fmt.Errorf("simulated %s event: %w", ev.EventType, err)
	}
	// The page it returns to says what was fired (the timeline below shows what followed).
	http.Redirect(w, r, "/console/emails/"+e.ID+"?fired="+url.QueryEscape(ev.EventType), http.StatusSeeOther)
	return nil
}

// simulatedBounces are the bounces the page offers: type/subtype as SES names them.
var simulatedBounces = map[string][2]string{
	"permanent-general":     {sesevent.BounceTypePermanent, sesevent.BounceSubTypeGeneral},
	"permanent-nomailbox":   {sesevent.BounceTypePermanent, "NoEmail"},
	"permanent-suppressed":  {sesevent.BounceTypePermanent, sesevent.BounceSubTypeSuppressed},
	"transient-general":     {sesevent.BounceTypeTransient, sesevent.BounceSubTypeGeneral},
	"transient-mailboxfull": {sesevent.BounceTypeTransient, "MailboxFull"},
	"undetermined":          {sesevent.BounceTypeUndetermined, "Undetermined"},
}

// bouncedRecipient is the recipient of a simulated bounce, with the status and diagnostic a
// receiving server gives for it: 5.x.x for a permanent bounce, 4.x.x for a transient one.
func bouncedRecipient(rcpt, typ, sub string) sesevent.BouncedRecipient {
	status, code := "5.1.1", "550" // a permanent bounce (SES's own suppression list's too): a bad mailbox
	switch {
	case typ == sesevent.BounceTypeTransient && sub == "MailboxFull":
		status, code = "4.2.2", "452"
	case typ == sesevent.BounceTypeTransient:
		status, code = "4.4.7", "421"
	case typ == sesevent.BounceTypeUndetermined:
		status, code = "5.0.0", "554"
	}
	return sesevent.BouncedRecipient{EmailAddress: rcpt, Action: "failed", Status: status,
		DiagnosticCode: "smtp; " + code + " " + status + " " + typ + " " + sub + " (simulated)"}
}

// simulatedEvent builds the SES event kind ("delay", "bounce", "complaint", "open", "click")
// for the email's first recipient.
func simulatedEvent(e store.Email, kind, subtype, link string, now time.Time) (sesevent.Event, error) {
	rcpt := ""
	if len(e.To) > 0 {
		rcpt = email.AddressOnly(e.To[0])
	}
	m := sesevent.Mail{Timestamp: e.UpdatedAt.UTC(), Source: e.From, MessageID: e.MessageID, Destination: e.To,
		Headers: []sesevent.Header{{Name: sesevent.EmailIDHeader, Value: e.ID}},
		Tags:    map[string][]string{sesevent.EmailIDTag: {e.ID}, sesevent.TeamIDTag: {strconv.FormatInt(e.TeamID, 10)}}}
	ev := sesevent.Event{Mail: m}
	switch kind {
	case "delay":
		exp := now.Add(24 * time.Hour)
		ev.EventType, ev.DeliveryDelay = sesevent.TypeDeliveryDelay, &sesevent.DeliveryDelay{Timestamp: now, DelayType: "MailboxFull",
			ExpirationTime: &exp, DelayedRecipients: []sesevent.DelayedRecipient{{EmailAddress: rcpt, Status: "4.2.2",
				DiagnosticCode: "smtp; 452 4.2.2 Mailbox full (simulated)"}}, ReportingMTA: "console.local"}
	case "bounce":
		b, ok := simulatedBounces[subtype]
		if !ok {
			return ev, fault.Field("subtype", "one of the offered bounces")
		}
		ev.EventType, ev.Bounce = sesevent.TypeBounce, &sesevent.Bounce{BounceType: b[0], BounceSubType: b[1], Timestamp: now,
			FeedbackID: e.MessageID + "-console-bounce", ReportingMTA: "console.local",
			BouncedRecipients: []sesevent.BouncedRecipient{bouncedRecipient(rcpt, b[0], b[1])}}
	case "complaint":
		ev.EventType, ev.Complaint = sesevent.TypeComplaint, &sesevent.Complaint{Timestamp: now, FeedbackID: e.MessageID + "-console-complaint",
			ComplainedRecipients: []sesevent.Recipient{{EmailAddress: rcpt}}, UserAgent: "Mailroom console",
			ComplaintFeedbackType: "abuse", ArrivalDate: now.Format(time.RFC3339Nano)}
	case "open":
		ev.EventType, ev.Open = sesevent.TypeOpen, &sesevent.Open{Timestamp: now, IPAddress: "192.0.2.10", UserAgent: "Mailroom console"}
	case "click":
		if u, err := url.Parse(link); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return ev, fault.Field("url", "an http(s) link")
		}
		ev.EventType, ev.Click = sesevent.TypeClick, &sesevent.Click{Timestamp: now, IPAddress: "192.0.2.10", UserAgent: "Mailroom console", Link: link}
	default:
		return ev, fault.Field("event", "delay, bounce, complaint, open or click")
	}
	return ev, nil
}

// keysView is the keys page.
type keysView struct {
	view
	Current     string // the id of the key this session signed in with
	Keys        []store.APIKey
	Domains     []store.Domain
	DomainNames map[int64]string // the Domains' names by id
	Created     string           // a key just made, shown once
	Revoked     string           // a key just revoked (?revoked= with its tag, when it is gone)
}

// formDomain is the key form's domain: an id, or 0 (empty, "0") for every domain; isID is
// false for anything else.
func formDomain(v string) (id int64, isID bool) {
	if v = strings.TrimSpace(v); v == "" || v == "0" {
		return 0, true
	}
	id, err := strconv.ParseInt(v, 10, 64)
	return id, err == nil && id > 0
}

// wholeTeam: a FULL key of the whole team, as the routes' Manage and TeamWide ask.
func wholeTeam(p auth.Principal) bool { return p.CanManage() && p.DomainID == 0 }

// mayManageKeys: the keys page is there and the key is a FULL key of the whole team.
func (c *Console) mayManageKeys(p auth.Principal) bool { return c.Keys != nil && wholeTeam(p) }

// checkForm refuses a post from another site or without the session's token.
func (c *Console) checkForm(r *http.Request, si signedIn) error {
	if !sameOrigin(r) {
		return fault.New(fault.Forbidden, "Cross-site request refused")
	}
	if si.csrf == "" || subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(si.csrf)) != 1 {
		// From this site, without this session's token: a page drawn before a sign-in again.
		return fault.New(fault.Forbidden, "This form is out of date: reload the page and try again")
	}
	return nil
}

// keys lists the team's keys and, on POST, makes one (shown once).
func (c *Console) keys(w http.ResponseWriter, r *http.Request, si signedIn) error {
	if !c.mayManageKeys(si.p) {
		return fault.New(fault.Forbidden, "Only a FULL key of the whole team may manage keys")
	}
	v := keysView{view: c.viewFor("Keys", si), Current: si.p.KeyID}
	status := http.StatusOK
	if r.Method == http.MethodPost {
		if err := c.checkForm(r, si); err != nil {
			return err
		}
		domainID, isID := formDomain(r.PostFormValue("domain"))
		perm := store.Permission(r.PostFormValue("permission"))
		var full string
		var made store.APIKey
		var err error
		switch {
		case perm != store.PermissionFull && perm != store.PermissionSending:
			err = fault.Field("permission", "FULL or SENDING")
		case !isID:
			err = store.ErrNotFound // a domain that is no id is no domain of the team
		default:
			full, made, err = c.Keys.CreateKey(r.Context(), team.KeyRequest{TeamID: si.p.TeamID, Name: strings.TrimSpace(r.PostFormValue("name")),
				Permission: perm, DomainID: domainID})
		}
		if err == nil { // as the admin CLI's commands are: who, not the key
			c.s.Log.Info("console: API key created", "teamId", si.p.TeamID, "keyId", made.ID, "permission", perm, "domainId", domainID)
		}
		// A refusal is said on the keys page, next to the form, as the API would say it.
		if f, ok := fault.As(err); ok && f.Kind == fault.Invalid {
			v.Error, status = "The key was not created: "+f.Message, http.StatusBadRequest
		} else if errors.Is(err, store.ErrNotFound) {
			v.Error, status = "The key was not created: its domain is not one of the team's.", http.StatusBadRequest
		} else if err != nil {
			return err
		}
		v.Created = full
	}
	var err error
	if v.Keys, err = c.Keys.Store.ListAPIKeys(r.Context(), si.p.TeamID); err != nil {
		return err
	}
	// Newest first, as every list of the console (a store lists keys by their random id).
	slices.SortStableFunc(v.Keys, func(a, b store.APIKey) int { return b.CreatedAt.Compare(a.CreatedAt) })
	// The page a revoke returns to says so, for a key that is indeed gone.
	q := r.URL.Query()
	if id := q.Get("revoked"); auth.IsKeyID(id) && si.csrf != "" && hmac.Equal([]byte(q.Get("t")), []byte(revokedTag(si, id))) &&
		!slices.ContainsFunc(v.Keys, func(k store.APIKey) bool { return k.ID == id }) {
		v.Revoked = id
	}
	if v.Domains, err = c.s.Domains.List(r.Context(), si.p.TeamID, 0); err != nil {
		return err
	}
	v.DomainNames = make(map[int64]string, len(v.Domains))
	for _, d := range v.Domains {
		v.DomainNames[d.ID] = d.Name
	}
	c.render(w, status, "keys", v)
	return nil
}

// revokeKey revokes one of the team's keys; it stops working at once, in the API as here.
func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request, si signedIn) error {
	if !c.mayManageKeys(si.p) {
		return fault.New(fault.Forbidden, "Only a FULL key of the whole team may manage keys")
	}
	if err := c.checkForm(r, si); err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := c.Keys.RevokeKey(r.Context(), si.p.TeamID, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fault.NotFoundf("Key not found")
		}
		return err
	}
	c.s.Auth.Forget(id)
	c.s.Log.Info("console: API key revoked", "teamId", si.p.TeamID, "keyId", id)
	if id == si.p.KeyID {
		// The session's own key: the session ends with it, and the sign-in page says why.
		c.endSession(si.id)
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/console/", MaxAge: -1, HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: secureRequest(r)})
		c.render(w, http.StatusOK, "signin", view{Title: "Sign in",
			Notice: "The key " + id + " is revoked, and this session, which it signed in, has ended: sign in with another key."})
		return nil
	}
	http.Redirect(w, r, "/console/keys?revoked="+id+"&t="+revokedTag(si, id), http.StatusSeeOther)
	return nil
}

// revokedTag authenticates the ?revoked= of the page a revoke returns to, under the session's
// form token: a link made elsewhere cannot have the page say a key was revoked.
func revokedTag(si signedIn, id string) string {
	m := hmac.New(sha256.New, []byte(si.csrf))
	m.Write([]byte("revoked\x00" + id))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// domainsView is the domains page: each domain with the DNS records to publish.
type domainsView struct {
	view
	Domains []store.Domain
}

func (c *Console) domains(w http.ResponseWriter, r *http.Request, si signedIn) error {
	list, err := c.s.Domains.List(r.Context(), si.p.TeamID, si.p.DomainID)
	if err != nil {
		return err
	}
	c.render(w, http.StatusOK, "domains", domainsView{view: c.viewFor("Domains", si), Domains: list})
	return nil
}

// campaignsView is the campaigns page: each campaign's status and counters, live.
type campaignsView struct {
	view
	Campaigns   []store.Campaign
	Page, Pages int
	Prev, Next  string
}

func (c *Console) campaigns(w http.ResponseWriter, r *http.Request, si signedIn) error {
	page := consolePageOf(r)
	list, pages, err := c.s.Campaigns.List(r.Context(), si.p.TeamID, si.p.DomainID, page, "", "")
	if err != nil {
		return err
	}
	at := func(n int) string {
		if n <= 1 {
			return "/console/campaigns"
		}
		return "/console/campaigns?page=" + strconv.Itoa(n)
	}
	if page > max(pages, 1) && r.URL.Query().Get("fragment") == "" { // past the last page: to the last one
		http.Redirect(w, r, at(pages), http.StatusSeeOther)
		return nil
	}
	v := campaignsView{view: c.viewFor("Campaigns", si), Campaigns: list, Page: page, Pages: pages}
	if page > 1 {
		v.Prev = at(min(page-1, max(pages, 1))) // a live fragment past the last page: back to the last one
	}
	if page < pages {
		v.Next = at(page + 1)
	}
	if r.URL.Query().Get("fragment") == "rows" {
		c.render(w, http.StatusOK, "campaignRows", v)
		return nil
	}
	v.Since = liveID(campaignsState(list)) // the list the live view watches
	c.render(w, http.StatusOK, "campaigns", v)
	return nil
}

// viewFor is a signed-in page's view.
func (c *Console) viewFor(title string, si signedIn) view {
	return view{Title: title, Signed: true, CSRF: si.csrf, Manage: si.p.CanManage(), Admin: c.mayManageKeys(si.p)}
}

// webhooksView is the webhooks page: each webhook with its latest calls (attempts, answer,
// payload) and a replay button.
type webhooksView struct {
	view
	Hooks []consoleHook
}

type consoleHook struct {
	store.Webhook
	Calls []consoleCall
}

type consoleCall struct {
	store.WebhookCall
	Payload  string
	Replayed bool // the call a replay just made (?replayed=)
}

func (c *Console) webhooks(w http.ResponseWriter, r *http.Request, si signedIn) error {
	list, err := c.s.Webhooks.List(r.Context(), si.p.TeamID)
	if err != nil {
		return err
	}
	v := webhooksView{view: c.viewFor("Webhooks", si)}
	replayed := r.URL.Query().Get("replayed") // the page a replay returns to marks its new call
	for _, h := range list {
		calls, err := c.s.Webhooks.Calls(r.Context(), si.p.TeamID, h.ID, 20, "")
		if err != nil {
			return err
		}
		ch := consoleHook{Webhook: h}
		for _, call := range calls {
			// The body as the receiver got it: the envelope around the data, at its last attempt.
			body, err := webhook.Body(call.ID, call.Type, call.EventAt, call.TeamID, call.Data, max(call.Attempts, 1))
			if err != nil {
				body = call.Data
			}
			var b bytes.Buffer
			if json.Indent(&b, body, "", "  ") != nil {
				b.Reset()
				b.Write(body)
			}
			ch.Calls = append(ch.Calls, consoleCall{WebhookCall: call, Payload: b.String(), Replayed: call.ID == replayed})
		}
		v.Hooks = append(v.Hooks, ch)
	}
	c.render(w, http.StatusOK, "webhooks", v)
	return nil
}

// replay sends a call's event again, as a new call (the API's replay).
func (c *Console) replay(w http.ResponseWriter, r *http.Request, si signedIn) error {
	if err := c.checkForm(r, si); err != nil {
		return err
	}
	call, err := c.s.Webhooks.Replay(r.Context(), si.p.TeamID, r.PathValue("id"), r.PathValue("callId"))
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/console/webhooks?replayed="+url.QueryEscape(call.ID)+"#call-"+url.QueryEscape(call.ID), http.StatusSeeOther)
	return nil
}

// suppressionsView is a page of the suppression list.
type suppressionsView struct {
	view
	List  []store.Suppression
	Total int
	pager
}

// consoleListPage is how many suppressions or contacts a page shows.
const consoleListPage = 100

// pager is a paged list's position and links: "First–Last of Total".
type pager struct {
	First, Last        int
	PrevPage, NextPage string
}

// maxConsolePage bounds ?page=, so that a page's offset cannot overflow.
const maxConsolePage = 1_000_000

// consolePageOf reads ?page= (1 to maxConsolePage; anything else is 1, or the bound).
func consolePageOf(r *http.Request) int {
	n, _ := strconv.Atoi(r.URL.Query().Get("page"))
	return min(max(n, 1), maxConsolePage)
}

// newPager is page's position among total items shown size at a time, with links made by at.
func newPager(page, shown, total, size int, at func(page int) string) pager {
	p := pager{First: (page-1)*size + 1, Last: (page-1)*size + shown}
	if shown == 0 { // past the last page: nothing shown, and a link back to the last one
		p.First, p.Last = 0, 0
	}
	if page > 1 {
		p.PrevPage = at(min(page-1, max(1, (total+size-1)/size)))
	}
	if page*size < total {
		p.NextPage = at(page + 1)
	}
	return p
}

func (c *Console) suppressions(w http.ResponseWriter, r *http.Request, si signedIn) error {
	page := consolePageOf(r)
	list, n, err := c.s.Suppressions.List(r.Context(), si.p.TeamID, "", page, consoleListPage)
	if err != nil {
		return err
	}
	at := func(p int) string { return "/console/suppressions?page=" + strconv.Itoa(p) }
	c.render(w, http.StatusOK, "suppressions", suppressionsView{view: c.viewFor("Suppressions", si), List: list, Total: n,
		pager: newPager(page, len(list), n, consoleListPage, at)})
	return nil
}

// analyticsView is the analytics page: the time series drawn as an inline SVG chart (no
// script, nothing from the network) and the reputation metrics.
type analyticsView struct {
	view
	Days       int
	Series     analytics.Series
	Reputation analytics.Reputation
	Lines      []chartLine
	Max        int64
	Labels     []chartLabel
}

type chartLine struct {
	Name, Color, Points string
	Dash                string // a dash pattern, so that a line under another one still shows
	Total               int64
}

type chartLabel struct {
	X      int
	Text   string
	Anchor string // the first label starts at its day, the last ends there: both stay inside
	Minor  bool   // left out on a phone, where the text is drawn twice as large
}

// minorLabel reports whether day i of n is left out of a phone's axis: one in n/3 stays, and
// the last, but not one right before the last.
func minorLabel(i, n int) bool {
	k := max(1, n/3)
	return i != n-1 && (i%k != 0 || i > n-1-k)
}

// The chart's drawing area, in SVG units.
const chartW, chartH, chartPad = 720, 240, 30

func (c *Console) analytics(w http.ResponseWriter, r *http.Request, si signedIn) error {
	days := 30
	if r.URL.Query().Get("days") == "7" {
		days = 7
	}
	series, err := c.s.Analytics.TimeSeries(r.Context(), si.p.TeamID, si.p.DomainID, days)
	if err != nil {
		return err
	}
	rep, err := c.s.Analytics.Reputation(r.Context(), si.p.TeamID, si.p.DomainID)
	if err != nil {
		return err
	}
	v := analyticsView{view: c.viewFor("Analytics", si), Days: days, Series: series, Reputation: rep}
	kinds := []struct {
		name, color string
		get         func(analytics.Counts) int64
	}{
		{"delivered", "#12562a", func(c analytics.Counts) int64 { return c.Delivered }},
		{"sent", "#0b3d7a", func(c analytics.Counts) int64 { return c.Sent }}, // dashed, over delivered
		{"opened", "#7a4d00", func(c analytics.Counts) int64 { return c.Opened }},
		{"clicked", "#5b2a86", func(c analytics.Counts) int64 { return c.Clicked }},
		{"bounced", "#8a1020", func(c analytics.Counts) int64 { return c.Bounced }},
		{"complained", "#c2410c", func(c analytics.Counts) int64 { return c.Complained }},
	}
	v.Max = 1
	for _, p := range series.Result {
		for _, k := range kinds {
			v.Max = max(v.Max, k.get(p.Counts))
		}
	}
	n := len(series.Result)
	x := func(i int) int {
		if n < 2 {
			return chartPad
		}
		return chartPad + i*(chartW-2*chartPad)/(n-1)
	}
	for _, k := range kinds {
		var pts []string
		for i, p := range series.Result {
			y := chartH - chartPad - int(k.get(p.Counts)*int64(chartH-2*chartPad)/v.Max)
			pts = append(pts, fmt.Sprintf("%d,%d", x(i), y))
		}
		line := chartLine{Name: k.name, Color: k.color, Points: strings.Join(pts, " "), Total: k.get(series.TotalCounts)}
		if k.name == "sent" {
			line.Dash = "8 6" // most days sent and delivered are one line: the dashes show both
		}
		v.Lines = append(v.Lines, line)
	}
	for i, p := range series.Result {
		if i%max(1, n/6) == 0 || i == n-1 {
			l := chartLabel{X: x(i), Text: p.Date, Anchor: "middle", Minor: minorLabel(i, n)}
			switch {
			case i == 0:
				l.X, l.Anchor = 0, "start"
			case i == n-1:
				l.X, l.Anchor = chartW, "end"
			}
			v.Labels = append(v.Labels, l)
		}
	}
	c.render(w, http.StatusOK, "analytics", v)
	return nil
}

// templatesView lists the team's templates, each with a preview.
type templatesView struct {
	view
	Templates []store.Template
}

func (c *Console) templates(w http.ResponseWriter, r *http.Request, si signedIn) error {
	list, err := c.s.Templates.List(r.Context(), si.p.TeamID)
	if err != nil {
		return err
	}
	for i := range list {
		list[i].HTML = withoutFetches(list[i].HTML)
	}
	c.render(w, http.StatusOK, "templates", templatesView{view: c.viewFor("Templates", si), Templates: list})
	return nil
}

// fetchTags are the tags of a message's HTML that make a browser reach a host though the
// page's content security policy blocks what they load: resource hints (<link
// rel=preconnect|dns-prefetch|prefetch|preload>: a DNS lookup or a connection, which tells
// the sender the message was opened) and frames (looked up before the policy refuses them).
var fetchTags = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)<(?:link|iframe|frame|frameset|object|embed|portal)\b[^>]*>`)
})

// withoutFetches is html for a preview with its remote content blocked: the tags of
// fetchTags replaced by a space (the rest is kept from the network by the policy and the
// sandbox). Not by nothing: "<lin<link>k rel=preconnect …>" would join into the tag it hid.
func withoutFetches(html string) string {
	if !strings.Contains(html, "<") {
		return html
	}
	return fetchTags().ReplaceAllLiteralString(html, " ")
}

// consoleBooksView lists the team's contact books; consoleBookView one book's contacts.
type consoleBooksView struct {
	view
	Books []store.ContactBook
}

type consoleBookView struct {
	view
	Book     store.ContactBook
	Contacts []store.Contact
	Total    int
	pager
}

func (c *Console) books(w http.ResponseWriter, r *http.Request, si signedIn) error {
	list, err := c.s.Contacts.Books(r.Context(), si.p.TeamID)
	if err != nil {
		return err
	}
	c.render(w, http.StatusOK, "books", consoleBooksView{view: c.viewFor("Contacts", si), Books: list})
	return nil
}

func (c *Console) book(w http.ResponseWriter, r *http.Request, si signedIn) error {
	b, err := c.s.Contacts.Book(r.Context(), si.p.TeamID, r.PathValue("id"))
	if err != nil {
		return err
	}
	page := consolePageOf(r)
	list, n, err := c.s.Contacts.List(r.Context(), si.p.TeamID, b.ID, store.ContactFilter{Offset: (page - 1) * consoleListPage, Limit: consoleListPage})
	if err != nil {
		return err
	}
	at := func(p int) string { return "/console/books/" + url.PathEscape(b.ID) + "?page=" + strconv.Itoa(p) }
	v := consoleBookView{view: c.viewFor("Contacts", si), Book: b, Contacts: list, Total: n,
		pager: newPager(page, len(list), n, consoleListPage, at)}
	v.PageTitle = b.Name
	c.render(w, http.StatusOK, "book", v)
	return nil
}
