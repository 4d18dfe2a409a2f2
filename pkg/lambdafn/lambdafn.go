// Package lambdafn adapts Mailroom to AWS Lambda: the HTTP functions (one per route of
// api.Routes, behind an API Gateway HTTP API) and the event-driven ones: the send worker (fed by
// the table's DynamoDB Stream), the scheduled-send and campaign batch targets (EventBridge
// Scheduler), the SES event ingester (EventBridge rule on the configuration sets' events), and
// the periodic reconciler and domain check (EventBridge schedules). Each functions/<name>/main.go is one call to Main;
// everything it needs is built once per cold start, never per invocation.
package lambdafn

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/auth"
	"github.com/mailroom/mailroom/pkg/deliver/batch"
	"github.com/mailroom/mailroom/pkg/hooks"
	"github.com/mailroom/mailroom/pkg/ingest"
	"github.com/mailroom/mailroom/pkg/jsonout"
	"github.com/mailroom/mailroom/pkg/sesevent"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/dynamo"
	"github.com/mailroom/mailroom/pkg/streamhooks"
)

// The functions that are not HTTP routes.
const (
	// SendWorkerFunction delivers QUEUED emails from the table's stream.
	SendWorkerFunction = "SendWorker"
	// ScheduledSendFunction is the target of scheduled emails' one-time schedules.
	ScheduledSendFunction = "ScheduledSend"
	// CampaignBatchFunction is the target of campaigns' schedules: it runs batch steps.
	CampaignBatchFunction = "CampaignBatch"
	// SESEventsFunction records the SES events of the configuration sets (EventBridge).
	SESEventsFunction = "SESEvents"
	// ReconcilerFunction is the periodic housekeeping (app.Periodic): emails stuck QUEUED or
	// SENDING go back through delivery, stalled campaigns get their next step again, and the
	// contacts of deleted books are removed.
	ReconcilerFunction = "Reconciler"
	// DomainCheckFunction refreshes every domain's verification status.
	DomainCheckFunction = "DomainCheck"
	// AuthorizerFunction is the HTTP API's Lambda authorizer: it authenticates the API key
	// once per key and cache period, for every route but the public ones.
	AuthorizerFunction = "Authorizer"
	// WebhookEventsFunction turns the emails' new history entries (from the table's stream)
	// into webhook calls and makes their first attempts.
	WebhookEventsFunction = "WebhookEvents"
	// WebhookRetriesFunction attempts the webhook calls due again, every minute.
	WebhookRetriesFunction = "WebhookRetries"
)

// ConsoleFunction serves the mail console (api.Console) behind the HTTP API, its routes
// api.ConsoleRoutes: sessions sealed under the deployment's keyring, since its instances share
// no memory, and the live view answered once per request, since API Gateway buffers answers.
const ConsoleFunction = "Console"

// Background lists the functions that are not HTTP routes, in the order Names ends with them.
func Background() []string {
	return []string{SendWorkerFunction, ScheduledSendFunction, CampaignBatchFunction, SESEventsFunction,
		ReconcilerFunction, DomainCheckFunction, AuthorizerFunction, WebhookEventsFunction, WebhookRetriesFunction}
}

// Names lists every Lambda function: the functions of api.Routes in table order, the
// console's, then the Background ones. functions/<Dir(name)>, events/<Dir(name)>.json and the <name>Function
// resource of template.yaml exist for each (tests check all three).
func Names() []string {
	var names []string
	seen := map[string]bool{}
	for _, r := range api.Routes {
		if !seen[r.Function] {
			seen[r.Function] = true
			names = append(names, r.Function)
		}
	}
	return append(append(names, ConsoleFunction), Background()...)
}

// uses is what each function's handler calls beyond the table, the one place that says it: the
// wiring (Main) builds exactly these ports, every AWS call outside them fails, and the
// deployment (pkg/deploy renders template.yaml) gives each function exactly the variables and
// IAM actions that follow from them (Ports.Env, Ports.IAM).
var uses = map[string]Ports{
	// Emails: a send with scheduledAt puts a schedule; a reschedule puts one, or deletes it when
	// the new time has passed; a cancel deletes it. A send writes the content and list entries
	// in batches and releases its idempotency claim when it fails.
	"SendEmail":   {Table: Writes(PutItem, UpdateItem, DeleteItem, BatchWriteItem), EmailSchedules: SchedulePut},
	"SendBatch":   {Table: Writes(PutItem, UpdateItem, DeleteItem, BatchWriteItem), EmailSchedules: SchedulePut},
	"UpdateEmail": {Table: emailUpdates, EmailSchedules: SchedulePutDel},
	"CancelEmail": {Table: emailUpdates, EmailSchedules: ScheduleDelete},
	// Domains: registration at SES (BYODKIM, then MAIL FROM; the domain is removed again when
	// SES refuses it), status refresh, removal. The hourly check also removes the claims left
	// unverified for 72 hours.
	"CreateDomain": {Table: Writes(PutItem, UpdateItem, DeleteItem),
		Identities: []string{"CreateEmailIdentity", "GetEmailIdentity", "PutEmailIdentityMailFromAttributes"}},
	"VerifyDomain": {Table: Writes(PutItem), Identities: []string{"GetEmailIdentity"}},
	"UpdateDomain": {Table: Writes(PutItem)},
	"DeleteDomain": {Table: Writes(DeleteItem), Identities: []string{"GetEmailIdentity", "DeleteEmailIdentity"}},
	// Templates, suppressions and contact books.
	"CreateTemplate":    {Table: Writes(PutItem)},
	"UpdateTemplate":    {Table: Writes(PutItem)},
	"DeleteTemplate":    {Table: Writes(DeleteItem)},
	"CreateSuppression": {Table: Writes(PutItem)},
	"DeleteSuppression": {Table: Writes(DeleteItem)},
	"CreateContactBook": {Table: Writes(PutItem)},
	"UpdateContactBook": {Table: Writes(UpdateItem)},
	"DeleteContactBook": {Table: Writes(PutItem, DeleteItem)},
	// Contacts: a new one is a transaction of its item and the book's count; a change of email
	// moves it (delete, put, repoint, and a check that the book still exists).
	// In a book with double opt-in, a new contact gets its confirmation email: written as a
	// send writes an email (content and list entries in batches), with a signed link. The link
	// is on the address the request came to (API Gateway's Host): PUBLIC_URL names the API,
	// which an API function cannot be given without a circular dependency.
	"CreateContact":      {Table: Writes(PutItem, UpdateItem, BatchWriteItem), Unsubscribe: Read},
	"UpsertContact":      {Table: Writes(PutItem, UpdateItem, BatchWriteItem), Unsubscribe: Read},
	"BulkCreateContacts": {Table: Writes(PutItem, UpdateItem, BatchWriteItem), Unsubscribe: Read},
	"UpdateContact":      {Table: Writes(PutItem, UpdateItem, DeleteItem, ConditionCheckItem)},
	"DeleteContact":      {Table: Writes(UpdateItem, DeleteItem)},
	"BulkDeleteContacts": {Table: Writes(UpdateItem, DeleteItem)},
	// Campaigns: starting one later puts its schedule, starting or resuming one now invokes its
	// step directly (and deletes a later start's schedule; a campaign whose start fails is
	// removed again); delete removes a start's schedule, or (a campaign that has sent) puts its
	// next step a minute ahead in place of a pending one and invokes it now: the step finds the
	// campaign gone and releases the emails held while it was paused, the schedule standing in
	// for a failed invocation.
	"CreateCampaign":   {Table: Writes(PutItem, DeleteItem), CampaignSchedules: SchedulePutDel, CampaignInvoke: true, Dates: true},
	"ScheduleCampaign": {Table: Writes(PutItem), CampaignSchedules: SchedulePutDel, CampaignInvoke: true, Dates: true},
	"PauseCampaign":    {Table: Writes(PutItem)},
	"ResumeCampaign":   {Table: Writes(PutItem), CampaignSchedules: SchedulePut, CampaignInvoke: true},
	"DeleteCampaign":   {Table: Writes(DeleteItem), CampaignSchedules: SchedulePutDel, CampaignInvoke: true},
	// Unsubscribing rewrites the contact (same key) and the email's counted kinds, and counts
	// the campaign's unsubscribed recipient: no delete, no batch, no transaction.
	"Unsubscribe": {Table: Writes(PutItem, UpdateItem), Unsubscribe: Read},
	// Confirming a double opt-in rewrites the contact (same key), checking the signed link.
	"ConfirmSubscription": {Table: Writes(PutItem, UpdateItem), Unsubscribe: Read},
	// The worker sends. The scheduled-send target re-arms a schedule that fired before its
	// email's time. A batch step signs unsubscribe links, schedules the next step after a
	// batch window or invokes it when its own deadline nears, and re-arms a start that fired
	// early. The reconciler hands stuck emails back to the worker (it never sends), restarts
	// stalled campaigns with a direct invocation, removes expired emails' items and the
	// contacts of deleted books.
	SendWorkerFunction:    {Table: emailUpdates, Send: true},
	ScheduledSendFunction: {Table: emailUpdates, EmailSchedules: SchedulePut},
	CampaignBatchFunction: {Table: Writes(PutItem, UpdateItem, BatchWriteItem), CampaignSchedules: SchedulePut, CampaignInvoke: true, Unsubscribe: Write},
	SESEventsFunction:     {Table: emailUpdates},
	ReconcilerFunction:    {Table: Writes(PutItem, UpdateItem, DeleteItem, BatchWriteItem), CampaignInvoke: true},
	DomainCheckFunction:   {Table: Writes(PutItem, DeleteItem), Identities: []string{"GetEmailIdentity", "DeleteEmailIdentity"}},
	// The authorizer only reads API keys.
	AuthorizerFunction: {Table: TableRead},
	// Webhooks: their secrets are sealed with the deployment's keyring (the unsubscribe secret),
	// so the routes that seal or sign and the functions that call read it. Calls and webhooks
	// are changed with conditional puts.
	"CreateWebhook":       {Table: Writes(PutItem), Unsubscribe: Read},
	"UpdateWebhook":       {Table: Writes(PutItem)},
	"DeleteWebhook":       {Table: Writes(DeleteItem)},
	"RotateWebhookSecret": {Table: Writes(PutItem), Unsubscribe: Read},
	"TestWebhook":         {Table: Writes(PutItem), Unsubscribe: Read},
	"ReplayWebhookCall":   {Table: Writes(PutItem), Unsubscribe: Read},
	// The console reads what the API's GETs read; its keys page puts and deletes keys, its
	// webhook replays put calls, and its sessions are sealed under the unsubscribe keyring.
	ConsoleFunction: {Table: Writes(PutItem, DeleteItem), Unsubscribe: Read, Console: true},
	// The stream function also applies the counts: counter and marker updates in transactions.
	WebhookEventsFunction:  {Table: Writes(PutItem, UpdateItem), Unsubscribe: Read},
	WebhookRetriesFunction: {Table: Writes(PutItem), Unsubscribe: Read},
}

// emailUpdates are the writes of changing an email: its item (a conditional put), and in a
// transaction with it counters (updates) and the events past its inline history (puts). No
// BatchWriteItem: it can delete any item, which IAM cannot narrow, and only writing emails
// (their content and list entries) needs it.
var emailUpdates = Writes(PutItem, UpdateItem)

// PortsOf returns what the named function builds: its uses, with the table actions TableRead
// for an HTTP function whose routes are all GETs (every other function names its own), and
// RateLimited for one that serves authenticated routes.
func PortsOf(function string) Ports {
	p := uses[function]
	routes, gets := 0, 0
	for _, r := range api.Routes {
		if r.Function == function {
			routes++
			if r.Method == http.MethodGet {
				gets++
			}
			if !r.Public {
				p.RateLimited = true
			}
		}
	}
	if p.Table == nil && routes > 0 && gets == routes {
		p.Table = TableRead
	}
	return p
}

// Dir is the kebab-case directory name of a function: SendEmail → send-email, SESEvents →
// ses-events (a run of capitals is one word; the Makefile's kebab does the same).
func Dir(name string) string {
	rs := []rune(name)
	var b strings.Builder
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 && (!unicode.IsUpper(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]))) {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

func requestID(ctx context.Context) string {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		return lc.AwsRequestID
	}
	return ""
}

func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// ScheduledSend is the target of a scheduled email's one-time schedule: EventBridge Scheduler
// invokes it with the schedule's input as the event, the JSON payload
// {"emailId":"...","scheduledAt":"<RFC 3339>"} (email.FirePayload), which fire receives as is
// (email.Service.Fire). An error makes the scheduler retry, then dead-letter the payload;
// fire returns nil when there is nothing (more) to do, so repeats are harmless.
func ScheduledSend(fire func(ctx context.Context, payload []byte) error, log *slog.Logger) func(context.Context, json.RawMessage) error {
	log = orDiscard(log)
	return func(ctx context.Context, payload json.RawMessage) error {
		if err := fire(ctx, payload); err != nil {
			log.ErrorContext(ctx, "scheduled send failed", "requestId", requestID(ctx), "err", err.Error())
			return err
		}
		return nil
	}
}

// CampaignBatch is the target of a campaign's schedule: EventBridge Scheduler invokes it with
// the schedule's input, the JSON payload {"campaignId":"...","teamId":1,"step":0}
// (campaign.Payload), which fire receives as is (campaign.Service.Fire: it runs that batch step
// and, while the batch window is 0 and the invocation's deadline allows, the ones after it, else
// it schedules the next). An error makes the scheduler retry, then dead-letter the payload; a
// step that already ran, or a paused or deleted campaign, is nil, so repeats are harmless.
func CampaignBatch(fire func(ctx context.Context, payload []byte) error, log *slog.Logger) func(context.Context, json.RawMessage) error {
	log = orDiscard(log)
	return func(ctx context.Context, payload json.RawMessage) error {
		start := time.Now()
		if err := fire(ctx, payload); err != nil {
			log.ErrorContext(ctx, "campaign batch failed", "requestId", requestID(ctx), "err", err.Error())
			return err
		}
		log.InfoContext(ctx, "campaign batch", "requestId", requestID(ctx), "ms", time.Since(start).Milliseconds())
		return nil
	}
}

// Housekeeping runs the periodic housekeeping (app.Periodic, which logs each part) on each
// scheduled event. A part that failed fails the invocation: it counts in the function's Errors
// metric, which an alarm watches; the next run retries it (the template turns off async
// retries).
func Housekeeping(run func(context.Context) error, log *slog.Logger) func(context.Context, events.CloudWatchEvent) error {
	log = orDiscard(log)
	return func(ctx context.Context, ev events.CloudWatchEvent) error {
		start := time.Now()
		err := run(ctx)
		if err != nil {
			log.ErrorContext(ctx, "periodic housekeeping failed", "requestId", requestID(ctx), "eventTime", ev.Time,
				"ms", time.Since(start).Milliseconds(), "err", err.Error())
			return err
		}
		log.InfoContext(ctx, "periodic housekeeping", "requestId", requestID(ctx), "eventTime", ev.Time,
			"ms", time.Since(start).Milliseconds())
		return nil
	}
}

// UnknownEmailRetry is how long after SES accepted a message an event about an email not found
// is retried rather than dropped: the email may not be visible yet (an event can overtake the
// worker's write, and the message-id index is eventually consistent, within a second or so).
// The function is invoked asynchronously (by the EventBridge rule), so an error is retried by
// Lambda's async retries: twice, about 1 and 3 minutes after the first attempt (the template's
// MaximumRetryAttempts: 2). So the third attempt, past this, drops an event of another
// sender's message instead of sending it to the dead-letter queue and its alarm.
const UnknownEmailRetry = 2 * time.Minute

// SESEvents records one SES event that a configuration set published to EventBridge (source
// aws.ses, the SES record as the detail). An event of a type Mailroom does not track is logged
// and dropped. An event about an email not found is returned as an error (Lambda's async
// retries try it again) for UnknownEmailRetry after SES accepted the message, and dropped after
// that (another sender's message through the same configuration set); any other failure is
// returned so that Lambda retries it and, in the end, puts it in the dead-letter queue. Replays
// are recorded once (pkg/ingest).
func SESEvents(publish func(context.Context, sesevent.Event) error, now func() time.Time, log *slog.Logger) func(context.Context, events.CloudWatchEvent) error {
	log = orDiscard(log)
	return func(ctx context.Context, env events.CloudWatchEvent) error {
		rid := requestID(ctx)
		ev, err := sesevent.FromEnvelope(env)
		if errors.Is(err, sesevent.ErrUnknownType) {
			log.WarnContext(ctx, "ignoring SES event", "requestId", rid, "eventId", env.ID,
				"detailType", env.DetailType, "err", err.Error())
			return nil
		}
		if err != nil {
			log.ErrorContext(ctx, "undecodable SES event", "requestId", rid, "eventId", env.ID,
				"detailType", env.DetailType, "err", err.Error())
			return err
		}
		err = publish(ctx, ev)
		switch {
		case errors.Is(err, ingest.ErrUnknownEmail) && !ev.Mail.Timestamp.IsZero() && now().Sub(ev.Mail.Timestamp) < UnknownEmailRetry:
			log.WarnContext(ctx, "SES event for an email not found yet; retried", "requestId", rid,
				"eventId", env.ID, "eventType", ev.EventType, "messageId", ev.Mail.MessageID)
			return err
		case errors.Is(err, ingest.ErrUnknownEmail):
			log.InfoContext(ctx, "SES event for an unknown email dropped", "requestId", rid,
				"eventId", env.ID, "eventType", ev.EventType, "messageId", ev.Mail.MessageID)
			return nil
		case err != nil:
			log.ErrorContext(ctx, "record SES event failed", "requestId", rid, "eventId", env.ID,
				"eventType", ev.EventType, "messageId", ev.Mail.MessageID, "err", err.Error())
			return err
		}
		return nil
	}
}

// Periodic runs a job on each scheduled event (an EventBridge schedule rule's "Scheduled Event")
// and logs how many items it handled. Its error is returned: the invocation shows as failed in
// the function's metrics, and the next run starts over (the template turns off async retries).
func Periodic(job string, run func(context.Context) (int, error), log *slog.Logger) func(context.Context, events.CloudWatchEvent) error {
	log = orDiscard(log)
	return func(ctx context.Context, ev events.CloudWatchEvent) error {
		n, err := run(ctx)
		if err != nil {
			log.ErrorContext(ctx, job+" failed", "requestId", requestID(ctx), "eventTime", ev.Time,
				"count", n, "err", err.Error())
			return err
		}
		log.InfoContext(ctx, job, "requestId", requestID(ctx), "eventTime", ev.Time, "count", n)
		return nil
	}
}

// Authorizer is the HTTP API's Lambda authorizer (payload 2.0, simple responses; API Gateway
// caches its answer per Authorization header for deploy.AuthCacheSeconds). It admits
// every request and passes the verdict in its context, a rejection included (auth.VerdictContext):
// the function behind the route answers a bad key in the API's error envelope. Only an error that
// is not a verdict (the table unavailable) fails the authorizer, which API Gateway answers with a
// 500 and does not cache.
func Authorizer(authenticate func(context.Context, string) (auth.Principal, error), log *slog.Logger) func(context.Context, events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	log = orDiscard(log)
	return func(ctx context.Context, req events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
		var header string
		for k, v := range req.Headers {
			if strings.EqualFold(k, "Authorization") {
				header = v
			}
		}
		p, err := authenticate(ctx, header)
		verdict, err := auth.VerdictContext(p, err)
		if err != nil {
			log.ErrorContext(ctx, "authorizer failed", "requestId", requestID(ctx), "route", req.RouteKey, "err", err.Error())
			return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, err
		}
		log.DebugContext(ctx, "authorized", "requestId", requestID(ctx), "route", req.RouteKey, "teamId", p.TeamID,
			"rejected", verdict["status"] != nil)
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: true, Context: verdict}, nil
	}
}

// HTTP serves an API Gateway HTTP API (payload 2.0) event with h. It never returns a Go error:
// API Gateway turns one into a bare 502, so an event that cannot be converted becomes a JSON 500
// in the API's error envelope instead.
//
// Two details of the conversion are corrected: API Gateway's request id becomes X-Request-Id
// when the caller sent none (so the request log line carries the id API Gateway logs), and
// header values are passed as received, one value each; the adapter would split every value on
// commas, which breaks an Idempotency-Key that contains one. The Lambda authorizer's verdict,
// when the route has one, goes to the handler in the request's context (auth.WithVerdict).
func HTTP(h http.Handler) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	adapter := httpadapter.NewV2(rawHeaders(h))
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		headers := make(map[string]string, len(req.Headers)+1)
		for k, v := range req.Headers {
			// Without the spaces and tabs around it, as the local server's net/http reads a
			// header: " B-1 " is the Idempotency-Key B-1 on both.
			headers[http.CanonicalHeaderKey(k)] = strings.Trim(v, " \t")
		}
		if len(req.Cookies) > 0 {
			headers["Cookie"] = strings.Join(req.Cookies, "; ")
		}
		if headers["X-Request-Id"] == "" && req.RequestContext.RequestID != "" {
			headers["X-Request-Id"] = req.RequestContext.RequestID
		}
		req.Headers = headers
		ctx = context.WithValue(ctx, headersKey{}, headers)
		if a := req.RequestContext.Authorizer; a != nil && a.Lambda != nil {
			ctx = auth.WithVerdict(ctx, a.Lambda)
		}
		if id := headers["X-Request-Id"]; len(id) > 128 { // as the API's handler takes one
			headers["X-Request-Id"] = req.RequestContext.RequestID
		}
		// What the request itself gets wrong is a 400 with the request's id, not a failed
		// conversion (a 500, logged as the server's error).
		answer := func(status int, code, msg string) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{
				StatusCode: status,
				Headers:    map[string]string{"Content-Type": "application/json", "X-Request-Id": headers["X-Request-Id"]},
				Body:       `{"error":{"code":"` + code + `","message":"` + msg + `"}}`,
			}, nil
		}
		badRequest := func(msg string) (events.APIGatewayV2HTTPResponse, error) {
			return answer(http.StatusBadRequest, "BAD_REQUEST", msg)
		}
		if req.IsBase64Encoded {
			if _, err := base64.StdEncoding.DecodeString(req.Body); err != nil {
				return badRequest("body: not valid base64 (isBase64Encoded)")
			}
		}
		if path, ok := routePath(req.RouteKey, req.PathParameters); ok {
			req.RawPath = path
		} else {
			if _, err := url.PathUnescape(req.RawPath); err != nil {
				return badRequest("path: malformed %-escape")
			}
			req.RawPath = withoutStage(req.RawPath, req.RequestContext.Stage)
		}
		if req.RequestContext.DomainName == "" && hostName(headers["Host"]) {
			// sam local start-api sends no domainName: the links the API writes (a double
			// opt-in's confirmation) take the Host the client asked for, as the local server's.
			req.RequestContext.DomainName = headers["Host"]
		}
		resp, err := adapter.ProxyWithContext(ctx, req)
		if err != nil {
			slog.ErrorContext(ctx, "request not converted", "requestId", headers["X-Request-Id"], "route", req.RouteKey, "err", err.Error())
			return answer(http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "Internal server error")
		}
		return compact(resp), nil
	}
}

// routePath is the path of a request to a route with parameters, made from the route and
// the parameters' values, each escaped: an HTTP API hands the function its rawPath decoded,
// so an id holding '%', '?' or '#' (a suppressed address may) would be read as an escape, a
// query or a fragment. A greedy parameter ({proxy+}) keeps its slashes. ok is false for a
// route without parameters (its rawPath is what it is) or a parameter the event lacks.
func routePath(routeKey string, params map[string]string) (string, bool) {
	_, pattern, found := strings.Cut(routeKey, " ")
	if !found || !strings.HasPrefix(pattern, "/") || !strings.Contains(pattern, "{") {
		return "", false
	}
	segs := strings.Split(pattern, "/")
	for i, seg := range segs {
		if !strings.HasPrefix(seg, "{") || !strings.HasSuffix(seg, "}") {
			continue
		}
		name, greedy := strings.CutSuffix(seg[1:len(seg)-1], "+")
		v, ok := params[name]
		if !ok || v == "" {
			return "", false
		}
		if !greedy {
			segs[i] = url.PathEscape(v)
			continue
		}
		parts := strings.Split(v, "/")
		for j, part := range parts {
			parts[j] = url.PathEscape(part)
		}
		segs[i] = strings.Join(parts, "/")
	}
	return strings.Join(segs, "/"), true
}

// withoutStage is the path of a request to a named stage's default endpoint
// (https://…/prod/api/v1/emails), whose rawPath starts with the stage, without it; a path
// that would not then be one Mailroom serves is left as it is (a custom domain's mapping has
// taken the stage off already, and a stage may be named like a path's first segment). The
// template deploys the $default stage, whose paths carry no stage.
func withoutStage(path, stage string) string {
	if stage == "" || stage == "$default" || !strings.HasPrefix(path, "/"+stage+"/") {
		return path
	}
	rest := strings.TrimPrefix(path, "/"+stage)
	for _, served := range []string{"/api/", "/console", "/healthz", "/unsubscribe/", "/subscribe/"} {
		if strings.HasPrefix(rest, served) {
			return rest
		}
	}
	return path
}

// hostName reports whether h is a host[:port] that makes a URL's authority as it is: a name or
// an address, and a port of digits if any.
func hostName(h string) bool {
	if h == "" || len(h) > 261 || strings.ContainsAny(h, "/?#@\\ ") {
		return false
	}
	u, err := url.Parse("https://" + h)
	if err != nil || u.Host != h || u.Hostname() == "" {
		return false
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return false
		}
	} else if strings.HasSuffix(h, ":") {
		return false
	}
	return true
}

// compactFrom is the body size from which compact compares the two encodings: below it, a
// response is far under Lambda's 6 MB either way and stays readable in the function's logs.
const compactFrom = 256 << 10

// compact sends a large body base64-encoded when that is the shorter form of it in the
// invocation's response: the runtime writes the body as a JSON string (without HTML escaping:
// aws-lambda-go's default), where a quote or a newline costs two bytes and a control character
// six, and base64 four for three. API Gateway decodes it for the client, who sees the same
// bytes.
func compact(resp events.APIGatewayV2HTTPResponse) events.APIGatewayV2HTTPResponse {
	if resp.IsBase64Encoded || len(resp.Body) < compactFrom {
		return resp
	}
	if _, asBase64 := jsonout.InvocationLen(resp.Body); !asBase64 {
		return resp
	}
	resp.Body, resp.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(resp.Body)), true
	return resp
}

type headersKey struct{}

// rawHeaders replaces the request's headers by the event's (see HTTP).
func rawHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if raw, ok := r.Context().Value(headersKey{}).(map[string]string); ok {
			hdr := make(http.Header, len(raw))
			for k, v := range raw {
				hdr[k] = []string{v}
			}
			r.Header = hdr
		}
		h.ServeHTTP(w, r)
	})
}

// Deliverer delivers one email (deliver.Worker). Deliver must be safe to call twice for the
// same email, and concurrently for different ones.
type Deliverer interface {
	Deliver(ctx context.Context, emailID string) error
}

// workerConcurrency bounds the deliveries in flight for one batch of stream records.
const workerConcurrency = 8

// SendWorker handles a batch of DynamoDB Stream records: each new image of an email item (key
// PK "EMAIL#<id>", SK "EMAIL") is delivered; every other record (events, content chunks,
// counters, removals) is ignored. The function is configured with ReportBatchItemFailures: an
// email that could not be delivered, or whose outcome could not be recorded, is reported by its
// record's SequenceNumber, which is what Lambda expects for a stream (it restarts the batch from
// the lowest one reported, and treats an identifier that matches no record as a failure of the
// whole batch); the error is never returned (that would retry the whole batch, sends included).
func SendWorker(w Deliverer, log *slog.Logger) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	log = orDiscard(log)
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		requestID := requestID(ctx)
		failed := make([]bool, len(ev.Records))
		ids := make([]string, len(ev.Records)) // "" for a record that is not an email's
		emails := 0
		for i, rec := range ev.Records {
			if id, ok := EmailID(rec); ok {
				ids[i] = id
				emails++
			}
		}
		// One pacing write takes the send slots of the whole batch.
		ctx = batch.With(ctx, emails)
		var wg sync.WaitGroup
		sem := make(chan struct{}, workerConcurrency)
		for i, rec := range ev.Records {
			id := ids[i]
			if id == "" {
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				if err := w.Deliver(ctx, id); err != nil {
					failed[i] = true
					log.ErrorContext(ctx, "deliver failed", "requestId", requestID, "emailId", id,
						"sequenceNumber", rec.Change.SequenceNumber, "err", err.Error())
				}
			}()
		}
		wg.Wait()
		var resp events.DynamoDBEventResponse
		for i, f := range failed {
			if f {
				resp.BatchItemFailures = append(resp.BatchItemFailures,
					events.DynamoDBBatchItemFailure{ItemIdentifier: ev.Records[i].Change.SequenceNumber})
			}
		}
		log.InfoContext(ctx, "stream batch", "requestId", requestID, "records", len(ev.Records),
			"emails", emails, "failed", len(resp.BatchItemFailures))
		return resp, nil
	}
}

// EmailID returns the id of the email a stream record is about, when it is the insert or
// modification of an email item.
func EmailID(rec events.DynamoDBEventRecord) (string, bool) {
	// The key alone: the send worker asks this of every record, and the images may be large.
	return streamhooks.EmailID(dynamo.StreamRecord{Keys: attrValues(rec.Change.Keys),
		Remove: rec.EventName == string(events.DynamoDBOperationTypeRemove)})
}

// streamRecord is rec as the store and streamhooks read it.
func streamRecord(rec events.DynamoDBEventRecord) dynamo.StreamRecord {
	return dynamo.StreamRecord{Seq: rec.Change.SequenceNumber, ID: rec.EventID,
		Keys: attrValues(rec.Change.Keys), Old: attrValues(rec.Change.OldImage), New: attrValues(rec.Change.NewImage),
		Remove: rec.EventName == string(events.DynamoDBOperationTypeRemove), At: rec.Change.ApproximateCreationDateTime.Time}
}

// WebhookEvents is the table stream's consumer (the second of the two readers a stream shard
// supports, next to SendWorker). First it applies the counts of the batch's email writes
// (counts: dynamo.Store.ApplyCounts, exactly once per record whatever the retries; the shard id
// comes with the mapping's tumbling window). Then the webhooks: each email item a write changed names
// the history entries it added (dynamo.NewEventsAttribute), and each write to a contact,
// domain or campaign item is a change (dynamo.DecodeChange, hooks.ChangeEvent); for a team
// with webhooks those become calls (one per webhook and entry, however often a record is delivered), whose first
// attempt is made at once. A call that fails is due again (WebhookRetries); a batch fails only
// when its calls could not be written, and is then retried by the event source mapping.
func WebhookEvents(h *hooks.Service, st store.Store, counts func(ctx context.Context, shardID string, records []dynamo.StreamRecord) (skipped []string, err error), log *slog.Logger) func(context.Context, events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
	log = orDiscard(log)
	// The response must carry a state (the mapping's tumbling window gives each invocation its
	// shard id); the function keeps none.
	ok := events.DynamoDBTimeWindowEventResponse{TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: map[string]string{}}}
	return func(ctx context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
		recs := make([]dynamo.StreamRecord, 0, len(ev.Records))
		for _, rec := range ev.Records {
			recs = append(recs, streamRecord(rec))
		}
		if counts != nil && len(recs) > 0 {
			if ev.ShardID == "" {
				err := errors.New("stream batch without a shard id: the event source mapping needs its tumbling window")
				log.ErrorContext(ctx, "counts not applied", "requestId", requestID(ctx), "err", err.Error())
				return events.DynamoDBTimeWindowEventResponse{}, err
			}
			skipped, err := counts(ctx, ev.ShardID, recs)
			if len(skipped) > 0 {
				log.WarnContext(ctx, "stream records not counted: not decodable", "requestId", requestID(ctx), "sequenceNumbers", skipped)
			}
			if err != nil {
				log.ErrorContext(ctx, "counts not applied", "requestId", requestID(ctx), "err", err.Error())
				return events.DynamoDBTimeWindowEventResponse{}, err
			}
		}
		r, err := streamhooks.Publish(ctx, h, st, recs)
		for _, u := range r.Undecoded {
			log.WarnContext(ctx, "stream record not decoded", "requestId", requestID(ctx), "eventId", u.ID, "err", u.Err.Error())
		}
		if err != nil {
			log.ErrorContext(ctx, "webhook calls not written", "requestId", requestID(ctx), "err", err.Error())
			return events.DynamoDBTimeWindowEventResponse{}, err
		}
		log.InfoContext(ctx, "webhook events", "requestId", requestID(ctx), "records", len(ev.Records),
			"entries", r.Entries, "changes", r.Changes, "calls", r.Calls, "attempted", r.Attempted)
		return ok, nil
	}
}

// attrValues converts a stream image to the SDK's attribute values.
func attrValues(m map[string]events.DynamoDBAttributeValue) map[string]types.AttributeValue {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]types.AttributeValue, len(m))
	for k, v := range m {
		out[k] = attrValue(v)
	}
	return out
}

func attrValue(v events.DynamoDBAttributeValue) types.AttributeValue {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}
	case events.DataTypeList:
		list := v.List()
		out := make([]types.AttributeValue, len(list))
		for i, e := range list {
			out[i] = attrValue(e)
		}
		return &types.AttributeValueMemberL{Value: out}
	case events.DataTypeMap:
		return &types.AttributeValueMemberM{Value: attrValues(v.Map())}
	}
	return &types.AttributeValueMemberNULL{Value: true}
}
