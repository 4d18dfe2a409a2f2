package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/admin"
	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/config"
	"github.com/mailroom/mailroom/pkg/server"
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
	if out := runOK("team", "list"); !strings.Contains(out, "1\tAcme") || !strings.Contains(out, "the server's rate limit, no daily quota") {
		t.Errorf("team list: %q", out)
	}
	if out := runOK("team", "set", "-team", "1", "-rate-limit", "5", "-daily-limit", "1000"); !strings.Contains(out, "team 1: 5 requests/s, 1000 emails/day") {
		t.Errorf("team set: %q", out)
	}
	if out := runOK("team", "set", "-team", "1", "-rate-limit", "0"); !strings.Contains(out, "no rate limit, 1000 emails/day") {
		t.Errorf("team set -rate-limit 0: %q", out)
	}
	if out := runOK("team", "set", "-team", "1", "-rate-limit", "default", "-daily-limit", "0"); !strings.Contains(out, "the server's rate limit, no daily quota") {
		t.Errorf("team set back to the defaults: %q", out)
	}
	var bad bytes.Buffer
	if err := run(ctx, []string{"team", "set", "-team", "1", "-rate-limit", "fast"}, &bad); err == nil {
		t.Error("-rate-limit fast was accepted")
	}
	if err := run(ctx, []string{"team", "set", "-team", "9", "-daily-limit", "5"}, &bad); err == nil {
		t.Error("an unknown team was changed")
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
	// A key of one's choosing (the sample events' key): stored once, then found again, from
	// -key or from MAILROOM_KEY.
	const sample = "us_samplekey0_0123456789abcdef0123456789abcdef"
	if out := runOK("key", "import", "-key", sample); !strings.Contains(out, "key samplekey0 is a FULL key of team 1 (all domains)") {
		t.Errorf("key import: %q", out)
	}
	t.Setenv("MAILROOM_KEY", sample)
	if out := runOK("key", "import"); !strings.Contains(out, "key samplekey0 is a FULL key of team 1") {
		t.Errorf("key import from MAILROOM_KEY: %q", out)
	}
	if list := runOK("key", "list", "-team", "1"); !strings.Contains(list, "samplekey0\tbootstrap\tFULL") {
		t.Errorf("imported key not listed: %q", list)
	}
	// An existing key is described as it is, not as FULL.
	sending := regexp.MustCompile(`us_[0-9a-z]{10}_[0-9a-f]{32}`).FindString(runOK("key", "create", "-team", "1", "-permission", "SENDING"))
	if out := runOK("key", "import", "-key", sending); !strings.Contains(out, "is a SENDING key of team 1") {
		t.Errorf("key import of a SENDING key: %q", out)
	}
	t.Setenv("MAILROOM_KEY", "")
	for _, args := range [][]string{
		{"key", "import", "-key", sample[:len(sample)-1] + "0"}, // another secret for an existing id
		{"key", "import", "-key", "nope"},
		{"key", "import"},
		{"key", "import", "-key", sample, "-team", "1"}, // a flag it would not honour
	} {
		if err := run(ctx, args, &out2); err == nil {
			t.Errorf("%v was accepted", args)
		}
	}
	// An unknown command says which word is wrong, then the usage.
	for args, want := range map[string]string{
		"bogus verb": `unknown command "bogus"`,
		"team bogus": `team: unknown command "bogus"`,
		"webhook":    "webhook: which one?",
	} {
		if err := run(ctx, strings.Fields(args), &out2); err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "usage") {
			t.Errorf("%s: %v, want %s and the usage", args, err, want)
		}
	}
	// -1 (what the code reads as left out) and an empty -rate-limit are refused, not ignored.
	for _, args := range [][]string{{"team", "set", "-team", "1", "-daily-limit", "-1"}, {"team", "set", "-team", "1", "-rate-limit", ""}} {
		if err := run(ctx, args, &out2); err == nil {
			t.Errorf("%q was accepted", args)
		}
	}
	// Each command takes its own flags only, needs those it needs, and nothing after them.
	for args, want := range map[string]string{
		"key create -team 1 -daily-limit 5":                  "flag provided but not defined: -daily-limit",
		"key create -team 1 -key " + sample:                  "flag provided but not defined: -key",
		"key list -team 1 -permission SENDING":               "flag provided but not defined: -permission",
		"key list":                                           "-team is required",
		"key create":                                         "-team is required",
		"key list -team 99":                                  "there is no team 99",
		"key list -team one":                                 `-team: "one" is not a team id`,
		"key list -team 1 extra":                             `"extra" is not taken`,
		"key revoke -team 1":                                 "-id is required",
		"team set -team 1 -daily-limit -3":                   "-daily-limit",
		"webhook create -team 1":                             "-url is required",
		"webhook create -team 99 -url https://example.com/h": "there is no team 99",
		"key revoke -team 1 -id nope":                        "team 1 has no key nope",
		"key create -team 1 -domain example.com":             `-domain: "example.com" is not a number`,
	} {
		err := run(ctx, strings.Fields(args), &out2)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %s", args, err, want)
		}
	}
	// -h after a command is its usage, and no error.
	var help bytes.Buffer
	if _, err := admin.Parse([]string{"key", "create", "-h"}, &help); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "usage: mailroom-admin key create -team ID") || !strings.Contains(help.String(), "-permission") {
		t.Errorf("key create -h: %v\n%s", err, help.String())
	}
}

// TestAdminRotatesUnsubscribeKey: rotating the local keyring keeps the first key (links made
// with it still verify) and signs with the new one.
func TestAdminRotatesUnsubscribeKey(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DATA_DIR", dir)
	t.Setenv("LOG_LEVEL", "error")
	ctx := context.Background()
	first := make([]byte, 64)
	for i := range first {
		first[i] = "0123456789abcdef"[i%16]
	}
	if err := os.WriteFile(filepath.Join(dir, "unsubscribe.key"), first, 0o600); err != nil {
		t.Fatal(err)
	}
	link := campaign.Link{TeamID: 1, BookID: "b", ContactID: "c"}
	old := campaign.Signer{Keys: campaign.SingleKey(string(first))}.Token(link)
	for i, want := range []string{"unsubscribe key 1 now signs new links; 2 keys", "unsubscribe key 2 now signs new links; 3 keys"} {
		var out bytes.Buffer
		if err := run(ctx, []string{"unsubscribe-key", "rotate"}, &out); err != nil || !strings.Contains(out.String(), want) {
			t.Fatalf("rotation %d: %q, %v", i+1, out.String(), err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "unsubscribe.key"))
	if err != nil {
		t.Fatal(err)
	}
	ring, err := campaign.ParseKeyring(string(b))
	if err != nil || ring.Current != "2" || string(ring.Keys["0"]) != string(first) {
		t.Fatalf("keyring after two rotations: current %q, %d keys, %v", ring.Current, len(ring.Keys), err)
	}
	s := campaign.Signer{Keys: ring}
	if l, err := s.Verify(ctx, old); err != nil || l.ContactID != "c" {
		t.Errorf("a link of the first key after rotation: %+v, %v", l, err)
	}
	if tok := s.Token(link); !strings.HasPrefix(tok, "3.2.") {
		t.Errorf("new links are signed %q, want with key 2", tok)
	}
}

// TestAdminWebhooks: a webhook made with the CLI is listed with its status and types, its
// secret printed once; an unknown type is refused, naming it.
func TestAdminWebhooks(t *testing.T) {
	t.Setenv("DATA_DIR", t.TempDir())
	t.Setenv("LOG_LEVEL", "error")
	ctx := context.Background()
	var out bytes.Buffer
	if err := run(ctx, []string{"team", "create", "-name", "Acme"}, &out); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(ctx, []string{"webhook", "create", "-team", "1", "-url", "http://127.0.0.1:9/hooks", "-events", "email.sent,email.bounced"}, &out); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`webhook (wh_[a-z0-9]+) created for team 1.*\n(whsec_[0-9a-f]{64})`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("create printed %q", out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"webhook", "list", "-team", "1"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), m[1]+"\tACTIVE\thttp://127.0.0.1:9/hooks\temail.bounced,email.sent") || strings.Contains(out.String(), m[2]) {
		t.Errorf("list %q", out.String())
	}
	err := run(ctx, []string{"webhook", "create", "-team", "1", "-url", "http://127.0.0.1:9/", "-events", "email.sending"}, &out)
	if err == nil || !strings.Contains(err.Error(), "email.sending") {
		t.Errorf("an unknown type: %v", err)
	}
}

// TestAdminWhileServerRuns: with the local server holding the database, the commands run
// inside it: a key made now works at once, a key revoked now is refused at once, and after the
// server stops the command opens the database itself again.
func TestAdminWhileServerRuns(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DATA_DIR", dir)
	t.Setenv("LOG_LEVEL", "error")
	ctx := context.Background()
	cfg := config.Config{Backend: config.BackendEmbedded, DataDir: dir, Workers: 1, AuthCacheTTL: time.Minute, LogLevel: slog.LevelError + 4}
	s, err := server.Start(ctx, cfg, "127.0.0.1:0", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = s.Shutdown(ctx)
		}
	}()
	var limit string // the last answer's X-RateLimit-Limit
	call := func(key string) int {
		req, _ := http.NewRequest("GET", s.URL+"/api/v1/domains", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		limit = resp.Header.Get("X-RateLimit-Limit")
		return resp.StatusCode
	}
	var out bytes.Buffer
	if err := run(ctx, []string{"key", "create", "-team", "1", "-name", "late"}, &out); err != nil {
		t.Fatalf("key create while the server runs: %v", err)
	}
	key := regexp.MustCompile(`us_([0-9a-z]{10})_[0-9a-f]{32}`).FindStringSubmatch(out.String())
	if key == nil {
		t.Fatalf("key create printed %q", out.String())
	}
	if code := call(key[0]); code != 200 {
		t.Fatalf("the new key: %d", code)
	}
	// A team's new limit applies at once, though the key (and its team) is cached.
	if err := run(ctx, []string{"team", "set", "-team", "1", "-rate-limit", "7"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if code := call(key[0]); code != 200 || limit != "7" {
		t.Errorf("after team set -rate-limit 7: %d, X-RateLimit-Limit %q", code, limit)
	}
	if err := run(ctx, []string{"team", "set", "-team", "1", "-rate-limit", "default"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if code := call(key[0]); code != 200 || limit != "" {
		t.Errorf("after team set -rate-limit default (the server has none): %d, X-RateLimit-Limit %q", code, limit)
	}
	out.Reset()
	if err := run(ctx, []string{"key", "list", "-team", "1"}, &out); err != nil || !strings.Contains(out.String(), key[1]+"\tlate") {
		t.Fatalf("key list: %q, %v", out.String(), err)
	}
	if err := run(ctx, []string{"key", "revoke", "-team", "1", "-id", key[1]}, &out); err != nil {
		t.Fatal(err)
	}
	if code := call(key[0]); code != 403 {
		t.Errorf("a key revoked while cached: %d, want 403 at once", code)
	}
	if err := run(ctx, []string{"team", "list", "-bogus"}, &out); err == nil {
		t.Error("a bad flag through the socket was accepted")
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	stopped = true
	out.Reset()
	if err := run(ctx, []string{"team", "list"}, &out); err != nil || !strings.HasPrefix(out.String(), "1\t") {
		t.Errorf("after the server stopped: %q, %v", out.String(), err)
	}
}

// TestAdminInAFolderWithoutADatabase: run where no server keeps its data (the CLI started from
// another folder), a command that reads or changes a database says so and makes nothing; one
// that sets a new database up makes it and says where.
func TestAdminInAFolderWithoutADatabase(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "elsewhere")
	t.Setenv("DATA_DIR", dir)
	t.Setenv("LOG_LEVEL", "error")
	ctx := context.Background()
	for _, args := range []string{"team list", "team set -team 1 -rate-limit 1", "key list -team 1", "webhook list -team 1"} {
		var out bytes.Buffer
		err := run(ctx, strings.Fields(args), &out)
		if err == nil || !strings.Contains(err.Error(), "there is no Mailroom database in") {
			t.Errorf("%s: %v, want no database", args, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s made %s", args, dir)
		}
	}
	var out bytes.Buffer
	if err := run(ctx, []string{"team", "create", "-name", "Acme"}, &out); err != nil || !strings.Contains(out.String(), "a new database: "+filepath.Join(dir, "mailroom.db")) {
		t.Fatalf("team create in a new folder: %q %v", out.String(), err)
	}
	out.Reset()
	if err := run(ctx, []string{"team", "list"}, &out); err != nil || !strings.Contains(out.String(), "Acme") {
		t.Fatalf("team list after it: %q %v", out.String(), err)
	}
}

// TestAdminHelp: -h alone lists every command, after a command's first word that word's.
func TestAdminHelp(t *testing.T) {
	t.Setenv("DATA_DIR", filepath.Join(t.TempDir(), "none"))
	for args, want := range map[string][]string{
		"-h":         {"team create", "key revoke", "webhook list"},
		"webhook -h": {"webhook create", "webhook list"},
		"key --help": {"key create", "key list", "key revoke", "key import"},
		"team -h":    {"team create", "team list", "team set"},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), strings.Fields(args), &out); err != nil {
			t.Errorf("%s: %v", args, err)
			continue
		}
		for _, w := range want {
			if !strings.Contains(out.String(), "mailroom-admin "+w) {
				t.Errorf("%s: %q lacks %s", args, out.String(), w)
			}
		}
		if first := strings.Fields(args)[0]; first != "-h" && strings.Contains(out.String(), "unsubscribe-key") {
			t.Errorf("%s lists other commands: %q", args, out.String())
		}
	}
	if err := run(context.Background(), []string{"nosuch", "-h"}, io.Discard); err == nil {
		t.Error("nosuch -h: no error")
	}
}

// TestAdminUsageNeedsNoDatabase: a command's usage, or what is wrong with its flags, is said in
// a folder without a database too, and makes none.
func TestAdminUsageNeedsNoDatabase(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "none")
	t.Setenv("DATA_DIR", dir)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"team", "set", "-h"}, &out); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "usage: mailroom-admin team set") {
		t.Errorf("team set -h: %v %q, want its usage", err, out.String())
	}
	if err := run(context.Background(), []string{"key", "create"}, &out); err == nil || !strings.Contains(err.Error(), "-team is required") {
		t.Errorf("key create without -team: %v, want -team is required", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("made %s", dir)
	}
}
