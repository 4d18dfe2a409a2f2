package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/mailroom/mailroom/pkg/config"
)

// TestMain runs main itself when asked to, so that the tests run the command as a process.
func TestMain(m *testing.M) {
	if os.Getenv("MAILROOM_TEST_MAIN") == "1" {
		os.Args = append([]string{"mailroom"}, strings.Fields(os.Getenv("MAILROOM_TEST_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func command(t *testing.T, args string, env ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"MAILROOM_TEST_MAIN=1", "MAILROOM_TEST_ARGS=" + args,
		"DATA_DIR=" + t.TempDir(), "PORT=0"}, env...)...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// TestFlags: -h and --version answer and exit without starting a server; anything else is a
// usage error; a variable the server cannot work with stops it at start.
func TestFlags(t *testing.T) {
	out, code := command(t, "-h")
	if code != 0 || !strings.HasPrefix(out, "Usage: mailroom") || strings.Contains(out, "listening") {
		t.Errorf("-h: %d\n%s", code, out)
	}
	for _, v := range config.Vars {
		if !v.AWS && !strings.Contains(out, v.Name) {
			t.Errorf("-h does not list %s", v.Name)
		}
	}
	if out, code := command(t, "--version"); code != 0 || !strings.HasPrefix(out, "mailroom ") || strings.Count(out, "\n") != 1 {
		t.Errorf("--version: %d %q", code, out)
	}
	if out, code := command(t, "--port 4000"); code != 2 || !strings.Contains(out, `unknown argument "--port"`) {
		t.Errorf("an unknown argument: %d %q", code, out)
	}
	if out, code := command(t, "", "WORKERS=0"); code != 1 || !strings.Contains(out, "WORKERS") {
		t.Errorf("WORKERS=0: %d %q", code, out)
	}
	// An unsubscribe secret that is no key, or a keyring with a short key, names its variable.
	for _, bad := range []string{" ", `{"current":"a","keys":{"a":"x"}}`} {
		if out, code := command(t, "", "UNSUBSCRIBE_SECRET="+bad); code != 1 || !strings.Contains(out, "UNSUBSCRIBE_SECRET: unsubscribe secret:") {
			t.Errorf("UNSUBSCRIBE_SECRET=%q: %d %q", bad, code, out)
		}
	}
}

// TestGoLine: go.mod's go line is the oldest Go the module can be built with: the newest go
// line among its dependencies (make test's go vet checks, with its stdversion analyzer, that
// the code itself uses nothing newer).
func TestGoLine(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(gobin, "list", "-m", "-f", "{{.Path}} {{.GoVersion}}", "all").Output()
	if err != nil {
		t.Fatal(err)
	}
	var ours, need string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, v, _ := strings.Cut(line, " ")
		if path == "github.com/mailroom/mailroom" {
			ours = v
		} else if v != "" && gover(v) > gover(need) {
			need = v
		}
	}
	if gover(ours) != gover(need) {
		t.Errorf("go.mod says go %s; the newest dependency needs %s", ours, need)
	}
}

// gover makes a go version comparable as a string: "1.26" and "1.26.0" are the same.
func gover(v string) string {
	parts := strings.Split(v, ".")
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	for i, p := range parts {
		parts[i] = fmt.Sprintf("%04s", p)
	}
	return strings.Join(parts, ".")
}
