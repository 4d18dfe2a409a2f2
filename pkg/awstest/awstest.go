// Package awstest starts a private moto_server for tests of the AWS adapters and gives an
// aws.Config pointed at it. moto is found as the moto_server script or as `python3 -m
// moto.server`. When neither exists the test is skipped, except under CI (CI set), where a
// missing emulator is a failure: CI must never pass by skipping.
package awstest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Region every test uses.
const Region = "us-east-1"

// Server is a running moto_server.
type Server struct {
	URL string
	cmd *exec.Cmd
}

var listening = regexp.MustCompile(`Running on (http://127\.0\.0\.1:\d+)`)

// command returns how to run moto on this machine, or nil.
func command() []string {
	if p, err := exec.LookPath("moto_server"); err == nil {
		return []string{p}
	}
	if p, err := exec.LookPath("python3"); err == nil {
		if exec.Command(p, "-c", "import moto.server").Run() == nil {
			return []string{p, "-m", "moto.server"}
		}
	}
	return nil
}

// Start runs a fresh moto_server on a free port and stops it (by PID) when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := start()
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("moto_server is required under CI: %v", err)
		}
		tb.Skipf("moto_server not available: %v", err)
	}
	tb.Cleanup(s.Stop)
	return s
}

func start() (*Server, error) {
	argv := command()
	if argv == nil {
		return nil, fmt.Errorf("neither moto_server nor python3 -m moto.server found")
	}
	cmd := exec.Command(argv[0], append(argv[1:], "-H", "127.0.0.1", "-p", "0")...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
	}()
	s := &Server{cmd: cmd}
	select {
	case s.URL = <-found:
	case <-time.After(30 * time.Second):
		s.Stop()
		return nil, fmt.Errorf("moto_server did not report its port within 30s")
	}
	// Wait until it answers HTTP.
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			// Lambda without Docker: an invocation is accepted (202) and runs nothing; tests
			// see what was invoked through Invocations.
			resp, err = http.Post(s.URL+"/moto-api/config", "application/json",
				strings.NewReader(`{"lambda":{"use_docker":false}}`))
			if err != nil {
				s.Stop()
				return nil, fmt.Errorf("configure moto: %w", err)
			}
			resp.Body.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("moto_server not answering: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server's process group.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Reset wipes every resource in the server (moto's reset API).
func (s *Server) Reset(tb testing.TB) {
	tb.Helper()
	resp, err := http.Post(s.URL+"/moto-api/reset", "application/json", strings.NewReader("{}"))
	if err != nil {
		tb.Fatalf("reset moto: %v", err)
	}
	resp.Body.Close()
}

// Config returns an aws.Config with static test credentials pointed at the server.
func (s *Server) Config(tb testing.TB) aws.Config {
	tb.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion(Region),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		config.WithBaseEndpoint(s.URL),
	)
	if err != nil {
		tb.Fatalf("aws config: %v", err)
	}
	return cfg
}

var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
)

// Shared returns one moto_server for the whole test binary (started on first use). Call
// StopShared from TestMain after m.Run. Tests that share it must use unique resource names.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	sharedOnce.Do(func() { shared, sharedErr = start() })
	if sharedErr != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("moto_server is required under CI: %v", sharedErr)
		}
		tb.Skipf("moto_server not available: %v", sharedErr)
	}
	return shared
}

// Main runs a test binary's tests and then stops the shared server: use it as the whole
// body of TestMain in packages that call Shared.
func Main(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// StopShared stops the server Shared started, if any.
func StopShared() {
	if shared != nil {
		shared.Stop()
	}
}
