// Command mailroom-bench runs the local server's benchmarks (make bench): POST /api/v1/emails
// next to a bare net/http handler, and a 100,000-contact campaign (pkg/bench).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/mailroom/mailroom/pkg/bench"
)

func main() {
	var o bench.Options
	flag.IntVar(&o.Clients, "c", 16, "concurrent clients (keep-alive connections)")
	flag.IntVar(&o.Requests, "n", 40000, "measured requests per target (several seconds of load, as a burst of sends under a second fits in the store's hold)")
	flag.IntVar(&o.Warmup, "warmup", 500, "warm-up requests per target (not measured)")
	flag.DurationVar(&o.Duration, "duration", 120*time.Second, "hard limit for the send phase (both targets' warm-ups and loads, and the delivery after)")
	flag.IntVar(&o.Workers, "workers", 16, "delivery goroutines of the local server (as its WORKERS default)")
	flag.BoolVar(&o.HTTP, "http", true, "run the POST /api/v1/emails phase")
	flag.IntVar(&o.Campaign, "campaign", 100000, "contacts of the campaign phase (0 skips it)")
	flag.IntVar(&o.CampaignBatch, "campaign-batch", 10000, "batchSize of the campaign")
	flag.DurationVar(&o.CampaignTimeout, "campaign-timeout", 10*time.Minute, "hard limit for the whole campaign phase")
	flag.DurationVar(&o.DeliveryWait, "delivery-wait", 120*time.Second, "how long to wait for delivery after the fan-out")
	flag.IntVar(&o.ImportClients, "import-c", 4, "concurrent bulk import requests")
	flag.StringVar(&o.CPUProfile, "cpuprofile", "", "write CPU profiles to `prefix`.{send,import,fanout,delivery}.pprof")
	flag.Parse()
	o.Figures = &bench.Figures{}
	o.DataDirs = &[]string{}
	if err := o.Check(); err != nil {
		fmt.Fprintln(os.Stderr, "mailroom-bench:", err)
		os.Exit(2)
	}
	code := run(o)
	bench.PrintTargets(*o.Figures)
	bench.RemoveDataDirs(*o.DataDirs) // at the end, not between phases (Options.DataDirs)
	os.Exit(code)
}

func run(o bench.Options) int {
	if o.HTTP {
		if err := bench.Run(o); err != nil {
			fmt.Fprintln(os.Stderr, "mailroom-bench:", err)
			return 1
		}
	}
	if o.Campaign > 0 {
		if err := bench.RunCampaign(o); err != nil {
			fmt.Fprintln(os.Stderr, "mailroom-bench: campaign:", err)
			return 1
		}
	}
	return 0
}
