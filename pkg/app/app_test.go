package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/app"
	"github.com/mailroom/mailroom/pkg/awstest"
	"github.com/mailroom/mailroom/pkg/config"
	"github.com/mailroom/mailroom/pkg/team"
)

func TestMain(m *testing.M) { awstest.Main(m) }

var tables atomic.Int64

// awsApp is the app on the AWS adapters against moto: a fresh table, a team with a key and the
// domain example.com, served by httptest. local runs delivery in process; without it nothing
// but the request path touches the table (as in Lambda, where the stream feeds the worker).
func awsApp(t *testing.T, local bool, configure ...func(*config.Config)) (*app.App, *httptest.Server, *awstest.Calls, string) {
	t.Helper()
	ctx := context.Background()
	awsCfg := awstest.Shared(t).Config(t)
	calls := &awstest.Calls{}
	calls.Install(&awsCfg)
	cfg := config.Config{TableName: fmt.Sprintf("mailroom-app-%d", tables.Add(1)), CreateTable: true, DataDir: t.TempDir(),
		Workers: 2, AuthCacheTTL: time.Minute, LogLevel: slog.LevelError + 4}
	for _, c := range configure {
		c(&cfg)
	}
	a, err := app.NewWithAWS(ctx, cfg, awsCfg, app.Options{Local: local})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Services.Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = a.Close(context.Background())
	})
	admin := &team.Admin{Store: a.Store, Now: time.Now}
	key, _, err := admin.Bootstrap(ctx, "")
	if err != nil || key == "" {
		t.Fatalf("bootstrap: %q %v", key, err)
	}
	if code, body := call(t, srv, key, "POST", "/api/v1/domains", `{"name":"example.com","region":"us-east-1"}`, nil); code != 200 {
		t.Fatalf("create domain: %d %s", code, body)
	}
	// The SES identity is this stack's (table's) own: the next test's stack, on the same moto,
	// may not take it over, so it goes with the test.
	t.Cleanup(func() {
		if code, body := call(t, srv, key, "DELETE", "/api/v1/domains/1", "", nil); code != 200 {
			t.Errorf("delete domain: %d %s", code, body)
		}
	})
	return a, srv, calls, key
}

func call(t *testing.T, srv *httptest.Server, key, method, path, body string, headers map[string]string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestSendBudgetOnDynamoDB: with the API key and the team's domains cached, an unscheduled
// single send with an Idempotency-Key costs at most 3 DynamoDB calls (claim; content and list
// entry; the email, whose counts the stream applies), and without a key 2.
func TestSendBudgetOnDynamoDB(t *testing.T) {
	_, srv, calls, key := awsApp(t, false)
	body := `{"to":"someone@example.org","from":"hello@example.com","subject":"s","text":"t"}`
	// The first send fills the key and domain caches, as in a warm Lambda.
	if code, b := call(t, srv, key, "POST", "/api/v1/emails", body, map[string]string{"Idempotency-Key": "warm"}); code != 200 {
		t.Fatalf("warm-up send: %d %s", code, b)
	}
	calls.Reset()
	if code, b := call(t, srv, key, "POST", "/api/v1/emails", body, map[string]string{"Idempotency-Key": "counted"}); code != 200 {
		t.Fatalf("send: %d %s", code, b)
	}
	got := calls.Reset()
	if n := dynamoCalls(got); n > 3 {
		t.Errorf("send with Idempotency-Key made %d DynamoDB calls, budget 3: %v", n, got)
	}
	if got["DynamoDB.PutItem"] != 2 || got["DynamoDB.BatchWriteItem"] != 1 || got["DynamoDB.TransactWriteItems"] != 0 {
		t.Errorf("calls = %v, want claim (PutItem), content and list entry (BatchWriteItem), email (a conditional PutItem, no transaction)", got)
	}
	if code, b := call(t, srv, key, "POST", "/api/v1/emails", body, nil); code != 200 {
		t.Fatalf("send: %d %s", code, b)
	}
	if got := calls.Reset(); dynamoCalls(got) != 2 {
		t.Errorf("send without a key made %v, want 2 calls", got)
	}
	// A replay is two calls: the claim returns the record, and its email is found.
	if code, _ := call(t, srv, key, "POST", "/api/v1/emails", body, map[string]string{"Idempotency-Key": "counted"}); code != 200 {
		t.Fatal("replay failed")
	}
	if got := calls.Reset(); dynamoCalls(got) != 2 || got["DynamoDB.PutItem"] != 1 || got["DynamoDB.Query"] != 1 {
		t.Errorf("replay made %v, want the claim (PutItem) and the email's read (Query)", got)
	}
}

func dynamoCalls(m map[string]int) int {
	total := 0
	for op, n := range m {
		if strings.HasPrefix(op, "DynamoDB.") {
			total += n
		}
	}
	return total
}

// TestAWSBackendDelivers: the same API on DynamoDB + SES (moto) sends an email to SENT.
func TestAWSBackendDelivers(t *testing.T) {
	_, srv, _, key := awsApp(t, true)
	code, b := call(t, srv, key, "POST", "/api/v1/emails", `{"to":"someone@example.org","from":"hello@example.com","subject":"s","text":"t"}`, nil)
	if code != 200 {
		t.Fatalf("send: %d %s", code, b)
	}
	var out struct{ EmailID string }
	_ = json.Unmarshal(b, &out)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, b := call(t, srv, key, "GET", "/api/v1/emails/"+out.EmailID, "", nil)
		if strings.Contains(string(b), `"latestStatus":"SENT"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("email never SENT: %s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAWSBackendWebhooks: the local server on the AWS backend reads its table's stream for the
// webhooks too (STREAM_COUNTS), as the WebhookEvents function does on AWS: a contact created
// and an email sent reach a registered webhook.
func TestAWSBackendWebhooks(t *testing.T) {
	a, srv, _, key := awsApp(t, true, func(c *config.Config) { c.StreamCounts = true })
	var mu sync.Mutex
	var got []string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("X-UseSend-Event"))
		mu.Unlock()
	}))
	defer rcv.Close()
	if code, b := call(t, srv, key, "POST", "/api/v1/webhooks", `{"url":"`+rcv.URL+`","eventTypes":["contact.created","email.sent"]}`, nil); code != 200 {
		t.Fatalf("create webhook: %d %s", code, b)
	}
	if err := a.Start(context.Background(), time.Hour); err != nil {
		t.Fatal(err)
	}
	var book struct{ ID string }
	code, b := call(t, srv, key, "POST", "/api/v1/contactBooks", `{"name":"hooks"}`, nil)
	if code != 200 || json.Unmarshal(b, &book) != nil || book.ID == "" {
		t.Fatalf("create book: %d %s", code, b)
	}
	if code, b := call(t, srv, key, "POST", "/api/v1/contactBooks/"+book.ID+"/contacts", `{"email":"ann@example.org"}`, nil); code != 200 {
		t.Fatalf("create contact: %d %s", code, b)
	}
	if code, b := call(t, srv, key, "POST", "/api/v1/emails", `{"to":"someone@example.org","from":"hello@example.com","subject":"s","text":"t"}`, nil); code != 200 {
		t.Fatalf("send: %d %s", code, b)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		types := slices.Clone(got)
		mu.Unlock()
		if slices.Contains(types, "contact.created") && slices.Contains(types, "email.sent") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook calls received: %v; want contact.created and email.sent", types)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
