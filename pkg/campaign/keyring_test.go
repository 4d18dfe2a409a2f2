package campaign

import (
	"os"
	"path/filepath"
	"testing"
)

// TestKeyringFile: the first call makes a key and keeps it; later calls read it back, a
// rotated ring whole; a file too short to hold a key is replaced.
func TestKeyringFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "unsubscribe.key")
	first, err := KeyringFile(path)
	if err != nil || len(first) != 64 {
		t.Fatalf("KeyringFile = %q, %v; want a new 64-hex key", first, err)
	}
	if again, err := KeyringFile(path); err != nil || again != first {
		t.Fatalf("second call = %q, %v; want the same key", again, err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, %v; want 0600", info.Mode().Perm(), err)
	}
	ring, _, err := RotateKeyring(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(ring+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := KeyringFile(path); err != nil || got != ring {
		t.Errorf("a rotated ring read back as %q, %v", got, err)
	}
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := KeyringFile(path); err != nil || len(got) != 64 || got == first {
		t.Errorf("a short file gave %q, %v; want a new key", got, err)
	}
}
