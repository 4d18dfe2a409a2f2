package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMakeRunCtrlC is Ctrl-C on `make run` in a terminal: the terminal sends SIGINT to its
// foreground process group. make runs as the session's leader on a pseudo-terminal, as a
// shell would start it; ^C typed into the terminal stops the server after its last line, and
// make ends with 0. (Without the server's -foreground, make gets the SIGINT too and ends
// killed by it, status 130 in a shell, whatever the server did.)
func TestMakeRunCtrlC(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("make is what runs the tests: %v", err)
	}
	master, slave := openPTY(t)
	cmd := exec.Command(makeBin, "-s", "-C", root, "run")
	for _, kv := range os.Environ() { // as from a user's shell, not from make test's make
		if !strings.HasPrefix(kv, "MAKEFLAGS=") && !strings.HasPrefix(kv, "MAKELEVEL=") && !strings.HasPrefix(kv, "MFLAGS=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PORT=0", "HOST=127.0.0.1", "DATA_DIR="+t.TempDir(), "LOG_LEVEL=warn")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var (
		mu  sync.Mutex
		out bytes.Buffer
	)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return // EIO once the terminal's last user is gone
			}
		}
	}()
	seen := func(s string) bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(out.String(), s)
	}
	waitFor := func(s string, d time.Duration) bool {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if seen(s) {
				return true
			}
		}
		return false
	}
	if !waitFor("listening on", 3*time.Minute) { // make builds the server first
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("make run did not start the server:\n%s", out.String())
	}
	// ^Z first: the server, alone in the terminal's foreground group, ignores it (stopped, it
	// would hang the shell, which waits for make); then ^C, as typed.
	if _, err := master.Write([]byte{0x1a}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := master.Write([]byte{0x03}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		waitFor("Mailroom stopped", time.Second)
		mu.Lock()
		defer mu.Unlock()
		if err != nil || !strings.Contains(out.String(), "Mailroom stopped") {
			t.Errorf("make run after ^C: %v, want exit status 0 after the shutdown line; its terminal:\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("make run still running a minute after ^C:\n%s", out.String())
	}
}

// openPTY opens a pseudo-terminal pair: the master the test types into and reads, the slave
// the command's terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}
