//go:build linux || darwin || freebsd || netbsd || openbsd

package main

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// takeTerminal moves the process into a process group of its own and makes that group the
// terminal's foreground one, so that Ctrl-C (SIGINT to the foreground group) reaches the server
// alone. Under `make run`, make is in the group the terminal had: it would get the SIGINT too,
// wait for the server's clean exit and then kill itself with the signal, ending with status
// 130 whatever the server did. With the terminal taken, make sees the server's exit status and
// ends with it. The returned function gives the terminal back to the group that had it. Without
// a terminal, or when the process is not in its foreground group (started in the background),
// nothing is changed.
func takeTerminal() (giveBack func()) {
	noop := func() {}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return noop
	}
	fd := int(tty.Fd())
	had, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || had != syscall.Getpgrp() {
		tty.Close()
		return noop
	}
	if err := syscall.Setpgid(0, 0); err != nil {
		tty.Close()
		return noop
	}
	setForeground := func(pgrp int) {
		// A process outside the foreground group that changes it is sent SIGTTOU, which
		// would stop it: ignored for the call.
		signal.Ignore(syscall.SIGTTOU)
		defer signal.Reset(syscall.SIGTTOU)
		_ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, pgrp)
	}
	setForeground(syscall.Getpgrp())
	// Ctrl-Z would stop the server alone: the shell waits for make, not for this group, and
	// would neither show its prompt nor resume the server. Ignored; Ctrl-C stops it.
	signal.Ignore(syscall.SIGTSTP)
	return func() {
		setForeground(had)
		tty.Close()
	}
}
