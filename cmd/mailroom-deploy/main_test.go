package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain runs the command itself when the test binary is started as it (runDeploy below).
func TestMain(m *testing.M) {
	if os.Getenv("MAILROOM_DEPLOY_RUN") == "1" {
		os.Args = append([]string{"mailroom-deploy"}, strings.Fields(os.Getenv("MAILROOM_DEPLOY_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runDeploy runs the command in dir with args: its output and exit code.
func runDeploy(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MAILROOM_DEPLOY_RUN=1", "MAILROOM_DEPLOY_ARGS="+strings.Join(args, " "))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// TestHelp: -h says what each command does, and is no error.
func TestHelp(t *testing.T) {
	for _, h := range []string{"-h", "--help", "help"} {
		out, code := runDeploy(t, t.TempDir(), h)
		if code != 0 || !strings.Contains(out, "mains       rewrites functions/<dir>/main.go") || !strings.Contains(out, "sam-local") {
			t.Errorf("%s: exit %d\n%s", h, code, out)
		}
	}
	if out, code := runDeploy(t, t.TempDir(), "bogus"); code != 2 || !strings.Contains(out, "usage") {
		t.Errorf("an unknown command: exit %d\n%s", code, out)
	}
}

// TestRewritesOnlyInTheRepository: the commands that rewrite the repository's files refuse to
// run elsewhere, where mains wrote 63 functions/*/main.go files into whatever folder it was in.
func TestRewritesOnlyInTheRepository(t *testing.T) {
	for _, c := range []string{"mains", "readme", "makefile"} {
		dir := t.TempDir()
		out, code := runDeploy(t, dir, c)
		if code != 1 || !strings.Contains(out, "run it in its root") {
			t.Errorf("%s outside the repository: exit %d\n%s", c, code, out)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s outside the repository wrote %v", c, entries)
		}
	}
	// template only prints: it runs anywhere.
	if out, code := runDeploy(t, t.TempDir(), "template"); code != 0 || !strings.Contains(out, "AWSTemplateFormatVersion") {
		t.Errorf("template outside the repository: exit %d\n%.200s", code, out)
	}
}
