package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/mailroom/mailroom/pkg/awstest"
	"github.com/mailroom/mailroom/pkg/config"
)

const bootstrapKey = "us_abcdefghij_0123456789abcdef0123456789abcdef"

func post(t *testing.T, url, key, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

func TestEmbeddedServerLifecycle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := config.Config{Backend: config.BackendEmbedded, DataDir: dir, Workers: 2, AuthCacheTTL: time.Minute, LogLevel: slog.LevelError + 4}
	var banner bytes.Buffer
	s, err := Start(ctx, cfg, "127.0.0.1:0", &banner)
	if err != nil {
		t.Fatal(err)
	}
	if s.APIKey == "" || !strings.Contains(banner.String(), s.APIKey) || !strings.Contains(banner.String(), s.URL+"/api/v1") ||
		!strings.Contains(banner.String(), filepath.Join(dir, "outbox")) || !strings.Contains(banner.String(), "usesend-js") {
		t.Errorf("banner lacks key, URL, outbox or SDK snippet:\n%s", banner.String())
	}
	resp, err := http.Get(s.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	// The server's own paths answer another method as the route table's do.
	for _, p := range []string{"/healthz", "/api/v1/doc"} {
		code, out := post(t, s.URL+p, "", `{}`)
		e, _ := out["error"].(map[string]any)
		if code != 405 || e["code"] != "METHOD_NOT_ALLOWED" {
			t.Errorf("POST %s = %d %v", p, code, out)
		}
	}
	if code, out := post(t, s.URL+"/api/v1/domains", s.APIKey, `{"name":"example.com","region":"us-east-1"}`); code != 200 || out["status"] != "SUCCESS" {
		t.Fatalf("domain: %d %v", code, out)
	}
	code, out := post(t, s.URL+"/api/v1/emails", s.APIKey, `{"from":"hi@example.com","to":"you@example.org","subject":"Hello","text":"It works"}`)
	if code != 200 {
		t.Fatalf("send: %d %v", code, out)
	}
	id := out["emailId"].(string)
	eml := filepath.Join(dir, "outbox", id+".eml")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(eml); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("message never reached the outbox")
		}
		time.Sleep(20 * time.Millisecond)
	}
	key := s.APIKey
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if last := lastLine(banner.String()); last != "Mailroom stopped: nothing queued" {
		t.Errorf("last line %q", last)
	}
	// Data survives a restart and no second key is made; port 0 is the last run's port again,
	// so the links in the emails it sent still work.
	banner.Reset()
	s2, err := Start(ctx, cfg, "127.0.0.1:0", &banner)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Shutdown(ctx)
	if s2.APIKey != "" {
		t.Error("a second key was created on restart")
	}
	if s2.URL != s.URL {
		t.Errorf("restarted on %s, the last run was on %s", s2.URL, s.URL)
	}
	req, _ := http.NewRequest("GET", s2.URL+"/api/v1/emails/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("email after restart: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestPortZeroTakenSaysSo: under PORT=0 the last run's port is used again; when something else
// holds it another is picked, and listen says which was lost (Start logs it: the links already
// sent point there), and the new one is kept for the next start.
func TestPortZeroTakenSaysSo(t *testing.T) {
	dir := t.TempDir()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	last := fmt.Sprint(held.Addr().(*net.TCPAddr).Port)
	if err := os.WriteFile(filepath.Join(dir, "port"), []byte(last+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{Backend: config.BackendEmbedded, DataDir: dir}
	ln, lost, err := listen(cfg, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	now := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	kept, _ := os.ReadFile(filepath.Join(dir, "port"))
	if lost != last || now == last || strings.TrimSpace(string(kept)) != now {
		t.Errorf("lost %q (want %s), listening on %s, kept %q", lost, last, now, kept)
	}
	ln.Close()
	if ln2, lost, err := listen(cfg, "127.0.0.1:0"); err != nil || lost != "" || fmt.Sprint(ln2.Addr().(*net.TCPAddr).Port) != now {
		t.Errorf("the next start: %v, lost %q", err, lost)
	} else {
		ln2.Close()
	}
}

func TestBootstrapKey(t *testing.T) {
	ctx := context.Background()
	cfg := config.Config{Backend: config.BackendEmbedded, DataDir: t.TempDir(), Workers: 1, BootstrapAPIKey: bootstrapKey, LogLevel: slog.LevelError + 4}
	s, err := Start(ctx, cfg, "127.0.0.1:0", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	if code, _ := post(t, s.URL+"/api/v1/domains", bootstrapKey, `{"name":"example.com"}`); code != 200 {
		t.Fatalf("bootstrap key rejected: %d", code)
	}
	cfg.BootstrapAPIKey, cfg.DataDir = "us_bad", t.TempDir()
	if _, err := Start(ctx, cfg, "127.0.0.1:0", io.Discard); err == nil || !strings.Contains(err.Error(), "BOOTSTRAP_API_KEY must look like") {
		t.Errorf("a malformed BOOTSTRAP_API_KEY: %v", err)
	}
}

// A DATA_DIR that is a file, or an address that cannot be listened on, stops the start with a
// message naming the variable.
func TestStartNamesTheVariable(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{Backend: config.BackendEmbedded, DataDir: file, Workers: 1, LogLevel: slog.LevelError + 4}
	if _, err := Start(ctx, cfg, "127.0.0.1:0", io.Discard); err == nil || !strings.Contains(err.Error(), "DATA_DIR") {
		t.Errorf("DATA_DIR that is a file: %v", err)
	}
	cfg.DataDir = t.TempDir()
	if _, err := Start(ctx, cfg, "192.0.2.1:0", io.Discard); err == nil || !strings.Contains(err.Error(), "HOST and PORT") {
		t.Errorf("an address of no interface here: %v", err)
	}
}

// TestAWSBackendOnBareMoto is the README's `BACKEND=aws AWS_ENDPOINT_URL=... make run`: the
// server creates the table itself and sends through SES, configured only by environment.
func TestAWSBackendOnBareMoto(t *testing.T) {
	moto := awstest.Start(t)
	t.Setenv("AWS_ENDPOINT_URL", moto.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	env := map[string]string{"BACKEND": "aws", "TABLE_NAME": "mailroom-server-test", "BOOTSTRAP_API_KEY": bootstrapKey, "LOG_LEVEL": "error", "DATA_DIR": t.TempDir()}
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg.CreateTable = true
	ctx := context.Background()
	s, err := Start(ctx, cfg, "127.0.0.1:0", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	table, err := dynamodb.NewFromConfig(moto.Config(t)).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &cfg.TableName})
	if err != nil || len(table.Table.GlobalSecondaryIndexes) == 0 || table.Table.StreamSpecification == nil {
		t.Fatalf("table not created with indexes and stream: %v", err)
	}
	if code, out := post(t, s.URL+"/api/v1/domains", bootstrapKey, `{"name":"example.com"}`); code != 200 {
		t.Fatalf("domain: %d %v", code, out)
	}
	code, out := post(t, s.URL+"/api/v1/emails", bootstrapKey, `{"from":"hi@example.com","to":"you@example.org","subject":"Hello","text":"It works"}`)
	if code != 200 {
		t.Fatalf("send: %d %v", code, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/v1/emails/%s", s.URL, out["emailId"]), nil)
		req.Header.Set("Authorization", "Bearer "+bootstrapKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), `"latestStatus":"SENT"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not SENT: %s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestVersion: a release set at build time wins; otherwise the build names itself.
func TestVersion(t *testing.T) {
	if v := Version(); v == "" {
		t.Fatal("no version")
	}
	defer func(v string) { version = v }(version)
	version = "v1.2.3"
	if v := Version(); v != "v1.2.3" {
		t.Errorf("Version() = %q", v)
	}
}

// TestAPILoad: delivery yields to a burst of API requests (two at once, or four begun within
// the window), not to a client that looks now and then.
func TestAPILoad(t *testing.T) {
	var l apiLoad
	if l.busy() {
		t.Fatal("busy before any request")
	}
	for range burstRequests {
		l.begin()
		l.end()
		if l.busy() {
			t.Fatal("one request at a time, spaced out, is a burst")
		}
		time.Sleep(burstWindow / 2)
	}
	l.begin()
	l.begin()
	if !l.busy() {
		t.Error("two requests at once are not a burst")
	}
	l.end()
	l.end()
	for range burstRequests {
		l.begin()
		l.end()
	}
	if !l.busy() {
		t.Error("four requests begun one after the other are not a burst")
	}
	time.Sleep(2 * burstWindow)
	if l.busy() {
		t.Error("still busy long after the burst")
	}
}
