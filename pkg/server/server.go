// Package server runs Mailroom as one local HTTP server: every route, GET /healthz, delivery in
// process, and a graceful shutdown that finishes in-flight requests and sends. It is the body of
// cmd/mailroom, kept here so that tests (the SDK test, the benchmarks) start the real thing.
package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/mailroom/mailroom/pkg/app"
	"github.com/mailroom/mailroom/pkg/config"
	"github.com/mailroom/mailroom/pkg/team"
)

// Server is a running local server.
type Server struct {
	App    *app.App
	URL    string // http://host:port
	APIKey string // the key created at start, if any
	http   *http.Server
	done   chan error
}

// Start builds the app, makes sure a team and key exist, recovers pending deliveries and
// serves on addr ("127.0.0.1:0" picks a free port). It prints the banner to out.
func Start(ctx context.Context, cfg config.Config, addr string, out io.Writer) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if cfg.PublicURL == "" { // links in emails (unsubscribe) point at this server
		cfg.PublicURL = "http://" + ln.Addr().String()
	}
	a, err := app.New(ctx, cfg, app.Options{Local: true})
	if err != nil {
		ln.Close()
		return nil, err
	}
	admin := &team.Admin{Store: a.Store, Now: time.Now}
	key, teamID, err := admin.Bootstrap(ctx, cfg.BootstrapAPIKey)
	if err != nil {
		_ = a.Close(ctx)
		ln.Close()
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	n, err := a.Pool.Recover(ctx, a.Store)
	if err != nil {
		_ = a.Close(ctx)
		ln.Close()
		return nil, fmt.Errorf("recover pending emails: %w", err)
	}
	if n > 0 {
		a.Log.Info("resuming delivery of pending emails", "count", n)
	}
	// Schedules that came due while the server was down fire now.
	if err := a.Start(ctx, time.Minute); err != nil {
		_ = a.Close(ctx)
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	})
	mux.Handle("/", a.Services.Handler())
	s := &Server{
		App: a, URL: "http://" + ln.Addr().String(), APIKey: key, done: make(chan error, 1),
		http: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
	}
	go func() { s.done <- s.http.Serve(ln) }()
	s.banner(out, teamID)
	return s, nil
}

func (s *Server) banner(out io.Writer, teamID int64) {
	if out == nil {
		return
	}
	fmt.Fprintf(out, "Mailroom is listening on %s (backend %s)\n", s.URL, s.App.Config.Backend)
	fmt.Fprintf(out, "  API base URL: %s/api/v1\n", s.URL)
	if s.App.Config.Backend == config.BackendEmbedded {
		fmt.Fprintf(out, "  data:   %s\n  outbox: %s\n", s.App.Config.DataDir, s.App.OutboxDir)
	}
	key := s.APIKey
	if key != "" {
		fmt.Fprintf(out, "  Created team %d with API key (shown once, keep it):\n    %s\n", teamID, key)
	} else {
		key = "<your API key>"
	}
	fmt.Fprintf(out, "Try it with the useSend SDK (npm install usesend-js):\n")
	fmt.Fprintf(out, "  const us = new (require(\"usesend-js\").UseSend)(%q, %q);\n", key, s.URL)
	fmt.Fprintf(out, "  await us.domains.create({ name: \"example.com\", region: \"us-east-1\" }); await us.emails.send({ from: \"hi@example.com\", to: \"you@example.org\", subject: \"Hello\", text: \"It works\" });\n")
}

// Shutdown stops taking requests, waits for those in flight, finishes in-flight deliveries
// and closes the store. Emails still queued are delivered after the next start.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	if cerr := s.App.Close(ctx); err == nil {
		err = cerr
	}
	return err
}
