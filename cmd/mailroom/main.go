// Command mailroom is the local server: every API route on one port, the embedded store, an
// outbox of .eml files and in-process delivery (or the AWS adapters with BACKEND=aws).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/mailroom/mailroom/pkg/config"
	"github.com/mailroom/mailroom/pkg/server"
)

func main() { os.Exit(mainCode()) }

// mainCode is main with its exit status returned, so that its deferred calls (the terminal
// given back) run before the process ends.
func mainCode() int {
	foreground := false
	for _, arg := range os.Args[1:] {
		switch arg {
		case "-foreground", "--foreground":
			foreground = true
		case "-h", "-help", "--help":
			usage(os.Stdout)
			return 0
		case "-version", "--version":
			fmt.Println("mailroom", server.Version())
			return 0
		default:
			fmt.Fprintf(os.Stderr, "mailroom: unknown argument %q\n\n", arg)
			usage(os.Stderr)
			return 2
		}
	}
	if foreground {
		defer takeTerminal()()
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mailroom:", err)
		return 1
	}
	return 0
}

// usage prints what the command does and the variables it reads.
func usage(w io.Writer) {
	fmt.Fprintf(w, `Usage: mailroom [-h | --version | -foreground]

Mailroom %s: the useSend-compatible email API on one machine. Every route, an
embedded database and an outbox of .eml files (or DynamoDB and SES with BACKEND=aws),
configured by environment variables:

`, server.Version())
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, v := range config.Vars {
		if v.AWS {
			continue
		}
		def := v.Default
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", v.Name, def, v.Meaning)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nCtrl-C stops it after the requests and sends in flight; queued emails are sent after the next start.")
	fmt.Fprintln(w, "-foreground takes the terminal for a process group of its own, so that Ctrl-C reaches the")
	fmt.Fprintln(w, "server alone and whatever started it (make run) ends with the server's status, 0.")
}

func run() error {
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	cfg.CreateTable = true
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := server.Start(ctx, cfg, net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port)), os.Stdout)
	if err != nil {
		return err
	}
	<-ctx.Done()
	stop() // a second Ctrl-C ends the process at once
	fmt.Println("Mailroom stopping: finishing the requests and sends in flight (Ctrl-C again to quit now)")
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
