package config

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestVarsAreWhatFromEnvReads: Vars lists exactly the variables FromEnv reads, and the
// README's tables name each of them.
func TestVarsAreWhatFromEnvReads(t *testing.T) {
	var read []string
	if _, err := FromEnv(func(name string) string {
		if !slices.Contains(read, name) {
			read = append(read, name)
		}
		return ""
	}); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, v := range Vars {
		listed = append(listed, v.Name)
	}
	slices.Sort(read)
	slices.Sort(listed)
	if !slices.Equal(read, listed) {
		t.Errorf("FromEnv reads %v\nVars lists %v", read, listed)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range Vars {
		if !strings.Contains(string(readme), "| `"+v.Name+"`") {
			t.Errorf("the README's variable tables do not list %s", v.Name)
		}
	}
}

// TestInvalidValuesAreRefused: a value the server could not work with stops it at start,
// naming the variable.
func TestInvalidValuesAreRefused(t *testing.T) {
	for _, kv := range [][2]string{
		{"WORKERS", "0"}, {"WORKERS", "1001"}, {"WORKERS", "100000000"}, {"PORT", "70000"}, {"LOG_LEVEL", "loud"},
		{"AUTH_CACHE_TTL", "-1s"}, {"PUBLIC_URL", "localhost:3000"}, {"RETENTION_DAYS", "-2"}, {"BACKEND", "postgres"},
		{"SES_MAX_SEND_RATE", "fast"}, {"SES_MAX_SEND_RATE", "NaN"}, {"SES_MAX_SEND_RATE", "Inf"}, {"API_RATE_LIMIT", "x"},
		{"RETENTION_DAYS", "99999999999"}, {"LOG_LEVEL", "DEBUG+3"}, {"HOST", "999.1.1.1"}, {"HOST", "not a host"},
		{"HOST", "-x.example"}, {"PUBLIC_URL", "http://x/ path"}, {"PUBLIC_URL", "http://x.example/base?q=1"},
		{"PUBLIC_URL", "https://x.example/#frag"}, {"PUBLIC_URL", "https://user:pw@x.example/"},
	} {
		name, value := kv[0], kv[1]
		_, err := FromEnv(func(n string) string {
			if n == name {
				return value
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: %v, want an error naming %s", name, value, err, name)
		}
	}
	c, err := FromEnv(func(n string) string {
		return map[string]string{"WORKERS": "1", "PORT": "0", "LOG_LEVEL": "debug", "PUBLIC_URL": "https://mail.example.com/"}[n]
	})
	if err != nil || c.Workers != 1 || c.Port != 0 || c.PublicURL != "https://mail.example.com" {
		t.Errorf("valid values: %+v, %v", c, err)
	}
	// Names of a choice in any case, as LOG_LEVEL's.
	c, err = FromEnv(func(n string) string { return map[string]string{"BACKEND": "AWS", "LOG_LEVEL": "DEBUG"}[n] })
	if err != nil || c.Backend != BackendAWS || c.LogLevel != slog.LevelDebug {
		t.Errorf("BACKEND=AWS, LOG_LEVEL=DEBUG: %q %v, %v", c.Backend, c.LogLevel, err)
	}
}

func TestHostsThatListen(t *testing.T) {
	for _, h := range []string{"127.0.0.1", "0.0.0.0", "::1", "::", "localhost", "mail-1.internal.example", "host.", "mail_room", "fe80::1%eth0"} {
		if !hostLike(h) {
			t.Errorf("HOST=%s refused", h)
		}
	}
}
