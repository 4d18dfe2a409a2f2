package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mailroom/mailroom/pkg/analytics"
	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/contact"
	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/webhook"
)

// The OpenAPI document of the API, which the local server serves at GET /api/v1/doc. Its paths,
// methods, operation ids, summaries, permissions and path parameters come from Routes, and its
// schemas are reflected from the Go types the handlers write, so that it cannot drift from what
// is served. What the route table does not say (bodies, query parameters, errors particular to
// a route) is in operations, keyed by Function: OpenAPI fails when a route has no entry there or
// an entry no route.
//
// Everything is built inside functions, not at package init: the Lambda functions link this
// package but never serve the document, so they neither run nor carry it.

type obj = map[string]any

// OpenAPI returns the OpenAPI 3.0.3 document of every route; version is its info.version.
func OpenAPI(version string) ([]byte, error) {
	g := &generator{names: schemaNames(), special: specialSchemas(), shared: sharedErrors(),
		schemas: obj{"Error": errorSchema()}}
	ops := g.operations()
	perFunction := map[string]int{}
	for _, r := range Routes {
		perFunction[r.Function]++
	}
	paths := obj{}
	for _, r := range Routes {
		op, ok := ops[r.Function]
		if !ok {
			return nil, fmt.Errorf("api: no OpenAPI operation for function %s", r.Function)
		}
		// An operation id is unique in a document: a function serving several routes (the
		// unsubscribe link's GET and POST) names each by its method.
		id := r.Function
		if perFunction[r.Function] > 1 {
			id += r.Method[:1] + strings.ToLower(r.Method[1:])
		}
		item, _ := paths[r.Path].(obj)
		if item == nil {
			item = obj{}
			paths[r.Path] = item
		}
		item[strings.ToLower(r.Method)] = g.operation(r, id, op)
	}
	for f := range ops {
		if perFunction[f] == 0 {
			return nil, fmt.Errorf("api: OpenAPI operation %s has no route", f)
		}
	}
	for _, b := range ServedBesides {
		item, _ := paths[b.Path].(obj)
		if item == nil {
			item = obj{}
			paths[b.Path] = item
		}
		answer := obj{"description": b.Answer}
		switch {
		case b.Status == http.StatusFound || b.Status == http.StatusSeeOther:
			answer["headers"] = obj{"Location": obj{"schema": obj{"type": "string"}, "description": "where to go"}}
		case b.Type == "application/json":
			answer["content"] = obj{b.Type: obj{"schema": obj{"type": "object"}}}
		default:
			content := obj{}
			for _, t := range strings.Split(b.Type, ",") {
				content[t] = obj{"schema": obj{"type": "string"}}
			}
			answer["content"] = content
		}
		responses := obj{strconv.Itoa(b.Status): answer}
		if b.Anonymous != 0 && b.Anonymous != b.Status {
			// Without a session: the sign-in page (a stream or a fragment: the bare status).
			typ := "text/html"
			if b.Type != "text/html" {
				typ = "text/plain"
			}
			responses[strconv.Itoa(b.Anonymous)] = obj{"description": "No console session (or, signing in, a key refused): " +
				"the sign-in form", "content": obj{typ: obj{"schema": obj{"type": "string"}}}}
		}
		if strings.Contains(b.Path, "{") {
			responses["404"] = obj{"description": "Nothing at this path: an unknown id (or another team's), or file",
				"content": obj{"text/html": obj{"schema": obj{"type": "string"}}, "text/plain": obj{"schema": obj{"type": "string"}}}}
		}
		op := obj{"operationId": b.ID, "summary": b.Summary, "tags": []string{b.Tag}, "security": []any{}, "responses": responses}
		var params []obj
		for _, name := range pathParams(b.Path) {
			params = append(params, pathParam(b.Path, name))
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		item[strings.ToLower(b.Method)] = op
	}
	if g.err != nil {
		return nil, g.err
	}
	responses := obj{}
	for status, e := range g.shared {
		responses[e.name] = errorResponse(status, e.when)
	}
	return json.MarshalIndent(obj{
		"openapi": "3.0.3",
		"info": obj{
			"title":   "Mailroom API",
			"version": version,
			"description": "Mailroom's HTTP API: the useSend API, which the official useSend SDKs call unchanged, " +
				"plus Mailroom's own routes (templates, the suppression list, webhooks, domain tracking settings " +
				"and the campaigns' unsubscribe links). Every error answers {\"error\":{\"code\",\"message\"}}.",
		},
		"servers": []obj{{"url": "/"}},
		"paths":   paths,
		"components": obj{
			"schemas":   g.schemas,
			"responses": responses,
			"securitySchemes": obj{bearer: obj{"type": "http", "scheme": "bearer",
				"description": "An API key of the team, us_<key id>_<secret>"}},
		},
	}, "", "  ")
}

// ServedBesides are what the server serves besides Routes (locally the server itself, on AWS
// the Console function: ConsoleRoutes), which the document describes too, without an API key:
// the health check, this document, and the mail console's way in (its pages are HTML for a
// signed-in browser).
var ServedBesides = append([]Besides{
	{"GET", "/healthz", "Health", "Says the server is up", "Server", "application/json", `{"status":"ok"}`, http.StatusOK, 0, ""},
	{"GET", "/api/v1/doc", "OpenAPIDocument", "This OpenAPI document", "Server", "application/json", "the document", http.StatusOK, 0, ""},
	{"GET", "/", "ConsoleRedirect", "Sends a browser to the mail console", "Console", "", "a redirect to " + ConsoleHome, http.StatusFound, 0, ""},
	{"GET", ConsoleHome, "Console", "The mail console: the team's emails, live (the sign-in form without a session)",
		"Console", "text/html", "the console's first page", http.StatusOK, 0, ""},
}, consoleBesides()...)

// Besides is one of ServedBesides: Status and Type are what a signed-in browser gets (the
// document's answer), Anonymous what the path answers without a session when it differs, Try
// the path a test asks for when Path has wildcards.
type Besides struct {
	Method, Path, ID, Summary, Tag, Type, Answer string
	Status, Anonymous                            int
	Try                                          string
}

// consoleBesides are the console's pages (ConsolePages) as the document lists them.
func consoleBesides() []Besides {
	out := make([]Besides, 0, len(ConsolePages))
	for _, p := range ConsolePages {
		b := Besides{Method: p.Method, Path: p.Path, ID: p.ID, Summary: p.Summary, Tag: "Console", Type: p.Type,
			Answer: "the page (HTML for a browser with the console's session cookie; a form posts its CSRF token)",
			Status: http.StatusOK, Anonymous: p.Anonymous, Try: p.Try}
		switch {
		case p.Anonymous == http.StatusFound:
			b.Status, b.Answer = http.StatusFound, "a redirect to "+ConsoleHome
		case p.Method == http.MethodPost && p.ID != "ConsoleCreateKey": // it shows the new key once
			b.Status, b.Answer = http.StatusSeeOther, "a redirect to the page the form was on"
		case p.Type == "text/event-stream":
			b.Answer = "the stream: an event each time what the watched page shows changes"
		case p.Type == "message/rfc822":
			b.Answer = "the message as it was sent (a download)"
		case p.ID == "ConsoleStatic":
			b.Answer = "the file"
		}
		out = append(out, b)
	}
	return out
}

// bearer names the security scheme of the API keys.
const bearer = "bearerAuth"

// operation is what the route table does not say about a route.
type operation struct {
	in       any            // a value of the request body's Go type (nil: no body)
	optional bool           // the body may be left out
	out      any            // a value of the 200 body's Go type
	params   []obj          // query and header parameters
	desc     string         // what the summary leaves out
	errs     map[int]string // errors particular to the route: status → when
	// idempotent routes take an Idempotency-Key: a replay answers as the first request did.
	idempotent bool
	// page routes answer HTML for people (the unsubscribe link in a recipient's mailbox).
	page bool
}

// bounded is an array body of min to max elements of item's type.
type bounded struct {
	item     any
	min, max int
}

func (g *generator) operations() map[string]operation {
	pageParam := query("page", "The page, from 1", obj{"type": "integer", "minimum": 1, "maximum": MaxPage, "default": 1})
	limitParam := query("limit", "Items per page", obj{"type": "integer", "minimum": 1, "maximum": 100, "default": 50})
	domain := query("domainId", "Only this domain (default: the key's domain, else the whole team)",
		obj{"type": "integer", "format": "int64", "minimum": 1})
	domainMissing := map[int]string{404: "domainId is not a domain of the team"}
	replayed := map[int]string{409: "The Idempotency-Key was used with another body, or its first request is still in progress"}
	sendDesc := fmt.Sprintf("subject, and html or text, are required unless templateId is given; at most %d recipients "+
		"in to, cc and bcc together and %d attachments. The email is queued (or scheduled) and sent in the background.",
		email.MaxRecipients, email.MaxAttachments)
	return map[string]operation{
		"SendEmail": {in: sendRequest{}, out: emailRef{}, idempotent: true, errs: replayed, desc: sendDesc},
		"SendBatch": {in: bounded{sendRequest{}, 1, email.MaxBatch}, out: listOnly[emailRef]{}, idempotent: true, errs: replayed,
			desc: "Each email as POST /api/v1/emails takes it; one invalid email refuses the whole batch."},
		"ListEmails": {out: listOf[emailItem]{}, desc: "Newest first. A body too large to list is null, flagged htmlOmitted or textOmitted: " +
			"GET /api/v1/emails/{emailId} has it.", params: []obj{pageParam, limitParam,
			query("startDate", "Only emails created at or after", obj{"type": "string", "format": "date-time"}),
			query("endDate", "Only emails created at or before (inclusive to the precision it is written in: to the millisecond, the whole millisecond)", obj{"type": "string", "format": "date-time"}),
			query("domainId", "Only these domains (repeated or comma-separated, at most 25)",
				obj{"type": "array", "items": obj{"type": "integer", "format": "int64", "minimum": 1}})}},
		"GetEmail":    {out: emailDetail{}},
		"UpdateEmail": {in: rescheduleRequest{}, out: emailRef{}},
		"CancelEmail": {out: emailRef{}},

		"ListDomains":  {out: []domainView{}},
		"CreateDomain": {in: createDomainRequest{}, out: domainView{}, errs: map[int]string{409: "The domain, or a parent domain, is registered already"}},
		"GetDomain":    {out: domainView{}},
		"UpdateDomain": {in: trackingRequest{}, out: domainView{}},
		"VerifyDomain": {out: verifyResult{}},
		"DeleteDomain": {out: domainDeleted{}},

		"CreateTemplate": {in: templateRequest{}, out: templateView{}, desc: "html or text is required."},
		"ListTemplates":  {out: listOf[templateItem]{}},
		"GetTemplate":    {out: templateView{}},
		"UpdateTemplate": {in: templateChange{}, out: templateView{}, desc: "Changes the fields given."},
		"DeleteTemplate": {out: idDeleted{}},

		"ListSuppressions": {out: listOf[suppressionView]{}, params: []obj{pageParam, limitParam,
			query("reason", "Only addresses suppressed for this reason", g.schema(reflect.TypeFor[suppressionReason]()))}},
		"CreateSuppression": {in: suppressionRequest{}, out: suppressionView{}},
		"DeleteSuppression": {out: suppressionDeleted{}},

		"ListContactBooks":  {out: []bookView{}},
		"CreateContactBook": {in: bookRequest{}, out: bookView{}},
		"GetContactBook":    {out: bookView{}},
		"UpdateContactBook": {in: bookChange{}, out: bookView{}, desc: "Changes the fields given."},
		"DeleteContactBook": {out: bookDeleted{}},
		"CreateContact": {in: contactRequest{}, out: contactRef{}, params: []obj{contactKeyParam()},
			desc: "A contact of the book with the same email is updated."},
		"ListContacts": {out: []contactView{}, params: []obj{pageParam,
			query("limit", "Contacts per page", obj{"type": "integer", "minimum": 1, "maximum": ContactsLimit, "default": ContactsLimit}),
			query("ids", "Only these contact ids (comma-separated)", obj{"type": "string"}),
			query("emails", "Only these emails (comma-separated)", obj{"type": "string"})}},
		"GetContact": {out: contactView{}},
		"UpdateContact": {in: contactChange{}, out: contactRef{}, desc: "Changes the fields given.",
			errs: map[int]string{409: "Another contact of the book has the new email"}},
		"UpsertContact": {in: contactRequest{}, out: contactRef{}, params: []obj{contactKeyParam()},
			desc: "Upserts by the body's email, as POST .../contacts does (the path's contactId is not read)."},
		"DeleteContact": {out: success{}},
		"BulkCreateContacts": {in: bounded{contactRequest{}, 0, contact.MaxBulk}, out: bulkCreated{}, params: []obj{contactKeyParam()},
			desc: "Every contact is checked before any is written."},
		"BulkDeleteContacts": {in: bulkDeleteRequest{}, out: bulkDeleted{}, desc: "count is the number of contacts that existed."},

		"CreateCampaign": {in: campaignRequest{}, out: campaignView{},
			desc: "html or content is required, and must carry the {{usesend_unsubscribe_url}} placeholder. content is the " +
				"email editor's JSON document, rendered to the campaign's html (it wins over html); content that is not " +
				"a JSON object is taken as html. Without sendNow or scheduledAt the campaign is a draft."},
		"ListCampaigns": {out: campaignList{}, desc: fmt.Sprintf("%d campaigns a page, newest first.", campaign.ListPageSize),
			params: []obj{pageParam,
				query("status", "Only campaigns in this status", obj{"type": "string", "enum": []string{store.CampaignDraft,
					store.CampaignScheduled, store.CampaignRunning, store.CampaignPaused, store.CampaignSent}}),
				query("search", "Only campaigns whose name or subject contains this", obj{"type": "string"})}},
		"GetCampaign":      {out: campaignView{}},
		"DeleteCampaign":   {out: campaignView{}, desc: "Answers the campaign as it was."},
		"ScheduleCampaign": {in: scheduleRequest{}, optional: true, out: success{}},
		"PauseCampaign":    {out: success{}},
		"ResumeCampaign":   {out: success{}},

		"GetEmailTimeSeries": {out: analytics.Series{}, errs: domainMissing,
			desc: "One point a day, oldest first, ending today (UTC).", params: []obj{domain,
				query("days", "The period", obj{"type": "integer", "enum": analytics.Days, "default": analytics.DefaultDays})}},
		"GetReputationMetrics": {out: analytics.Reputation{}, errs: domainMissing, params: []obj{domain},
			desc: fmt.Sprintf("Over the last %d days.", analytics.DefaultDays)},

		"CreateWebhook":       {in: webhookRequest{}, out: webhookView{}, desc: "The answer carries the webhook's secret, shown only here."},
		"ListWebhooks":        {out: listOf[webhookView]{}},
		"GetWebhook":          {out: webhookView{}},
		"UpdateWebhook":       {in: webhookChange{}, out: webhookView{}, desc: "Changes the fields given; status pauses or resumes it."},
		"DeleteWebhook":       {out: success{}},
		"RotateWebhookSecret": {out: webhookView{}, desc: "The answer carries the new secret, shown only here."},
		"TestWebhook":         {out: callView{}},
		"ListWebhookCalls": {out: listOf[callView]{}, desc: "Newest first, a page at a time by before= (a log has no total: count is the calls in this page).", params: []obj{
			query("limit", "Calls per page", obj{"type": "integer", "minimum": 1, "maximum": 100, "default": 20}),
			query("before", "Only calls older than this call id (the next page)", obj{"type": "string"})}},
		"ReplayWebhookCall": {out: callView{}},

		"Unsubscribe": {page: true, desc: "GET shows a confirmation form (link scanners unsubscribe nobody); " +
			"POST, the form's and a mail client's RFC 8058 one-click, unsubscribes."},
		"ConfirmSubscription": {page: true, desc: "The link of a double opt-in email: GET shows a Confirm button (link " +
			"scanners subscribe nobody); POST, the button's, subscribes the contact waiting for it. A link works for 7 days (410 after)."},
	}
}

// query is a query parameter.
func query(name, desc string, schema obj) obj {
	return obj{"name": name, "in": "query", "description": desc, "schema": schema}
}

// pathParams are the {name}s of a route's path (ServeMux wildcards are whole segments).
func pathParams(path string) []string {
	var names []string
	for _, seg := range strings.Split(path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			names = append(names, strings.TrimSuffix(name, "}"))
		}
	}
	return names
}

// pathParam is a {name} of path: a string, but for a domain's id, an integer.
func pathParam(path, name string) obj {
	s := obj{"type": "string"}
	if name == "id" && strings.HasPrefix(path, "/api/v1/domains/") {
		s = obj{"type": "integer", "format": "int64", "minimum": 1}
	}
	return obj{"name": name, "in": "path", "required": true, "schema": s}
}

// tag groups a route by its path's first segment under /api/v1 (the contact books' contacts
// are under contactBooks).
func tag(path string) string {
	seg := strings.Split(strings.TrimPrefix(path, "/api/v1"), "/")[1]
	if seg == "contactBooks" {
		return "Contacts"
	}
	return strings.ToUpper(seg[:1]) + seg[1:]
}

// contactKeyParam is the Idempotency-Key of the routes that add contacts: a retry mails no
// contact waiting for its double opt-in a second confirmation.
func contactKeyParam() obj {
	return obj{"name": "Idempotency-Key", "in": "header",
		"description": fmt.Sprintf("Makes the request safe to retry for %d hours: a contact waiting for its double opt-in "+
			"gets no second confirmation email.", int(email.IdempotencyTTL.Hours())),
		"schema": obj{"type": "string", "minLength": 1, "maxLength": email.MaxIdempotencyKey}}
}

func (g *generator) operation(r Route, id string, op operation) obj {
	var params []obj
	for _, name := range pathParams(r.Path) {
		params = append(params, pathParam(r.Path, name))
	}
	params = append(params, op.params...)
	if op.idempotent {
		params = append(params, obj{"name": "Idempotency-Key", "in": "header",
			"description": fmt.Sprintf("Makes the request safe to retry for %d hours: the same key and body answer as the "+
				"first request did, without sending again.", int(email.IdempotencyTTL.Hours())),
			"schema": obj{"type": "string", "minLength": 1, "maxLength": email.MaxIdempotencyKey}})
	}
	o := obj{"operationId": id, "summary": r.Summary, "tags": []string{tag(r.Path)},
		"responses": g.responses(r, op, len(params) > 0)}
	if len(params) > 0 {
		o["parameters"] = params
	}
	notes := []string{op.desc}
	if r.Manage {
		notes = append(notes, "FULL keys only.")
	}
	if r.TeamWide {
		notes = append(notes, "Not for domain-restricted keys.")
	}
	if r.Public {
		notes = append(notes, "No API key: the link is signed.")
	}
	if d := strings.TrimSpace(strings.Join(notes, " ")); d != "" {
		o["description"] = d
	}
	o["security"] = []obj{{bearer: []string{}}}
	if r.Public {
		o["security"] = []obj{}
	}
	if op.in != nil {
		o["requestBody"] = obj{"required": !op.optional, "content": obj{"application/json": obj{"schema": g.body(op.in)}}}
	}
	return o
}

// responses are the 200 and the errors the route may answer.
func (g *generator) responses(r Route, op operation, params bool) obj {
	shared := func(status int) obj { return obj{"$ref": "#/components/responses/" + g.shared[status].name} }
	if op.page {
		html := obj{"text/html": obj{"schema": obj{"type": "string"}}}
		return obj{
			"200": obj{"description": "A page for the recipient", "content": html},
			"404": obj{"description": "The link is not valid (a page)", "content": html},
			"500": shared(500),
		}
	}
	ok := obj{"description": "OK", "content": obj{"application/json": obj{"schema": g.body(op.out)}}}
	if op.idempotent {
		ok["headers"] = obj{"Idempotency-Replayed": obj{"description": "The answer of an earlier request with the same Idempotency-Key",
			"schema": obj{"type": "string", "enum": []string{"true"}}}}
	}
	res := obj{"200": ok}
	for status, when := range op.errs {
		res[strconv.Itoa(status)] = errorResponse(status, when)
	}
	add := func(status int) {
		if _, ok := res[strconv.Itoa(status)]; !ok {
			res[strconv.Itoa(status)] = shared(status)
		}
	}
	if op.in != nil || params {
		add(400)
	}
	if !r.Public {
		add(401)
		add(403)
		add(429)
	}
	if op.in != nil {
		add(413)
	}
	if strings.Contains(r.Path, "{") {
		add(404)
	}
	add(500)
	return res
}

// sharedError is an error most routes may answer, one of components.responses.
type sharedError struct{ name, when string }

func sharedErrors() map[int]sharedError {
	return map[int]sharedError{
		400: {"BadRequest", "Invalid input: the message names the field"},
		401: {"Unauthorized", "No API key"},
		403: {"Forbidden", "Not a valid API key, or a key this route refuses (see its description)"},
		404: {"NotFound", "Not found (another team's ids are not found either)"},
		413: {"TooLarge", "The request body is too large"},
		429: {"RateLimited", "The team's rate limit is exceeded: retry after Retry-After seconds"},
		500: {"InternalError", "Internal error (never detailed)"},
	}
}

func errorResponse(status int, when string) obj {
	res := obj{"description": when, "content": obj{"application/json": obj{"schema": obj{"$ref": "#/components/schemas/Error"}}}}
	if status == 429 {
		n := func(desc string) obj { return obj{"description": desc, "schema": obj{"type": "integer"}} }
		res["headers"] = obj{
			"Retry-After":           n("Seconds to wait"),
			"X-RateLimit-Limit":     n("Requests a second the team may make"),
			"X-RateLimit-Remaining": n("Requests left in this second"),
			"X-RateLimit-Reset":     n("When the limit resets (Unix seconds)"),
		}
	}
	return res
}

// errorSchema is the error envelope, its codes those writeError answers.
func errorSchema() obj {
	codes := []string{"INTERNAL_SERVER_ERROR"}
	for _, k := range kinds {
		codes = append(codes, k.code)
	}
	slices.Sort(codes)
	str := obj{"type": "string"}
	return obj{"type": "object", "required": []string{"error"}, "properties": obj{
		"error": obj{"type": "object", "required": []string{"code", "message"}, "properties": obj{
			"code": obj{"type": "string", "enum": codes}, "message": str}},
	}}
}

// generator reflects JSON schemas from Go types as encoding/json writes and reads them: json
// tags name the fields, omitempty ones are optional, pointers nullable, slices arrays, maps
// objects of their values. A doc tag describes a field.
type generator struct {
	names   map[reflect.Type]string // types that are components.schemas, by name
	special map[reflect.Type]obj    // types whose schema reflection cannot tell
	shared  map[int]sharedError     // components.responses, by status
	schemas obj                     // components.schemas
	err     error
}

// body is the schema of a request or response body.
func (g *generator) body(v any) obj {
	if b, ok := v.(bounded); ok {
		return obj{"type": "array", "items": g.schema(reflect.TypeOf(b.item)), "minItems": b.min, "maxItems": b.max}
	}
	return g.schema(reflect.TypeOf(v))
}

func (g *generator) schema(t reflect.Type) obj {
	if s, ok := g.special[t]; ok {
		return maps.Clone(s)
	}
	name, ok := g.names[t]
	if !ok {
		return g.inline(t)
	}
	if _, done := g.schemas[name]; !done {
		g.schemas[name] = obj{} // taken, should the type refer to itself
		g.schemas[name] = g.inline(t)
	}
	return obj{"$ref": "#/components/schemas/" + name}
}

func (g *generator) inline(t reflect.Type) obj {
	switch t.Kind() {
	case reflect.Pointer:
		return with(g.schema(t.Elem()), "nullable", true)
	case reflect.Struct:
		props, required := obj{}, []string{}
		g.fields(t, props, &required)
		s := obj{"type": "object", "properties": props}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	case reflect.Slice, reflect.Array:
		return obj{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return obj{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.String:
		return obj{"type": "string"}
	case reflect.Bool:
		return obj{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return obj{"type": "integer"}
	case reflect.Int64, reflect.Uint64:
		return obj{"type": "integer", "format": "int64"}
	case reflect.Float32, reflect.Float64:
		return obj{"type": "number"}
	case reflect.Interface:
		return obj{} // any value
	}
	if g.err == nil {
		g.err = fmt.Errorf("api: no JSON schema for Go type %s", t)
	}
	return obj{}
}

// fields adds the JSON fields of struct t as encoding/json sees them: an untagged embedded
// struct's fields are promoted unless t has its own of the same name.
func (g *generator) fields(t reflect.Type, props obj, required *[]string) {
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			embedded = append(embedded, f.Type)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := g.schema(f.Type)
		if d := f.Tag.Get("doc"); d != "" {
			s = with(s, "description", d)
		}
		// limits:"maxItems=10,minimum=1": bounds the handlers check, as numbers.
		for _, l := range strings.Split(f.Tag.Get("limits"), ",") {
			if k, v, ok := strings.Cut(l, "="); ok {
				n, err := strconv.Atoi(v)
				if err != nil && g.err == nil {
					g.err = fmt.Errorf("api: limits of %s.%s: %w", t.Name(), f.Name, err)
				}
				s = with(s, k, n)
			}
		}
		props[name] = s
		if !slices.Contains(strings.Split(opts, ","), "omitempty") {
			*required = append(*required, name)
		}
	}
	for _, e := range embedded {
		inner, innerRequired := obj{}, []string{}
		g.fields(e, inner, &innerRequired)
		for _, name := range innerRequired {
			if _, own := props[name]; !own {
				*required = append(*required, name)
			}
		}
		for name, s := range inner {
			if _, own := props[name]; !own {
				props[name] = s
			}
		}
	}
}

// with sets key on schema s; a $ref takes no other keys in OpenAPI 3.0, so it is wrapped.
func with(s obj, key string, v any) obj {
	if _, ok := s["$ref"]; ok {
		s = obj{"allOf": []obj{s}}
	}
	s[key] = v
	return s
}

// schemaNames are the types that are components.schemas: the resources and their parts.
func schemaNames() map[reflect.Type]string {
	return map[reflect.Type]string{
		reflect.TypeFor[sendRequest]():          "SendEmailRequest",
		reflect.TypeFor[email.Attachment]():     "Attachment",
		reflect.TypeFor[emailItem]():            "EmailSummary",
		reflect.TypeFor[emailDetail]():          "Email",
		reflect.TypeFor[eventView]():            "EmailEvent",
		reflect.TypeFor[domainView]():           "Domain",
		reflect.TypeFor[store.DNSRecord]():      "DNSRecord",
		reflect.TypeFor[templateView]():         "Template",
		reflect.TypeFor[suppressionView]():      "Suppression",
		reflect.TypeFor[bookView]():             "ContactBook",
		reflect.TypeFor[contactView]():          "Contact",
		reflect.TypeFor[contactRequest]():       "ContactRequest",
		reflect.TypeFor[campaignView]():         "Campaign",
		reflect.TypeFor[campaignItem]():         "CampaignSummary",
		reflect.TypeFor[webhookView]():          "Webhook",
		reflect.TypeFor[callView]():             "WebhookCall",
		reflect.TypeFor[analytics.Series]():     "EmailTimeSeries",
		reflect.TypeFor[analytics.Counts]():     "EmailCounts",
		reflect.TypeFor[analytics.Reputation](): "ReputationMetrics",
	}
}

// Types of the request bodies below whose schema reflection cannot tell from their Go type.
type (
	addressList       []string // an address or a list of them
	eventType         string
	suppressionReason string
	webhookStatus     string
)

func specialSchemas() map[reflect.Type]obj {
	return map[reflect.Type]obj{
		reflect.TypeFor[time.Time]():       {"type": "string", "format": "date-time"},
		reflect.TypeFor[json.RawMessage](): {"description": "Any JSON value"},
		reflect.TypeFor[addressList](): {"oneOf": []obj{{"type": "string"}, {"type": "array", "items": obj{"type": "string"}}},
			"description": `An address ("Name <a@example.com>" or a@example.com) or a list of them`},
		reflect.TypeFor[eventType]():         {"type": "string", "enum": webhook.EventTypes},
		reflect.TypeFor[suppressionReason](): {"type": "string", "enum": []string{store.ReasonHardBounce, store.ReasonComplaint, store.ReasonManual}},
		reflect.TypeFor[webhookStatus]():     {"type": "string", "enum": []string{store.WebhookActive, store.WebhookPaused}},
	}
}

// The request bodies as the handlers read them. Most handlers decode into an anonymous struct,
// or check field by field (email.DecodeRequest), so these are written for the document; the
// tests hold their fields to the handlers'. Required fields are those without omitempty.

// sendRequest is the body of POST /emails (email.Request is its validated, normalised form).
type sendRequest struct {
	To          addressList        `json:"to"`
	From        string             `json:"from" doc:"The sender, of a verified domain of the team"`
	Subject     *string            `json:"subject,omitempty" doc:"Required unless templateId is given"`
	TemplateID  string             `json:"templateId,omitempty" doc:"A template of the team; its subject and bodies are rendered with variables"`
	Variables   map[string]string  `json:"variables,omitempty" doc:"Values for the template's {{name}}s (strings)"`
	ReplyTo     addressList        `json:"replyTo,omitempty"`
	CC          addressList        `json:"cc,omitempty"`
	BCC         addressList        `json:"bcc,omitempty"`
	Text        *string            `json:"text,omitempty"`
	HTML        *string            `json:"html,omitempty"`
	Headers     map[string]string  `json:"headers,omitempty" doc:"Extra headers; those Mailroom sets itself are refused"`
	Attachments []email.Attachment `json:"attachments,omitempty" doc:"Each content base64" limits:"maxItems=10"`
	ScheduledAt *time.Time         `json:"scheduledAt,omitempty" doc:"When to send (default: now)"`
	InReplyToID *string            `json:"inReplyToId,omitempty" doc:"An email of the team this one answers"`
}

// rescheduleRequest is the body of PATCH /emails/{emailId}.
type rescheduleRequest struct {
	ScheduledAt time.Time `json:"scheduledAt"`
}

type createDomainRequest struct {
	Name   string  `json:"name"`
	Region *string `json:"region,omitempty" doc:"The SES region (default: the server's)"`
}

type trackingRequest struct {
	ClickTracking *bool `json:"clickTracking,omitempty"`
	OpenTracking  *bool `json:"openTracking,omitempty"`
}

type templateChange struct {
	Name    *string `json:"name,omitempty"`
	Subject *string `json:"subject,omitempty"`
	HTML    *string `json:"html,omitempty"`
	Text    *string `json:"text,omitempty"`
}

type templateRequest struct {
	Name string `json:"name"`
	templateChange
}

type suppressionRequest struct {
	Email  string            `json:"email"`
	Reason suppressionReason `json:"reason,omitempty" doc:"Default MANUAL"`
}

type bookChange struct {
	Name               *string           `json:"name,omitempty"`
	Emoji              *string           `json:"emoji,omitempty"`
	Properties         map[string]string `json:"properties,omitempty"`
	Variables          []string          `json:"variables,omitempty" doc:"The contacts' properties campaigns may use"`
	DoubleOptInEnabled *bool             `json:"doubleOptInEnabled,omitempty" doc:"New contacts wait, not subscribed, until they confirm through the link of their confirmation email (default false)"`
	DoubleOptInFrom    *string           `json:"doubleOptInFrom,omitempty" doc:"From of the confirmation email, on a verified domain (default hello@ the team's oldest verified domain)"`
	DoubleOptInSubject *string           `json:"doubleOptInSubject,omitempty" doc:"Its subject ({{firstName}}, {{lastName}}, {{email}} filled in)"`
	DoubleOptInContent *string           `json:"doubleOptInContent,omitempty" doc:"Its body: the email editor's JSON document, or html, with the {{doubleOptInUrl}} placeholder"`
}

type bookRequest struct {
	Name string `json:"name"`
	bookChange
}

type contactChange struct {
	Email      *string           `json:"email,omitempty"`
	FirstName  *string           `json:"firstName,omitempty"`
	LastName   *string           `json:"lastName,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
	Subscribed *bool             `json:"subscribed,omitempty"`
}

type contactRequest struct {
	Email string `json:"email"`
	contactChange
}

type bulkDeleteRequest struct {
	ContactIDs []string `json:"contactIds" limits:"minItems=1,maxItems=1000"`
}

type campaignRequest struct {
	Name               string      `json:"name"`
	From               string      `json:"from"`
	Subject            string      `json:"subject"`
	PreviewText        string      `json:"previewText,omitempty"`
	ContactBookID      string      `json:"contactBookId"`
	Content            string      `json:"content,omitempty" doc:"The email editor's JSON document (ProseMirror: {\"type\":\"doc\",\"content\":[...]}), rendered to the html"`
	HTML               string      `json:"html,omitempty"`
	ReplyTo            addressList `json:"replyTo,omitempty"`
	CC                 addressList `json:"cc,omitempty"`
	BCC                addressList `json:"bcc,omitempty"`
	SendNow            bool        `json:"sendNow,omitempty"`
	ScheduledAt        string      `json:"scheduledAt,omitempty" doc:"RFC 3339, or natural language: \"tomorrow 9am\""`
	BatchSize          int         `json:"batchSize,omitempty" doc:"Emails a batch" limits:"minimum=1,maximum=100000"`
	BatchWindowMinutes int         `json:"batchWindowMinutes,omitempty" doc:"Minutes between batches"`
}

// scheduleRequest is the body of POST /campaigns/{campaignId}/schedule; none starts it now.
type scheduleRequest struct {
	SendNow     bool   `json:"sendNow,omitempty" doc:"Start now (wins over scheduledAt)"`
	ScheduledAt string `json:"scheduledAt,omitempty" doc:"RFC 3339, or natural language: \"tomorrow 9am\" (default: now)"`
	BatchSize   int    `json:"batchSize,omitempty" limits:"minimum=1,maximum=100000"`
}

type webhookBody struct {
	URL         *string      `json:"url,omitempty"`
	EventTypes  *[]eventType `json:"eventTypes,omitempty" doc:"The events to receive (empty: every one)"`
	DomainIDs   *[]int64     `json:"domainIds,omitempty" doc:"Only these domains' events (empty: every domain's)"`
	Description *string      `json:"description,omitempty"`
}

// webhookRequest is the body of POST /webhooks: a status is set with PATCH only.
type webhookRequest struct {
	URL string `json:"url"`
	webhookBody
}

type webhookChange struct {
	webhookBody
	Status *webhookStatus `json:"status,omitempty"`
}

// The bodies the handlers answer with a map, not a view.

type emailRef struct {
	EmailID string `json:"emailId"`
}

type contactRef struct {
	ContactID string `json:"contactId"`
}

type listOnly[T any] struct {
	Data []T `json:"data"`
}

type listOf[T any] struct {
	Data  []T `json:"data"`
	Count int `json:"count"`
}

type success struct {
	Success bool `json:"success"`
}

type verifyResult struct {
	Message string `json:"message"`
	Status  string `json:"status"`
}

type domainDeleted struct {
	ID int64 `json:"id"`
	success
	Message string `json:"message"`
}

type idDeleted struct {
	ID string `json:"id"`
	success
}

type bookDeleted struct {
	idDeleted
	Message string `json:"message"`
}

type suppressionDeleted struct {
	Email string `json:"email"`
	success
}

type bulkCreated struct {
	Message string `json:"message"`
	Count   int    `json:"count"`
}

type bulkDeleted struct {
	success
	Count int `json:"count"`
}

type campaignList struct {
	Campaigns []campaignItem `json:"campaigns"`
	TotalPage int            `json:"totalPage"`
}
