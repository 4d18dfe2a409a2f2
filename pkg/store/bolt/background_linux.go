//go:build linux

package bolt

import (
	"runtime"
	"syscall"
)

// background gives the calling goroutine an OS thread of its own at the lowest scheduling
// priority (nice 19): Linux's scheduler then runs the request threads first whenever both
// want a processor, and this one in the time they leave. The goroutine keeps the thread
// until it ends (the thread then ends with it).
func background() {
	runtime.LockOSThread()
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), 19)
}
