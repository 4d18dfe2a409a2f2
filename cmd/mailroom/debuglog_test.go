package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestDebugLogLines: LOG_LEVEL=debug (README's table) adds, on the server as `make run`
// starts it, each request's method and path, a line per event the outbox publishes and a line
// per batch of webhook calls; at info, none of them.
func TestDebugLogLines(t *testing.T) {
	debug := runAndSend(t, "debug")
	for _, want := range []string{`"msg":"outbox event published"`, `"msg":"webhook events"`, `"method":"POST","path":"/api/v1/emails"`} {
		if !strings.Contains(debug, want) {
			t.Errorf("LOG_LEVEL=debug: no line with %s:\n%s", want, debug)
		}
	}
	info := runAndSend(t, "info")
	for _, absent := range []string{`"level":"DEBUG"`, `"method":`} {
		if strings.Contains(info, absent) {
			t.Errorf("LOG_LEVEL=info: a line with %s:\n%s", absent, info)
		}
	}
	if !strings.Contains(info, `"msg":"request"`) {
		t.Errorf("LOG_LEVEL=info: no request line:\n%s", info)
	}
}

// runAndSend starts the server at level, adds a webhook (a receiver on loopback), sends an
// email, waits for its email.delivered call, stops the server and returns what it logged.
func runAndSend(t *testing.T, level string) string {
	t.Helper()
	const key = "us_debuglog00_0123456789abcdef0123456789abcdef"
	var (
		mu    sync.Mutex
		calls []string
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		calls = append(calls, string(b))
		mu.Unlock()
	}))
	defer recv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MAILROOM_TEST_MAIN=1", "MAILROOM_TEST_ARGS=", "DATA_DIR="+t.TempDir(),
		"HOST=127.0.0.1", fmt.Sprintf("PORT=%d", port), "LOG_LEVEL="+level, "BOOTSTRAP_API_KEY="+key)
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = io.Discard, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	base := fmt.Sprintf("http://127.0.0.1:%d/api/v1", port)
	call := func(path, body string) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
	}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the server did not start:\n%s", logs.String())
		}
	}
	call("/domains", `{"name":"example.com","region":"us-east-1"}`)
	call("/webhooks", `{"url":"`+recv.URL+`","eventTypes":["email.delivered"]}`)
	call("/emails", `{"from":"hi@example.com","to":"you@example.org","subject":"Hello","text":"It works"}`)
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		n := len(calls)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("no webhook call")
		}
	}
	var ev struct{ Type string }
	mu.Lock()
	_ = json.Unmarshal([]byte(calls[0]), &ev)
	mu.Unlock()
	if ev.Type != "email.delivered" {
		t.Errorf("webhook call of %q, want email.delivered", ev.Type)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Errorf("after SIGINT: %v", err)
	}
	return logs.String()
}

// lockedBuffer is what the server writes to while the test may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
