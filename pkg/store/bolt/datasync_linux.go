//go:build linux

package bolt

import (
	"os"
	"syscall"
)

// datasync makes f's data durable without its times: the log's segments are written in
// place, so their size, the one piece of metadata a later read needs, never changes.
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
