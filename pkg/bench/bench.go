// Package bench measures the local server (cmd/mailroom-bench, make bench): POST
// /api/v1/emails on the real local server (started in process on a free loopback port, with a temporary data directory) against a bare net/http
// handler that answers the same JSON shape without doing anything, under the same load: C
// keep-alive clients, a warm-up, then N requests. It also measures the delivery side: how long
// until every accepted email has left QUEUED (reached SENT). Every run is bounded by -n and by
// -duration, and talks to 127.0.0.1 only.
//
// A second phase (campaign.go) measures a campaign: a fresh local server, -campaign contacts
// imported through the bulk endpoint, one campaign with sendNow and -campaign-batch, and the time
// until it is SENT (every email written: the fan-out), bounded by -campaign-timeout; delivery to
// the outbox is reported, waited for at most -delivery-wait after the fan-out.
//
// Flags (cmd/mailroom-bench): go run ./cmd/mailroom-bench [-c 16] [-n 5000] [-warmup 500] [-duration 60s] [-workers 8]
//
//	[-http=true] [-campaign 100000] [-campaign-batch 10000] [-campaign-timeout 10m]
//	[-delivery-wait 120s] [-import-c 4] [-cpuprofile prefix]
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/mailroom/mailroom/pkg/auth"
	"github.com/mailroom/mailroom/pkg/config"
	"github.com/mailroom/mailroom/pkg/server"
)

// The domain the bench sends from, and a normal recipient so the whole delivery pipeline runs.
const (
	benchDomain = "example.com"
	benchFrom   = "Bench <bench@example.com>"
	benchTo     = "reader@example.org"
)

// Options are the bench's settings (cmd/mailroom-bench reads them from flags).
type Options struct {
	Clients  int
	Requests int
	Warmup   int
	Duration time.Duration
	Workers  int

	HTTP            bool
	Campaign        int
	CampaignBatch   int
	CampaignTimeout time.Duration
	DeliveryWait    time.Duration
	ImportClients   int
	CPUProfile      string

	// Figures, when set, receives the figures the phases measured (PrintTargets).
	Figures *Figures
	// DataDirs, when set, collects the phases' data directories for the caller to remove when
	// the whole run ends (RemoveDataDirs) instead of each phase removing its own. Removing
	// thousands of files just before the next phase would slow that phase's file creation:
	// ext4 passes over recently deleted inodes (for a minute or more) when it allocates one,
	// so every .eml the outbox writes would pay for the previous phase's cleanup.
	DataDirs *[]string
}

// RemoveDataDirs removes the data directories collected in dirs.
func RemoveDataDirs(dirs []string) {
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

// Figures are the local server's figures that issue targets name.
type Figures struct {
	SendRatio    float64 // Mailroom's POST /api/v1/emails requests/s over the bare handler's
	SendP99Ratio float64 // its p99 latency over the bare handler's
	Delivery     float64 // campaign emails written into the outbox (SENT) per second
	Import       float64 // contacts imported per second (bulk, 1000 a request)
	FanOut       float64 // campaign emails written per second
}

// PrintTargets prints each figure next to its target (issue 14); a figure not measured says so.
func PrintTargets(f Figures) {
	line := func(name string, v float64, format, target string, met bool) {
		verdict := "not met"
		if met {
			verdict = "met"
		}
		if v == 0 {
			fmt.Printf("  %-18s %-24s (target %s)\n", name, "not measured", target)
			return
		}
		fmt.Printf("  %-18s %-24s (target %s): %s\n", name, fmt.Sprintf(format, v), target, verdict)
	}
	fmt.Println("\nlocal server targets:")
	line("send path", 100*f.SendRatio, "%.1f%% of bare requests/s", "≥ 50%", f.SendRatio >= 0.5)
	line("send path p99", f.SendP99Ratio, "%.1fx the bare p99", "≤ 2x", f.SendP99Ratio > 0 && f.SendP99Ratio <= 2)
	line("local delivery", f.Delivery, "%.0f emails/s", "≥ 2,000/s", f.Delivery >= 2000)
	line("bulk import", f.Import, "%.0f contacts/s", "≥ 10,000/s", f.Import >= 10000)
	line("campaign fan-out", f.FanOut, "%.0f emails/s", "≥ 5,000/s", f.FanOut >= 5000)
}

// Run is the HTTP phase: POST /api/v1/emails on the real local server next to a bare net/http
// handler, in one run, and the time the accepted emails take to be delivered.
func Run(o Options) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.Duration)
	defer cancel()

	srv, key, removeData, err := startServer(ctx, o, "mailroom-bench-")
	if err != nil {
		return err
	}
	defer removeData()
	defer func() {
		shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()

	bare, err := startBare()
	if err != nil {
		return err
	}
	defer bare.Close()

	body, err := json.Marshal(map[string]any{
		"from": benchFrom, "to": benchTo, "subject": "Benchmark", "text": "Hello from mailroom-bench.",
	})
	if err != nil {
		return err
	}

	fmt.Printf("mailroom-bench: %d clients, %d warm-up + %d measured requests per target, %d delivery workers, GOMAXPROCS %d\n\n",
		o.Clients, o.Warmup, o.Requests, o.Workers, runtime.GOMAXPROCS(0))

	// The bare handler first (it needs little of the time budget), then Mailroom: warm up, let
	// the warm-up emails drain, then measure the load and, after it, the delivery backlog.
	bareTarget := target{name: "bare net/http", url: bare.url + "/api/v1/emails", key: key, body: body}
	load(ctx, bareTarget, o.Warmup, o.Clients)
	br := load(ctx, bareTarget, o.Requests, o.Clients)

	mailroom := target{name: "mailroom", url: srv.URL + "/api/v1/emails", key: key, body: body}
	load(ctx, mailroom, o.Warmup, o.Clients)
	if _, _, err := waitDelivered(ctx, srv); err != nil {
		return fmt.Errorf("warm-up delivery: %w", err)
	}
	stopProfile := profile(o.CPUProfile, "send")
	mr := load(ctx, mailroom, o.Requests, o.Clients)
	stopProfile()
	backlog, _ := pending(ctx, srv)
	drained, left, derr := waitDelivered(ctx, srv)

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\trequests\terrors\trequests/s\tp50\tp90\tp99\t")
	for _, r := range []result{mr, br} {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t\n", r.name, r.requests, r.errors, r.rate(),
			ms(r.percentile(50)), ms(r.percentile(90)), ms(r.percentile(99)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if o.Figures != nil && mr.rate() > 0 && br.rate() > 0 {
		o.Figures.SendRatio = mr.rate() / br.rate()
		if bp := br.percentile(99); bp > 0 {
			o.Figures.SendP99Ratio = float64(mr.percentile(99)) / float64(bp)
		}
	}
	if mr.rate() > 0 && br.rate() > 0 {
		fmt.Printf("\nratio: bare handler / mailroom = %.1fx requests/s (mailroom reaches %.1f%% of the bare handler)\n",
			br.rate()/mr.rate(), 100*mr.rate()/br.rate())
	}

	accepted := mr.requests - mr.errors
	sent, took := accepted-left, mr.elapsed+drained
	switch {
	case derr == nil && took > 0:
		fmt.Printf("delivery: all %d accepted emails reached SENT %s after the first measured request (%.0f emails/s); backlog when the load ended: %d, drained in %s\n",
			accepted, ms(took), float64(sent)/took.Seconds(), backlog, ms(drained))
	case took > 0:
		fmt.Printf("delivery: only %d of %d accepted emails reached SENT in %s after the first measured request (%.0f emails/s); backlog when the load ended: %d; stopped waiting: %v\n",
			sent, accepted, ms(took), float64(sent)/took.Seconds(), backlog, derr)
	}
	if ctx.Err() != nil {
		fmt.Printf("note: stopped by -duration %s before finishing\n", o.Duration)
	}
	return nil
}

// target is one endpoint under load: every request is the same authenticated POST.
type target struct {
	name string
	url  string
	key  string
	body []byte
}

// result is what load measured: latencies of every finished request (successful or not).
type result struct {
	name      string
	requests  int
	errors    int
	elapsed   time.Duration
	latencies []time.Duration // sorted ascending
}

func (r result) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.requests) / r.elapsed.Seconds()
}

// percentile is the nearest-rank percentile p (0..100] of the latencies.
func (r result) percentile(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	i := int(float64(len(r.latencies))*p/100+0.999999) - 1
	return r.latencies[min(max(i, 0), len(r.latencies)-1)]
}

// load sends n requests to t from c concurrent keep-alive clients and stops early when ctx ends.
// A request counts as an error unless it answers 200 with a JSON body carrying an emailId.
func load(ctx context.Context, t target, n, c int) result {
	client := &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy:               nil, // loopback only, never through a proxy
			MaxIdleConns:        c,
			MaxIdleConnsPerHost: c,
			MaxConnsPerHost:     c,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
	}
	defer client.CloseIdleConnections()

	var (
		next   atomic.Int64
		errs   atomic.Int64
		mu     sync.Mutex
		lat    = make([]time.Duration, 0, n)
		wg     sync.WaitGroup
		issued = func() bool { return next.Add(1) <= int64(n) }
	)
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, n/c+1)
			for ctx.Err() == nil && issued() {
				t0 := time.Now()
				if err := send(ctx, client, t); err != nil {
					errs.Add(1)
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	return result{name: t.name, requests: len(lat), errors: int(errs.Load()), elapsed: elapsed, latencies: lat}
}

// send makes one request and reads the whole answer, so that the connection is reused.
func send(ctx context.Context, client *http.Client, t target) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(t.body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+t.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		EmailID string `json:"emailId"`
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, &out); err != nil || out.EmailID == "" {
		return fmt.Errorf("unexpected body %s", data)
	}
	return nil
}

// pending is the number of emails still QUEUED or being sent.
func pending(ctx context.Context, srv *server.Server) (int, error) {
	ids, err := srv.App.Store.PendingEmails(ctx, 1<<30)
	return len(ids), err
}

// waitDelivered polls the store until no email is waiting for delivery or ctx ends; it says how
// long it waited and how many emails were still waiting at the end.
func waitDelivered(ctx context.Context, srv *server.Server) (time.Duration, int, error) {
	start := time.Now()
	last := 0
	for {
		n, err := pending(ctx, srv)
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return time.Since(start), last, err
		}
		if last = n; n == 0 {
			return time.Since(start), 0, nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), last, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// createDomain registers the sending domain through the API (verified at once locally).
func createDomain(ctx context.Context, baseURL, key string) error {
	body := fmt.Sprintf(`{"name":%q,"region":"us-east-1"}`, benchDomain)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/api/v1/domains", bytes.NewBufferString(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("create domain %s: status %d: %s", benchDomain, resp.StatusCode, data)
	}
	return nil
}

// bareServer answers every request like a successful send, doing nothing else.
type bareServer struct {
	url  string
	http *http.Server
}

func startBare() (*bareServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var n atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"emailId":"bare`+strconv.FormatInt(n.Add(1), 10)+`"}`)
	})
	s := &bareServer{url: "http://" + ln.Addr().String(), http: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "mailroom-bench: bare server:", err)
		}
	}()
	return s, nil
}

func (s *bareServer) Close() { _ = s.http.Close() }

// startServer runs the real local server in process on a fresh data directory (named with
// prefix), with a bootstrap FULL key and the verified domain example.com. The caller shuts the
// server down, then calls removeData (which leaves the directory to Options.DataDirs when set).
func startServer(ctx context.Context, o Options, prefix string) (srv *server.Server, key string, removeData func(), err error) {
	dataDir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, "", nil, err
	}
	removeData = func() { os.RemoveAll(dataDir) }
	if o.DataDirs != nil {
		*o.DataDirs = append(*o.DataDirs, dataDir)
		removeData = func() {}
	}
	if key, _, err = auth.Generate(); err != nil {
		removeData()
		return nil, "", nil, err
	}
	cfg := config.Config{
		Backend:         config.BackendEmbedded,
		DataDir:         dataDir,
		Workers:         o.Workers,
		AuthCacheTTL:    time.Minute,
		LogLevel:        slog.LevelWarn,
		BootstrapAPIKey: key,
	}
	if srv, err = server.Start(ctx, cfg, "127.0.0.1:0", nil); err != nil {
		removeData()
		return nil, "", nil, fmt.Errorf("start server: %w", err)
	}
	if err := createDomain(ctx, srv.URL, key); err != nil {
		_ = srv.Shutdown(context.Background())
		removeData()
		return nil, "", nil, err
	}
	return srv, key, removeData, nil
}

// ms formats a duration in milliseconds with two decimals.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
}

// Check refuses settings the bench cannot run with.
func (o Options) Check() error {
	if o.Clients < 1 || o.Requests < 1 || o.Warmup < 0 || o.Duration <= 0 || o.Workers < 1 {
		return errors.New("-c, -n, -workers must be positive, -warmup non-negative, -duration positive")
	}
	if o.Campaign < 0 || o.CampaignBatch < 1 || o.CampaignTimeout <= 0 || o.DeliveryWait < 0 || o.ImportClients < 1 {
		return errors.New("-campaign non-negative, -campaign-batch, -import-c, -campaign-timeout positive, -delivery-wait non-negative")
	}
	return nil
}
