// Package admin is mailroom-admin's commands: teams, API keys, limits, webhooks and the
// unsubscribe keyring. The command runs them on the store it opens, or, while a local server
// holds the embedded database, inside that server through its admin socket (see Socket).
package admin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/mailroom/mailroom/pkg/app"
	"github.com/mailroom/mailroom/pkg/auth"
	"github.com/mailroom/mailroom/pkg/hooks"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/team"
)

// command is what one command takes: its flags, and those it needs. Its usage starts with its
// name ("key create -team ID …").
type command struct {
	flags, required []string
	usage           string
}

// commands are the commands, in the order Usage lists them.
var commands = []command{
	{[]string{"name"}, []string{"name"}, "team create -name NAME"},
	{nil, nil, "team list"},
	{[]string{"team", "rate-limit", "daily-limit"}, []string{"team"}, "team set -team ID [-rate-limit N|default] [-daily-limit N]"},
	{[]string{"team", "name", "permission", "domain"}, []string{"team"}, "key create -team ID [-name NAME] [-permission FULL|SENDING] [-domain ID]"},
	{[]string{"team"}, []string{"team"}, "key list -team ID"},
	{[]string{"team", "id"}, []string{"team", "id"}, "key revoke -team ID -id KEYID"},
	{[]string{"key"}, nil, "key import [-key us_...]   (or the key in MAILROOM_KEY)"},
	{nil, nil, "unsubscribe-key rotate"},
	{[]string{"team", "url", "events"}, []string{"team", "url"}, "webhook create -team ID -url URL [-events TYPE,TYPE]"},
	{[]string{"team"}, []string{"team"}, "webhook list -team ID"},
}

// Usage lists the commands.
var Usage = func() string {
	lines := []string{"usage:"}
	for _, c := range commands {
		lines = append(lines, "  mailroom-admin "+c.usage)
	}
	return strings.Join(lines, "\n")
}()

// Help is the usage that a command line asking for it wants (-h or --help, alone or after a
// command's first word), and whether it asks.
func Help(args []string) (string, bool) {
	isHelp := func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }
	switch {
	case len(args) == 1 && (isHelp(args[0]) || args[0] == "help"):
		return Usage, true
	case len(args) == 2 && isHelp(args[1]):
		lines := []string{"usage:"}
		for _, c := range commands {
			if strings.HasPrefix(c.usage, args[0]+" ") {
				lines = append(lines, "  mailroom-admin "+c.usage)
			}
		}
		if len(lines) == 1 {
			return "", false // no such command: said as such
		}
		return strings.Join(lines, "\n"), true
	}
	return "", false
}

// commandOf is the command args start with.
func commandOf(args []string) (command, bool) {
	if len(args) < 2 {
		return command{}, false
	}
	for _, c := range commands {
		if strings.HasPrefix(c.usage, args[0]+" "+args[1]+" ") || c.usage == args[0]+" "+args[1] {
			return c, true
		}
	}
	return command{}, false
}

// UnknownCommand says which word of a command line that names no command is wrong.
func UnknownCommand(args []string) string {
	if len(args) == 0 {
		return "no command given"
	}
	known := false
	for _, c := range commands {
		if strings.HasPrefix(c.usage, args[0]+" ") {
			known = true
		}
	}
	switch {
	case !known:
		return fmt.Sprintf("unknown command %q", args[0])
	case len(args) < 2:
		return fmt.Sprintf("%s: which one? (a second word is missing)", args[0])
	default:
		return fmt.Sprintf("%s: unknown command %q", args[0], args[1])
	}
}

// flagHelp is what each flag means.
var flagHelp = map[string]string{
	"name":        "name",
	"team":        "team id",
	"permission":  "FULL or SENDING",
	"domain":      "restrict the key to this domain id",
	"id":          "key id (the 10 characters after us_)",
	"rate-limit":  "API requests per second (0: none; default: the server's API_RATE_LIMIT)",
	"daily-limit": "emails per UTC day (0: none)",
	"key":         "a FULL key to keep, us_<10 [0-9a-z]>_<32 hex>",
	"url":         "the receiver's URL",
	"events":      "event types, comma-separated (none: every type)",
}

// parsed is a command's flags as given.
type parsed struct {
	fs  *flag.FlagSet
	str map[string]*string
}

// s is the flag's value ("" when the command has no such flag).
func (p parsed) s(name string) string {
	if v, ok := p.str[name]; ok {
		return *v
	}
	return ""
}

// given reports whether the flag was on the command line.
func (p parsed) given(name string) bool {
	found := false
	p.fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

func (p parsed) int(name string, def int64) (int64, error) {
	if !p.given(name) {
		return def, nil
	}
	n, err := strconv.ParseInt(p.s(name), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("-%s: %q is not a number", name, p.s(name))
	}
	return n, nil
}

// Parse checks args against the command they name: its own flags only, those it needs given,
// nothing else after them. -h (or -help, --help) after a command is flag.ErrHelp, with the
// command's usage written to out.
func Parse(args []string, out io.Writer) (parsed, error) {
	cmd, ok := commandOf(args)
	if !ok {
		return parsed{}, fmt.Errorf("%s\n%s", UnknownCommand(args), Usage)
	}
	fs := flag.NewFlagSet(args[0]+" "+args[1], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	p := parsed{fs: fs, str: map[string]*string{}}
	for _, name := range cmd.flags {
		p.str[name] = fs.String(name, "", flagHelp[name])
	}
	usage := func() {
		fmt.Fprintf(out, "usage: mailroom-admin %s\n", cmd.usage)
		fs.SetOutput(out)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if err := fs.Parse(args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return parsed{}, err
		}
		return parsed{}, fmt.Errorf("%s: %v (usage: mailroom-admin %s)", fs.Name(), err, cmd.usage)
	}
	if fs.NArg() > 0 {
		return parsed{}, fmt.Errorf("%s: %q is not taken (usage: mailroom-admin %s)", fs.Name(), fs.Arg(0), cmd.usage)
	}
	for _, name := range cmd.required {
		if !p.given(name) || strings.TrimSpace(p.s(name)) == "" {
			return parsed{}, fmt.Errorf("%s: -%s is required (usage: mailroom-admin %s)", fs.Name(), name, cmd.usage)
		}
	}
	return p, nil
}

// Run runs one admin command on a's store and services, printing to out.
func Run(ctx context.Context, a *app.App, args []string, out io.Writer) error {
	p, err := Parse(args, out)
	if err != nil {
		return err
	}
	if args[0] == "unsubscribe-key" && args[1] == "rotate" {
		id, n, err := a.RotateUnsubscribeKey(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "unsubscribe key %s now signs new links; %d keys check them\n", id, n)
		return nil
	}
	if args[0] == "webhook" {
		return webhooks(ctx, a.Services.Webhooks, a.Store, p, args, out)
	}
	admin := &team.Admin{Store: a.Store, Now: time.Now}
	var cache keyCache = noCache{}
	if a.Services != nil && a.Services.Auth != nil {
		// A running server refuses a revoked key, and applies a team's new limits, at once.
		cache = a.Services.Auth
	}
	return dispatch(ctx, admin, p, args, out, cache)
}

// teamOf is the -team flag, a team that exists when the command needs one.
func teamOf(ctx context.Context, st store.Teams, p parsed) (int64, error) {
	if _, ok := p.str["team"]; !ok {
		return 0, nil
	}
	id, err := p.int("team", 0)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("-team: %q is not a team id", p.s("team"))
	}
	if _, err := st.GetTeam(ctx, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return 0, fmt.Errorf("-team: there is no team %d (mailroom-admin team list)", id)
		}
		return 0, err
	}
	return id, nil
}

// keyCache is the running server's cache of keys and their teams' limits.
type keyCache interface {
	Forget(keyID string)
	ForgetTeam(teamID int64)
}

type noCache struct{}

func (noCache) Forget(string)    {}
func (noCache) ForgetTeam(int64) {}

func dispatch(ctx context.Context, admin *team.Admin, p parsed, args []string, out io.Writer, cache keyCache) error {
	teamID, err := teamOf(ctx, admin.Store, p)
	if err != nil {
		return err
	}
	switch args[0] + " " + args[1] {
	case "team create":
		t, err := admin.CreateTeam(ctx, p.s("name"))
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "team %d %q created\n", t.ID, t.Name)
	case "team set":
		daily, err := p.int("daily-limit", -1) // -1 when it is left out: unchanged
		if err != nil {
			return err
		}
		if p.given("daily-limit") && daily < 0 {
			return fmt.Errorf("-daily-limit: want emails per UTC day, 0 for none")
		}
		rate := p.s("rate-limit")
		if p.given("rate-limit") && rate == "" {
			return fmt.Errorf("-rate-limit: want requests per second, 0 or default")
		}
		t, err := admin.Store.UpdateTeam(ctx, teamID, func(t *store.Team) error {
			switch rate {
			case "":
			case "default":
				t.APIRateLimit = nil
			default:
				n, err := strconv.ParseInt(rate, 10, 64)
				if err != nil || n < 0 {
					return fmt.Errorf("-rate-limit: want requests per second, 0 or default")
				}
				t.APIRateLimit = &n
			}
			if daily >= 0 {
				t.DailyEmailLimit = daily
			}
			return nil
		})
		if err != nil {
			return err
		}
		cache.ForgetTeam(t.ID)
		fmt.Fprintf(out, "team %d: %s\n", t.ID, limits(t))
	case "team list":
		teams, err := admin.Store.ListTeams(ctx)
		if err != nil {
			return err
		}
		for _, t := range teams {
			fmt.Fprintf(out, "%d\t%s\t%s\t%s\n", t.ID, t.Name, t.CreatedAt.Format(time.RFC3339), limits(t))
		}
	case "key create":
		domainID, err := p.int("domain", 0)
		if err != nil {
			return err
		}
		perm := strings.ToUpper(p.s("permission"))
		if perm == "" {
			perm = string(store.PermissionFull)
		}
		full, k, err := admin.CreateKey(ctx, team.KeyRequest{TeamID: teamID, Name: p.s("name"),
			Permission: store.Permission(perm), DomainID: domainID})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "key %s created for team %d (%s); it is shown once, keep it:\n%s\n", k.ID, k.TeamID, k.Permission, full)
	case "key list":
		keys, err := admin.Store.ListAPIKeys(ctx, teamID)
		if err != nil {
			return err
		}
		for _, k := range keys {
			fmt.Fprintf(out, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.Permission, keyScope(k), k.CreatedAt.Format(time.RFC3339))
		}
	case "key import":
		// What BOOTSTRAP_API_KEY does for the local server, for any store: the sample events'
		// key against a table, or a key kept from another install (from MAILROOM_KEY rather
		// than the command line, which shell histories keep: mailroom-admin passes it as -key).
		given := p.s("key")
		id, _, err := auth.Parse(given)
		if err != nil {
			return fmt.Errorf("key import: give -key or MAILROOM_KEY, us_<10 [0-9a-z]>_<32 hex>")
		}
		if _, _, err := admin.Bootstrap(ctx, given); err != nil {
			return fmt.Errorf("key import: %w", err)
		}
		k, err := admin.Store.GetAPIKey(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "key %s is a %s key of team %d (%s)\n", k.ID, k.Permission, k.TeamID, keyScope(k))
	case "key revoke":
		keyID := p.s("id")
		if err := admin.RevokeKey(ctx, teamID, keyID); err != nil {
			return err
		}
		cache.Forget(keyID)
		fmt.Fprintf(out, "key %s revoked\n", keyID)
	default:
		return fmt.Errorf("%s", Usage)
	}
	return nil
}

// keyScope says which of its team's domains a key acts on.
func keyScope(k store.APIKey) string {
	if k.DomainID != 0 {
		return fmt.Sprintf("domain %d", k.DomainID)
	}
	return "all domains"
}

// limits describes a team's limits.
func limits(t store.Team) string {
	rate := "the server's rate limit"
	if t.APIRateLimit != nil {
		rate = fmt.Sprintf("%d requests/s", *t.APIRateLimit)
		if *t.APIRateLimit == 0 {
			rate = "no rate limit"
		}
	}
	daily := "no daily quota"
	if t.DailyEmailLimit > 0 {
		daily = fmt.Sprintf("%d emails/day", t.DailyEmailLimit)
	}
	return rate + ", " + daily
}

// webhooks runs the webhook commands: create (the secret is printed once) and list.
func webhooks(ctx context.Context, h *hooks.Service, teams store.Teams, p parsed, args []string, out io.Writer) error {
	teamID, err := teamOf(ctx, teams, p)
	if err != nil {
		return err
	}
	switch args[1] {
	case "create":
		url := p.s("url")
		f := hooks.Fields{URL: &url}
		if types := p.s("events"); types != "" {
			list := strings.Split(types, ",")
			f.EventTypes = &list
		}
		w, secret, err := h.Create(ctx, teamID, f)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "webhook %s created for team %d; its secret is shown once, keep it:\n%s\n", w.ID, w.TeamID, secret)
	case "list":
		list, err := h.List(ctx, teamID)
		if err != nil {
			return err
		}
		for _, w := range list {
			types := "every event"
			if len(w.EventTypes) > 0 {
				types = strings.Join(w.EventTypes, ",")
			}
			fmt.Fprintf(out, "%s\t%s\t%s\t%s\t%s\n", w.ID, w.Status, w.URL, types, w.CreatedAt.Format(time.RFC3339))
		}
	default:
		return fmt.Errorf("%s", Usage)
	}
	return nil
}
