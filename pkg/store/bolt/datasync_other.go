//go:build !linux

package bolt

import "os"

// datasync makes f's data durable (Sync elsewhere than Linux).
func datasync(f *os.File) error { return f.Sync() }
