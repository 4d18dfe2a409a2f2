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
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mailroom/mailroom/pkg/admin"
	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/app"
	"github.com/mailroom/mailroom/pkg/config"
	"github.com/mailroom/mailroom/pkg/team"
)

// LocalConsoleScan is how many of the newest emails the local console's search or status
// filter looks through (the console's default, for a console on Lambda over DynamoDB, is
// 1,000): a busy day's. A search of 5,000 takes about 0.1 s on this project's machine.
const LocalConsoleScan = 5000

// YieldGap is how often local delivery starts an email while the API is answering requests
// (deliver.Pool.YieldTo): 100 a second.
const YieldGap = 10 * time.Millisecond

// apiLoad tells a burst of API writes (sends, imports: what a client waits on) from requests
// that come now and then; only writes count (reads are cheap, and pollers waiting for their
// emails must not slow delivery down). Delivery yields to a burst.
type apiLoad struct {
	inFlight atomic.Int64
	next     atomic.Uint64
	starts   [burstRequests]atomic.Int64 // the last requests' start times (Unix nanoseconds)
}

// A burst is two requests answered at once, or burstRequests begun within burstWindow.
const (
	burstRequests = 4
	burstWindow   = 4 * YieldGap
)

func (l *apiLoad) begin() {
	l.inFlight.Add(1)
	l.starts[l.next.Add(1)%burstRequests].Store(time.Now().UnixNano())
}

func (l *apiLoad) end() { l.inFlight.Add(-1) }

func (l *apiLoad) busy() bool {
	if l.inFlight.Load() >= 2 {
		return true
	}
	oldest := l.starts[0].Load()
	for i := 1; i < burstRequests; i++ {
		oldest = min(oldest, l.starts[i].Load())
	}
	return oldest > 0 && time.Since(time.Unix(0, oldest)) < burstWindow
}

// yielder is a store that puts its own work off while the API is busy (the embedded store:
// bolt.Store.YieldTo).
type yielder interface{ YieldTo(busy func() bool) }

// Server is a running local server.
type Server struct {
	App    *app.App
	URL    string // http://host:port
	APIKey string // the key created at start, if any
	http   *http.Server
	done   chan error
	out    io.Writer
	admin  *admin.Socket // the embedded backend's admin socket (nil otherwise)
}

// version is the release this binary was built as (-ldflags "-X
// github.com/mailroom/mailroom/pkg/server.version=v1.2.3"); Version falls back on the build's
// own information.
var version string

// Version names the build: the release, else the module version, else the VCS revision it was
// built from ("+dirty" with local changes), else "dev".
func Version() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	v := "dev-" + rev[:min(len(rev), 12)]
	if dirty {
		v += "+dirty"
	}
	return v
}

// listen listens on addr. Port 0 on the embedded backend reuses the port of the last run
// (DATA_DIR/port) while it is free: the links in the emails it sent point at it. lost is that
// port when it was taken (another one is picked, and the links already sent are dead).
func listen(cfg config.Config, addr string) (ln net.Listener, lost string, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port != "0" || cfg.Backend != config.BackendEmbedded {
		ln, err := net.Listen("tcp", addr)
		return ln, "", err
	}
	file := filepath.Join(cfg.DataDir, "port")
	if b, err := os.ReadFile(file); err == nil {
		if last := strings.TrimSpace(string(b)); last != "" && last != "0" {
			ln, err := net.Listen("tcp", net.JoinHostPort(host, last))
			if err == nil {
				return ln, "", nil
			}
			lost = last
		}
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	_, picked, _ := net.SplitHostPort(ln.Addr().String())
	if err := os.MkdirAll(cfg.DataDir, 0o755); err == nil {
		_ = os.WriteFile(file, []byte(picked+"\n"), 0o600)
	}
	return ln, lost, nil
}

// Start builds the app, makes sure a team and key exist, recovers pending deliveries and
// serves on addr ("127.0.0.1:0" picks a free port). It prints the banner to out, and Shutdown
// its last line.
func Start(ctx context.Context, cfg config.Config, addr string, out io.Writer) (*Server, error) {
	// The OpenAPI document depends on nothing but the build: made once, served as is.
	doc, err := api.OpenAPI(Version())
	if err != nil {
		return nil, err
	}
	ln, lostPort, err := listen(cfg, addr)
	if err != nil {
		return nil, fmt.Errorf("HOST and PORT: cannot listen on %s: %w", addr, err)
	}
	base := "http://" + reachable(ln.Addr(), cfg.Host)
	if cfg.PublicURL == "" { // links in emails (unsubscribe) point at this server
		cfg.PublicURL = base
	}
	a, err := app.New(ctx, cfg, app.Options{Local: true})
	if err != nil {
		ln.Close()
		return nil, err
	}
	if lostPort != "" {
		a.Log.Warn("PORT=0: the port of the last run is taken, so another was picked: unsubscribe links already sent point at the old one (stop what holds it and restart, or set PORT)",
			"lastPort", lostPort, "port", ln.Addr().(*net.TCPAddr).Port)
	}
	teams := &team.Admin{Store: a.Store, Now: time.Now}
	key, teamID, err := teams.Bootstrap(ctx, cfg.BootstrapAPIKey)
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
	// GET /api/v1/doc is served here, not in api.Routes: each route there is a Lambda function,
	// and the document is for whoever develops against this server. It takes no API key.
	mux.HandleFunc("GET /api/v1/doc", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	})
	for _, p := range []string{"/healthz", "/api/v1/doc"} {
		mux.Handle(p, api.MethodNotAllowed(http.MethodGet, http.MethodHead))
	}
	// Delivery yields to the API (deliver.Pool.YieldTo): while a request is being answered, it
	// starts one email per YieldGap, so that a burst of sends is answered at once and the
	// outbox catches up after it.
	var load apiLoad
	apiHandler := a.Services.Handler()
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			load.begin()
			defer load.end()
		}
		apiHandler.ServeHTTP(w, r)
	}))
	if a.Pool != nil {
		a.Pool.YieldTo(load.busy, YieldGap)
	}
	if y, ok := a.Store.(yielder); ok {
		y.YieldTo(load.busy)
	}
	// The mail console: GET / sends a browser to it.
	console := api.NewConsole(a.Services, a.OutboxDir)
	console.Events = a.Ingester // its buttons fire SES events as SES would
	console.Keys = teams
	// A search reads the local store, not DynamoDB: it looks through a busy day's emails.
	console.Scan = LocalConsoleScan
	ch := console.Handler()
	mux.Handle("GET /{$}", ch)
	mux.Handle("GET /console", ch) // the console's own redirect, with its headers and the query
	mux.Handle("/console/", ch)
	s := &Server{
		App: a, URL: base, APIKey: key, done: make(chan error, 1), out: out,
		http: &http.Server{Handler: api.CleanPaths(mux), ReadHeaderTimeout: 10 * time.Second},
	}
	go func() { s.done <- s.http.Serve(ln) }()
	if cfg.Backend == config.BackendEmbedded {
		// mailroom-admin runs its commands in this process while it holds the database.
		if s.admin, err = admin.Listen(a, cfg.DataDir); err != nil {
			a.Log.Warn("no admin socket: mailroom-admin needs the server stopped", "err", err.Error())
		}
	}
	mailer, store := "SES v2", "DynamoDB table "+cfg.TableName
	if cfg.Backend == config.BackendEmbedded {
		mailer, store = "outbox "+a.OutboxDir, "embedded in "+cfg.DataDir
	}
	a.Log.Info("mailroom started", "version", Version(), "address", s.URL, "backend", cfg.Backend, "store", store,
		"mailer", mailer, "workers", cfg.Workers)
	s.banner(out, teamID)
	return s, nil
}

// reachable is addr as another machine would reach it: a wildcard address (HOST=0.0.0.0 or
// ::) is no address to reach, so links name this machine's host name instead (PUBLIC_URL
// names another). An IPv6 address keeps its zone (HOST's, when the listener does not report
// it), written %25 as a URL writes it (RFC 6874).
func reachable(addr net.Addr, host string) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return addr.String()
	}
	port := strconv.Itoa(tcp.Port)
	if tcp.IP.IsUnspecified() {
		name, err := os.Hostname()
		if err != nil || name == "" {
			name = "localhost"
		}
		return net.JoinHostPort(name, port)
	}
	ip, zone := tcp.IP.String(), tcp.Zone
	if i := strings.LastIndexByte(host, '%'); zone == "" && i >= 0 && tcp.IP.To4() == nil {
		zone = host[i+1:]
	}
	if zone != "" {
		ip += "%25" + zone
	}
	return net.JoinHostPort(ip, port)
}

func (s *Server) banner(out io.Writer, teamID int64) {
	if out == nil {
		return
	}
	c := s.App.Config
	fmt.Fprintf(out, "Mailroom %s listening on %s (backend %s", Version(), s.URL, c.Backend)
	if c.Backend == config.BackendEmbedded {
		fmt.Fprintf(out, "; data in %s, messages in %s", c.DataDir, s.App.OutboxDir)
	}
	fmt.Fprintf(out, ")\n  API base URL: %s/api/v1\n", s.URL)
	key := "process.env.USESEND_API_KEY"
	if s.APIKey != "" {
		fmt.Fprintf(out, "  Created team %d with API key (shown once, keep it):\n    %s\n", teamID, s.APIKey)
		key = strconv.Quote(s.APIKey)
	} else {
		fmt.Fprintf(out, "  (set USESEND_API_KEY to your key for the snippet below)\n")
	}
	fmt.Fprintf(out, "Try it: npm install usesend-js, save this as try.mjs and run node try.mjs\n")
	for _, line := range strings.Split(Snippet(key, s.URL), "\n") {
		fmt.Fprintf(out, "  %s\n", line)
	}
	fmt.Fprintln(out)
}

// Snippet is the banner's SDK example, an ES module that runs as written: key is a JavaScript
// expression.
func Snippet(key, url string) string {
	return `import { UseSend } from "usesend-js";
const us = new UseSend(` + key + `, "` + url + `");
await us.domains.create({ name: "example.com", region: "us-east-1" }); // verified at once locally
const { data, error } = await us.emails.send({ from: "hi@example.com", to: "you@example.org", subject: "Hello", text: "It works" });
console.log(data ?? error);`
}

// Shutdown stops taking requests, waits for those in flight, finishes in-flight deliveries
// and closes the store, then prints how many emails are still queued: they are delivered after
// the next start.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	if s.admin != nil {
		_ = s.admin.Close(ctx)
	}
	if s.App.Pool != nil {
		s.App.Pool.Close(ctx) // the sends in flight end before the count
	}
	if cerr := s.App.Close(ctx); err == nil {
		err = cerr
	}
	queued := s.App.Queued()
	if s.out != nil {
		switch {
		case queued > 0:
			fmt.Fprintf(s.out, "Mailroom stopped: %d emails still queued, sent after the next start\n", queued)
		case queued == 0:
			fmt.Fprintln(s.out, "Mailroom stopped: nothing queued")
		default:
			fmt.Fprintln(s.out, "Mailroom stopped")
		}
	}
	s.App.Log.Info("mailroom stopped", "queued", queued)
	return err
}
