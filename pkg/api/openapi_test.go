package api_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/contact"
	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/hooks"
	"github.com/mailroom/mailroom/pkg/template"
)

type jsonObject = map[string]any

// pathParam matches the {name}s of a route's path.
var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// openAPI is the document, decoded.
func openAPI(t *testing.T) jsonObject {
	t.Helper()
	b, err := api.OpenAPI("1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	var doc jsonObject
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	return doc
}

// operation finds the operation of an id.
func operation(t *testing.T, doc jsonObject, id string) jsonObject {
	t.Helper()
	for _, item := range doc["paths"].(jsonObject) {
		for _, op := range item.(jsonObject) {
			if op.(jsonObject)["operationId"] == id {
				return op.(jsonObject)
			}
		}
	}
	t.Fatalf("no operation %s", id)
	return nil
}

// resolve follows a local $ref ("#/components/schemas/Email").
func resolve(doc jsonObject, ref string) (jsonObject, bool) {
	var at any = doc
	for _, key := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, ok := at.(jsonObject)
		if !ok {
			return nil, false
		}
		at = m[key]
	}
	m, ok := at.(jsonObject)
	return m, ok && strings.HasPrefix(ref, "#/")
}

// deref is o, or what its $ref points at.
func deref(t *testing.T, doc, o jsonObject) jsonObject {
	t.Helper()
	ref, ok := o["$ref"].(string)
	if !ok {
		return o
	}
	m, ok := resolve(doc, ref)
	if !ok {
		t.Fatalf("$ref %s does not resolve", ref)
	}
	return m
}

// responseSchema is the JSON schema of an operation's response with that status.
func responseSchema(t *testing.T, doc jsonObject, id, status string) jsonObject {
	t.Helper()
	res, ok := operation(t, doc, id)["responses"].(jsonObject)[status].(jsonObject)
	if !ok {
		t.Fatalf("%s documents no %s response", id, status)
	}
	s, ok := deref(t, doc, res)["content"].(jsonObject)["application/json"].(jsonObject)["schema"].(jsonObject)
	if !ok {
		t.Fatalf("%s's %s response has no JSON schema", id, status)
	}
	return s
}

func TestOpenAPIDocument(t *testing.T) {
	doc := openAPI(t)
	info, _ := doc["info"].(jsonObject)
	if doc["openapi"] != "3.0.3" || info["title"] != "Mailroom API" || info["version"] != "1.2.3" {
		t.Errorf("openapi %v, info %v", doc["openapi"], info)
	}
	scheme, _ := doc["components"].(jsonObject)["securitySchemes"].(jsonObject)["bearerAuth"].(jsonObject)
	if scheme["type"] != "http" || scheme["scheme"] != "bearer" {
		t.Errorf("security scheme %v", scheme)
	}
}

// TestOpenAPIRoutes holds the document to the route table: every route and nothing else, its
// operation id, summary, path parameters, permissions and errors.
func TestOpenAPIRoutes(t *testing.T) {
	doc := openAPI(t)
	paths := doc["paths"].(jsonObject)
	documented := 0
	for _, item := range paths {
		documented += len(item.(jsonObject))
	}
	if documented != len(api.Routes)+len(api.ServedBesides) {
		t.Errorf("%d operations documented, %d routes and %d served besides", documented, len(api.Routes), len(api.ServedBesides))
	}
	// What the server serves besides the API's routes is there too, taking no key.
	for _, b := range api.ServedBesides {
		op, ok := paths[b.Path].(jsonObject)[strings.ToLower(b.Method)].(jsonObject)
		if !ok || op["operationId"] != b.ID || len(asList(op["security"])) != 0 {
			t.Errorf("%s %s: %v, want operation %s without security", b.Method, b.Path, op, b.ID)
		}
	}
	perFunction := map[string]int{}
	for _, r := range api.Routes {
		perFunction[r.Function]++
	}
	ids := map[string]bool{}
	for _, r := range api.Routes {
		item, _ := paths[r.Path].(jsonObject)
		op, ok := item[strings.ToLower(r.Method)].(jsonObject)
		if !ok {
			t.Errorf("%s is not documented", r.Pattern())
			continue
		}
		id, _ := op["operationId"].(string)
		if ids[id] {
			t.Errorf("%s: operationId %s is not unique", r.Pattern(), id)
		}
		ids[id] = true
		// A function serving several routes names each by its method as well.
		if id != r.Function && (perFunction[r.Function] == 1 || !strings.HasPrefix(id, r.Function)) {
			t.Errorf("%s: operationId %s, function %s", r.Pattern(), id, r.Function)
		}
		if op["summary"] != r.Summary || len(op["tags"].([]any)) != 1 {
			t.Errorf("%s: summary %v, tags %v", r.Pattern(), op["summary"], op["tags"])
		}
		var declared []string
		for _, p := range asList(op["parameters"]) {
			if p := p.(jsonObject); p["in"] == "path" {
				if p["required"] != true {
					t.Errorf("%s: path parameter %s not required", r.Pattern(), p["name"])
				}
				declared = append(declared, p["name"].(string))
			}
		}
		var want []string
		for _, m := range pathParam.FindAllStringSubmatch(r.Path, -1) {
			want = append(want, m[1])
		}
		if !slices.Equal(declared, want) {
			t.Errorf("%s: path parameters %v, want %v", r.Pattern(), declared, want)
		}
		security := asList(op["security"])
		if r.Public != (len(security) == 0) {
			t.Errorf("%s: security %v (public %v)", r.Pattern(), security, r.Public)
		}
		desc, _ := op["description"].(string)
		if r.Manage != strings.Contains(desc, "FULL keys only") || r.TeamWide != strings.Contains(desc, "Not for domain-restricted keys") {
			t.Errorf("%s: description %q does not say its permissions", r.Pattern(), desc)
		}
		responses := op["responses"].(jsonObject)
		content, _ := responses["200"].(jsonObject)["content"].(jsonObject)
		ok200 := content["text/html"] != nil
		if !r.Public {
			ok200 = content["application/json"] != nil
			for _, status := range []string{"401", "403", "429"} {
				if responses[status] == nil {
					t.Errorf("%s documents no %s", r.Pattern(), status)
				}
			}
		}
		if !ok200 {
			t.Errorf("%s: 200 content %v", r.Pattern(), content)
		}
		if responses["500"] == nil || (len(want) > 0 && responses["404"] == nil) {
			t.Errorf("%s documents no 500, or no 404 for its path ids", r.Pattern())
		}
	}
	if p := pathParameter(t, doc, "GetDomain", "id"); p["type"] != "integer" {
		t.Errorf("a domain id is %v, want an integer", p)
	}
}

func pathParameter(t *testing.T, doc jsonObject, id, name string) jsonObject {
	t.Helper()
	for _, p := range asList(operation(t, doc, id)["parameters"]) {
		if p := p.(jsonObject); p["name"] == name {
			return p["schema"].(jsonObject)
		}
	}
	t.Fatalf("%s has no parameter %s", id, name)
	return nil
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func TestOpenAPIRefsResolve(t *testing.T) {
	doc := openAPI(t)
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case jsonObject:
			if ref, ok := v["$ref"].(string); ok {
				if _, ok := resolve(doc, ref); !ok {
					t.Errorf("%s: $ref %s does not resolve", at, ref)
				}
			}
			for k, x := range v {
				walk(x, at+"/"+k)
			}
		case []any:
			for i, x := range v {
				walk(x, at+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(doc, "#")
}

// requestSchema is the object schema of an operation's JSON request body (of its elements,
// for an array body), and whether the body is an array.
func requestSchema(t *testing.T, doc, op jsonObject) (jsonObject, bool) {
	t.Helper()
	body, _ := op["requestBody"].(jsonObject)
	s, ok := body["content"].(jsonObject)["application/json"].(jsonObject)["schema"].(jsonObject)
	if !ok {
		t.Fatalf("%s has no JSON request body", op["operationId"])
	}
	s = deref(t, doc, s)
	if s["type"] != "array" {
		return s, false
	}
	return deref(t, doc, s["items"].(jsonObject)), true
}

// requestFields are the lowercased properties of an operation's request body.
func requestFields(t *testing.T, doc jsonObject, id string) []string {
	t.Helper()
	s, _ := requestSchema(t, doc, operation(t, doc, id))
	var out []string
	for k := range s["properties"].(jsonObject) {
		out = append(out, strings.ToLower(k))
	}
	slices.Sort(out)
	return out
}

// goFields are the lowercased names of the exported fields of v's struct type, but skip.
func goFields(v any, skip ...string) []string {
	var out []string
	for f := range reflect.TypeOf(v).Fields() {
		if f.IsExported() && !slices.Contains(skip, f.Name) {
			out = append(out, strings.ToLower(f.Name))
		}
	}
	slices.Sort(out)
	return out
}

// TestOpenAPIRequestFields holds the documented request bodies to the types the handlers hand
// their fields to: a field added to one must be documented.
func TestOpenAPIRequestFields(t *testing.T) {
	doc := openAPI(t)
	for id, want := range map[string][]string{
		"SendEmail":          goFields(email.Request{}),
		"SendBatch":          goFields(email.Request{}),
		"CreateTemplate":     goFields(template.Fields{}),
		"UpdateTemplate":     goFields(template.Fields{}),
		"CreateContactBook":  goFields(contact.BookFields{}, "KeyDomain"),
		"UpdateContactBook":  goFields(contact.BookFields{}, "KeyDomain"),
		"CreateContact":      goFields(contact.Fields{}),
		"UpdateContact":      goFields(contact.Fields{}),
		"UpsertContact":      goFields(contact.Fields{}),
		"BulkCreateContacts": goFields(contact.Fields{}),
		"CreateCampaign":     goFields(campaign.Request{}, "KeyDomain"),
		"CreateWebhook":      goFields(hooks.Fields{}, "Status"),
		"UpdateWebhook":      goFields(hooks.Fields{}),
	} {
		if got := requestFields(t, doc, id); !slices.Equal(got, want) {
			t.Errorf("%s documents %v, the handler reads %v", id, got, want)
		}
	}
}

// TestOpenAPIRequestsAccepted sends every documented field of each request body: the handlers
// that refuse unknown fields (sends, templates, campaigns, webhooks, reschedule) must know them.
func TestOpenAPIRequestsAccepted(t *testing.T) {
	e := newEnv(t)
	doc := openAPI(t)
	for _, r := range api.Routes {
		op := doc["paths"].(jsonObject)[r.Path].(jsonObject)[strings.ToLower(r.Method)].(jsonObject)
		if op["requestBody"] == nil {
			continue
		}
		body, array := requestSchema(t, doc, op)
		fields := jsonObject{}
		for k := range body["properties"].(jsonObject) {
			fields[k] = nil
		}
		var v any = fields
		if array {
			v = []any{fields}
		}
		b, _ := json.Marshal(v)
		// Path ids that exist or not: the bodies are read either way.
		path := pathParam.ReplaceAllStringFunc(r.Path, func(p string) string {
			if p == "{id}" && strings.HasPrefix(r.Path, "/api/v1/domains/") {
				return strconv.FormatInt(e.domain, 10)
			}
			return "abcdef"
		})
		res := e.do(r.Method, path, string(b))
		if strings.Contains(string(res.body), "unknown field") {
			t.Errorf("%s refuses a documented field: %s", r.Pattern(), res.body)
		}
	}
}

// conform returns where the decoded JSON v departs from schema s of doc.
func conform(t *testing.T, doc, s jsonObject, v any, at string) []string {
	s = deref(t, doc, s)
	if v == nil {
		if s["nullable"] == true || (s["type"] == nil && s["allOf"] == nil && s["oneOf"] == nil) {
			return nil
		}
		return []string{at + ": null, not nullable"}
	}
	var errs []string
	for _, sub := range asList(s["allOf"]) {
		errs = append(errs, conform(t, doc, sub.(jsonObject), v, at)...)
	}
	if one := asList(s["oneOf"]); len(one) > 0 {
		n := 0
		for _, sub := range one {
			if len(conform(t, doc, sub.(jsonObject), v, at)) == 0 {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, fmt.Sprintf("%s: %v matches %d of oneOf", at, v, n))
		}
	}
	ok := true
	switch s["type"] {
	case "object":
		var m jsonObject
		if m, ok = v.(jsonObject); ok {
			props, _ := s["properties"].(jsonObject)
			extra, _ := s["additionalProperties"].(jsonObject)
			for k, x := range m {
				if p, found := props[k].(jsonObject); found {
					errs = append(errs, conform(t, doc, p, x, at+"."+k)...)
				} else if extra != nil {
					errs = append(errs, conform(t, doc, extra, x, at+"."+k)...)
				} else {
					errs = append(errs, at+"."+k+": not documented")
				}
			}
			for _, k := range asList(s["required"]) {
				if _, found := m[k.(string)]; !found {
					errs = append(errs, at+"."+k.(string)+": required, missing")
				}
			}
		}
	case "array":
		var l []any
		if l, ok = v.([]any); ok {
			for i, x := range l {
				errs = append(errs, conform(t, doc, s["items"].(jsonObject), x, at+"["+strconv.Itoa(i)+"]")...)
			}
		}
	case "string":
		_, ok = v.(string)
		if enum := asList(s["enum"]); ok && len(enum) > 0 && !slices.Contains(enum, v) {
			errs = append(errs, fmt.Sprintf("%s: %v not in %v", at, v, enum))
		}
	case "integer":
		f, isNumber := v.(float64)
		ok = isNumber && f == math.Trunc(f)
	case "number":
		_, ok = v.(float64)
	case "boolean":
		_, ok = v.(bool)
	}
	if !ok {
		errs = append(errs, fmt.Sprintf("%s: %v is not a %s", at, v, s["type"]))
	}
	return errs
}

// TestOpenAPIResponses calls every JSON route and holds its answer to the documented 200
// schema: every field documented, with its type; every required field present.
func TestOpenAPIResponses(t *testing.T) {
	e := newEnv(t)
	doc := openAPI(t)
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer hook.Close()
	checked := map[string]bool{}
	call := func(id, method, path, body string) jsonObject {
		t.Helper()
		r := e.do(method, path, body)
		if r.status != http.StatusOK {
			t.Fatalf("%s %s = %d %s", method, path, r.status, r.body)
		}
		var v any
		r.json(t, &v)
		for _, msg := range conform(t, doc, responseSchema(t, doc, id, "200"), v, id) {
			t.Error(msg)
		}
		checked[id] = true
		m, _ := v.(jsonObject)
		return m
	}
	str := func(m jsonObject, k string) string { return fmt.Sprint(m[k]) }

	// Emails: one delivered (its events carry data), a batch, one scheduled then moved and
	// cancelled.
	sent := str(call("SendEmail", "POST", "/api/v1/emails", simple), "emailId")
	e.await(sent, "DELIVERED")
	call("GetEmail", "GET", "/api/v1/emails/"+sent, "")
	call("SendBatch", "POST", "/api/v1/emails/batch", "["+simple+","+simple+"]")
	call("ListEmails", "GET", "/api/v1/emails?limit=5", "")
	at := func(d time.Duration) string { return e.clock.Now().Add(d).Format(time.RFC3339) }
	later := str(call("SendEmail", "POST", "/api/v1/emails", strings.Replace(simple, "{", `{"scheduledAt":"`+at(48*time.Hour)+`",`, 1)), "emailId")
	call("UpdateEmail", "PATCH", "/api/v1/emails/"+later, `{"scheduledAt":"`+at(72*time.Hour)+`"}`)
	call("CancelEmail", "POST", "/api/v1/emails/"+later+"/cancel", "")

	dom := "/api/v1/domains/" + strconv.FormatInt(e.domain, 10)
	call("ListDomains", "GET", "/api/v1/domains", "")
	call("GetDomain", "GET", dom, "")
	call("UpdateDomain", "PATCH", dom, `{"openTracking":true}`)
	call("VerifyDomain", "PUT", dom+"/verify", "")
	other := call("CreateDomain", "POST", "/api/v1/domains", `{"name":"other.org"}`)
	call("DeleteDomain", "DELETE", "/api/v1/domains/"+str(other, "id"), "")

	tpl := "/api/v1/templates/" + str(call("CreateTemplate", "POST", "/api/v1/templates", `{"name":"t","subject":"s","html":"<p>x</p>"}`), "id")
	call("ListTemplates", "GET", "/api/v1/templates", "")
	call("GetTemplate", "GET", tpl, "")
	call("UpdateTemplate", "PATCH", tpl, `{"text":"x"}`)
	call("DeleteTemplate", "DELETE", tpl, "")

	call("CreateSuppression", "POST", "/api/v1/suppressions", `{"email":"gone@example.org"}`)
	call("ListSuppressions", "GET", "/api/v1/suppressions", "")
	call("DeleteSuppression", "DELETE", "/api/v1/suppressions/gone@example.org", "")

	bookID := str(call("CreateContactBook", "POST", "/api/v1/contactBooks", `{"name":"News","properties":{"a":"b"}}`), "id")
	book := "/api/v1/contactBooks/" + bookID
	call("ListContactBooks", "GET", "/api/v1/contactBooks", "")
	call("UpdateContactBook", "PATCH", book, `{"emoji":"📬"}`)
	ann := book + "/contacts/" + str(call("CreateContact", "POST", book+"/contacts", `{"email":"ann@example.org","firstName":"Ann"}`), "contactId")
	call("UpsertContact", "PUT", ann, `{"email":"ann@example.org","lastName":"Lee"}`)
	call("UpdateContact", "PATCH", ann, `{"properties":{"plan":"pro"}}`)
	call("GetContact", "GET", ann, "")
	call("BulkCreateContacts", "POST", book+"/contacts/bulk", `[{"email":"bob@example.org"},{"email":"cid@example.org"}]`)
	call("ListContacts", "GET", book+"/contacts", "")
	call("GetContactBook", "GET", book, "")
	var list []struct{ ID string }
	e.mustDo("GET", book+"/contacts?emails=bob@example.org,cid@example.org", "", &list)
	if len(list) != 2 {
		t.Fatalf("bob and cid: %+v", list)
	}
	// Repeated keys say the same as a comma-separated list.
	var repeated []struct{ ID string }
	e.mustDo("GET", book+"/contacts?emails=bob@example.org&emails=cid@example.org&ids="+list[0].ID+"&ids="+list[1].ID, "", &repeated)
	if len(repeated) != 2 {
		t.Errorf("emails=bob&emails=cid&ids=…&ids=…: %+v, want both", repeated)
	}
	// A filter with nothing in it (a client joining an empty list) matches nothing, as
	// upstream's; one with a trailing comma, what it names; one of an unknown book is a 404.
	for q, want := range map[string]int{"?emails=": 0, "?ids=": 0, "?emails=,": 0, "?emails=bob@example.org,": 1, "?page=1": 3} {
		var got []struct{ ID string }
		if e.mustDo("GET", book+"/contacts"+q, "", &got); len(got) != want {
			t.Errorf("contacts%s: %d contacts, want %d", q, len(got), want)
		}
	}
	if r := e.do("GET", "/api/v1/contactBooks/nobook/contacts?emails=", ""); r.status != 404 {
		t.Errorf("contacts?emails= of an unknown book: %d %s", r.status, r.body)
	}
	call("DeleteContact", "DELETE", book+"/contacts/"+list[0].ID, "")
	call("BulkDeleteContacts", "DELETE", book+"/contacts/bulk", `{"contactIds":["`+list[1].ID+`"]}`)

	cmp := "/api/v1/campaigns/" + str(call("CreateCampaign", "POST", "/api/v1/campaigns", `{"name":"Launch","from":"news@example.com",
		"subject":"Hi","contactBookId":"`+bookID+`","html":`+jsonString(campaignHTML)+`}`), "id")
	call("ScheduleCampaign", "POST", cmp+"/schedule", `{"scheduledAt":"`+at(48*time.Hour)+`"}`)
	call("PauseCampaign", "POST", cmp+"/pause", "")
	call("ResumeCampaign", "POST", cmp+"/resume", "")
	call("GetCampaign", "GET", cmp, "")
	call("ListCampaigns", "GET", "/api/v1/campaigns", "")
	call("DeleteCampaign", "DELETE", cmp, "")
	call("DeleteContactBook", "DELETE", book, "")

	call("GetEmailTimeSeries", "GET", "/api/v1/analytics/email-time-series?days=7", "")
	call("GetReputationMetrics", "GET", "/api/v1/analytics/reputation-metrics?domainId="+strconv.FormatInt(e.domain, 10), "")

	wh := "/api/v1/webhooks/" + str(call("CreateWebhook", "POST", "/api/v1/webhooks", `{"url":"`+hook.URL+`","eventTypes":["email.sent"]}`), "id")
	call("ListWebhooks", "GET", "/api/v1/webhooks", "")
	call("GetWebhook", "GET", wh, "")
	call("UpdateWebhook", "PATCH", wh, `{"status":"PAUSED","description":"paused"}`)
	call("UpdateWebhook", "PATCH", wh, `{"status":"ACTIVE"}`)
	call("RotateWebhookSecret", "POST", wh+"/secret", "")
	tested := call("TestWebhook", "POST", wh+"/test", "")
	call("ListWebhookCalls", "GET", wh+"/calls", "")
	call("ReplayWebhookCall", "POST", wh+"/calls/"+str(tested, "id")+"/replay", "")
	call("DeleteWebhook", "DELETE", wh, "")

	for _, r := range api.Routes {
		if !r.Public && !checked[r.Function] {
			t.Errorf("%s: no answer checked against its documented schema", r.Function)
		}
	}

	// Errors answer the documented envelope, and the unsubscribe link a page.
	r := e.do("GET", "/api/v1/emails/nosuchemail", "")
	var v any
	r.json(t, &v)
	if r.status != http.StatusNotFound {
		t.Fatalf("unknown email: %d", r.status)
	}
	for _, msg := range conform(t, doc, responseSchema(t, doc, "GetEmail", "404"), v, "404") {
		t.Error(msg)
	}
	res, err := http.Get(e.srv.URL + "/unsubscribe/nosuchtoken")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	page := operation(t, doc, "UnsubscribeGet")["responses"].(jsonObject)["404"].(jsonObject)["content"].(jsonObject)
	if res.StatusCode != http.StatusNotFound || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || page["text/html"] == nil {
		t.Errorf("unsubscribe link: %d %s, documented %v", res.StatusCode, res.Header.Get("Content-Type"), page)
	}
}

// TestOpenAPIPathTemplatesHaveParameters: OpenAPI 3 wants a required path parameter for each
// {name} of a path, in every operation of it (validators and code generators refuse the
// document otherwise), and no path parameter that the path does not have.
func TestOpenAPIPathTemplatesHaveParameters(t *testing.T) {
	doc := openAPI(t)
	for path, item := range doc["paths"].(jsonObject) {
		var want []string
		for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
			want = append(want, m[1])
		}
		for method, op := range item.(jsonObject) {
			var got []string
			for _, p := range asList(op.(jsonObject)["parameters"]) {
				if p := p.(jsonObject); p["in"] == "path" {
					if p["required"] != true {
						t.Errorf("%s %s: path parameter %v is not required", method, path, p["name"])
					}
					got = append(got, p["name"].(string))
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s %s: path parameters %v, want %v", method, path, got, want)
			}
		}
	}
}

// TestOpenAPILimitsAreTheHandlers': the bounds the document gives are the constants the
// handlers check.
func TestOpenAPILimitsAreTheHandlers(t *testing.T) {
	doc := openAPI(t)
	prop := func(schema, name string) jsonObject {
		s, _ := resolve(doc, "#/components/schemas/"+schema)
		if s == nil {
			s = jsonObject{}
		}
		p, _ := s["properties"].(jsonObject)[name].(jsonObject)
		return p
	}
	if got := prop("SendEmailRequest", "attachments")["maxItems"]; got != float64(email.MaxAttachments) {
		t.Errorf("attachments maxItems %v, want %d", got, email.MaxAttachments)
	}
	body := requestBodyOf(t, doc, "BulkDeleteContacts")
	ids, _ := body["properties"].(jsonObject)["contactIds"].(jsonObject)
	if ids["minItems"] != float64(1) || ids["maxItems"] != float64(contact.MaxBulk) {
		t.Errorf("contactIds %v, want 1 to %d items", ids, contact.MaxBulk)
	}
	for _, id := range []string{"CreateCampaign", "ScheduleCampaign"} {
		bs, _ := requestBodyOf(t, doc, id)["properties"].(jsonObject)["batchSize"].(jsonObject)
		if bs["minimum"] != float64(1) || bs["maximum"] != float64(campaign.MaxBatchSize) {
			t.Errorf("%s batchSize %v, want 1 to %d", id, bs, campaign.MaxBatchSize)
		}
	}
}

// requestBodyOf is the object schema of an operation's JSON request body.
func requestBodyOf(t *testing.T, doc jsonObject, id string) jsonObject {
	t.Helper()
	s, _ := requestSchema(t, doc, operation(t, doc, id))
	return s
}
