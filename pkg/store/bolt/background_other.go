//go:build !linux

package bolt

// background does nothing where a thread's priority cannot be set on its own.
func background() {}
