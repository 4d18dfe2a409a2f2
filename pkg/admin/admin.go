// Package admin is mailroom-admin's commands: teams, API keys, limits, webhooks and the
// unsubscribe keyring. The command runs them on the store it opens, or, while a local server
// holds the embedded database, inside that server through its admin socket (see Socket).
package admin

import (
	"context"
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

// Usage lists the commands.
const Usage = `usage:
  mailroom-admin team create -name NAME
  mailroom-admin team list
  mailroom-admin team set -team ID [-rate-limit N|default] [-daily-limit N]
  mailroom-admin key create -team ID [-name NAME] [-permission FULL|SENDING] [-domain ID]
  mailroom-admin key list -team ID
  mailroom-admin key revoke -team ID -id KEYID
  mailroom-admin key import [-key us_...]   (or the key in MAILROOM_KEY)
  mailroom-admin unsubscribe-key rotate
  mailroom-admin webhook create -team ID -url URL [-events TYPE,TYPE]
  mailroom-admin webhook list -team ID`

// Run runs one admin command on a's store and services, printing to out.
func Run(ctx context.Context, a *app.App, args []string, out io.Writer) error {
	if len(args) < 2 {
		return fmt.Errorf("%s", Usage)
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
		return webhooks(ctx, a.Services.Webhooks, args, out)
	}
	admin := &team.Admin{Store: a.Store, Now: time.Now}
	forget := func(string) {}
	if a.Services != nil && a.Services.Auth != nil {
		forget = a.Services.Auth.Forget // a running server refuses a revoked key at once
	}
	return dispatch(ctx, admin, args, out, forget)
}

func dispatch(ctx context.Context, admin *team.Admin, args []string, out io.Writer, forget func(keyID string)) error {
	fs := flag.NewFlagSet(args[0]+" "+args[1], flag.ContinueOnError)
	fs.SetOutput(out)
	name := fs.String("name", "", "name")
	teamID := fs.Int64("team", 0, "team id")
	perm := fs.String("permission", "FULL", "FULL or SENDING")
	domainID := fs.Int64("domain", 0, "restrict the key to this domain id")
	keyID := fs.String("id", "", "key id (the 10 characters after us_)")
	rate := fs.String("rate-limit", "", "API requests per second (0: none; default: the server's API_RATE_LIMIT)")
	daily := fs.Int64("daily-limit", -1, "emails per UTC day (0: none)")
	given := fs.String("key", "", "a FULL key to keep, us_<10 [0-9a-z]>_<32 hex>")
	if err := fs.Parse(args[2:]); err != nil {
		return err
	}
	switch args[0] + " " + args[1] {
	case "team create":
		t, err := admin.CreateTeam(ctx, *name)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "team %d %q created\n", t.ID, t.Name)
	case "team set":
		t, err := admin.Store.UpdateTeam(ctx, *teamID, func(t *store.Team) error {
			switch *rate {
			case "":
			case "default":
				t.APIRateLimit = nil
			default:
				n, err := strconv.ParseInt(*rate, 10, 64)
				if err != nil || n < 0 {
					return fmt.Errorf("-rate-limit: want requests per second, 0 or default")
				}
				t.APIRateLimit = &n
			}
			if *daily >= 0 {
				t.DailyEmailLimit = *daily
			}
			return nil
		})
		if err != nil {
			return err
		}
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
		full, k, err := admin.CreateKey(ctx, team.KeyRequest{TeamID: *teamID, Name: *name,
			Permission: store.Permission(*perm), DomainID: *domainID})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "key %s created for team %d (%s); it is shown once, keep it:\n%s\n", k.ID, k.TeamID, k.Permission, full)
	case "key list":
		keys, err := admin.Store.ListAPIKeys(ctx, *teamID)
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
		var other []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name != "key" {
				other = append(other, "-"+f.Name)
			}
		})
		if len(other) > 0 {
			return fmt.Errorf("key import: %s not taken (the key goes to the first team, FULL)", strings.Join(other, ", "))
		}
		id, _, err := auth.Parse(*given)
		if err != nil {
			return fmt.Errorf("key import: give -key or MAILROOM_KEY, us_<10 [0-9a-z]>_<32 hex>")
		}
		if _, _, err := admin.Bootstrap(ctx, *given); err != nil {
			return fmt.Errorf("key import: %w", err)
		}
		k, err := admin.Store.GetAPIKey(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "key %s is a %s key of team %d (%s)\n", k.ID, k.Permission, k.TeamID, keyScope(k))
	case "key revoke":
		if err := admin.RevokeKey(ctx, *teamID, *keyID); err != nil {
			return err
		}
		forget(*keyID)
		fmt.Fprintf(out, "key %s revoked\n", *keyID)
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
func webhooks(ctx context.Context, h *hooks.Service, args []string, out io.Writer) error {
	fs := flag.NewFlagSet(args[0]+" "+args[1], flag.ContinueOnError)
	fs.SetOutput(out)
	teamID := fs.Int64("team", 0, "team id")
	url := fs.String("url", "", "the receiver's URL")
	types := fs.String("events", "", "event types, comma-separated (none: every type)")
	if err := fs.Parse(args[2:]); err != nil {
		return err
	}
	switch args[1] {
	case "create":
		f := hooks.Fields{URL: url}
		if *types != "" {
			list := strings.Split(*types, ",")
			f.EventTypes = &list
		}
		w, secret, err := h.Create(ctx, *teamID, f)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "webhook %s created for team %d; its secret is shown once, keep it:\n%s\n", w.ID, w.TeamID, secret)
	case "list":
		list, err := h.List(ctx, *teamID)
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
