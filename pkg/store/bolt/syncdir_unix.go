//go:build !windows

package bolt

import (
	"fmt"
	"os"
)

// syncDir makes the directory's entries (a segment created or removed) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("bolt: log %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("bolt: log %s: sync: %w", dir, err)
	}
	return nil
}
