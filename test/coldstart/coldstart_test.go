// Package coldstart measures each Lambda function's cold start next to an aws-lambda-go
// hello-world built the same way: the time from spawning the binary to its first request for
// an invocation (GET /2018-06-01/runtime/invocation/next) on a stub Runtime API, which is all
// of a cold start that is the function's own (package init and its wiring). Run it with `make
// bench-coldstart` (or `make bench`); the figures are medians, never asserted in a test.
package coldstart

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/lambdafn"
)

const (
	spawns      = 31  // per binary, alternating with the hello-world
	targetRatio = 1.5 // a function's median cold start / the hello-world's
	targetInit  = 1.0 // ms of init for any one package of ours
)

// env is what every function reads (the union of their variables, with placeholder values):
// the cold start must not fail for a missing one.
var env = []string{
	"TABLE_NAME=mailroom", "STACK_NAME=", "LOG_LEVEL=INFO", "AUTH_CACHE_TTL=60s", "API_RATE_LIMIT=10", "BACKEND=aws",
	"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY=secret", "AWS_SESSION_TOKEN=token",
	"SES_CONFIGURATION_SET=mailroom", "SES_MAX_SEND_RATE=14", "SCHEDULE_GROUP=mailroom",
	"SCHEDULE_ROLE_ARN=arn:aws:iam::123456789012:role/scheduler",
	"SCHEDULE_DLQ_ARN=arn:aws:sqs:us-east-1:123456789012:dlq",
	"SCHEDULE_TARGET_ARN=arn:aws:lambda:us-east-1:123456789012:function:mailroom-scheduled-send",
	"CAMPAIGN_TARGET_ARN=arn:aws:lambda:us-east-1:123456789012:function:mailroom-campaign-batch",
	"UNSUBSCRIBE_SECRET_ID=mailroom/unsubscribe",
	"PUBLIC_URL=https://api.example.com",
}

// build compiles the hello-world and every function as the Makefile does for Lambda, for this
// machine's architecture.
func build(b *testing.B, dir string) map[string]string {
	b.Helper()
	bins := map[string]string{}
	args := []string{"build", "-trimpath", "-tags", "lambda.norpc", "-ldflags=-s -w", "-o", dir + string(filepath.Separator),
		"./test/coldstart/hello"}
	for _, n := range lambdafn.Names() {
		args = append(args, "./functions/"+lambdafn.Dir(n))
		bins[n] = filepath.Join(dir, lambdafn.Dir(n))
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	bins["hello"] = filepath.Join(dir, "hello")
	return bins
}

// runtimeAPI is a stub Lambda Runtime API that notes when a process first asks for work.
type runtimeAPI struct {
	addr string
	next chan time.Time
}

func startRuntimeAPI(b *testing.B) *runtimeAPI {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	r := &runtimeAPI{addr: ln.Addr().String(), next: make(chan time.Time, 1)}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "/runtime/invocation/next") {
			select {
			case r.next <- time.Now():
			default:
			}
			<-req.Context().Done() // no invocation comes: the process is killed
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return r
}

// coldStart spawns bin once and returns the time to its first /next.
func (r *runtimeAPI) coldStart(b *testing.B, bin string) time.Duration {
	cmd := exec.Command(bin)
	cmd.Env = append([]string{"AWS_LAMBDA_RUNTIME_API=" + r.addr, "AWS_ENDPOINT_URL=http://" + r.addr, "PATH=/usr/bin:/bin"}, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	select {
	case t := <-r.next:
		return t.Sub(start)
	case <-time.After(10 * time.Second):
		b.Fatalf("%s never asked for an invocation:\n%s", filepath.Base(bin), stderr.String())
	}
	return 0
}

// initOfOurs runs bin once with GODEBUG=inittrace=1 and returns the slowest package init of
// Mailroom's own packages.
func initOfOurs(b *testing.B, r *runtimeAPI, bin string) (string, float64) {
	cmd := exec.Command(bin)
	cmd.Env = append([]string{"AWS_LAMBDA_RUNTIME_API=" + r.addr, "AWS_ENDPOINT_URL=http://" + r.addr, "GODEBUG=inittrace=1"}, env...)
	out, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	<-r.next
	_ = cmd.Process.Kill()
	worst, worstMs := "", 0.0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		// init github.com/mailroom/mailroom/pkg/domain @1.2 ms, 0.26 ms clock, ...
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[0] != "init" || !strings.HasPrefix(f[1], "github.com/mailroom/") {
			continue
		}
		ms, _ := strconv.ParseFloat(f[4], 64)
		if ms > worstMs {
			worst, worstMs = strings.TrimPrefix(f[1], "github.com/mailroom/mailroom/"), ms
		}
	}
	return worst, worstMs
}

func median(ds []float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkColdStart prints, for every function, its median cold start, the hello-world's
// median measured alternately with it, the median of the pairwise ratios and the target, and
// the slowest init of a package of ours.
func BenchmarkColdStart(b *testing.B) {
	bins := build(b, b.TempDir())
	r := startRuntimeAPI(b)
	for range 3 { // warm the page cache and the runtime API
		r.coldStart(b, bins["hello"])
	}
	var lines []string
	worstRatio, worstInit, worstInitPkg, over := 0.0, 0.0, "", 0
	for b.Loop() {
		lines = lines[:0]
		worstRatio, worstInit, over = 0, 0, 0
		for _, n := range lambdafn.Names() {
			var fn, hello, ratios []float64
			for range spawns {
				h := r.coldStart(b, bins["hello"]).Seconds() * 1000
				f := r.coldStart(b, bins[n]).Seconds() * 1000
				fn, hello, ratios = append(fn, f), append(hello, h), append(ratios, f/h)
			}
			ratio := median(ratios)
			pkg, ms := initOfOurs(b, r, bins[n])
			verdict := "ok"
			if ratio > targetRatio {
				verdict, over = "OVER", over+1
			}
			worstRatio = max(worstRatio, ratio)
			if ms > worstInit {
				worstInit, worstInitPkg = ms, pkg
			}
			lines = append(lines, fmt.Sprintf("%-20s %8.2f %8.2f %7.2fx  %-4s  %-24s %5.2f", n, median(fn), median(hello), ratio,
				verdict, pkg, ms))
		}
	}
	fmt.Printf("\ncold start: spawn to the first /next on a stub Runtime API, median of %d spawns each, alternating with an aws-lambda-go hello-world built the same way\n", spawns)
	fmt.Printf("%-20s %8s %8s %8s  %-4s  %-24s %5s\n", "function", "ms", "hello", "ratio", "", "slowest init of ours", "ms")
	for _, l := range lines {
		fmt.Println(l)
	}
	fmt.Printf("coldstart: worst ratio %.2fx (target <= %.1fx), %d functions over; slowest init of ours %.2f ms in %s (target <= %.1f ms)\n",
		worstRatio, targetRatio, over, worstInit, worstInitPkg, targetInit)
	b.ReportMetric(worstRatio, "worst-ratio")
	b.ReportMetric(worstInit, "worst-init-ms")
}
