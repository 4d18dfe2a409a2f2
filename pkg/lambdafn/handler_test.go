package lambdafn_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/mailroom/mailroom/pkg/ingest"
	"github.com/mailroom/mailroom/pkg/lambdafn"
	"github.com/mailroom/mailroom/pkg/lambdafn/withmailer"
	"github.com/mailroom/mailroom/pkg/sesevent"
)

func TestDir(t *testing.T) {
	for name, want := range map[string]string{
		"SendEmail": "send-email", "VerifyDomain": "verify-domain", "SendWorker": "send-worker", "X": "x",
		"SESEvents": "ses-events", "DomainCheck": "domain-check", "ListSuppressions": "list-suppressions",
		"GetDKIM2Record": "get-dkim2-record", "HTTPAPI": "httpapi",
	} {
		if got := lambdafn.Dir(name); got != want {
			t.Errorf("Dir(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestNames(t *testing.T) {
	names := lambdafn.Names()
	bg := lambdafn.Background()
	if len(names) < len(bg) || !slices.Equal(names[len(names)-len(bg):], bg) {
		t.Errorf("Names() = %v, want the background functions %v last", names, bg)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("Names() lists %s twice", n)
		}
		seen[n] = true
	}
}

// TestHTTP covers what the adapter adds to the API's handlers: the request id, header values
// kept whole but for the spaces around them (as net/http reads them locally), and no Go error
// for an event it cannot convert.
func TestHTTP(t *testing.T) {
	var got *http.Request
	h := lambdafn.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	req := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "POST /api/v1/emails", RawPath: "/api/v1/emails",
		RawQueryString: "a=1",
		Headers: map[string]string{
			"idempotency-key": " order-1042,retry\t", "content-type": "application/json",
			"authorization": "Bearer k",
		},
		Cookies: []string{"a=b", "c=d"},
		Body:    `{"x":1}`,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID: "Xk3Zsh8RoAMEVxg=",
			HTTP:      events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/api/v1/emails"},
		},
	}
	resp, err := h(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusCreated || resp.Body != `{"ok":true}` {
		t.Errorf("response = %d %s", resp.StatusCode, resp.Body)
	}
	if got.Method != "POST" || got.URL.Path != "/api/v1/emails" || got.URL.Query().Get("a") != "1" {
		t.Errorf("request = %s %s", got.Method, got.URL)
	}
	for name, want := range map[string][]string{
		"Idempotency-Key": {"order-1042,retry"},
		"X-Request-Id":    {"Xk3Zsh8RoAMEVxg="},
		"Authorization":   {"Bearer k"},
		"Cookie":          {"a=b; c=d"},
	} {
		if v := got.Header.Values(name); !slices.Equal(v, want) {
			t.Errorf("header %s = %q, want %q", name, v, want)
		}
	}

	// A caller's X-Request-Id wins over API Gateway's.
	req.Headers["x-request-id"] = "mine"
	if _, err := h(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if v := got.Header.Get("X-Request-Id"); v != "mine" {
		t.Errorf("X-Request-Id = %q, want the caller's", v)
	}

	// A body that says it is base64 and is not: the API's 400, with the request's id.
	req.IsBase64Encoded, req.Body = true, "not base64!"
	resp, err = h(context.Background(), req)
	if err != nil {
		t.Fatalf("got a Go error: %v", err)
	}
	var body struct{ Error struct{ Code string } }
	if resp.StatusCode != http.StatusBadRequest || json.Unmarshal([]byte(resp.Body), &body) != nil ||
		body.Error.Code != "BAD_REQUEST" || resp.Headers["X-Request-Id"] != "mine" {
		t.Errorf("response = %d %v %s, want the API's 400 envelope with the request id", resp.StatusCode, resp.Headers, resp.Body)
	}
	// A path with a malformed %-escape is the caller's error too: a 400, not a failed
	// conversion.
	req.IsBase64Encoded, req.Body, req.RawPath = false, "", "/a%zz"
	resp, err = h(context.Background(), req)
	if err != nil || resp.StatusCode != http.StatusBadRequest || json.Unmarshal([]byte(resp.Body), &body) != nil ||
		body.Error.Code != "BAD_REQUEST" || resp.Headers["X-Request-Id"] != "mine" {
		t.Errorf("/a%%zz: response = %d %s, %v; want the API's 400 envelope", resp.StatusCode, resp.Body, err)
	}
	// sam local start-api sends no domainName: the request's host is the Host asked for.
	req.RawPath, req.Headers["host"] = "/api/v1/emails", "127.0.0.1:3000"
	if _, err := h(context.Background(), req); err != nil || got.Host != "127.0.0.1:3000" {
		t.Errorf("without a domainName: host %q, %v; want the Host header's", got.Host, err)
	}
	// A named stage's default endpoint puts the stage before the path; a path the stage's name
	// merely starts (a stage named api) or a custom domain's (stage taken off) is left alone.
	for _, c := range []struct{ stage, raw, want string }{
		{"prod", "/prod/api/v1/emails", "/api/v1/emails"},
		{"api", "/api/api/v1/emails", "/api/v1/emails"},
		{"api", "/api/v1/emails", "/api/v1/emails"},
		{"prod", "/api/v1/emails", "/api/v1/emails"},
		{"$default", "/api/v1/emails", "/api/v1/emails"},
	} {
		req.RawPath, req.RequestContext.Stage = c.raw, c.stage
		if _, err := h(context.Background(), req); err != nil || got.URL.Path != c.want {
			t.Errorf("stage %s, rawPath %s: served %s, %v; want %s", c.stage, c.raw, got.URL.Path, err, c.want)
		}
	}
	req.RawPath, req.RequestContext.Stage = "/api/v1/emails", ""
	// A Host that makes no URL is left alone (the adapter's https:// with no host then).
	for _, bad := range []string{"host:abc", "a:b:c", "x/y", "a b", "h:", "h:99999"} {
		req.Headers["host"] = bad
		if resp, err := h(context.Background(), req); err != nil || resp.StatusCode != http.StatusCreated {
			t.Errorf("Host %q: %d %v, want the request served", bad, resp.StatusCode, err)
		}
	}
	req.Headers["host"] = "[::1]:3000"
	if _, err := h(context.Background(), req); err != nil || got.Host != "[::1]:3000" {
		t.Errorf("Host [::1]:3000: host %q, %v", got.Host, err)
	}
	// An event the adapter cannot convert otherwise is a JSON 500, not a Go error (a 502 at
	// API Gateway).
	req.RequestContext.DomainName = "bad host"
	resp, err = h(context.Background(), req)
	if err != nil {
		t.Fatalf("got a Go error: %v", err)
	}
	if resp.StatusCode != http.StatusInternalServerError || json.Unmarshal([]byte(resp.Body), &body) != nil ||
		body.Error.Code != "INTERNAL_SERVER_ERROR" {
		t.Errorf("response = %d %s, want the API's 500 envelope", resp.StatusCode, resp.Body)
	}
}

type fakeDeliverer struct {
	mu    sync.Mutex
	calls []string
	fail  map[string]bool
}

func (f *fakeDeliverer) Deliver(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, id)
	if f.fail[id] {
		return errors.New("table unavailable")
	}
	return nil
}

// record is a stream record as Lambda delivers it: an event id (a hex string, not what a failure
// is reported by) and a sequence number (the stream's own position, which is).
func record(seq, name, pk, sk string) events.DynamoDBEventRecord {
	return events.DynamoDBEventRecord{
		EventID: fmt.Sprintf("%032x", seq), EventName: name,
		Change: events.DynamoDBStreamRecord{
			SequenceNumber: "1117000000000000000000" + seq,
			Keys: map[string]events.DynamoDBAttributeValue{
				"PK": events.NewStringAttribute(pk), "SK": events.NewStringAttribute(sk),
			},
		},
	}
}

func TestSendWorker(t *testing.T) {
	f := &fakeDeliverer{fail: map[string]bool{"em2": true, "em5": true}}
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		record("1", "INSERT", "EMAIL#em1", "EMAIL"),
		record("2", "INSERT", "EMAIL#em2", "EMAIL"),
		record("3", "INSERT", "EMAIL#em3", "EVENT#x"), // an event of an email
		record("4", "REMOVE", "EMAIL#em4", "EMAIL"),   // a deleted email
		record("5", "MODIFY", "EMAIL#em5", "EMAIL"),   // e.g. SCHEDULED → QUEUED
		record("6", "INSERT", "TEAM#1", "DOMAIN#1"),   // not an email
		record("7", "INSERT", "EMAIL#", "EMAIL"),      // no id
		{EventID: "8", EventName: "INSERT", Change: events.DynamoDBStreamRecord{SequenceNumber: "11170000000000000000008"}}, // no keys
		record("9", "INSERT", "EMAIL#em9", "CONTENT#r#0001"),                                                                // a content chunk
	}}
	resp, err := lambdafn.SendWorker(f, nil)(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(f.calls)
	if want := []string{"em1", "em2", "em5"}; !slices.Equal(f.calls, want) {
		t.Errorf("delivered %v, want %v", f.calls, want)
	}
	var failed []string
	for _, b := range resp.BatchItemFailures {
		failed = append(failed, b.ItemIdentifier)
	}
	// Reported by sequence number (Lambda's contract for streams), in batch order.
	want := []string{ev.Records[1].Change.SequenceNumber, ev.Records[4].Change.SequenceNumber}
	if !slices.Equal(failed, want) {
		t.Errorf("batch item failures %v, want %v (the records' sequence numbers, in batch order)", failed, want)
	}
	// The response is what AWS documents for partial batch responses:
	// {"batchItemFailures":[{"itemIdentifier":"<SequenceNumber>"}]}.
	raw, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"batchItemFailures":[{"itemIdentifier":"` + want[0] + `"},{"itemIdentifier":"` + want[1] + `"}]}`
	if string(raw) != wantJSON {
		t.Errorf("response %s, want %s", raw, wantJSON)
	}
}

// TestSendWorkerSample: one failing record of the sample batch is reported by that record's
// sequence number as the sample (events/send-worker.json, AWS's shape) carries it.
func TestSendWorkerSample(t *testing.T) {
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(readSample(t, "send-worker"), &ev); err != nil {
		t.Fatal(err)
	}
	id, ok := lambdafn.EmailID(ev.Records[0])
	if !ok {
		t.Fatal("the sample's first record is not an email")
	}
	seq := ev.Records[0].Change.SequenceNumber
	if seq == "" || seq == ev.Records[0].EventID {
		t.Fatalf("sample sequence number %q (event id %q): the sample must carry both", seq, ev.Records[0].EventID)
	}
	out, err := lambda.NewHandler(lambdafn.SendWorker(&fakeDeliverer{fail: map[string]bool{id: true}}, nil)).
		Invoke(context.Background(), readSample(t, "send-worker"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"batchItemFailures":[{"itemIdentifier":"` + seq + `"}]}`; string(out) != want {
		t.Errorf("response %s, want %s", out, want)
	}
}

func TestScheduledSend(t *testing.T) {
	var got []byte
	fail := errors.New("email not written yet")
	var ret error
	h := lambdafn.ScheduledSend(func(_ context.Context, p []byte) error { got = p; return ret }, nil)
	payload := `{"emailId":"emlioj4b5t2l2imhrkpsinhnqr","scheduledAt":"2025-03-13T09:00:00Z"}`
	if err := h(context.Background(), json.RawMessage(payload)); err != nil || string(got) != payload {
		t.Errorf("fire got %s, err %v; want the payload as is", got, err)
	}
	ret = fail
	if err := h(context.Background(), json.RawMessage(payload)); !errors.Is(err, fail) {
		t.Errorf("err = %v, want the fire error (the scheduler retries)", err)
	}
}

func TestSESEvents(t *testing.T) {
	delivery := json.RawMessage(`{"eventType":"Delivery","mail":{"messageId":"m1","timestamp":"2025-03-12T19:03:58Z","destination":["a@example.org"]},
		"delivery":{"timestamp":"2025-03-12T19:04:00Z","recipients":["a@example.org"]}}`)
	clock := time.Date(2025, 3, 12, 19, 5, 0, 0, time.UTC) // a minute after SES accepted it
	env := func(detail json.RawMessage) events.CloudWatchEvent {
		return events.CloudWatchEvent{ID: "1", Source: sesevent.Source, DetailType: "Email Delivered", Detail: detail}
	}
	var published []string
	var ret error
	h := lambdafn.SESEvents(func(_ context.Context, ev sesevent.Event) error {
		published = append(published, ev.EventType)
		return ret
	}, func() time.Time { return clock }, nil)
	ctx := context.Background()
	if err := h(ctx, env(delivery)); err != nil || !slices.Equal(published, []string{"Delivery"}) {
		t.Errorf("published %v, err %v", published, err)
	}
	ret = ingest.ErrUnknownEmail // not visible yet: retried for a while
	if err := h(ctx, env(delivery)); !errors.Is(err, ingest.ErrUnknownEmail) {
		t.Errorf("email not found a minute after the send: %v, want the error (EventBridge retries)", err)
	}
	clock = clock.Add(lambdafn.UnknownEmailRetry) // another sender's message through the same set: dropped
	if err := h(ctx, env(delivery)); err != nil {
		t.Errorf("unknown email long after the send: %v, want nil", err)
	}
	ret = errors.New("table unavailable") // retried by EventBridge
	if err := h(ctx, env(delivery)); err == nil {
		t.Error("store failure: nil, want the error")
	}
	ret, published = nil, nil
	if err := h(ctx, env(json.RawMessage(`{"eventType":"Something New","mail":{}}`))); err != nil || published != nil {
		t.Errorf("unknown type: err %v, published %v; want dropped", err, published)
	}
	if err := h(ctx, env(json.RawMessage(`{"eventType":"Bounce","mail":{}}`))); err == nil || published != nil {
		t.Errorf("bounce without bounce: err %v, published %v; want an error", err, published)
	}
}

func TestPeriodic(t *testing.T) {
	n, ret := 0, error(nil)
	h := lambdafn.Periodic("job", func(context.Context) (int, error) { n++; return 3, ret }, nil)
	if err := h(context.Background(), events.CloudWatchEvent{DetailType: "Scheduled Event"}); err != nil || n != 1 {
		t.Errorf("runs %d, err %v", n, err)
	}
	ret = errors.New("boom")
	if err := h(context.Background(), events.CloudWatchEvent{}); !errors.Is(err, ret) {
		t.Errorf("err = %v, want the job's", err)
	}
}

func TestCampaignBatch(t *testing.T) {
	var got []byte
	var ret error
	h := lambdafn.CampaignBatch(func(_ context.Context, p []byte) error { got = p; return ret }, nil)
	payload := `{"campaignId":"cpw6n3kq7zt2mr5xb4hv6jd3pa","teamId":1,"step":0}`
	if err := h(context.Background(), json.RawMessage(payload)); err != nil || string(got) != payload {
		t.Errorf("fire got %s, err %v; want the payload as is", got, err)
	}
	ret = errors.New("table unavailable")
	if err := h(context.Background(), json.RawMessage(payload)); !errors.Is(err, ret) {
		t.Errorf("err = %v, want the fire error (the scheduler retries)", err)
	}
}

func TestHousekeeping(t *testing.T) {
	n, ret := 0, error(nil)
	h := lambdafn.Housekeeping(func(context.Context) error { n++; return ret }, nil)
	if err := h(context.Background(), events.CloudWatchEvent{DetailType: "Scheduled Event"}); err != nil || n != 1 {
		t.Errorf("runs %d, err %v", n, err)
	}
	// A failed part fails the invocation (the function's Errors metric, its alarm).
	ret = errors.New("pending emails: table unavailable")
	if err := h(context.Background(), events.CloudWatchEvent{}); !errors.Is(err, ret) || n != 2 {
		t.Errorf("runs %d, err %v; want the housekeeping's error", n, err)
	}
}

// TestBuildRefusesPlugsThatDifferFromPorts: a function whose main passes fewer plugs than its
// ports name, or more, or that is not a function, fails to build (a test, never a cold start).
func TestBuildRefusesPlugsThatDifferFromPorts(t *testing.T) {
	env := map[string]string{"TABLE_NAME": "t", "SES_CONFIGURATION_SET": "s", "SES_MAX_SEND_RATE": "0"}
	getenv := func(k string) string { return env[k] }
	cfg := lambdafn.AWSConfig(func(k string) string { return map[string]string{"AWS_REGION": "eu-west-1"}[k] })
	ctx := context.Background()
	if _, err := lambdafn.Build(ctx, "SendWorker", getenv, cfg, lambdafn.BuildOptions{}); err == nil ||
		!strings.Contains(err.Error(), "SES mailer") {
		t.Errorf("SendWorker without its mailer: %v", err)
	}
	if _, err := lambdafn.Build(ctx, "GetTemplate", getenv, cfg, lambdafn.BuildOptions{}, withmailer.Mailer); err == nil ||
		!strings.Contains(err.Error(), "do not name") {
		t.Errorf("GetTemplate with a mailer: %v", err)
	}
	if _, err := lambdafn.Build(ctx, "NoSuchFunction", getenv, cfg, lambdafn.BuildOptions{}); err == nil {
		t.Error("an unknown function built")
	}
	w, err := lambdafn.Build(ctx, "SendWorker", getenv, cfg, lambdafn.BuildOptions{}, withmailer.Mailer)
	if err != nil || w.Deliverer == nil || w.AWS.Region != "eu-west-1" {
		t.Fatalf("SendWorker with its mailer: %+v, %v", w, err)
	}
	// A function's variables must all be set: a deployment that does not configure a port fails.
	delete(env, "SES_CONFIGURATION_SET")
	if _, err := lambdafn.Build(ctx, "SendWorker", getenv, cfg, lambdafn.BuildOptions{}, withmailer.Mailer); err == nil ||
		!strings.Contains(err.Error(), "SES_CONFIGURATION_SET") {
		t.Errorf("SendWorker without its configuration set: %v", err)
	}
}

func TestAWSConfig(t *testing.T) {
	env := map[string]string{"AWS_DEFAULT_REGION": "eu-central-1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_SESSION_TOKEN": "token"}
	cfg := lambdafn.AWSConfig(func(k string) string { return env[k] })
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil || cfg.Region != "eu-central-1" || creds.AccessKeyID != "AKID" || creds.SessionToken != "token" || cfg.BaseEndpoint != nil {
		t.Errorf("config %+v, credentials %+v, %v", cfg, creds, err)
	}
	env["AWS_REGION"], env["AWS_ENDPOINT_URL"] = "us-west-2", "http://127.0.0.1:5000"
	cfg = lambdafn.AWSConfig(func(k string) string { return env[k] })
	if cfg.Region != "us-west-2" || cfg.BaseEndpoint == nil || *cfg.BaseEndpoint != "http://127.0.0.1:5000" {
		t.Errorf("config %+v: AWS_REGION wins, AWS_ENDPOINT_URL is the base endpoint", cfg)
	}
}

// TestHTTPLargeBodies: a large body goes base64-encoded when that is shorter in the
// invocation's response than as a JSON string as the runtime writes it (without HTML
// escaping: < costs one byte, a quote or a backslash two), and as it is otherwise; decoded, it
// is the handler's bytes either way.
func TestHTTPLargeBodies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string
		base64 bool
	}{
		{"html marks", `{"html":"` + strings.Repeat("<p>&</p>", 64<<10) + `"}`, false},
		{"escaped quotes", `{"properties":{"json":"` + strings.Repeat(`{"a":"b"}`, 48<<10) + `"}}`, true},
		{"plain text", `{"text":"` + strings.Repeat("hello world ", 48<<10) + `"}`, false},
		{"small marks", `{"html":"<p>&amp;</p>"}`, false},
	} {
		h := lambdafn.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(tc.body))
		}))
		resp, err := h(context.Background(), events.APIGatewayV2HTTPRequest{
			Version: "2.0", RouteKey: "GET /api/v1/emails/{emailId}", RawPath: "/api/v1/emails/x",
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/api/v1/emails/x"},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		got := resp.Body
		if resp.IsBase64Encoded {
			raw, err := base64.StdEncoding.DecodeString(resp.Body)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			got = string(raw)
		}
		if resp.IsBase64Encoded != tc.base64 || got != tc.body {
			t.Errorf("%s: base64 %v (want %v), body intact %v", tc.name, resp.IsBase64Encoded, tc.base64, got == tc.body)
		}
		var buf bytes.Buffer // as aws-lambda-go writes the invocation's response
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(resp)
		envelope := buf.Bytes()
		if limit := base64.StdEncoding.EncodedLen(len(tc.body)) + 1024; len(envelope) > limit {
			t.Errorf("%s: the invocation's response is %d bytes for a body of %d, want at most %d",
				tc.name, len(envelope), len(tc.body), limit)
		}
	}
}

// TestDecodedPathKeepsItsParameters: an HTTP API hands the function its rawPath decoded, so an
// id with '%', '#', '?' or a space (a suppressed address may hold any) reaches the handler
// exactly, built from the route and its path parameters; a greedy parameter keeps its
// slashes; a rawPath still encoded (a REST API, sam local) ends the same.
func TestDecodedPathKeepsItsParameters(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("DELETE /api/v1/suppressions/{email}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.PathValue("email")))
	})
	mux.HandleFunc("GET /console/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.PathValue("rest") + "|" + r.URL.RawQuery))
	})
	h := lambdafn.HTTP(mux)
	call := func(method, routeKey, rawPath, query string, params map[string]string) string {
		t.Helper()
		resp, err := h(context.Background(), events.APIGatewayV2HTTPRequest{
			Version: "2.0", RouteKey: routeKey, RawPath: rawPath, RawQueryString: query, PathParameters: params,
			RequestContext: events.APIGatewayV2HTTPRequestContext{RouteKey: routeKey,
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: rawPath}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Errorf("%s %s: %d %s", method, rawPath, resp.StatusCode, resp.Body)
		}
		return resp.Body
	}
	for _, email := range []string{"a%b@example.org", "a%41b@example.org", "a#b@example.org", "a?b@example.org", "a b@example.org", "zoë@example.org"} {
		params := map[string]string{"email": email}
		if got := call("DELETE", "DELETE /api/v1/suppressions/{email}", "/api/v1/suppressions/"+email, "", params); got != email {
			t.Errorf("decoded rawPath: the handler got %q, want %q", got, email)
		}
		encoded := "/api/v1/suppressions/" + url.PathEscape(email)
		if got := call("DELETE", "DELETE /api/v1/suppressions/{email}", encoded, "", params); got != email {
			t.Errorf("encoded rawPath %s: the handler got %q, want %q", encoded, got, email)
		}
	}
	if got := call("GET", "GET /console/{proxy+}", "/console/emails/em1", "page=2", map[string]string{"proxy": "emails/em1"}); got != "emails/em1|page=2" {
		t.Errorf("greedy parameter: %q", got)
	}
}
