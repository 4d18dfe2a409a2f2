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
	"net/http"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mailroom/mailroom/pkg/auth"
	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
)

// The mail console: pages the local server serves under /console/ for a person with an API
// key — the team's emails, live, and each email's message and history. The pages are rendered
// here from the same services as the API, with the signed-in key's principal, so a SENDING or
// domain-restricted key sees what the API would show it. Everything is embedded: no script or
// style comes from the network.

//go:embed consoleui
var consoleFiles embed.FS

var consolePages = template.Must(template.New("console").Funcs(template.FuncMap{
	"join":  strings.Join,
	"stamp": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"when":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
}).ParseFS(consoleFiles, "consoleui/*.html"))

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

// Console serves the mail console. outboxDir is the local mailer's folder (raw messages).
type Console struct {
	s         *Services
	outboxDir string
	secret    []byte // keys the CSRF tokens

	mu       sync.Mutex
	sessions map[string]consoleSession
	// Poll is how often the live view looks for changes (1 s unless set).
	Poll time.Duration
}

// consoleSession is a signed-in browser: the key it signed in with (authenticated again on
// every request, so a revoked key ends it) and when it ends.
type consoleSession struct {
	key     string
	expires time.Time
}

// NewConsole builds the console on the services.
func NewConsole(s *Services, outboxDir string) *Console {
	c := &Console{s: s, outboxDir: outboxDir, secret: make([]byte, 32), sessions: map[string]consoleSession{}, Poll: time.Second}
	_, _ = rand.Read(c.secret)
	return c
}

// Handler serves /console/ and its pages; GET / sends a browser there.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(consoleFiles, "consoleui")
	mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusFound)
	})
	mux.HandleFunc("GET /console/{$}", c.page(c.emails))
	mux.HandleFunc("GET /console/emails/{id}", c.page(c.email))
	mux.HandleFunc("GET /console/emails/{id}/raw", c.page(c.raw))
	mux.HandleFunc("GET /console/events", c.page(c.events))
	mux.HandleFunc("POST /console/session", c.signIn)
	mux.HandleFunc("POST /console/signout", c.page(c.signOut))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", consoleCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		mux.ServeHTTP(w, r)
	})
}

// view is what every page gets.
type view struct {
	Title  string
	Signed bool
	CSRF   string
	Error  string
}

// signedIn is a request's session: its id and the key's principal.
type signedIn struct {
	id string
	p  auth.Principal
}

// page runs h for a signed-in browser; others get the sign-in page (or 401 for the live
// events and fragments, which a page's script asks for).
func (c *Console) page(h func(http.ResponseWriter, *http.Request, signedIn) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		si, ok := c.session(r)
		if !ok {
			if r.URL.Path != "/console/" {
				http.Error(w, "Sign in at /console/", http.StatusUnauthorized)
				return
			}
			c.render(w, http.StatusOK, "signin", view{Title: "Sign in"})
			return
		}
		if err := h(w, r, si); err != nil {
			status, _, msg := errorOf(err)
			if status >= 500 {
				c.s.Log.Error("console", "path", r.URL.Path, "err", err.Error())
			}
			http.Error(w, msg, status)
		}
	}
}

func (c *Console) session(r *http.Request) (signedIn, bool) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return signedIn{}, false
	}
	c.mu.Lock()
	s, ok := c.sessions[ck.Value]
	if ok && time.Now().After(s.expires) {
		delete(c.sessions, ck.Value)
		ok = false
	}
	c.mu.Unlock()
	if !ok {
		return signedIn{}, false
	}
	p, err := c.s.Auth.Authenticate(r.Context(), "Bearer "+s.key)
	if err != nil {
		return signedIn{}, false // revoked since
	}
	return signedIn{id: ck.Value, p: p}, true
}

// csrf is the token a signed-in session's forms carry.
func (c *Console) csrf(sessionID string) string {
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte(sessionID))
	return hex.EncodeToString(m.Sum(nil))
}

// sameOrigin refuses a form posted from another site (with the SameSite=Strict cookie and the
// CSRF token, the third of three checks).
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return r.Header.Get("Sec-Fetch-Site") != "cross-site"
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "Cross-site request refused", http.StatusForbidden)
		return
	}
	key := strings.TrimSpace(r.PostFormValue("key"))
	if _, err := c.s.Auth.Authenticate(r.Context(), "Bearer "+key); err != nil {
		c.render(w, http.StatusUnauthorized, "signin", view{Title: "Sign in", Error: "That API key is not valid."})
		return
	}
	var b [24]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	c.mu.Lock()
	c.sessions[id] = consoleSession{key: key, expires: time.Now().Add(sessionTTL)}
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/console/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(sessionTTL.Seconds())})
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request, si signedIn) error {
	if !sameOrigin(r) || subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(c.csrf(si.id))) != 1 {
		http.Error(w, "Cross-site request refused", http.StatusForbidden)
		return nil
	}
	c.mu.Lock()
	delete(c.sessions, si.id)
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/console/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
	return nil
}

func (c *Console) render(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := consolePages.ExecuteTemplate(&b, name, data); err != nil {
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
	Prev, Next          string
	FragmentURL         string
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
}

func parseFilter(r *http.Request) filter {
	v := r.URL.Query()
	f := filter{q: strings.TrimSpace(v.Get("q")), status: v.Get("status"), from: v.Get("from"), to: v.Get("to")}
	f.domain, _ = strconv.ParseInt(v.Get("domain"), 10, 64)
	f.page, _ = strconv.Atoi(v.Get("page"))
	f.page = max(f.page, 1)
	if !slices.Contains(consoleStatuses, f.status) {
		f.status = ""
	}
	return f
}

func (f filter) url(page int, fragment bool) string {
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
	if fragment {
		v.Set("fragment", "rows")
	}
	if len(v) == 0 {
		return "/console/"
	}
	return "/console/?" + v.Encode()
}

// list reads the page of emails f selects. Without a search or a status it is the API's list;
// with one, the newest consoleScan emails are looked through.
func (c *Console) list(ctx context.Context, p auth.Principal, f filter) ([]store.Email, int, error) {
	q := email.ListQuery{Limit: consolePage, Page: f.page}
	if f.domain != 0 {
		q.DomainIDs = []int64{f.domain}
	}
	day := func(s string, end bool) *time.Time {
		t, err := time.Parse("2006-01-02", s)
		if err != nil {
			return nil
		}
		if end {
			t = t.Add(24*time.Hour - time.Nanosecond)
		}
		return &t
	}
	q.Start, q.End = day(f.from, false), day(f.to, true)
	if f.q == "" && f.status == "" {
		return c.s.Emails.List(ctx, p, q)
	}
	var matched []store.Email
	needle := strings.ToLower(f.q)
	for page := 1; page <= consoleScan/100; page++ {
		q.Page, q.Limit = page, 100
		batch, _, err := c.s.Emails.List(ctx, p, q)
		if err != nil {
			return nil, 0, err
		}
		for _, e := range batch {
			if f.status != "" && e.LatestStatus != f.status {
				continue
			}
			if needle != "" && !strings.Contains(strings.ToLower(e.Subject+" "+strings.Join(e.To, " ")), needle) {
				continue
			}
			matched = append(matched, e)
		}
		if len(batch) < 100 {
			break
		}
	}
	start := min((f.page-1)*consolePage, len(matched))
	return matched[start:min(start+consolePage, len(matched))], len(matched), nil
}

func (c *Console) emails(w http.ResponseWriter, r *http.Request, si signedIn) error {
	f := parseFilter(r)
	list, total, err := c.list(r.Context(), si.p, f)
	if err != nil {
		return err
	}
	redactFor(si.p, list)
	v := emailsView{view: view{Title: "Emails", Signed: true, CSRF: c.csrf(si.id)}, Q: f.q, Status: f.status, From: f.from,
		To: f.to, Domain: f.domain, Statuses: consoleStatuses, Emails: list, Total: total,
		Shown: len(list), FragmentURL: f.url(f.page, true)}
	if f.page > 1 {
		v.Prev = f.url(f.page-1, false)
	}
	if f.page*consolePage < total {
		v.Next = f.url(f.page+1, false)
	}
	if v.Domains, err = c.s.Domains.List(r.Context(), si.p.TeamID, si.p.DomainID); err != nil {
		return err
	}
	if r.URL.Query().Get("fragment") == "rows" {
		c.render(w, http.StatusOK, "rows", v)
		return nil
	}
	c.render(w, http.StatusOK, "emails", v)
	return nil
}

// emailView is an email's page.
type emailView struct {
	view
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
	e = one[0]
	v := emailView{view: view{Title: "Email", Signed: true, CSRF: c.csrf(si.id)}, E: e}
	for _, ev := range events {
		ce := consoleEvent{Status: ev.Status, CreatedAt: ev.CreatedAt}
		if len(ev.Data) > 0 && string(ev.Data) != "null" {
			var b bytes.Buffer
			if json.Indent(&b, ev.Data, "", "  ") == nil {
				ce.Data = b.String()
			}
		}
		v.Events = append(v.Events, ce)
	}
	if e.Content.HTML != nil {
		v.HTML = *e.Content.HTML
	}
	if e.Content.Text != nil {
		v.Text = *e.Content.Text
	}
	for _, a := range e.Content.Attachments {
		v.Attachments = append(v.Attachments, a.Filename)
	}
	if raw, err := c.rawMessage(e.ID); err == nil {
		v.Raw = true
		if m, err := mail.ReadMessage(bytes.NewReader(raw)); err == nil {
			var b strings.Builder
			for _, k := range sortedKeys(m.Header) {
				for _, val := range m.Header[k] {
					fmt.Fprintf(&b, "%s: %s\n", k, val)
				}
			}
			v.Headers = b.String()
		}
	}
	if r.URL.Query().Get("fragment") == "timeline" {
		c.render(w, http.StatusOK, "timeline", v)
		return nil
	}
	c.render(w, http.StatusOK, "email", v)
	return nil
}

func sortedKeys(h mail.Header) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

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
	if e.CampaignID != "" && !si.p.CanManage() {
		// The raw message carries the recipient's unsubscribe link, which such a key may not see.
		return fault.New(fault.Forbidden, "This API key may not read a campaign email's raw message")
	}
	b, err := c.rawMessage(e.ID)
	if err != nil {
		http.Error(w, "This email has no message in the outbox (yet).", http.StatusNotFound)
		return nil
	}
	w.Header().Set("Content-Type", "message/rfc822")
	w.Header().Set("Content-Disposition", `attachment; filename="`+e.ID+`.eml"`)
	_, _ = w.Write(b)
	return nil
}

// events is the live view's stream (server-sent events): "changed" whenever the newest emails
// (or, with ?email=, that email's history) differ from what the page was drawn from.
func (c *Console) events(w http.ResponseWriter, r *http.Request, si signedIn) error {
	fl, ok := w.(http.Flusher)
	if !ok {
		return errors.New("console events: no flusher")
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	id := r.URL.Query().Get("email")
	state := func() string {
		var b strings.Builder
		if id != "" {
			e, events, err := c.s.Emails.Get(r.Context(), si.p, id)
			if err != nil {
				return ""
			}
			fmt.Fprintf(&b, "%s %d", e.LatestStatus, len(events))
			return b.String()
		}
		list, n, err := c.s.Emails.List(r.Context(), si.p, email.ListQuery{Page: 1, Limit: consolePage})
		if err != nil {
			return ""
		}
		fmt.Fprintf(&b, "%d", n)
		for _, e := range list {
			fmt.Fprintf(&b, " %s:%s", e.ID, e.LatestStatus)
		}
		return b.String()
	}
	last := state()
	fmt.Fprint(w, "retry: 2000\n\n")
	fl.Flush()
	t := time.NewTicker(c.Poll)
	defer t.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-t.C:
		}
		if now := state(); now != last {
			last = now
			fmt.Fprint(w, "event: changed\ndata: {}\n\n")
			fl.Flush()
		}
	}
}
