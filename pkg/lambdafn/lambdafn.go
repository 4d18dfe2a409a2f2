// Package lambdafn adapts Mailroom to AWS Lambda: the HTTP functions (one per route of
// api.Routes, behind an API Gateway HTTP API) and the send worker (fed by the table's DynamoDB
// Stream). Each functions/<name>/main.go is one call to Main; everything it needs is built once
// per cold start, never per invocation.
package lambdafn

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"unicode"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/app"
)

// SendWorkerFunction is the name of the function that delivers QUEUED emails from the stream.
const SendWorkerFunction = "SendWorker"

// Names lists every Lambda function: the functions of api.Routes in table order, then the send
// worker. functions/<Dir(name)>, events/<Dir(name)>.json and the <name>Function resource of
// template.yaml exist for each (tests check all three).
func Names() []string {
	var names []string
	seen := map[string]bool{}
	for _, r := range api.Routes {
		if !seen[r.Function] {
			seen[r.Function] = true
			names = append(names, r.Function)
		}
	}
	return append(names, SendWorkerFunction)
}

// Dir is the kebab-case directory name of a function: SendEmail → send-email.
func Dir(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Main runs the named function: it reads the configuration (the AWS backend, whatever BACKEND
// says), builds the app once for this execution environment and hands the handler to the
// Lambda runtime. A configuration or wiring error fails the cold start with one log line.
func Main(function string) {
	getenv := func(k string) string {
		if k == "BACKEND" {
			return app.BackendAWS
		}
		return os.Getenv(k)
	}
	cfg, err := app.ConfigFromEnv(getenv)
	if err != nil {
		fail(cfg, function, "config", err)
	}
	a, err := app.New(context.Background(), cfg, app.Options{})
	if err != nil {
		fail(cfg, function, "build app", err)
	}
	lambda.Start(Handler(a, function))
}

func fail(cfg app.Config, function, step string, err error) {
	cfg.Logger().Error("cold start failed", "function", function, "step", step, "err", err.Error())
	os.Exit(1)
}

// Handler returns the Lambda handler of the named function on a built app: the send worker for
// SendWorkerFunction, otherwise the HTTP adapter around the function's routes (it panics on a
// name that has no route, as api.FunctionHandler does: a wiring mistake, found at cold start).
// The returned handler does the JSON decoding and encoding of the Lambda runtime, so tests
// invoke it with the raw bytes of a sample event.
func Handler(a *app.App, function string) lambda.Handler {
	if function == SendWorkerFunction {
		return lambda.NewHandler(SendWorker(a.Worker, a.Log))
	}
	return lambda.NewHandler(HTTP(a.Services.FunctionHandler(function)))
}

// HTTP serves an API Gateway HTTP API (payload 2.0) event with h. It never returns a Go error:
// API Gateway turns one into a bare 502, so an event that cannot be converted becomes a JSON 500
// in the API's error envelope instead.
//
// Two details of the conversion are corrected: API Gateway's request id becomes X-Request-Id
// when the caller sent none (so the request log line carries the id API Gateway logs), and
// header values are passed as received, one value each; the adapter would split every value on
// commas, which breaks an Idempotency-Key that contains one.
func HTTP(h http.Handler) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	adapter := httpadapter.NewV2(rawHeaders(h))
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		headers := make(map[string]string, len(req.Headers)+1)
		for k, v := range req.Headers {
			headers[http.CanonicalHeaderKey(k)] = v
		}
		if len(req.Cookies) > 0 {
			headers["Cookie"] = strings.Join(req.Cookies, "; ")
		}
		if headers["X-Request-Id"] == "" && req.RequestContext.RequestID != "" {
			headers["X-Request-Id"] = req.RequestContext.RequestID
		}
		req.Headers = headers
		resp, err := adapter.ProxyWithContext(context.WithValue(ctx, headersKey{}, headers), req)
		if err != nil {
			return events.APIGatewayV2HTTPResponse{
				StatusCode: http.StatusInternalServerError,
				Headers:    map[string]string{"Content-Type": "application/json"},
				Body:       `{"error":{"code":"INTERNAL_SERVER_ERROR","message":"Internal server error"}}`,
			}, nil
		}
		return resp, nil
	}
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
// record's event id so that Lambda retries from it, and the error is never returned (that
// would retry the whole batch, sends included).
func SendWorker(w Deliverer, log *slog.Logger) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		requestID := ""
		if lc, ok := lambdacontext.FromContext(ctx); ok {
			requestID = lc.AwsRequestID
		}
		failed := make([]bool, len(ev.Records))
		emails := 0
		var wg sync.WaitGroup
		sem := make(chan struct{}, workerConcurrency)
		for i, rec := range ev.Records {
			id, ok := EmailID(rec)
			if !ok {
				continue
			}
			emails++
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				if err := w.Deliver(ctx, id); err != nil {
					failed[i] = true
					log.ErrorContext(ctx, "deliver failed", "requestId", requestID, "emailId", id,
						"eventId", rec.EventID, "err", err.Error())
				}
			}()
		}
		wg.Wait()
		var resp events.DynamoDBEventResponse
		for i, f := range failed {
			if f {
				resp.BatchItemFailures = append(resp.BatchItemFailures,
					events.DynamoDBBatchItemFailure{ItemIdentifier: ev.Records[i].EventID})
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
	if rec.EventName == string(events.DynamoDBOperationTypeRemove) {
		return "", false
	}
	pk, ok := stringAttr(rec.Change.Keys, "PK")
	if !ok {
		return "", false
	}
	if sk, ok := stringAttr(rec.Change.Keys, "SK"); !ok || sk != "EMAIL" {
		return "", false
	}
	id, ok := strings.CutPrefix(pk, "EMAIL#")
	if !ok || id == "" {
		return "", false
	}
	return id, true
}

func stringAttr(m map[string]events.DynamoDBAttributeValue, name string) (string, bool) {
	v, ok := m[name]
	if !ok || v.DataType() != events.DataTypeString {
		return "", false
	}
	return v.String(), true
}
