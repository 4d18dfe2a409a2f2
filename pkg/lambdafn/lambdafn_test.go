package lambdafn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/app"
	"github.com/mailroom/mailroom/pkg/awstest"
	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/config"
	"github.com/mailroom/mailroom/pkg/deploy"
	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/lambdafn"
	"github.com/mailroom/mailroom/pkg/lambdafn/withconsole"
	"github.com/mailroom/mailroom/pkg/lambdafn/withdates"
	"github.com/mailroom/mailroom/pkg/lambdafn/withlambda"
	"github.com/mailroom/mailroom/pkg/lambdafn/withmailer"
	"github.com/mailroom/mailroom/pkg/lambdafn/withscheduler"
	"github.com/mailroom/mailroom/pkg/lambdafn/withsecret"
	"github.com/mailroom/mailroom/pkg/lambdafn/withses"
	"github.com/mailroom/mailroom/pkg/schedule"
	"github.com/mailroom/mailroom/pkg/schedule/eventbridge"
	"github.com/mailroom/mailroom/pkg/sesevent"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/dynamo"
	"github.com/mailroom/mailroom/pkg/store/dynamo/streams"
	"github.com/mailroom/mailroom/pkg/team"
	"github.com/mailroom/mailroom/pkg/webhook"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// root is the repository root (this package is pkg/lambdafn).
const root = "../.."

// sampleKey is the API key every HTTP sample in events/ carries.
const sampleKey = "us_samplekey0_0123456789abcdef0123456789abcdef"

// env is what one invocation sees: the ids created by earlier invocations, which the samples
// stand for with their own (a sample's path ids are rewritten to these before it is sent).
type env struct {
	t        *testing.T
	fixture  *fixture
	teamID   int64
	domainID string
	emailID  string
	batchIDs []string
	template string

	// handler is the function of the step running (its checks may invoke it again).
	handler lambda.Handler
	// scheduledID is the scheduled email rescheduled then cancelled, firedID the one the
	// schedule fires, stuckID the one the reconciler finds stuck.
	scheduledID, firedID, stuckID string
	firedPayload                  []byte // what firedID's schedule delivered
	// strandedID is a scheduled email whose schedule was lost, its time long past.
	strandedID string
	// lastChecked is the domain's lastCheckedTime before the domain check.
	lastChecked time.Time

	// bookID is the contact book created, contacts its contacts by email (as listed), contactID
	// the one created, upserted and patched; campaignID the campaign sent to the book, and
	// unsubToken the token of the unsubscribe link in its email to contactID.
	bookID, contactID, campaignID, unsubToken string
	contacts                                  map[string]string
	// confirmToken is the double opt-in link's token of doiContactID (ada).
	confirmToken, doiContactID string

	// webhookID is the webhook created, with its secret (and the one a rotation replaced);
	// webhookCallID a call of its delivery log.
	webhookID, webhookSecret, webhookOldSecret, webhookCallID string
}

// step invokes one function with one of its samples and checks the answer. Steps run in order,
// each Lambda function with its own app (its own cold start), all on one moto table.
type step struct {
	function string
	// sample is the sample's file name in events/ without .json ("": lambdafn.Dir(function)).
	sample string
	// prepare rewrites the sample to the ids of this run (nil: sent as it is).
	prepare func(e *env, raw []byte) []byte
	// check looks at an HTTP response's body; status 200 is checked for every HTTP step.
	check func(e *env, body map[string]any)
	// after looks at a background function's output (required for them).
	after func(e *env, out []byte)
	// page replaces the JSON checks for an HTTP function that answers an HTML page.
	page func(e *env, resp events.APIGatewayV2HTTPResponse)
	// deadline, if set, is the invocation's deadline (a Lambda context has one).
	deadline time.Duration
}

func (s step) sampleName() string {
	if s.sample != "" {
		return s.sample
	}
	return lambdafn.Dir(s.function)
}

func background(function string) bool { return slices.Contains(lambdafn.Background(), function) }

// steps is the tour TestSamples takes, in order.
var steps = slices.Concat(emailSteps, webhookSteps, contactSteps, finalSteps)

// emailSteps: domains, sending, SES events, suppressions, scheduled emails, templates.
var emailSteps = []step{
	{function: "CreateDomain", check: func(e *env, b map[string]any) {
		e.wantField(b, "name", "example.com")
		e.domainID = fmt.Sprint(b["id"])
	}},
	{function: "ListDomains", check: func(e *env, b map[string]any) {
		list := e.list(b, "")
		if len(list) != 1 || fmt.Sprint(list[0]["id"]) != e.domainID {
			e.t.Errorf("domains = %v, want the one created", list)
		}
	}},
	{function: "GetDomain", prepare: pathID("id", func(e *env) string { return e.domainID }),
		check: func(e *env, b map[string]any) { e.wantField(b, "name", "example.com") }},
	{function: "VerifyDomain", prepare: pathID("id", func(e *env) string { return e.domainID }),
		check: func(e *env, b map[string]any) {
			if b["status"] == "" || b["status"] == nil {
				e.t.Errorf("verify answered %v, want a status", b)
			}
			if b["status"] != store.DomainSuccess {
				e.fixture.markVerified(e)
			}
		}},
	{function: "UpdateDomain", prepare: pathID("id", func(e *env) string { return e.domainID }),
		check: func(e *env, b map[string]any) {
			// From now on the worker sends through the <base>-open-click configuration set.
			e.wantField(b, "openTracking", true)
			e.wantField(b, "clickTracking", true)
		}},
	{function: "SendEmail", check: func(e *env, b map[string]any) {
		e.emailID, _ = b["emailId"].(string)
		if !strings.HasPrefix(e.emailID, "em") {
			e.t.Fatalf("send answered %v, want an emailId", b)
		}
		e.fixture.checkQueuedItem(e, e.emailID)
	}},
	{function: "SendBatch", check: func(e *env, b map[string]any) {
		for _, it := range e.list(b, "data") {
			e.batchIDs = append(e.batchIDs, fmt.Sprint(it["emailId"]))
		}
		if len(e.batchIDs) != 2 {
			e.t.Errorf("batch answered %v, want two emailIds", b)
		}
	}},
	{function: "ListEmails", check: func(e *env, b map[string]any) {
		var ids []string
		for _, it := range e.list(b, "data") {
			ids = append(ids, fmt.Sprint(it["id"]))
		}
		for _, id := range append([]string{e.emailID}, e.batchIDs...) {
			if !slices.Contains(ids, id) {
				e.t.Errorf("list %v misses %s", ids, id)
			}
		}
		if n, _ := b["count"].(float64); int(n) != 3 {
			e.t.Errorf("count = %v, want 3", b["count"])
		}
	}},
	{function: "GetEmail", prepare: pathID("emailId", func(e *env) string { return e.emailID }),
		check: func(e *env, b map[string]any) {
			e.wantField(b, "id", e.emailID)
			e.wantField(b, "latestStatus", "QUEUED")
		}},
	{function: lambdafn.SendWorkerFunction, prepare: streamRecord, after: checkSendWorker},
	// SES's events about that email, each sample once (ses-events.json is the delivery).
	sesStep("ses-events-send", store.StatusSent),
	sesStep("ses-events", "DELIVERED"),
	sesStep("ses-events-delivery-delay", "DELIVERY_DELAYED"),
	sesStep("ses-events-open", "OPENED"),
	sesStep("ses-events-click", "CLICKED"),
	sesStep("ses-events-bounce", "BOUNCED"),
	sesStep("ses-events-complaint", "COMPLAINED"),
	sesStep("ses-events-reject", "REJECTED"),
	sesStep("ses-events-rendering-failure", "RENDERING_FAILURE"),
	// The analytics of the domain: the email above counted once for each kind, today (once
	// the stream's counts are applied, as the WebhookEvents function does).
	{function: "GetEmailTimeSeries", prepare: both(settled, queryParam("domainId", func(e *env) string { return e.domainID })),
		check: func(e *env, b map[string]any) {
			result, _ := b["result"].([]any)
			if len(result) != 8 {
				e.t.Fatalf("%d days for days=7, want 8", len(result))
			}
			today, _ := result[7].(map[string]any)
			e.wantField(today, "date", time.Now().UTC().Format("Jan 02"))
			for _, k := range []string{"delivered", "opened", "clicked", "bounced", "complained"} {
				e.wantField(today, k, float64(1))
			}
			if sent, _ := today["sent"].(float64); sent < 1 {
				e.t.Errorf("sent today %v, want at least 1", today["sent"])
			}
			totals, _ := b["totalCounts"].(map[string]any)
			e.wantField(totals, "delivered", float64(1))
		}},
	{function: "GetReputationMetrics", prepare: queryParam("domainId", func(e *env) string { return e.domainID }),
		check: func(e *env, b map[string]any) {
			e.wantField(b, "delivered", float64(1))
			e.wantField(b, "hardBounced", float64(1))
			e.wantField(b, "complained", float64(1))
			e.wantField(b, "bounceRate", float64(100))
			e.wantField(b, "complaintRate", float64(100))
		}},
	{function: "CreateSuppression", check: func(e *env, b map[string]any) {
		e.wantField(b, "email", "ada@example.org")
		e.wantField(b, "reason", store.ReasonManual)
	}},
	{function: "ListSuppressions", check: func(e *env, b map[string]any) {
		// The sample filters by reason MANUAL: the bounce and complaint entries are not listed.
		list := e.list(b, "data")
		if len(list) != 1 || list[0]["email"] != "ada@example.org" || b["count"] != float64(1) {
			e.t.Errorf("suppressions = %v (count %v), want the MANUAL one created", list, b["count"])
		}
	}},
	{function: "DeleteSuppression", check: func(e *env, b map[string]any) {
		e.wantField(b, "success", true)
		if got := e.fixture.suppressions(e, "ada@example.org"); len(got) != 0 {
			e.t.Errorf("still suppressed: %v", got)
		}
	}},
	// A scheduled email, rescheduled, then cancelled.
	{function: "SendEmail", prepare: scheduleAt(time.Hour), check: func(e *env, b map[string]any) {
		e.scheduledID = e.fixture.checkScheduled(e, b)
	}},
	{function: "UpdateEmail", prepare: both(pathID("emailId", func(e *env) string { return e.scheduledID }), scheduleAt(2*time.Hour)),
		check: func(e *env, b map[string]any) {
			e.wantField(b, "emailId", e.scheduledID)
			em := e.fixture.email(e, e.scheduledID)
			if em.Status != store.StatusScheduled || em.ScheduledAt == nil || time.Until(*em.ScheduledAt) < 90*time.Minute {
				e.t.Errorf("email is %s for %v, want SCHEDULED in about 2 hours", em.Status, em.ScheduledAt)
			}
			e.fixture.checkSchedule(e, em, 0)
		}},
	{function: "CancelEmail", prepare: pathID("emailId", func(e *env) string { return e.scheduledID }),
		check: func(e *env, b map[string]any) {
			e.wantField(b, "emailId", e.scheduledID)
			if em := e.fixture.email(e, e.scheduledID); em.Status != store.StatusCancelled {
				e.t.Errorf("email is %s, want CANCELLED", em.Status)
			}
			if _, err := e.fixture.schedule(e, e.scheduledID); err == nil {
				e.t.Error("the cancelled email's schedule still exists")
			}
		}},
	// Another scheduled email, whose schedule fires.
	{function: "SendEmail", prepare: scheduleAt(time.Hour), check: func(e *env, b map[string]any) {
		e.firedID = e.fixture.checkScheduled(e, b)
	}},
	// It fires early (EventBridge Scheduler fires within the minute; a crossed reschedule
	// fires at an old time): the function re-arms the schedule, as the service deleted the one
	// that fired. Then it fires on time.
	{function: lambdafn.ScheduledSendFunction, prepare: earlyFire, after: checkRearmed},
	{function: lambdafn.ScheduledSendFunction, prepare: firePayload, after: checkScheduledSend},
	// An email whose worker died after claiming it, and a scheduled one whose schedule was
	// lost, both found by the reconciler.
	{function: "SendEmail", check: func(e *env, b map[string]any) {
		e.stuckID, _ = b["emailId"].(string)
		e.fixture.makeStuck(e, e.stuckID)
	}},
	{function: "SendEmail", prepare: scheduleAt(time.Hour), check: func(e *env, b map[string]any) {
		e.strandedID = e.fixture.checkScheduled(e, b)
		e.fixture.strand(e, e.strandedID)
	}},
	{function: lambdafn.ReconcilerFunction, after: checkReconciler},
	{function: "CreateTemplate", check: func(e *env, b map[string]any) {
		e.template, _ = b["id"].(string)
		if !strings.HasPrefix(e.template, "tpl_") {
			e.t.Fatalf("create template answered %v", b)
		}
	}},
	{function: "ListTemplates", check: func(e *env, b map[string]any) {
		if list := e.list(b, "data"); len(list) != 1 || list[0]["id"] != e.template {
			e.t.Errorf("templates = %v, want the one created", list)
		}
	}},
	{function: "GetTemplate", prepare: pathID("id", func(e *env) string { return e.template }),
		check: func(e *env, b map[string]any) { e.wantField(b, "name", "order-shipped") }},
	{function: "UpdateTemplate", prepare: pathID("id", func(e *env) string { return e.template }),
		check: func(e *env, b map[string]any) {
			e.wantField(b, "subject", "Good news: order {{order}} has shipped")
		}},
	{function: "DeleteTemplate", prepare: pathID("id", func(e *env) string { return e.template }),
		check: func(e *env, b map[string]any) { e.wantField(b, "success", true) }},
}

// finalSteps check every domain and delete the domain, after everything that sends from it.
var finalSteps = []step{
	{function: lambdafn.AuthorizerFunction, after: checkAuthorizer},
	{function: lambdafn.DomainCheckFunction,
		prepare: func(e *env, raw []byte) []byte {
			if d := e.fixture.domain(e); d.LastCheckedTime != nil {
				e.lastChecked = *d.LastCheckedTime
			}
			return raw
		},
		after: func(e *env, out []byte) {
			if d := e.fixture.domain(e); d.LastCheckedTime == nil || !d.LastCheckedTime.After(e.lastChecked) {
				e.t.Errorf("lastCheckedTime %v, want after %v", d.LastCheckedTime, e.lastChecked)
			}
		}},
	consoleStep,
	{function: "DeleteDomain", prepare: pathID("id", func(e *env) string { return e.domainID }),
		check: func(e *env, b map[string]any) { e.wantField(b, "success", true) }},
}

// queryParam sets a query parameter of an HTTP sample.
func queryParam(name string, value func(*env) string) func(*env, []byte) []byte {
	return func(e *env, raw []byte) []byte {
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			e.t.Fatal(err)
		}
		if _, ok := ev.QueryStringParameters[name]; !ok {
			e.t.Fatalf("sample has no %s query parameter", name)
		}
		ev.QueryStringParameters[name] = value(e)
		q := url.Values{}
		for k, v := range ev.QueryStringParameters {
			q.Set(k, v)
		}
		ev.RawQueryString = q.Encode()
		b, err := json.Marshal(ev)
		if err != nil {
			e.t.Fatal(err)
		}
		return b
	}
}

// both applies two rewrites in turn.
// settled applies the counts of the table's stream so far, as the WebhookEvents function
// does on AWS (moto runs no event source mapping).
func settled(e *env, raw []byte) []byte {
	st := dynamo.New(e.fixture.db, e.fixture.vars["TABLE_NAME"])
	st.ReadStream(streams.New(dynamodbstreams.NewFromConfig(e.fixture.awsCfg)))
	if err := st.Settle(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	return raw
}

func both(a, b func(*env, []byte) []byte) func(*env, []byte) []byte {
	return func(e *env, raw []byte) []byte { return b(e, a(e, raw)) }
}

// scheduleAt sets the body's scheduledAt to d from now (the samples' dates are in the past).
func scheduleAt(d time.Duration) func(*env, []byte) []byte {
	return rewriteBody(func(_ *env, body map[string]any) {
		body["scheduledAt"] = time.Now().Add(d).UTC().Format(time.RFC3339)
	})
}

// rewriteBody changes an HTTP sample's JSON object body.
func rewriteBody(change func(e *env, body map[string]any)) func(*env, []byte) []byte {
	return func(e *env, raw []byte) []byte {
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			e.t.Fatal(err)
		}
		var body map[string]any
		if err := json.Unmarshal([]byte(ev.Body), &body); err != nil {
			e.t.Fatal(err)
		}
		change(e, body)
		b, _ := json.Marshal(body)
		ev.Body = string(b)
		ev.Headers["content-length"] = fmt.Sprint(len(b))
		out, err := json.Marshal(ev)
		if err != nil {
			e.t.Fatal(err)
		}
		return out
	}
}

// sesStep replays one SES event sample about the email SendEmail queued and the worker sent,
// and checks that its history has the event's status.
func sesStep(sample, status string) step {
	return step{function: lambdafn.SESEventsFunction, sample: sample, prepare: sesEvent,
		after: func(e *env, out []byte) {
			if string(out) != "null" {
				e.t.Errorf("output %s", out)
			}
			if n := e.fixture.historyCount(e, e.emailID, status); n != 1 {
				e.t.Errorf("history has %s %d times, want once", status, n)
			}
			// A redelivery (EventBridge is at least once) is recorded once.
			if _, err := e.handler.Invoke(context.Background(), sesEvent(e, readSample(e.t, sample))); err != nil {
				e.t.Fatalf("replay: %v", err)
			}
			if n := e.fixture.historyCount(e, e.emailID, status); n != 1 {
				e.t.Errorf("after a replay the history has %s %d times, want once", status, n)
			}
			// A hard bounce or a complaint suppresses the address it names.
			var ev struct {
				Detail sesevent.Event `json:"detail"`
			}
			if err := json.Unmarshal(readSample(e.t, sample), &ev); err != nil {
				e.t.Fatal(err)
			}
			reason := ""
			switch {
			case ev.Detail.Bounce != nil && ev.Detail.Bounce.BounceType == sesevent.BounceTypePermanent:
				reason = store.ReasonHardBounce
			case ev.Detail.Complaint != nil:
				reason = store.ReasonComplaint
			}
			if reason == "" {
				return
			}
			addrs := ev.Detail.Recipients()
			got := e.fixture.suppressions(e, addrs...)
			for _, a := range addrs {
				if s, ok := got[a]; !ok || s.Reason != reason || s.EmailID != e.emailID {
					e.t.Errorf("suppression of %s = %+v, want %s from %s", a, s, reason, e.emailID)
				}
			}
		}}
}

// sesEvent points an SES event sample at the email the worker sent: its X-Usesend-Email-ID
// header and SES message id.
func sesEvent(e *env, raw []byte) []byte {
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		e.t.Fatal(err)
	}
	em := e.fixture.email(e, e.emailID)
	if em.MessageID == "" {
		e.t.Fatalf("email %s has no SES message id", em.ID)
	}
	mail, _ := path(ev, "detail", "mail").(map[string]any)
	if mail == nil {
		e.t.Fatal("sample has no detail.mail")
	}
	mail["messageId"] = em.MessageID
	if ch, ok := mail["commonHeaders"].(map[string]any); ok {
		ch["messageId"] = em.MessageID
	}
	found := false
	for _, h := range mail["headers"].([]any) {
		h := h.(map[string]any)
		if strings.EqualFold(fmt.Sprint(h["name"]), sesevent.EmailIDHeader) {
			h["value"], found = em.ID, true
		}
	}
	if !found {
		e.t.Fatalf("sample has no %s header", sesevent.EmailIDHeader)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func path(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// firePayload is what the fired email's schedule delivers (the sample's shape, checked).
func firePayload(e *env, raw []byte) []byte {
	var p map[string]any
	if err := json.Unmarshal(raw, &p); err != nil {
		e.t.Fatal(err)
	}
	if len(p) != 2 || p["emailId"] == nil || p["scheduledAt"] == nil {
		e.t.Fatalf("scheduled-send sample %v, want {emailId, scheduledAt}", p)
	}
	sch, err := e.fixture.schedule(e, e.firedID)
	if err != nil {
		e.t.Fatalf("schedule of %s: %v", e.firedID, err)
	}
	// The scheduler fires at the email's time; the test cannot wait an hour, so the email's
	// time is moved into the past, as if it had come (the target goes by the email's time).
	past := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	if _, err := e.fixture.admin.Store.UpdateEmail(context.Background(), e.firedID, func(x *store.Email) ([]store.Event, error) {
		x.ScheduledAt = &past
		return nil, nil
	}); err != nil {
		e.t.Fatal(err)
	}
	e.firedPayload = []byte(aws.ToString(sch.Target.Input))
	return e.firedPayload
}

// checkAuthorizer: the authorizer admits the sample key with its team, and the route's function
// answers from that verdict alone; a wrong key is admitted with a rejection that the function
// answers in the API's error envelope.
func checkAuthorizer(e *env, out []byte) {
	ctx := context.Background()
	var resp events.APIGatewayV2CustomAuthorizerSimpleResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		e.t.Fatalf("response %s: %v", out, err)
	}
	if !resp.IsAuthorized || resp.Context["teamId"] != fmt.Sprint(e.teamID) || resp.Context["permission"] != "FULL" {
		e.t.Fatalf("authorizer answered %s, want the sample key's team %d, FULL", out, e.teamID)
	}
	// API Gateway passes the context to the route's function: ListDomains with the verdict
	// and a header that would not authenticate by itself answers the team's domains.
	listDomains := e.fixture.handler(e.t, "ListDomains")
	withVerdict := func(verdict map[string]any, header string) events.APIGatewayV2HTTPResponse {
		var req events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(readSample(e.t, "ListDomains"), &req); err != nil {
			e.t.Fatal(err)
		}
		req.Headers["authorization"] = header
		req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: verdict}
		raw, _ := json.Marshal(req)
		out, err := listDomains.Invoke(ctx, raw)
		if err != nil {
			e.t.Fatal(err)
		}
		var resp events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			e.t.Fatal(err)
		}
		return resp
	}
	if r := withVerdict(resp.Context, "Bearer not-checked-again"); r.StatusCode != 200 || !strings.Contains(r.Body, `"example.com"`) {
		e.t.Errorf("ListDomains with the verdict: %d %s", r.StatusCode, r.Body)
	}
	// A wrong key: admitted with a 403 verdict, answered by the function in the envelope.
	var req events.APIGatewayV2CustomAuthorizerV2Request
	if err := json.Unmarshal(readSample(e.t, lambdafn.AuthorizerFunction), &req); err != nil {
		e.t.Fatal(err)
	}
	req.Headers["authorization"] = "Bearer us_samplekey0_ffffffffffffffffffffffffffffffff"
	raw, _ := json.Marshal(req)
	out, err := e.handler.Invoke(ctx, raw)
	if err != nil {
		e.t.Fatal(err)
	}
	resp = events.APIGatewayV2CustomAuthorizerSimpleResponse{}
	if err := json.Unmarshal(out, &resp); err != nil || !resp.IsAuthorized || resp.Context["status"] != "403" {
		e.t.Fatalf("wrong key: authorizer answered %s, want admitted with a 403 verdict", out)
	}
	if r := withVerdict(resp.Context, req.Headers["authorization"]); r.StatusCode != 403 ||
		!strings.Contains(r.Body, `{"error":{"code":"FORBIDDEN","message":"Invalid API token"}}`) {
		e.t.Errorf("ListDomains with a 403 verdict: %d %s", r.StatusCode, r.Body)
	}
	// A verdict that is not the authorizer's shape is refused, never trusted.
	if r := withVerdict(map[string]any{"teamId": "x"}, "Bearer "+sampleKey); r.StatusCode != 500 {
		e.t.Errorf("malformed verdict: %d %s, want 500", r.StatusCode, r.Body)
	}
}

// strand leaves a scheduled email as a lost schedule would: its time passed 10 minutes ago and
// no schedule will fire for it.
func (f *fixture) strand(e *env, id string) {
	sch, err := f.schedule(e, id)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := scheduler.NewFromConfig(f.awsCfg).DeleteSchedule(context.Background(), &scheduler.DeleteScheduleInput{
		Name: sch.Name, GroupName: sch.GroupName,
	}); err != nil {
		e.t.Fatal(err)
	}
	past := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Second)
	if _, err := f.admin.Store.UpdateEmail(context.Background(), id, func(x *store.Email) ([]store.Event, error) {
		x.ScheduledAt = &past
		return nil, nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

// checkReconciler: the stuck email was sent; the stranded scheduled one was queued once, with
// an event saying why, and a second run changes nothing.
func checkReconciler(e *env, out []byte) {
	if string(out) != "null" {
		e.t.Errorf("output %s", out)
	}
	// The reconciler sends nothing itself: the email whose worker died goes back to QUEUED,
	// a new stream record for the send worker, which then sends it.
	em := e.fixture.email(e, e.stuckID)
	if em.Status != store.StatusQueued || em.ClaimedAt != nil || em.MessageID != "" {
		e.t.Fatalf("stuck email is %s (claim %v, message id %q), want QUEUED again, unsent", em.Status, em.ClaimedAt, em.MessageID)
	}
	e.fixture.checkQueuedItem(e, e.stuckID)
	queued := e.emailID
	e.emailID = e.stuckID
	rec := streamRecord(e, readSample(e.t, lambdafn.SendWorkerFunction))
	e.emailID = queued
	if _, err := e.fixture.handler(e.t, lambdafn.SendWorkerFunction).Invoke(context.Background(), rec); err != nil {
		e.t.Fatal(err)
	}
	if em := e.fixture.email(e, e.stuckID); em.Status != store.StatusSent || em.MessageID == "" {
		e.t.Errorf("requeued email is %s (message id %q) after the worker, want SENT", em.Status, em.MessageID)
	}
	st := e.fixture.email(e, e.strandedID)
	if st.Status != store.StatusQueued {
		e.t.Fatalf("stranded email is %s, want QUEUED", st.Status)
	}
	e.fixture.checkQueuedItem(e, e.strandedID) // the stream record the worker is fed by
	if n := e.fixture.historyCount(e, e.strandedID, store.StatusQueued); n != 1 {
		e.t.Errorf("stranded email has %d QUEUED events, want 1", n)
	}
	if _, err := e.handler.Invoke(context.Background(), readSample(e.t, lambdafn.ReconcilerFunction)); err != nil {
		e.t.Fatalf("second run: %v", err)
	}
	if n := e.fixture.historyCount(e, e.strandedID, store.StatusQueued); n != 1 {
		e.t.Errorf("after a second run the stranded email has %d QUEUED events, want 1", n)
	}
}

// earlyFire is the schedule's payload as it fires before the email's time; the service has
// deleted the schedule (ActionAfterCompletion: DELETE).
func earlyFire(e *env, _ []byte) []byte {
	sch, err := e.fixture.schedule(e, e.firedID)
	if err != nil {
		e.t.Fatalf("schedule of %s: %v", e.firedID, err)
	}
	_, err = scheduler.NewFromConfig(e.fixture.awsCfg).DeleteSchedule(context.Background(), &scheduler.DeleteScheduleInput{
		Name: sch.Name, GroupName: sch.GroupName,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return []byte(aws.ToString(sch.Target.Input))
}

// checkRearmed: the early fire left the email SCHEDULED and put its schedule back in the
// stack's group, for the email's time, with its target, role and dead-letter queue, using only
// what the function's ports give it.
func checkRearmed(e *env, out []byte) {
	if string(out) != "null" {
		e.t.Errorf("output %s", out)
	}
	em := e.fixture.email(e, e.firedID)
	if em.Status != store.StatusScheduled {
		e.t.Fatalf("early-fired email is %s, want SCHEDULED", em.Status)
	}
	e.fixture.checkSchedule(e, em, 1) // a new name: the one that fired is the service's to delete
}

func checkScheduledSend(e *env, out []byte) {
	ctx := context.Background()
	if string(out) != "null" {
		e.t.Errorf("output %s", out)
	}
	em := e.fixture.email(e, e.firedID)
	if em.Status != store.StatusQueued || em.LatestStatus != store.StatusQueued {
		e.t.Errorf("fired email is %s (latest %s), want QUEUED", em.Status, em.LatestStatus)
	}
	e.fixture.checkQueuedItem(e, e.firedID)
	// Fired again (the scheduler is at least once): nothing changes.
	events := e.fixture.historyCount(e, e.firedID, "")
	if _, err := e.handler.Invoke(ctx, e.firedPayload); err != nil {
		e.t.Errorf("second fire: %v", err)
	}
	if n := e.fixture.historyCount(e, e.firedID, ""); n != events {
		e.t.Errorf("second fire: %d events, want %d", n, events)
	}
	// The cancelled email's schedule, had it fired anyway: nothing to do.
	at, _ := json.Marshal(time.Now().UTC().Truncate(time.Second))
	stale := []byte(`{"emailId":"` + e.scheduledID + `","scheduledAt":` + string(at) + `}`)
	if _, err := e.handler.Invoke(ctx, stale); err != nil {
		e.t.Errorf("stale fire: %v", err)
	}
	if em := e.fixture.email(e, e.scheduledID); em.Status != store.StatusCancelled {
		e.t.Errorf("cancelled email is now %s", em.Status)
	}
	// An email not written (yet): an error, so that the scheduler retries; long past its time
	// (email.NotWrittenGrace), the schedule is dropped instead of ending in the dead letters.
	if _, err := e.handler.Invoke(ctx, []byte(`{"emailId":"emnotwrittenyet00000000000","scheduledAt":`+string(at)+`}`)); err == nil {
		e.t.Error("firing an unknown email succeeded, want an error (retry)")
	}
	if _, err := e.handler.Invoke(ctx, []byte(`{"emailId":"emnotwrittenyet00000000000","scheduledAt":"2025-03-13T09:00:00Z"}`)); err != nil {
		e.t.Errorf("firing an unknown email long past its time: %v, want nil (dropped)", err)
	}
}

func (e *env) wantField(b map[string]any, k string, want any) {
	e.t.Helper()
	if b[k] != want {
		e.t.Errorf("%s = %#v, want %#v (body %v)", k, b[k], want, b)
	}
}

// list returns b[key] (or the body itself, key "") as a list of objects.
func (e *env) list(b map[string]any, key string) []map[string]any {
	e.t.Helper()
	var v any = b["_array"]
	if key != "" {
		v = b[key]
	}
	items, ok := v.([]any)
	if !ok {
		e.t.Fatalf("%q is not a list: %v", key, b)
	}
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i], _ = it.(map[string]any)
	}
	return out
}

// pathID rewrites the sample's path parameter (and the same segment of its paths) to an id
// created earlier in the run.
func pathID(param string, id func(*env) string) func(*env, []byte) []byte {
	return func(e *env, raw []byte) []byte {
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			e.t.Fatal(err)
		}
		old, now := ev.PathParameters[param], id(e)
		if old == "" || now == "" {
			e.t.Fatalf("sample has no %s path parameter, or no id to put there", param)
		}
		ev.PathParameters[param] = now
		ev.RawPath = strings.Replace(ev.RawPath, "/"+old, "/"+now, 1)
		ev.RequestContext.HTTP.Path = strings.Replace(ev.RequestContext.HTTP.Path, "/"+old, "/"+now, 1)
		b, err := json.Marshal(ev)
		if err != nil {
			e.t.Fatal(err)
		}
		return b
	}
}

// streamRecord points the sample stream record at the email SendEmail queued, with the item's
// real image, and checks that the sample's image has the real item's shape.
func streamRecord(e *env, raw []byte) []byte {
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		e.t.Fatal(err)
	}
	if len(ev.Records) != 1 {
		e.t.Fatalf("the send worker sample has %d records, want 1", len(ev.Records))
	}
	item := e.fixture.emailItem(e, e.emailID)
	image := streamImage(e.t, item)
	rec := &ev.Records[0]
	for name, v := range rec.Change.NewImage {
		got, ok := image[name]
		if !ok {
			e.t.Errorf("sample NewImage has %s, which an email item does not", name)
		} else if got.DataType() != v.DataType() {
			e.t.Errorf("sample NewImage %s has type %v, an email item %v", name, v.DataType(), got.DataType())
		}
	}
	for _, name := range []string{"PK", "SK", "Status"} {
		if _, ok := rec.Change.NewImage[name]; !ok {
			e.t.Errorf("sample NewImage lacks %s", name)
		}
	}
	rec.Change.Keys = map[string]events.DynamoDBAttributeValue{"PK": image["PK"], "SK": image["SK"]}
	rec.Change.NewImage = image
	b, err := json.Marshal(ev)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// streamImage converts an item read with the SDK into a stream record's image (through the
// attribute values' common JSON form).
func streamImage(t *testing.T, item map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	t.Helper()
	out := map[string]events.DynamoDBAttributeValue{}
	for name, v := range item {
		b, err := json.Marshal(attrJSON(v))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var av events.DynamoDBAttributeValue
		if err := json.Unmarshal(b, &av); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = av
	}
	return out
}

func attrJSON(v types.AttributeValue) map[string]any {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *types.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *types.AttributeValueMemberB:
		return map[string]any{"B": v.Value}
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *types.AttributeValueMemberNULL:
		return map[string]any{"NULL": true}
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": v.Value}
	case *types.AttributeValueMemberNS:
		return map[string]any{"NS": v.Value}
	case *types.AttributeValueMemberBS:
		return map[string]any{"BS": v.Value}
	case *types.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			l[i] = attrJSON(e)
		}
		return map[string]any{"L": l}
	case *types.AttributeValueMemberM:
		m := make(map[string]any, len(v.Value))
		for k, e := range v.Value {
			m[k] = attrJSON(e)
		}
		return map[string]any{"M": m}
	}
	panic(fmt.Sprintf("attribute value %T", v))
}

// fixture is the moto side of the run.
type fixture struct {
	srv    *awstest.Server
	awsCfg aws.Config
	cfg    config.Config
	db     *dynamodb.Client
	admin  *app.App // for setup and for reading results, not for invocations
	vars   map[string]string
	// invocations are the direct Lambda invocations the functions made (moto runs none).
	invocations awstest.Invocations
	// metrics holds the metric lines the functions wrote (their standard output on Lambda).
	metrics syncBuffer
}

// syncBuffer is a bytes.Buffer safe for the concurrent writers of a function's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// take returns what was written since the last take.
func (b *syncBuffer) take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	b.buf.Reset()
	return s
}

var tableSeq atomic.Int64

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := awstest.Shared(t)
	f := &fixture{srv: srv, awsCfg: srv.Config(t)}
	f.invocations.Install(&f.awsCfg)
	ctx := context.Background()
	f.db = dynamodb.NewFromConfig(f.awsCfg)
	table := fmt.Sprintf("lambdafn-%d-%d", time.Now().UnixNano(), tableSeq.Add(1))
	if err := dynamo.EnsureTable(ctx, f.db, table); err != nil {
		t.Fatal(err)
	}
	// The configuration sets sends name, as template.yaml creates them: the base name and one
	// per combination of tracking flags.
	confSet := table + "-sends"
	ses := sesv2.NewFromConfig(f.awsCfg)
	for _, suffix := range []string{"", "-open", "-click", "-open-click"} {
		if _, err := ses.CreateConfigurationSet(ctx, &sesv2.CreateConfigurationSetInput{ConfigurationSetName: aws.String(confSet + suffix)}); err != nil {
			t.Fatalf("create configuration set: %v", err)
		}
	}
	// The schedule group, and what template.yaml passes the functions that schedule.
	group := table + "-schedules"
	if err := eventbridge.EnsureGroup(ctx, scheduler.NewFromConfig(f.awsCfg), group); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"BACKEND": "aws", "TABLE_NAME": table, "SES_CONFIGURATION_SET": confSet, "LOG_LEVEL": "warn",
		"SES_MAX_SEND_RATE":   "1000", // moto has no GetAccount; test/pacing reads it from an SES stand-in
		"STACK_NAME":          "mailroom-test",
		"SCHEDULE_GROUP":      group,
		"SCHEDULE_TARGET_ARN": "arn:aws:lambda:us-east-1:123456789012:function:mailroom-ScheduledSendFunction-8XK2QH4M1ZP7",
		"SCHEDULE_ROLE_ARN":   "arn:aws:iam::123456789012:role/mailroom-SchedulerRole-3JQ9W6T2RB5N",
		"SCHEDULE_DLQ_ARN":    "arn:aws:sqs:us-east-1:123456789012:mailroom-ScheduleDeadLetterQueue-5TY7U1I3O9PA",
		"CAMPAIGN_TARGET_ARN": "arn:aws:lambda:us-east-1:123456789012:function:mailroom-prod-campaign-batch",
		"PUBLIC_URL":          "https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com",
		// Every HTTP step counts its request in the team's rate-limit item (high enough never to
		// refuse one): a read-only function may write that and nothing else.
		"API_RATE_LIMIT": "1000",
		// The unsubscribe keys: a secret in moto, as template.yaml makes it (a single key).
		"UNSUBSCRIBE_SECRET_ID": table + "/unsubscribe",
	}
	if _, err := secretsmanager.NewFromConfig(f.awsCfg).CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String(table + "/unsubscribe"), SecretString: aws.String(fixtureUnsubscribeKey)}); err != nil {
		t.Fatal(err)
	}
	f.vars = vars
	cfg, err := config.FromEnv(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	f.cfg = cfg
	f.admin, err = app.NewWithAWS(ctx, f.cfg, f.awsCfg, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.admin.Close(context.Background()) })
	return f
}

// plugValues are the plugs by the names functions' mains pass them (deploy.PlugNames).
var plugValues = map[string]lambdafn.Plug{
	"withmailer.Mailer": withmailer.Mailer, "withses.Identities": withses.Identities,
	"withscheduler.Emails": withscheduler.Emails, "withscheduler.Campaigns": withscheduler.Campaigns,
	"withdates.English": withdates.English, "withlambda.CampaignInvoke": withlambda.CampaignInvoke,
	"withsecret.Unsubscribe": withsecret.Unsubscribe, "withconsole.Pages": withconsole.Pages,
}

// fixtureUnsubscribeKey is the unsubscribe secret's first value in the fixture.
const fixtureUnsubscribeKey = "0f3c9a7e5b1d4c2a8e6f0b9d7c5a3e1f2b4d6f8a0c2e4a6b8d0f2a4c6e8b0d2f"

// handler builds the function as its main does (lambdafn.Main with the plugs of its main.go,
// deploy.PlugNames): from the variables its ports read only, with every AWS call outside its
// ports refused.
func (f *fixture) handler(t *testing.T, function string) lambda.Handler {
	t.Helper()
	var plugs []lambdafn.Plug
	for _, n := range deploy.PlugNames(function) {
		p, ok := plugValues[n]
		if !ok {
			t.Fatalf("no plug %s", n)
		}
		plugs = append(plugs, p)
	}
	w, err := lambdafn.Build(context.Background(), function, func(k string) string { return f.vars[k] }, f.awsCfg,
		lambdafn.BuildOptions{MetricsOut: &f.metrics, WebhookPolicy: &webhook.Policy{AllowLocal: true}}, plugs...)
	if err != nil {
		t.Fatal(err)
	}
	return w.Handler()
}

func (f *fixture) email(e *env, id string) store.Email {
	e.t.Helper()
	em, err := f.admin.Store.GetEmail(context.Background(), id)
	if err != nil {
		e.t.Fatalf("email %s: %v", id, err)
	}
	return em
}

// historyCount counts the email's events with status ("": all of them).
func (f *fixture) historyCount(e *env, id, status string) int {
	e.t.Helper()
	_, evs, err := f.admin.Store.GetEmailDetail(context.Background(), id)
	if err != nil {
		e.t.Fatalf("email %s: %v", id, err)
	}
	n := 0
	for _, ev := range evs {
		if status == "" || ev.Status == status {
			n++
		}
	}
	return n
}

func (f *fixture) suppressions(e *env, addrs ...string) map[string]store.Suppression {
	e.t.Helper()
	got, err := f.admin.Store.GetSuppressions(context.Background(), e.teamID, addrs)
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

func (f *fixture) domain(e *env) store.Domain {
	e.t.Helper()
	var id int64
	if _, err := fmt.Sscan(e.domainID, &id); err != nil {
		e.t.Fatal(err)
	}
	d, err := f.admin.Store.GetDomain(context.Background(), e.teamID, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// schedule reads the newest schedule of an email's current time (the last re-arm, if any)
// from moto's EventBridge Scheduler.
func (f *fixture) schedule(e *env, emailID string) (*scheduler.GetScheduleOutput, error) {
	e.t.Helper()
	em, err := f.admin.Store.GetEmail(context.Background(), emailID)
	if err != nil || em.ScheduledAt == nil {
		e.t.Fatalf("email %s: %v, scheduled at %v", emailID, err, em.ScheduledAt)
	}
	for rearm := schedule.MaxRearms; ; rearm-- {
		out, err := scheduler.NewFromConfig(f.awsCfg).GetSchedule(context.Background(), &scheduler.GetScheduleInput{
			Name: aws.String(email.ScheduleName(emailID, *em.ScheduledAt, rearm)), GroupName: aws.String(f.cfg.ScheduleGroup),
		})
		if err == nil || rearm == 0 {
			return out, err
		}
	}
}

// checkScheduled: a send with a future scheduledAt stored the email SCHEDULED and created its
// one-time schedule; it returns the email's id.
func (f *fixture) checkScheduled(e *env, b map[string]any) string {
	id, _ := b["emailId"].(string)
	em := f.email(e, id)
	if em.Status != store.StatusScheduled || em.ScheduledAt == nil {
		e.t.Fatalf("email %s is %s, want SCHEDULED", id, em.Status)
	}
	f.checkSchedule(e, em, 0)
	return id
}

// checkSchedule: the email's schedule (re-armed rearm times) fires at its scheduledAt, once,
// the scheduled-send function with the payload it expects, as the template's role, with the
// dead-letter queue.
func (f *fixture) checkSchedule(e *env, em store.Email, rearm int) {
	e.t.Helper()
	sch, err := scheduler.NewFromConfig(f.awsCfg).GetSchedule(context.Background(), &scheduler.GetScheduleInput{
		Name: aws.String(email.ScheduleName(em.ID, *em.ScheduledAt, rearm)), GroupName: aws.String(f.cfg.ScheduleGroup),
	})
	if err != nil {
		e.t.Fatalf("schedule of %s: %v", em.ID, err)
	}
	// EventBridge Scheduler fires within the minute of an at() time: the schedule is for the
	// first whole minute not before the email's time, so it never fires early.
	at := em.ScheduledAt.UTC()
	if at.Second() != 0 || at.Nanosecond() != 0 {
		at = at.Truncate(time.Minute).Add(time.Minute)
	}
	if want := "at(" + at.Format("2006-01-02T15:04:05") + ")"; aws.ToString(sch.ScheduleExpression) != want {
		e.t.Errorf("schedule expression %q, want %q", aws.ToString(sch.ScheduleExpression), want)
	}
	tg := sch.Target
	if aws.ToString(tg.Arn) != f.cfg.ScheduleTargetARN || aws.ToString(tg.RoleArn) != f.cfg.ScheduleRoleARN ||
		tg.DeadLetterConfig == nil || aws.ToString(tg.DeadLetterConfig.Arn) != f.cfg.ScheduleDLQARN {
		e.t.Errorf("schedule target %+v, want the configured function, role and queue", tg)
	}
	var p struct {
		EmailID     string `json:"emailId"`
		ScheduledAt string `json:"scheduledAt"`
		Rearm       int    `json:"rearm"`
	}
	if err := json.Unmarshal([]byte(aws.ToString(tg.Input)), &p); err != nil || p.EmailID != em.ID ||
		p.ScheduledAt != em.ScheduledAt.UTC().Format(time.RFC3339) || p.Rearm != rearm {
		e.t.Errorf("schedule input %s (%v), want this email and its scheduledAt", aws.ToString(tg.Input), err)
	}
}

// makeStuck leaves an email as a worker that died after claiming it an hour ago would.
func (f *fixture) makeStuck(e *env, id string) {
	hourAgo := time.Now().Add(-time.Hour).UTC()
	_, err := f.admin.Store.UpdateEmail(context.Background(), id, func(em *store.Email) ([]store.Event, error) {
		em.Status, em.ClaimedAt, em.UpdatedAt = store.StatusSending, &hourAgo, hourAgo
		return nil, nil
	})
	if err != nil {
		e.t.Fatalf("make %s stuck: %v", id, err)
	}
}

// markVerified makes the domain usable for sending. moto registers the SES identity but has no
// DNS to check, so it may leave it unverified (PENDING): the test then records SUCCESS in the
// store, as a later verify against real SES would.
func (f *fixture) markVerified(e *env) {
	var id int64
	if _, err := fmt.Sscan(e.domainID, &id); err != nil {
		e.t.Fatal(err)
	}
	_, err := f.admin.Store.UpdateDomain(context.Background(), e.teamID, id, func(d *store.Domain) error {
		d.Status = store.DomainSuccess
		d.IsVerifying = false
		return nil
	})
	if err != nil {
		e.t.Fatalf("mark domain verified: %v", err)
	}
}

// emailItem reads an email's item as DynamoDB stores it.
func (f *fixture) emailItem(e *env, id string) map[string]types.AttributeValue {
	return f.item(e, "EMAIL#"+id, "EMAIL")
}

// item reads an item of the table.
func (f *fixture) item(e *env, pk, sk string) map[string]types.AttributeValue {
	out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      aws.String(f.cfg.TableName),
		Key:            map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: pk}, "SK": &types.AttributeValueMemberS{Value: sk}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil || out.Item == nil {
		e.t.Fatalf("item %s %s: %v (item %v)", pk, sk, err, out)
	}
	return out.Item
}

// checkQueuedItem: the send wrote an email item whose stream image passes template.yaml's
// filter (pkg/deploy checks the filter against events/send-worker.json, whose shape this run
// checks against the real item).
func (f *fixture) checkQueuedItem(e *env, id string) {
	item := f.emailItem(e, id)
	if s, ok := item["Status"].(*types.AttributeValueMemberS); !ok || s.Value != store.StatusQueued {
		e.t.Errorf("email item Status = %#v, want S QUEUED", item["Status"])
	}
}

// readSample reads events/<name>.json; name is a sample's name or a function's.
func readSample(t *testing.T, name string) []byte {
	t.Helper()
	if !strings.Contains(name, "-") {
		name = lambdafn.Dir(name)
	}
	b, err := os.ReadFile(filepath.Join(root, "events", name+".json"))
	if err != nil {
		t.Fatalf("sample %s: %v", name, err)
	}
	return b
}

// TestSamples invokes every function's handler, through the Lambda runtime's JSON handling,
// with its sample from events/ against moto.
func TestSamples(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, teamID, err := (&team.Admin{Store: f.admin.Store, Now: time.Now}).Bootstrap(ctx, sampleKey)
	if err != nil {
		t.Fatalf("bootstrap the sample key: %v", err)
	}
	e := &env{fixture: f, teamID: teamID}
	invoked := map[string]bool{}
	for _, s := range steps {
		ok := t.Run(s.function+"/"+s.sampleName(), func(t *testing.T) {
			e.t = t
			h := f.handler(t, s.function)
			e.handler = h
			raw := readSample(t, s.sampleName())
			if s.prepare != nil {
				raw = s.prepare(e, raw)
			}
			ctx := ctx
			if s.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, s.deadline)
				defer cancel()
			}
			out, err := h.Invoke(ctx, raw)
			if err != nil {
				t.Fatalf("invoke: %v", err)
			}
			invoked[s.function] = true
			if background(s.function) {
				if s.after == nil {
					t.Fatal("a background function's step needs an after check")
				}
				s.after(e, out)
				return
			}
			var resp events.APIGatewayV2HTTPResponse
			if err := json.Unmarshal(out, &resp); err != nil {
				t.Fatalf("response: %v\n%s", err, out)
			}
			if resp.StatusCode != 200 {
				t.Fatalf("status %d, want 200: %s", resp.StatusCode, resp.Body)
			}
			// Counted against the team's rate limit, through the function's own grant.
			if lambdafn.PortsOf(s.function).RateLimited {
				if got := resp.Headers["X-Ratelimit-Limit"]; got != "1000" {
					t.Errorf("X-RateLimit-Limit %q, want 1000 (the limiter failed open?)", got)
				}
			}
			if s.page != nil {
				s.page(e, resp)
				return
			}
			if ct := resp.Headers["Content-Type"]; ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			var body map[string]any
			if strings.HasPrefix(resp.Body, "[") {
				var arr []any
				err = json.Unmarshal([]byte(resp.Body), &arr)
				body = map[string]any{"_array": arr}
			} else {
				err = json.Unmarshal([]byte(resp.Body), &body)
			}
			if err != nil {
				t.Fatalf("body: %v\n%s", err, resp.Body)
			}
			if s.check != nil {
				s.check(e, body)
			}
		})
		if !ok {
			break // later steps use what this one created
		}
	}
	for _, n := range lambdafn.Names() {
		if !invoked[n] {
			t.Errorf("%s was not invoked", n)
		}
	}
}

func checkSendWorker(e *env, out []byte) {
	t, f := e.t, e.fixture
	var resp events.DynamoDBEventResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("response: %v\n%s", err, out)
	}
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %v", resp.BatchItemFailures)
	}
	em, err := f.admin.Store.GetEmail(context.Background(), e.emailID)
	if err != nil {
		t.Fatal(err)
	}
	if em.Status != store.StatusSent || em.MessageID == "" {
		t.Errorf("email %s is %s (message id %q), want SENT with a message id", em.ID, em.Status, em.MessageID)
	}
	// The send counted in the dashboard's metric, for this stack.
	if m := f.metrics.take(); !strings.Contains(m, `"EmailsSent":1`) || !strings.Contains(m, `"Stack":"mailroom-test"`) {
		t.Errorf("metric lines %q, want EmailsSent 1 for the stack", m)
	}
}

// TestSamplesCoverFunctions: every directory in functions/ has a sample in events/ and a step
// of TestSamples, and every sample is a function's and is invoked by a step: events/<dir>.json,
// or events/<dir>-<variant>.json for a function with several (the SES event types).
func TestSamplesCoverFunctions(t *testing.T) {
	dirs, err := os.ReadDir(filepath.Join(root, "functions"))
	if err != nil {
		t.Fatal(err)
	}
	stepDirs := map[string]bool{}
	stepSamples := map[string]bool{}
	for _, s := range steps {
		stepDirs[lambdafn.Dir(s.function)] = true
		stepSamples[s.sampleName()] = true
		if n := s.sampleName(); n != lambdafn.Dir(s.function) && !strings.HasPrefix(n, lambdafn.Dir(s.function)+"-") {
			t.Errorf("step %s uses sample %s, which is not its", s.function, n)
		}
	}
	fnDirs := map[string]bool{}
	for _, d := range dirs {
		fnDirs[d.Name()] = true
		if _, err := os.Stat(filepath.Join(root, "events", d.Name()+".json")); err != nil {
			t.Errorf("functions/%s has no sample: %v", d.Name(), err)
		}
		if !stepDirs[d.Name()] {
			t.Errorf("functions/%s is not invoked by TestSamples", d.Name())
		}
	}
	samples, _ := filepath.Glob(filepath.Join(root, "events", "*.json"))
	for _, s := range samples {
		name := strings.TrimSuffix(filepath.Base(s), ".json")
		if !stepSamples[name] {
			t.Errorf("events/%s.json is not invoked by TestSamples", name)
		}
		if fnDirs[name] {
			continue
		}
		if !slices.ContainsFunc(dirs, func(d os.DirEntry) bool { return strings.HasPrefix(name, d.Name()+"-") }) {
			t.Errorf("events/%s.json belongs to no function", name)
		}
	}
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// routeSample names a route's sample: events/<dir>.json for the first route of its function,
// events/<dir>-<method>.json for the others of a function that serves several (Unsubscribe:
// unsubscribe.json is the GET, unsubscribe-post.json the one-click POST).
func routeSample(r api.Route) string {
	for _, o := range api.Routes {
		if o.Function == r.Function {
			if o.Pattern() == r.Pattern() {
				return lambdafn.Dir(r.Function)
			}
			break
		}
	}
	return lambdafn.Dir(r.Function) + "-" + strings.ToLower(r.Method)
}

// TestHTTPSamplesMatchRoutes: each HTTP sample is what API Gateway sends for its route.
func TestHTTPSamplesMatchRoutes(t *testing.T) {
	for _, r := range api.Routes {
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(readSample(t, routeSample(r)), &ev); err != nil {
			t.Fatalf("%s: %v", r.Function, err)
		}
		if ev.Version != "2.0" || ev.RouteKey != r.Pattern() || ev.RequestContext.RouteKey != r.Pattern() ||
			ev.RequestContext.HTTP.Method != r.Method {
			t.Errorf("%s: version %q routeKey %q method %q, want 2.0 %q", r.Function, ev.Version, ev.RouteKey,
				ev.RequestContext.HTTP.Method, r.Pattern())
		}
		want := pathParam.ReplaceAllStringFunc(r.Path, func(m string) string {
			return ev.PathParameters[m[1:len(m)-1]]
		})
		if ev.RawPath != want || ev.RequestContext.HTTP.Path != want {
			t.Errorf("%s: rawPath %q, http.path %q, want %q", r.Function, ev.RawPath, ev.RequestContext.HTTP.Path, want)
		}
		if n := len(pathParam.FindAllString(r.Path, -1)); len(ev.PathParameters) != n {
			t.Errorf("%s: %d path parameters, want %d", r.Function, len(ev.PathParameters), n)
		}
		// A public route's caller is a person's browser or mail client: no key, and a form body.
		switch {
		case r.Public && ev.Headers["authorization"] != "":
			t.Errorf("%s: a public route's sample carries an authorization header", r.Function)
		case !r.Public && ev.Headers["authorization"] != "Bearer "+sampleKey:
			t.Errorf("%s: authorization header %q", r.Function, ev.Headers["authorization"])
		}
		switch {
		case ev.Body == "":
		case r.Public:
			if ev.Headers["content-type"] != "application/x-www-form-urlencoded" {
				t.Errorf("%s: body is not a form with its content-type", r.Function)
			}
		case ev.Headers["content-type"] != "application/json" || !json.Valid([]byte(ev.Body)):
			t.Errorf("%s: body is not JSON with its content-type", r.Function)
		}
		if n := ev.Headers["content-length"]; ev.Body != "" && n != fmt.Sprint(len(ev.Body)) {
			t.Errorf("%s: content-length %s, body %d bytes", r.Function, n, len(ev.Body))
		}
	}
}

// TestUnsubscribeKeyRotation (moto): the Unsubscribe function reads its keys from Secrets
// Manager at first use; after `mailroom-admin unsubscribe-key rotate` (app.RotateUnsubscribeKey)
// a warm one opens the links of the new key (it reads the secret again) and still those of the
// old one, and refuses a key id the secret does not have.
func TestUnsubscribeKeyRotation(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(t, "Unsubscribe")
	link := campaign.Link{TeamID: 1, BookID: "cb1", ContactID: "ct1"}
	oldToken := campaign.Signer{Keys: campaign.SingleKey(fixtureUnsubscribeKey)}.Token(link)
	e := &env{fixture: f, t: t}
	status := func(token string) int {
		t.Helper()
		e.unsubToken = token
		raw, err := h.Invoke(ctx, unsubscribeToken(e, readSample(t, "unsubscribe")))
		if err != nil {
			t.Fatal(err)
		}
		var resp events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(raw, &resp); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	if code := status(oldToken); code != 200 { // the function reads its keys now
		t.Fatalf("a link of the stack's key: %d", code)
	}
	// A new key's link is looked for at once only ReloadEvery after the function's last read.
	time.Sleep(campaign.ReloadEvery)
	// On the AWS backend a rotation without the secret's id changes nothing: it is refused.
	noID := f.cfg
	noID.UnsubscribeSecretID, noID.DataDir = "", t.TempDir()
	other, err := app.NewWithAWS(ctx, noID, f.awsCfg, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, _, err := other.RotateUnsubscribeKey(ctx); err == nil || !strings.Contains(err.Error(), "UNSUBSCRIBE_SECRET_ID") {
		t.Fatalf("a rotation without the secret's id: %v", err)
	}
	id, n, err := f.admin.RotateUnsubscribeKey(ctx)
	if err != nil || id != "1" || n != 2 {
		t.Fatalf("rotate: key %q, %d keys, %v", id, n, err)
	}
	out, err := secretsmanager.NewFromConfig(f.awsCfg).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(f.vars["UNSUBSCRIBE_SECRET_ID"])})
	if err != nil {
		t.Fatal(err)
	}
	ring, err := campaign.ParseKeyring(aws.ToString(out.SecretString))
	if err != nil {
		t.Fatal(err)
	}
	newToken := campaign.Signer{Keys: ring}.Token(link)
	if !strings.HasPrefix(newToken, "3.1.") {
		t.Fatalf("token of the rotated ring %q", newToken)
	}
	_, sealed, _ := strings.Cut(strings.TrimPrefix(newToken, "3.1."), ".")
	for _, c := range []struct {
		token string
		want  int
	}{{newToken, 200}, {oldToken, 200}, {"3.2." + sealed, 404}} {
		if code := status(c.token); code != c.want {
			t.Errorf("token %.8s…: status %d, want %d", c.token, code, c.want)
		}
	}
}
