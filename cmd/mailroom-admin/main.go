// Command mailroom-admin manages teams and API keys on the configured backend (BACKEND,
// DATA_DIR, TABLE_NAME and AWS_* as for the server). With the embedded backend and a local
// server running on DATA_DIR, the command runs inside that server (pkg/admin's socket): the
// database file is opened by one process at a time.
//
//	mailroom-admin team create -name "Acme"
//	mailroom-admin team list
//	mailroom-admin team set -team 1 [-rate-limit 20|0|default] [-daily-limit 50000|0]
//	mailroom-admin key create -team 1 -name ci [-permission SENDING] [-domain 2]
//	mailroom-admin key list -team 1
//	mailroom-admin key revoke -team 1 -id abcdefghij
//	MAILROOM_KEY=us_... mailroom-admin key import   (or -key us_...)
//	mailroom-admin unsubscribe-key rotate
//	mailroom-admin webhook create -team 1 -url https://example.com/hooks [-events email.sent,email.delivered]
//	mailroom-admin webhook list -team 1
//
// unsubscribe-key rotate adds a new key for signing unsubscribe links and makes it the one that
// signs; links signed by the older keys keep working (the ring keeps the last ten keys). It
// rotates the secret UNSUBSCRIBE_SECRET_ID names (AWS), or DATA_DIR/unsubscribe.key.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mailroom/mailroom/pkg/admin"
	"github.com/mailroom/mailroom/pkg/app"
	"github.com/mailroom/mailroom/pkg/config"
)

func main() {
	// A command's usage (-h) is not an error: Parse printed it.
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "mailroom-admin:", err)
		os.Exit(1)
	}
}

// about follows the list of commands that -h alone prints.
const about = "\nIt runs on what DATA_DIR (embedded: inside the server running there, if one is) or\n" +
	"BACKEND=aws, TABLE_NAME and the usual AWS variables name, as the server does;\n" +
	"key import reads the key from MAILROOM_KEY when -key is not given."

func run(ctx context.Context, args []string, out io.Writer) (err error) {
	if usage, ok := admin.Help(args); ok {
		fmt.Fprintln(out, usage)
		if len(args) == 1 {
			fmt.Fprintln(out, about)
		}
		return nil
	}
	if len(args) < 2 {
		return fmt.Errorf("%s\n%s", admin.UnknownCommand(args), admin.Usage)
	}
	if args[0] == "key" && args[1] == "import" && !slices.ContainsFunc(args, func(a string) bool {
		return a == "-key" || a == "--key" || strings.HasPrefix(a, "-key=") || strings.HasPrefix(a, "--key=")
	}) {
		if k := os.Getenv("MAILROOM_KEY"); k != "" {
			args = append(slices.Clip(args), "-key", k) // not from the command line: no history keeps it
		}
	}
	// A command's own flags are checked before anything is opened: its usage (-h), or what is
	// wrong with it, needs no database or server.
	if _, err := admin.Parse(args, out); err != nil {
		return err
	}
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	if cfg.Backend == config.BackendEmbedded {
		if err := admin.Remote(ctx, cfg.DataDir, args, out); !errors.Is(err, admin.ErrNoServer) {
			return err
		}
		// A folder without a database is most often the wrong folder (the CLI run from
		// elsewhere): only the commands that set up a new one make it.
		db := filepath.Join(cfg.DataDir, "mailroom.db")
		if _, statErr := os.Stat(db); errors.Is(statErr, os.ErrNotExist) {
			if !makesFirst(args) {
				abs, _ := filepath.Abs(cfg.DataDir)
				return fmt.Errorf("there is no Mailroom database in %s: run this where the server keeps its data, or set DATA_DIR to that folder", abs)
			}
			defer func() {
				if err == nil {
					fmt.Fprintf(out, "(a new database: %s)\n", db)
				}
			}()
		}
	}
	cfg.CreateTable = true
	a, err := app.New(ctx, cfg, app.Options{})
	if err != nil {
		return err
	}
	defer a.Close(ctx)
	return admin.Run(ctx, a, args, out)
}

// makesFirst reports the commands that may make a new database: those that set one up before
// the server's first start (a team, a key you chose, the unsubscribe keyring).
func makesFirst(args []string) bool {
	return args[0] == "team" && args[1] == "create" || args[0] == "key" && args[1] == "import" ||
		args[0] == "unsubscribe-key"
}
