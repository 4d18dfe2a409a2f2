// Package crash tests the local server's durability on the real binary: it is loaded by
// clients sending idempotent batches, killed with SIGKILL at random points, and restarted on
// the same data folder, several times; then every email it accepted must reach DELIVERED once.
package crash

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const apiKey = "us_crashtst01_0123456789abcdef0123456789abcdef"

// server is one run of the binary.
type server struct {
	cmd    *exec.Cmd
	base   string
	log    *os.File
	exited chan struct{}
}

func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mailroom")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(gobin, "build", "-o", bin, "../../cmd/mailroom").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func start(t *testing.T, bin, dataDir string, port int, logPath string) *server {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "HOST=127.0.0.1", fmt.Sprintf("PORT=%d", port), "DATA_DIR="+dataDir,
		"BOOTSTRAP_API_KEY="+apiKey, "LOG_LEVEL=info")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", port), log: logf, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(s.base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		select {
		case <-s.exited:
			deadline = time.Time{}
		default:
		}
		if time.Now().After(deadline) {
			s.kill()
			b, _ := os.ReadFile(logPath)
			t.Fatalf("the server did not start:\n%s", b)
		}
	}
}

func (s *server) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	s.log.Close()
}

var client = &http.Client{Timeout: 20 * time.Second}

func call(base, method, path string, body any, headers ...string) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func must(t *testing.T, base, method, path string, body any, out any) {
	t.Helper()
	code, b, err := call(base, method, path, body)
	if err != nil || code/100 != 2 {
		t.Fatalf("%s %s: %d %s %v", method, path, code, b, err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %s", method, path, b)
		}
	}
}

// batch is one idempotent request: its key and body, and the ids of its answer once one came.
type batch struct {
	key  string
	body []map[string]any
	ids  []string
}

func newBatch(client, n int) *batch {
	b := &batch{key: fmt.Sprintf("crash-%d-%d", client, n)}
	for i := range 20 {
		b.body = append(b.body, map[string]any{"from": "Crash <hi@crash.example.com>",
			"to": fmt.Sprintf("user%d.%d.%d@example.org", client, n, i), "subject": "crash test", "text": "hello"})
	}
	return b
}

func (b *batch) send(base string) ([]string, error) {
	code, body, err := call(base, "POST", "/api/v1/emails/batch", b.body, "Idempotency-Key", b.key)
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("%d %s", code, body)
	}
	var out struct {
		Data []struct {
			ID string `json:"emailId"`
		}
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, err
	}
	ids := make([]string, len(out.Data))
	for i, d := range out.Data {
		ids[i] = d.ID
	}
	return ids, nil
}

// TestSurvivesSIGKILL: four clients send batches of 20 with Idempotency-Keys while the server is
// killed with SIGKILL at random points, three times, and restarted on the same data folder.
// Every batch is then replayed: one answered before a kill returns the same ids; one whose
// answer was lost returns the ids it made, if it was accepted. In the end every accepted email
// is DELIVERED with exactly one SENT and one DELIVERED event and one outbox file, and the
// server holds no other email.
func TestSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := build(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "server.log")
	data := filepath.Join(dir, "data")
	port := freePort(t)
	s := start(t, bin, data, port, logPath)
	defer func() { s.kill() }()
	var dom struct{ ID int64 }
	must(t, s.base, "POST", "/api/v1/domains", map[string]any{"name": "crash.example.com"}, &dom)
	must(t, s.base, "PUT", fmt.Sprintf("/api/v1/domains/%d/verify", dom.ID), nil, nil)

	var (
		mu      sync.Mutex
		batches []*batch
	)
	// perRound bounds a client's batches between kills, so the run stays short on a small
	// machine; the kill comes before most clients are through them.
	const clients, kills, perRound = 4, 3, 40
	for round := range kills + 1 {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ctx.Err() == nil && n < perRound; n++ {
					b := newBatch(c, round*100000+n)
					mu.Lock()
					batches = append(batches, b)
					mu.Unlock()
					if ids, err := b.send(s.base); err == nil {
						mu.Lock()
						b.ids = ids
						mu.Unlock()
					}
				}
			}()
		}
		if round < kills {
			time.Sleep(time.Duration(150+rand.IntN(350)) * time.Millisecond)
			s.kill() // mid-request, mid-delivery, mid-event
		} else {
			time.Sleep(300 * time.Millisecond)
		}
		cancel()
		wg.Wait()
		if round < kills {
			s = start(t, bin, data, port, logPath)
		}
	}

	// Replays: the same key and body answer the same ids; a batch never answered gets its
	// ids now (accepted before a kill, or now).
	accepted := map[string]bool{}
	for _, b := range batches {
		ids, err := b.send(s.base)
		if err != nil {
			t.Fatalf("replay of %s: %v", b.key, err)
		}
		if b.ids != nil && !slices.Equal(ids, b.ids) {
			t.Fatalf("replay of %s answered %v, first %v", b.key, ids, b.ids)
		}
		for _, id := range ids {
			if accepted[id] {
				t.Fatalf("email %s in two batches", id)
			}
			accepted[id] = true
		}
	}
	t.Logf("%d batches, %d emails accepted across %d kills; %d written at a restart from the store's log (accepted, not yet in bbolt at the kill)",
		len(batches), len(accepted), kills, replayedFromLog(t, logPath))

	ids := make([]string, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	type detail struct {
		LatestStatus string
		EmailEvents  []struct{ Status string }
	}
	var failed []string
	var fmu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan string)
	deadline := time.Now().Add(3 * time.Minute)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				var d detail
				for {
					code, b, err := call(s.base, "GET", "/api/v1/emails/"+id, nil)
					if err == nil && code == 200 && json.Unmarshal(b, &d) == nil && d.LatestStatus == "DELIVERED" {
						break
					}
					if time.Now().After(deadline) {
						fmu.Lock()
						failed = append(failed, fmt.Sprintf("%s: %s", id, b))
						fmu.Unlock()
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				var statuses []string
				for _, e := range d.EmailEvents {
					statuses = append(statuses, e.Status)
				}
				if d.LatestStatus == "DELIVERED" && (count(statuses, "SENT") != 1 || count(statuses, "DELIVERED") != 1) {
					fmu.Lock()
					failed = append(failed, fmt.Sprintf("%s: history %v", id, statuses))
					fmu.Unlock()
				}
			}
		}()
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of %d accepted emails not delivered exactly once, e.g. %v", len(failed), len(ids), failed[:min(5, len(failed))])
	}

	files, err := filepath.Glob(filepath.Join(data, "outbox", "*.eml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(ids) {
		t.Errorf("%d outbox files for %d emails", len(files), len(ids))
	}
	for _, f := range files {
		if !accepted[strings.TrimSuffix(filepath.Base(f), ".eml")] {
			t.Errorf("outbox file %s is no accepted email's", filepath.Base(f))
		}
	}
	var list struct{ Count int }
	must(t, s.base, "GET", "/api/v1/emails?limit=1", nil, &list)
	if list.Count != len(ids) {
		t.Errorf("the server counts %d emails, %d were accepted", list.Count, len(ids))
	}
}

func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

// replayedFromLog sums what the restarts' start lines say they applied from the store's log.
func replayedFromLog(t *testing.T, logPath string) int {
	raw, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(raw), "\n") {
		var rec struct {
			Msg    string `json:"msg"`
			Emails int    `json:"emails"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && strings.Contains(rec.Msg, "written from the store's log") {
			n += rec.Emails
		}
	}
	return n
}
