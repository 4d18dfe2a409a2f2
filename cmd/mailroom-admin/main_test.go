package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

func TestAdminTeamAndKeys(t *testing.T) {
	t.Setenv("DATA_DIR", t.TempDir())
	t.Setenv("LOG_LEVEL", "error")
	ctx := context.Background()
	runOK := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(ctx, args, &out); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out.String()
	}
	if out := runOK("team", "create", "-name", "Acme"); !strings.Contains(out, `team 1 "Acme" created`) {
		t.Errorf("team create: %q", out)
	}
	if out := runOK("team", "list"); !strings.Contains(out, "1\tAcme") {
		t.Errorf("team list: %q", out)
	}
	out := runOK("key", "create", "-team", "1", "-name", "ci", "-permission", "SENDING")
	key := regexp.MustCompile(`us_([0-9a-z]{10})_[0-9a-f]{32}`).FindStringSubmatch(out)
	if key == nil {
		t.Fatalf("key create printed no key: %q", out)
	}
	list := runOK("key", "list", "-team", "1")
	if !strings.Contains(list, key[1]+"\tci\tSENDING\tall domains") || strings.Contains(list, key[0]) {
		t.Errorf("key list must show the key id but never the secret: %q", list)
	}
	runOK("key", "revoke", "-team", "1", "-id", key[1])
	if list := runOK("key", "list", "-team", "1"); strings.Contains(list, key[1]) {
		t.Errorf("revoked key still listed: %q", list)
	}
	var out2 bytes.Buffer
	if err := run(ctx, []string{"key", "create", "-team", "9"}, &out2); err == nil {
		t.Error("a key for a missing team was created")
	}
	if err := run(ctx, []string{"key", "create", "-team", "1", "-permission", "ROOT"}, &out2); err == nil {
		t.Error("an unknown permission was accepted")
	}
	if err := run(ctx, []string{"bogus", "verb"}, &out2); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Errorf("unknown command: %v", err)
	}
}
