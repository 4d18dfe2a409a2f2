//go:build windows

package bolt

// syncDir does nothing on Windows, which cannot sync a directory handle (NTFS journals a
// file's creation itself).
func syncDir(string) error { return nil }
