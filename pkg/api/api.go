// Package api is the HTTP face of Mailroom: one route table (the single source of truth for the
// local server, each Lambda function and template.yaml), the auth middleware, the error
// envelope and the handlers. Handlers are plain net/http so that they run behind http.Server
// locally and behind the API Gateway proxy adapter in Lambda.
package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mailroom/mailroom/pkg/analytics"
	"github.com/mailroom/mailroom/pkg/auth"
	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/contact"
	"github.com/mailroom/mailroom/pkg/domain"
	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/hooks"
	"github.com/mailroom/mailroom/pkg/jsonout"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/suppression"
	"github.com/mailroom/mailroom/pkg/template"
)

// Services are the use cases the handlers call.
type Services struct {
	Auth         *auth.Authenticator
	Emails       *email.Service
	Domains      *domain.Service
	Templates    *template.Service
	Suppressions *suppression.Service
	Contacts     *contact.Service
	Campaigns    *campaign.Service
	Analytics    *analytics.Service
	Webhooks     *hooks.Service
	Log          *slog.Logger
	// Limiter counts requests for the teams' rate limits; DefaultRateLimit is the limit of a
	// team without its own (requests per second, 0: none).
	Limiter          store.RateLimits
	DefaultRateLimit int64
	now              func() time.Time
}

// Route is one endpoint. Function is the name of the Lambda function that serves it
// (functions/<Function>, logical id <Function>Function in template.yaml).
type Route struct {
	Method   string
	Path     string // API Gateway / ServeMux form: /api/v1/emails/{emailId}
	Function string
	// Manage marks routes a SENDING key may not call.
	Manage bool
	// TeamWide marks routes over what the whole team shares (adding, changing or removing its
	// domains and templates; its suppression list): a key restricted to one domain may not
	// call them.
	TeamWide bool
	// Public routes take no API key (the unsubscribe link in a recipient's mailbox).
	Public bool
	// Summary says what the route does (its function's description in template.yaml).
	Summary string
	handler func(*Services, http.ResponseWriter, *http.Request) error
}

// Pattern is the ServeMux pattern of the route.
func (r Route) Pattern() string { return r.Method + " " + r.Path }

// Routes is the route table.
var Routes = []Route{
	{Method: "POST", Path: "/api/v1/emails", Function: "SendEmail", Summary: "Queues one email", handler: (*Services).sendEmail},
	{Method: "POST", Path: "/api/v1/emails/batch", Function: "SendBatch", Summary: "Queues a batch of emails", handler: (*Services).sendBatch},
	{Method: "GET", Path: "/api/v1/emails", Function: "ListEmails", Summary: "Lists the team's emails", handler: (*Services).listEmails},
	{Method: "GET", Path: "/api/v1/emails/{emailId}", Function: "GetEmail", Summary: "Reads one email and its events", handler: (*Services).getEmail},
	{Method: "PATCH", Path: "/api/v1/emails/{emailId}", Function: "UpdateEmail", Summary: "Reschedules a scheduled email", handler: (*Services).rescheduleEmail},
	{Method: "POST", Path: "/api/v1/emails/{emailId}/cancel", Function: "CancelEmail", Summary: "Cancels a scheduled email", handler: (*Services).cancelEmail},
	{Method: "GET", Path: "/api/v1/domains", Function: "ListDomains", Summary: "Lists the team's domains", Manage: true, handler: (*Services).listDomains},
	{Method: "POST", Path: "/api/v1/domains", Function: "CreateDomain", Summary: "Registers a sending domain at SES", Manage: true, TeamWide: true, handler: (*Services).createDomain},
	{Method: "GET", Path: "/api/v1/domains/{id}", Function: "GetDomain", Summary: "Reads one domain", Manage: true, handler: (*Services).getDomain},
	{Method: "PATCH", Path: "/api/v1/domains/{id}", Function: "UpdateDomain", Summary: "Turns a domain's open and click tracking on or off", Manage: true, TeamWide: true, handler: (*Services).updateDomain},
	{Method: "PUT", Path: "/api/v1/domains/{id}/verify", Function: "VerifyDomain", Summary: "Refreshes a domain's SES verification status", Manage: true, handler: (*Services).verifyDomain},
	{Method: "DELETE", Path: "/api/v1/domains/{id}", Function: "DeleteDomain", Summary: "Removes a domain and its SES identity", Manage: true, TeamWide: true, handler: (*Services).deleteDomain},
	{Method: "POST", Path: "/api/v1/templates", Function: "CreateTemplate", Summary: "Creates a template", Manage: true, TeamWide: true, handler: (*Services).createTemplate},
	{Method: "GET", Path: "/api/v1/templates", Function: "ListTemplates", Summary: "Lists the team's templates", Manage: true, handler: (*Services).listTemplates},
	{Method: "GET", Path: "/api/v1/templates/{id}", Function: "GetTemplate", Summary: "Reads one template", Manage: true, handler: (*Services).getTemplate},
	{Method: "PATCH", Path: "/api/v1/templates/{id}", Function: "UpdateTemplate", Summary: "Changes a template", Manage: true, TeamWide: true, handler: (*Services).updateTemplate},
	{Method: "DELETE", Path: "/api/v1/templates/{id}", Function: "DeleteTemplate", Summary: "Deletes a template", Manage: true, TeamWide: true, handler: (*Services).deleteTemplate},
	{Method: "GET", Path: "/api/v1/suppressions", Function: "ListSuppressions", Summary: "Lists the team's suppressed addresses", Manage: true, TeamWide: true, handler: (*Services).listSuppressions},
	{Method: "POST", Path: "/api/v1/suppressions", Function: "CreateSuppression", Summary: "Puts an address on the suppression list", Manage: true, TeamWide: true, handler: (*Services).createSuppression},
	{Method: "DELETE", Path: "/api/v1/suppressions/{email}", Function: "DeleteSuppression", Summary: "Takes an address off the suppression list", Manage: true, TeamWide: true, handler: (*Services).deleteSuppression},

	{Method: "GET", Path: "/api/v1/contactBooks", Function: "ListContactBooks", Summary: "Lists the team's contact books", Manage: true, handler: (*Services).listContactBooks},
	{Method: "POST", Path: "/api/v1/contactBooks", Function: "CreateContactBook", Summary: "Creates a contact book", Manage: true, handler: (*Services).createContactBook},
	{Method: "GET", Path: "/api/v1/contactBooks/{contactBookId}", Function: "GetContactBook", Summary: "Reads one contact book", Manage: true, handler: (*Services).getContactBook},
	{Method: "PATCH", Path: "/api/v1/contactBooks/{contactBookId}", Function: "UpdateContactBook", Summary: "Changes a contact book", Manage: true, handler: (*Services).updateContactBook},
	{Method: "DELETE", Path: "/api/v1/contactBooks/{contactBookId}", Function: "DeleteContactBook", Summary: "Deletes a contact book (its contacts go in the background)", Manage: true, handler: (*Services).deleteContactBook},
	{Method: "POST", Path: "/api/v1/contactBooks/{contactBookId}/contacts", Function: "CreateContact", Summary: "Adds or updates a contact by email", Manage: true, handler: (*Services).upsertContact},
	{Method: "GET", Path: "/api/v1/contactBooks/{contactBookId}/contacts", Function: "ListContacts", Summary: "Lists a book's contacts", Manage: true, handler: (*Services).listContacts},
	{Method: "GET", Path: "/api/v1/contactBooks/{contactBookId}/contacts/{contactId}", Function: "GetContact", Summary: "Reads one contact", Manage: true, handler: (*Services).getContact},
	{Method: "PATCH", Path: "/api/v1/contactBooks/{contactBookId}/contacts/{contactId}", Function: "UpdateContact", Summary: "Changes a contact", Manage: true, handler: (*Services).updateContact},
	{Method: "PUT", Path: "/api/v1/contactBooks/{contactBookId}/contacts/{contactId}", Function: "UpsertContact", Summary: "Creates or replaces a contact by email", Manage: true, handler: (*Services).upsertContact},
	{Method: "DELETE", Path: "/api/v1/contactBooks/{contactBookId}/contacts/{contactId}", Function: "DeleteContact", Summary: "Deletes a contact", Manage: true, handler: (*Services).deleteContact},
	{Method: "POST", Path: "/api/v1/contactBooks/{contactBookId}/contacts/bulk", Function: "BulkCreateContacts", Summary: "Adds or updates up to 1000 contacts", Manage: true, handler: (*Services).bulkCreateContacts},
	{Method: "DELETE", Path: "/api/v1/contactBooks/{contactBookId}/contacts/bulk", Function: "BulkDeleteContacts", Summary: "Deletes contacts by id", Manage: true, handler: (*Services).bulkDeleteContacts},

	{Method: "POST", Path: "/api/v1/campaigns", Function: "CreateCampaign", Summary: "Creates a campaign, a draft or started", Manage: true, handler: (*Services).createCampaign},
	{Method: "GET", Path: "/api/v1/campaigns", Function: "ListCampaigns", Summary: "Lists the team's campaigns", Manage: true, handler: (*Services).listCampaigns},
	{Method: "GET", Path: "/api/v1/campaigns/{campaignId}", Function: "GetCampaign", Summary: "Reads one campaign and its counters", Manage: true, handler: (*Services).getCampaign},
	{Method: "DELETE", Path: "/api/v1/campaigns/{campaignId}", Function: "DeleteCampaign", Summary: "Deletes a campaign and its schedule", Manage: true, handler: (*Services).deleteCampaign},
	{Method: "POST", Path: "/api/v1/campaigns/{campaignId}/schedule", Function: "ScheduleCampaign", Summary: "Starts a campaign now or at a time", Manage: true, handler: (*Services).scheduleCampaign},
	{Method: "POST", Path: "/api/v1/campaigns/{campaignId}/pause", Function: "PauseCampaign", Summary: "Pauses a campaign between batches", Manage: true, handler: (*Services).pauseCampaign},
	{Method: "POST", Path: "/api/v1/campaigns/{campaignId}/resume", Function: "ResumeCampaign", Summary: "Resumes a paused campaign from its cursor", Manage: true, handler: (*Services).resumeCampaign},

	{Method: "GET", Path: "/api/v1/analytics/email-time-series", Function: "GetEmailTimeSeries", Summary: "Reads the team's or a domain's daily email counts", Manage: true, handler: (*Services).emailTimeSeries},
	{Method: "GET", Path: "/api/v1/analytics/reputation-metrics", Function: "GetReputationMetrics", Summary: "Reads the team's or a domain's bounce and complaint rates", Manage: true, handler: (*Services).reputationMetrics},

	{Method: "POST", Path: "/api/v1/webhooks", Function: "CreateWebhook", Summary: "Creates a webhook (its secret shown once)", Manage: true, TeamWide: true, handler: (*Services).createWebhook},
	{Method: "GET", Path: "/api/v1/webhooks", Function: "ListWebhooks", Summary: "Lists the team's webhooks", Manage: true, TeamWide: true, handler: (*Services).listWebhooks},
	{Method: "GET", Path: "/api/v1/webhooks/{id}", Function: "GetWebhook", Summary: "Reads one webhook", Manage: true, TeamWide: true, handler: (*Services).getWebhook},
	{Method: "PATCH", Path: "/api/v1/webhooks/{id}", Function: "UpdateWebhook", Summary: "Changes a webhook, pauses or resumes it", Manage: true, TeamWide: true, handler: (*Services).updateWebhook},
	{Method: "DELETE", Path: "/api/v1/webhooks/{id}", Function: "DeleteWebhook", Summary: "Deletes a webhook", Manage: true, TeamWide: true, handler: (*Services).deleteWebhook},
	{Method: "POST", Path: "/api/v1/webhooks/{id}/secret", Function: "RotateWebhookSecret", Summary: "Gives a webhook a new secret (the old one signs too for 24 hours)", Manage: true, TeamWide: true, handler: (*Services).rotateWebhookSecret},
	{Method: "POST", Path: "/api/v1/webhooks/{id}/test", Function: "TestWebhook", Summary: "Sends a webhook.test call to a webhook", Manage: true, TeamWide: true, handler: (*Services).testWebhook},
	{Method: "GET", Path: "/api/v1/webhooks/{id}/calls", Function: "ListWebhookCalls", Summary: "Reads a webhook's delivery log", Manage: true, TeamWide: true, handler: (*Services).listWebhookCalls},
	{Method: "POST", Path: "/api/v1/webhooks/{id}/calls/{callId}/replay", Function: "ReplayWebhookCall", Summary: "Sends a logged call's event again", Manage: true, TeamWide: true, handler: (*Services).replayWebhookCall},

	{Method: "GET", Path: "/unsubscribe/{token}", Function: "Unsubscribe", Summary: "Unsubscribes a campaign's recipient from its signed link", Public: true, handler: (*Services).unsubscribeForm},
	{Method: "POST", Path: "/unsubscribe/{token}", Function: "Unsubscribe", Summary: "Unsubscribes a campaign's recipient from its signed link", Public: true, handler: (*Services).unsubscribe},
	{Method: "GET", Path: "/subscribe/{token}", Function: "ConfirmSubscription", Summary: "Confirms a double opt-in subscription from its signed link", Public: true, handler: (*Services).confirmForm},
	{Method: "POST", Path: "/subscribe/{token}", Function: "ConfirmSubscription", Summary: "Confirms a double opt-in subscription from its signed link", Public: true, handler: (*Services).confirm},
}

// Handler serves every route (the local server).
func (s *Services) Handler() http.Handler { return s.handler(Routes) }

// FunctionHandler serves the routes of one Lambda function.
func (s *Services) FunctionHandler(function string) http.Handler {
	var rs []Route
	for _, r := range Routes {
		if r.Function == function {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		panic("api: no route for function " + function)
	}
	return s.handler(rs)
}

func (s *Services) handler(routes []Route) http.Handler {
	mux := http.NewServeMux()
	// paths knows every path regardless of method, to tell 405 (with the methods it has) from 404.
	paths := http.NewServeMux()
	methods := pathMethods(routes)
	for _, r := range routes {
		mux.Handle(r.Pattern(), s.wrap(r))
	}
	for p := range methods {
		paths.Handle(p, http.NotFoundHandler())
	}
	// A path that ends in a fixed segment (/api/v1/emails/batch) asked for with a method it does not
	// have would go to the route of that method whose wildcard matches it (GET
	// /api/v1/emails/{emailId}: "Email not found"; PUT .../contacts/{contactId}: an upsert): it
	// is a 405 with the methods it has, as any other known path. From the whole route table:
	// on AWS, API Gateway hands GET /api/v1/emails/batch to the GetEmail function.
	for path, have := range pathMethods(Routes) {
		if strings.HasSuffix(path, "}") {
			continue // ends in a wildcard
		}
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if !slices.Contains(have, m) {
				mux.Handle(m+" "+path, s.wrap(Route{Method: "*", Path: "(no route)", Public: true,
					handler: func(_ *Services, w http.ResponseWriter, r *http.Request) error {
						return notAllowed(w, r, have)
					}}))
			}
		}
	}
	// Whatever no route takes is answered (and logged, with a request id) like a route's error.
	mux.Handle("/", s.wrap(Route{Method: "*", Path: "(no route)", Public: true,
		handler: func(_ *Services, w http.ResponseWriter, r *http.Request) error {
			if _, pattern := paths.Handler(r); pattern != "" {
				return notAllowed(w, r, methods[pattern])
			}
			return fault.NotFoundf("Route %s %s not found", r.Method, r.URL.Path)
		}}))
	return CleanPaths(mux)
}

// pathMethods lists each path of routes with its methods (HEAD where it has GET).
func pathMethods(routes []Route) map[string][]string {
	out := map[string][]string{}
	for _, r := range routes {
		out[r.Path] = append(out[r.Path], r.Method)
		if r.Method == http.MethodGet {
			out[r.Path] = append(out[r.Path], http.MethodHead)
		}
	}
	return out
}

// CleanPaths serves a request for an API path with empty, "." or ".." segments
// ("//api/v1/emails", from a base URL that ends in "/") as the clean path, where ServeMux would
// answer with a redirect that is not JSON and that a POST's client may not follow. It cleans
// the path as sent (escaped): an encoded "/" stays inside its segment, so "x%2F..%2Fdomains" is
// one id, as ServeMux reads it, and never climbs out of its route. Other paths (the console's,
// whose cookie is scoped to its path) keep ServeMux's redirect. Wrapping twice is harmless.
func CleanPaths(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ep := r.URL.EscapedPath()
		cp := cleanPath(ep)
		if strings.HasPrefix(cp, "/api/") {
			cp = strings.TrimSuffix(cp, "/") // no API route ends in "/": /api/v1/domains/ is the list
		}
		if cp != ep && strings.HasPrefix(cp, "/api/") {
			if p, err := url.PathUnescape(cp); err == nil {
				r2 := *r
				u := *r.URL
				u.Path, u.RawPath = p, cp
				r2.URL = &u
				r = &r2
			}
		}
		h.ServeHTTP(w, r)
	})
}

// cleanPath is path.Clean of p, rooted, keeping a trailing slash (as ServeMux does).
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

type ctxKey int

const principalKey ctxKey = 1

// principal returns the authenticated caller.
func principal(r *http.Request) auth.Principal {
	p, _ := r.Context().Value(principalKey).(auth.Principal)
	return p
}

// statusRecorder remembers the status for the request log line.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// permits refuses a key the route is not for (Manage, TeamWide). The console asks it too, for
// the route each of its pages shows the answer of.
func (rt Route) permits(p auth.Principal) error {
	if rt.Manage && !p.CanManage() {
		return fault.New(fault.Forbidden, "This API key may only send and read emails")
	}
	if rt.TeamWide && p.DomainID != 0 {
		if rt.Method == http.MethodGet {
			return fault.New(fault.Forbidden, "This API key is restricted to one domain: it may not read what the whole team shares")
		}
		return fault.New(fault.Forbidden, "This API key is restricted to one domain: it may not change what the whole team shares")
	}
	return nil
}

// routeOf is the route of the function named fn (a Route's Function).
func routeOf(fn string) Route {
	for _, rt := range Routes {
		if rt.Function == fn {
			return rt
		}
	}
	panic("api: no route " + fn)
}

// wrap authenticates, checks the key's permission, runs the handler, maps its error and logs
// one line. Nothing about the body, the key or the error text of an internal error is logged
// to the client; the log line carries the internal error for operators.
func (s *Services) wrap(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		reqID := r.Header.Get("X-Request-Id")
		if reqID == "" || len(reqID) > 128 {
			reqID = newRequestID()
		}
		w.Header().Set("X-Request-Id", reqID)
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		var teamID int64
		err := func() error {
			if rt.Public {
				return rt.handler(s, rec, r)
			}
			// Two Authorization headers are read as API Gateway passes them on, joined with a
			// comma (no valid key then), not as the first alone.
			p, err := s.Auth.Authenticate(r.Context(), strings.Join(r.Header.Values("Authorization"), ","))
			if err != nil {
				return err
			}
			teamID = p.TeamID
			// Every authenticated request counts, and its answer carries the X-RateLimit-*
			// headers (COMPAT), a 403 for a route the key may not call too.
			if err := s.rateLimit(r.Context(), rec, p); err != nil {
				return err
			}
			if err := rt.permits(p); err != nil {
				return err
			}
			if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
				// r.URL.Query() drops what it cannot decode: limit=%ZZ would read as no limit.
				return fault.Field("query", "malformed: %s", queryError(err))
			}
			ctx := context.WithValue(r.Context(), principalKey, p)
			return rt.handler(s, rec, r.WithContext(ctx))
		}()
		level := slog.LevelInfo
		attrs := []any{"requestId", reqID, "route", rt.Pattern(), "teamId", teamID}
		if err != nil {
			_, code, _ := errorOf(err)
			attrs = append(attrs, "code", code)
			if _, ok := fault.As(err); !ok {
				level = slog.LevelError
				attrs = append(attrs, "err", err.Error())
			}
			writeError(rec, err)
		}
		if err == nil && rec.status >= 400 {
			// A page for people (a link not valid) answers its status itself: its line names
			// the code an error of that status has.
			attrs = append(attrs, "code", statusCode(rec.status))
		}
		attrs = append(attrs, "status", rec.status, "durationMs", time.Since(start).Milliseconds())
		if s.Log.Enabled(r.Context(), slog.LevelDebug) {
			// A link's path holds its credential (a signed unsubscribe or confirmation
			// token): the route pattern says which it was, never the token. Any other path,
			// an unknown one included, is logged as it came, but for such a token.
			path := redactLinks(r.URL.Path)
			if strings.Contains(rt.Path, "{token}") {
				path = rt.Path
			}
			attrs = append(attrs, "method", r.Method, "path", path, "bytesIn", r.ContentLength,
				"remote", r.RemoteAddr, "userAgent", r.UserAgent())
		}
		s.Log.Log(r.Context(), level, "request", attrs...)
	})
}

// rateLimit counts the request against its team's limit per second (a fixed one-second window
// shared by every process), sets the X-RateLimit-* headers and refuses the request past the
// limit. A limiter that fails lets the request through (logged): the limit is protection, not
// a reason to stop serving.
func (s *Services) rateLimit(ctx context.Context, w http.ResponseWriter, p auth.Principal) error {
	limit := p.RateLimit
	if limit == auth.DefaultRateLimit {
		limit = s.DefaultRateLimit
	}
	if limit <= 0 || s.Limiter == nil {
		return nil
	}
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	sec := now.Truncate(time.Second)
	n, ok, err := s.Limiter.TakeRequest(ctx, p.TeamID, sec, limit)
	if err != nil {
		s.Log.Warn("rate limiter unavailable: the request is let through", "teamId", p.TeamID, "err", err.Error())
		return nil
	}
	reset := sec.Add(time.Second)
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.FormatInt(limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(max(limit-n, 0), 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	if ok {
		return nil
	}
	wait := max(int64(math.Ceil(reset.Sub(now).Seconds())), 1)
	limited := fault.New(fault.RateLimited, "Rate limit exceeded. Try again in %d seconds.", wait)
	limited.RetryAfter = time.Duration(wait) * time.Second // writeError's Retry-After
	return limited
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

const methodNotAllowed fault.Kind = 100

var kinds = map[fault.Kind]struct {
	status int
	code   string
}{
	fault.Invalid:      {http.StatusBadRequest, "BAD_REQUEST"},
	fault.Unauthorized: {http.StatusUnauthorized, "UNAUTHORIZED"},
	fault.Forbidden:    {http.StatusForbidden, "FORBIDDEN"},
	fault.NotFound:     {http.StatusNotFound, "NOT_FOUND"},
	methodNotAllowed:   {http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED"},
	fault.Conflict:     {http.StatusConflict, "NOT_UNIQUE"},
	fault.TooLarge:     {http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE"},
	fault.RateLimited:  {http.StatusTooManyRequests, "RATE_LIMITED"},
}

// MethodNotAllowed answers a request for a path served by the given methods only, as the route
// table's paths answer (405, Allow, the error envelope): for the local server's own paths.
func MethodNotAllowed(allow ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, notAllowed(w, r, allow))
	})
}

// notAllowed sets Allow to the methods the path has and returns the 405 for r's method.
func notAllowed(w http.ResponseWriter, r *http.Request, allow []string) error {
	w.Header().Set("Allow", strings.Join(allow, ", "))
	return &fault.Error{Kind: methodNotAllowed, Message: "Method " + r.Method + " not allowed on " + r.URL.Path}
}

// writeError is the one place errors become responses: a fault keeps its message, anything
// else is a 500 with a fixed text.
func writeError(w http.ResponseWriter, err error) {
	status, code, msg := errorOf(err)
	if fe, ok := fault.As(err); ok && fe.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(fe.RetryAfter.Seconds())), 10))
	}
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// statusCode is the error code of an answer's status (kinds), or INTERNAL_SERVER_ERROR.
func statusCode(status int) string {
	for _, k := range kinds {
		if k.status == status {
			return k.code
		}
	}
	return "INTERNAL_SERVER_ERROR"
}

// errorOf is the status, code and message an error answers with.
func errorOf(err error) (status int, code, msg string) {
	status, code, msg = http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "Internal server error"
	var tooBig *http.MaxBytesError
	if fe, ok := fault.As(err); ok {
		if k, ok := kinds[fe.Kind]; ok {
			status, code, msg = k.status, k.code, fe.Message
		}
	} else if errors.As(err, &tooBig) {
		status, code, msg = http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", "Request body too large"
	} else if errors.Is(err, store.ErrTooLarge) {
		// On AWS: a record past DynamoDB's 400 KB once its bodies are compressed.
		status, code, msg = http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE",
			"body: too large to store: a record holds at most 400 KB (a template's or a campaign's html and text count compressed)"
	}
	return status, code, msg
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := jsonout.Marshal(v) // < > & as they are: an email html keeps its size
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"INTERNAL_SERVER_ERROR","message":"Internal server error"}}`)
	}
	writeRaw(w, status, b)
}

func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// queryError says what url.ParseQuery refused, without echoing more of the query than that.
func queryError(err error) string {
	var esc url.EscapeError
	if errors.As(err, &esc) {
		return fmt.Sprintf("%%%s is not a %%-escape", strings.TrimPrefix(string(esc), "%"))
	}
	return "not a query string"
}
