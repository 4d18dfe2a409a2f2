package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

// The campaign phase: a fresh local server (its own temporary DATA_DIR), one contact book of N
// contacts imported through POST /contactBooks/{id}/contacts/bulk (1000 a request), and one
// campaign with sendNow. It measures the import, the fan-out (from the create request until
// the campaign is SENT, that is every email written), and how far delivery (the outbox) got
// within a bounded wait after the fan-out.

const (
	bulkSize        = 1000 // contacts per bulk request (the API's maximum)
	campaignSubject = "Hello {{firstName}}, news for {{company,fallback=friend}}"
	campaignHTML    = `<p>Dear {{firstName}} {{lastName}} at {{company,fallback=friend}},</p>` +
		`<p>This is the monthly newsletter of Mailroom's benchmark. It has a few paragraphs of text so the ` +
		`message has a realistic size, and a link to <a href="https://example.com/news">the news</a>.</p>` +
		`<p>Kind regards,<br>The bench</p>` +
		`<p style="font-size:small"><a href="{{usesend_unsubscribe_url}}">Unsubscribe</a></p>`
)

// campaignCounters is what GET /campaigns/{id} answers that the bench reads.
type campaignCounters struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	Total     int    `json:"total"` // the audience, from the first step
	Sent      int    `json:"sent"`
	Delivered int    `json:"delivered"`
	Written   int    `json:"-"` // the emails written so far: the store's count, not the API's
}

// campaignResult is what the phase measured; a zero duration is a step that did not finish.
type campaignResult struct {
	contacts       int
	imported       int
	importTook     time.Duration
	createTook     time.Duration // the create request alone
	fanoutTook     time.Duration // create request sent → status SENT
	fanoutDone     bool
	final          campaignCounters // at the end of the fan-out
	afterWait      campaignCounters // after the delivery wait
	deliveryTook   time.Duration    // create request sent → last observation of afterWait
	outboxFiles    int
	deliveryDone   bool
	peakRSS        string
	stopped        string // why the phase stopped early, if it did
	progressPoints []progressPoint
}

type progressPoint struct {
	at    time.Duration
	c     campaignCounters
	queue int
}

// RunCampaign is the campaign phase: a bulk import of o.Campaign contacts and a campaign sent
// to them on the local server, with its fan-out and delivery rates.
func RunCampaign(o Options) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.CampaignTimeout)
	defer cancel()

	srv, key, removeData, err := startServer(ctx, o, "mailroom-bench-campaign-")
	if err != nil {
		return err
	}
	defer removeData()
	defer func() {
		shutdown, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		queued, t0 := srv.App.Pool.Len(), time.Now()
		err := srv.Shutdown(shutdown)
		fmt.Printf("server shutdown with %d emails still queued for delivery: %s (err %v)\n",
			queued, time.Since(t0).Round(10*time.Millisecond), err)
	}()
	c := &apiClient{base: srv.URL + "/api/v1", key: key, http: &http.Client{
		Timeout:   5 * time.Minute, // a bulk request of 1000 contacts may take a while
		Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16, DisableCompression: true},
	}}

	fmt.Printf("\ncampaign: %d contacts, batchSize %d, %d delivery workers, import concurrency %d, bound %s (delivery wait %s), GOMAXPROCS %d\n",
		o.Campaign, o.CampaignBatch, o.Workers, o.ImportClients, o.CampaignTimeout, o.DeliveryWait, runtime.GOMAXPROCS(0))

	r := campaignResult{contacts: o.Campaign}
	defer func() { printCampaign(r, o) }()

	var book struct {
		ID string `json:"id"`
	}
	if err := c.do(ctx, http.MethodPost, "/contactBooks", map[string]any{"name": "bench"}, &book); err != nil {
		return fmt.Errorf("create contact book: %w", err)
	}

	// Import.
	stopProfile := profile(o.CPUProfile, "import")
	defer stopProfile() // when the import stops early
	start := time.Now()
	imported, err := importContacts(ctx, c, book.ID, o.Campaign, o.ImportClients, start)
	r.imported, r.importTook = imported, time.Since(start)
	stopProfile()
	if err != nil {
		r.stopped = fmt.Sprintf("import: %v", err)
		return nil
	}

	// Fan-out.
	stopProfile = profile(o.CPUProfile, "fanout")
	defer stopProfile() // when the fan-out stops early
	var created campaignCounters
	start = time.Now()
	err = c.do(ctx, http.MethodPost, "/campaigns", map[string]any{
		"name": "bench", "from": benchFrom, "subject": campaignSubject, "html": campaignHTML,
		"contactBookId": book.ID, "sendNow": true, "batchSize": o.CampaignBatch,
	}, &created)
	r.createTook = time.Since(start)
	if err != nil {
		r.stopped = fmt.Sprintf("create campaign: %v", err)
		return nil
	}
	lastLog := time.Now()
	p, err := srv.App.Services.Auth.Authenticate(ctx, "Bearer "+key)
	if err != nil {
		return err
	}
	observe := func() (campaignCounters, error) {
		var cur campaignCounters
		err := c.do(ctx, http.MethodGet, "/campaigns/"+created.ID, nil, &cur)
		if err == nil {
			var stored store.Campaign
			if stored, err = srv.App.Store.GetCampaign(ctx, p.TeamID, created.ID); err == nil {
				cur.Written = int(stored.Counters[store.CountTotal])
			}
		}
		if err == nil {
			p := progressPoint{at: time.Since(start), c: cur, queue: srv.App.Pool.Len()}
			r.progressPoints = append(r.progressPoints, p)
			if time.Since(lastLog) >= 10*time.Second {
				lastLog = time.Now()
				fmt.Printf("  %6.1fs  status %-9s written %7d  sent %7d  delivered %7d  delivery queue %7d\n",
					p.at.Seconds(), cur.Status, cur.Written, cur.Sent, cur.Delivered, p.queue)
			}
		}
		return cur, err
	}
	for {
		cur, err := observe()
		if err != nil {
			r.stopped = fmt.Sprintf("fan-out: %v", err)
			return nil
		}
		r.final = cur
		if cur.Status == "SENT" {
			r.fanoutTook, r.fanoutDone = time.Since(start), true
			break
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			r.fanoutTook = time.Since(start)
			r.stopped = fmt.Sprintf("fan-out not finished within -campaign-timeout %s", o.CampaignTimeout)
			return nil
		}
	}

	stopProfile()

	// Delivery: reported, waited for at most -delivery-wait after the fan-out.
	stopProfile = profile(o.CPUProfile, "delivery")
	defer stopProfile()
	wctx, wcancel := context.WithTimeout(ctx, o.DeliveryWait)
	defer wcancel()
	for {
		cur, err := observe()
		if err != nil {
			break
		}
		r.afterWait, r.deliveryTook = cur, time.Since(start)
		if cur.Sent >= cur.Total && cur.Delivered >= cur.Total {
			r.deliveryDone = true
			break
		}
		if !sleepCtx(wctx, 250*time.Millisecond) {
			break
		}
	}
	r.outboxFiles = countOutbox(srv.App.OutboxDir)
	r.peakRSS = peakRSS()
	return nil
}

// importContacts uploads n contacts in bulk requests of 1000 from clients concurrent
// requests and reports how many the server accepted.
func importContacts(ctx context.Context, c *apiClient, bookID string, n, clients int, start time.Time) (int, error) {
	var (
		next     atomic.Int64
		done     atomic.Int64
		reported atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	requests := (n + bulkSize - 1) / bulkSize
	for range max(1, clients) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= requests {
					return
				}
				lo, hi := i*bulkSize, min(n, (i+1)*bulkSize)
				batch := make([]map[string]any, 0, hi-lo)
				for k := lo; k < hi; k++ {
					ct := map[string]any{
						"email":     fmt.Sprintf("reader%07d@bench.example.org", k),
						"firstName": "Reader" + strconv.Itoa(k),
						"lastName":  "Bench",
					}
					if k%3 != 0 { // a third of the contacts take the fallback
						ct["properties"] = map[string]string{"company": "Company " + strconv.Itoa(k%97)}
					}
					batch = append(batch, ct)
				}
				var out struct {
					Count int `json:"count"`
				}
				if err := c.do(ctx, http.MethodPost, "/contactBooks/"+bookID+"/contacts/bulk", batch, &out); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("bulk request %d: %w", i, err); cancel() })
					return
				}
				total := done.Add(int64(out.Count))
				// Progress every 10k contacts.
				for {
					last := reported.Load()
					if total/10000 <= last/10000 {
						break
					}
					if reported.CompareAndSwap(last, total) {
						el := time.Since(start)
						fmt.Printf("  imported %7d contacts in %6.1fs (%.0f/s)\n", total, el.Seconds(), float64(total)/el.Seconds())
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = fmt.Errorf("stopped by -campaign-timeout: %w", ctx.Err())
	}
	return int(done.Load()), firstErr
}

func printCampaign(r campaignResult, o Options) {
	if f := o.Figures; f != nil {
		per := func(n int, d time.Duration) float64 {
			if d <= 0 {
				return 0
			}
			return float64(n) / d.Seconds()
		}
		if r.imported == r.contacts {
			f.Import = per(r.imported, r.importTook)
		}
		if r.fanoutDone {
			f.FanOut = per(r.final.Written, r.fanoutTook)
		}
		f.Delivery = per(r.afterWait.Sent, r.deliveryTook) // over what reached SENT, finished or not
	}
	rate := func(n int, d time.Duration) string {
		if d <= 0 {
			return "-"
		}
		return strconv.FormatFloat(float64(n)/d.Seconds(), 'f', 0, 64) + "/s"
	}
	dur := func(d time.Duration, ok bool) string {
		if d <= 0 {
			return "-"
		}
		s := d.Round(10 * time.Millisecond).String()
		if !ok {
			s += " (unfinished)"
		}
		return s
	}
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "campaign phase\tcount\ttime\trate\t")
	fmt.Fprintf(tw, "import contacts (bulk, %d a request)\t%d of %d\t%s\t%s\t\n", bulkSize, r.imported, r.contacts,
		dur(r.importTook, r.imported == r.contacts), rate(r.imported, r.importTook))
	if r.createTook > 0 {
		fmt.Fprintf(tw, "create campaign request\t1\t%s\t\t\n", dur(r.createTook, true))
	}
	if r.final.ID != "" {
		fmt.Fprintf(tw, "fan-out: emails written (create → SENT)\t%d\t%s\t%s\t\n", r.final.Written,
			dur(r.fanoutTook, r.fanoutDone), rate(r.final.Written, r.fanoutTook))
		fmt.Fprintf(tw, "  delivered to the outbox by the end of the fan-out\t%d\t\t\t\n", r.final.Sent)
	}
	if r.afterWait.ID != "" {
		fmt.Fprintf(tw, "delivery: reached SENT (create → last look)\t%d of %d\t%s\t%s\t\n", r.afterWait.Sent, r.afterWait.Total,
			dur(r.deliveryTook, r.deliveryDone), rate(r.afterWait.Sent, r.deliveryTook))
		fmt.Fprintf(tw, "delivery: DELIVERED\t%d of %d\t\t\t\n", r.afterWait.Delivered, r.afterWait.Total)
		fmt.Fprintf(tw, "outbox .eml files\t%d\t\t\t\n", r.outboxFiles)
	}
	_ = tw.Flush()
	if line := milestones(r.progressPoints, r.contacts); line != "" {
		fmt.Println(line)
	}
	if r.fanoutDone && !r.deliveryDone {
		fmt.Printf("delivery did not finish within -delivery-wait %s after the fan-out (not awaited further)\n", o.DeliveryWait)
	}
	if r.peakRSS != "" {
		fmt.Printf("peak RSS of the bench process (server in process): %s\n", r.peakRSS)
	}
	if r.stopped != "" {
		fmt.Printf("campaign phase stopped early: %s\n", r.stopped)
	}
}

// milestones says when the fan-out had written 10%, 25%, 50%, 75% and 100% of the contacts
// and the rate within each stretch, to show whether it slows down as the data grows.
func milestones(points []progressPoint, n int) string {
	if len(points) == 0 || n == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("fan-out progress (written at, rate since the previous mark):")
	prevAt, prevN, i := time.Duration(0), 0, 0
	for _, pct := range []int{10, 25, 50, 75, 100} {
		want := n * pct / 100
		for i < len(points) && points[i].c.Written < want {
			i++
		}
		if i == len(points) {
			fmt.Fprintf(&b, " %d%% not reached;", pct)
			break
		}
		p := points[i]
		r := 0.0
		if d := p.at - prevAt; d > 0 {
			r = float64(p.c.Written-prevN) / d.Seconds()
		}
		fmt.Fprintf(&b, " %d%% %.1fs (%.0f/s);", pct, p.at.Seconds(), r)
		prevAt, prevN = p.at, p.c.Written
	}
	return strings.TrimSuffix(b.String(), ";")
}

// apiClient calls the JSON API with a key.
type apiClient struct {
	base, key string
	http      *http.Client
}

func (c *apiClient) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: status %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(data))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// profile starts a CPU profile to prefix.name.pprof (nothing without a prefix) and returns
// its stop function, which may be called more than once.
func profile(prefix, name string) func() {
	if prefix == "" {
		return func() {}
	}
	path := prefix + "." + name + ".pprof"
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mailroom-bench: cpuprofile:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "mailroom-bench: cpuprofile:", err)
		f.Close()
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
			fmt.Printf("  CPU profile of the %s: %s\n", name, path)
		})
	}
}

// sleepCtx sleeps d unless ctx ends first; it reports whether ctx is still alive.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// countOutbox counts the .eml files of the outbox.
func countOutbox(dir string) int {
	f, err := os.Open(dir)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	for {
		names, err := f.Readdirnames(10000)
		for _, name := range names {
			if filepath.Ext(name) == ".eml" {
				n++
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintln(os.Stderr, "mailroom-bench: read outbox:", err)
			}
			return n
		}
	}
}

// peakRSS is VmHWM from /proc/self/status ("" where there is none).
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
