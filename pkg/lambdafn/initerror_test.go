package lambdafn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/mailroom/mailroom/pkg/lambdafn"
)

// TestColdStartFailureReachesTheRuntime: a cold start that fails (here SendEmail without its
// schedule group) is posted to the Runtime API's init error path with its cause, so Lambda
// answers with the reason instead of a bare Runtime.ExitError; outside Lambda nothing is sent.
func TestColdStartFailureReachesTheRuntime(t *testing.T) {
	env := map[string]string{"TABLE_NAME": "t"}
	_, cause := lambdafn.Build(context.Background(), "SendEmail", func(k string) string { return env[k] }, aws.Config{}, lambdafn.BuildOptions{})
	if cause == nil || !strings.Contains(cause.Error(), "SCHEDULE_GROUP") {
		t.Fatalf("cold start without SCHEDULE_GROUP: %v", cause)
	}
	// TABLE_NAME has a default only for the local server: a function names it with the rest.
	_, err := lambdafn.Build(context.Background(), "SendEmail", func(string) string { return "" }, aws.Config{}, lambdafn.BuildOptions{})
	if err == nil || !strings.Contains(err.Error(), "missing environment variables TABLE_NAME, ") || !strings.Contains(err.Error(), "SCHEDULE_GROUP") {
		t.Errorf("cold start without TABLE_NAME and SCHEDULE_GROUP: %v", err)
	}
	type posted struct {
		path, errType string
		body          map[string]any
	}
	got := make(chan posted, 1)
	rt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		got <- posted{r.Method + " " + r.URL.Path, r.Header.Get("Lambda-Runtime-Function-Error-Type"), body}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer rt.Close()
	if err := lambdafn.ReportInitError(func(k string) string { return env[k] }, rt.Client(), cause); err != nil {
		t.Fatalf("outside Lambda: %v", err)
	}
	select {
	case p := <-got:
		t.Fatalf("outside Lambda a report was sent: %+v", p)
	default:
	}
	env["AWS_LAMBDA_RUNTIME_API"] = strings.TrimPrefix(rt.URL, "http://")
	if err := lambdafn.ReportInitError(func(k string) string { return env[k] }, rt.Client(), cause); err != nil {
		t.Fatal(err)
	}
	p := <-got
	if p.path != "POST /2018-06-01/runtime/init/error" || p.errType != lambdafn.InitErrorType ||
		p.body["errorType"] != lambdafn.InitErrorType || !strings.Contains(p.body["errorMessage"].(string), "SCHEDULE_GROUP") {
		t.Errorf("posted %+v", p)
	}
}

// TestLibraryLogsAreJSONErrors: what the runtime library prints with the log package comes out
// as a JSON record at ERROR through the function's logger, even one that drops INFO.
func TestLibraryLogsAreJSONErrors(t *testing.T) {
	prev := slog.Default()
	defer func() { slog.SetDefault(prev); slog.SetLogLoggerLevel(slog.LevelInfo) }()
	var buf bytes.Buffer
	lambdafn.LibraryLogsTo(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	log.Printf("%s", `{"errorMessage":"boom","errorType":"wrapError"}`)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("not one JSON record: %q", buf.String())
	}
	if rec["level"] != "ERROR" || !strings.Contains(fmt.Sprint(rec["msg"]), "boom") {
		t.Errorf("record %v", rec)
	}
}
