package lambdafn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/auth"
	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/config"
	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/housekeeping"
	"github.com/mailroom/mailroom/pkg/identity"
	"github.com/mailroom/mailroom/pkg/ingest"
	"github.com/mailroom/mailroom/pkg/metric"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/dynamo"
	"github.com/mailroom/mailroom/pkg/webhook"
)

// A function's cold start builds the table's store and its services, and what its Ports name
// beyond them comes from plugs: small packages (pkg/lambdafn/with*) that each link one AWS
// client or library, so that a function links only what it calls. functions/<dir>/main.go
// passes the plugs its Ports need (pkg/deploy writes those files from Ports), and Build
// refuses a function whose plugs and Ports differ, so a test finds the mistake, never a cold
// start.

// Wiring is one function's cold start: its configuration, its AWS configuration, the table,
// and what its plugs built.
type Wiring struct {
	Name    string
	Config  config.Config
	Ports   Ports
	Log     *slog.Logger
	AWS     aws.Config
	Now     func() time.Time
	Metrics metric.Counter
	Store   *dynamo.Store

	// Set by the plugs. withmailer.Mailer: the send worker on SES.
	Deliverer         Deliverer
	Identities        identity.Identities                             // withses.Identities
	EmailScheduler    email.Scheduler                                 // withscheduler.Emails
	CampaignScheduler campaign.Scheduler                              // withscheduler.Campaigns
	CampaignInvoke    func(ctx context.Context, payload []byte) error // withlambda.CampaignInvoke
	Dates             func(string, time.Time) (time.Time, error)      // withdates.English
	Unsubscribe       *campaign.KeySource                             // withsecret.Unsubscribe
	Console           func(*api.Services) http.Handler                // withconsole.Pages

	webhookPolicy *webhook.Policy // BuildOptions.WebhookPolicy
}

// Plug builds one port of a function.
type Plug func(*Wiring) error

// BuildOptions are for tests.
type BuildOptions struct {
	// MetricsOut is where the metric lines go (os.Stdout unless set).
	MetricsOut io.Writer
	// WebhookPolicy replaces where webhook calls may go (tests call a receiver on loopback,
	// which a deployed function never may).
	WebhookPolicy *webhook.Policy
}

// AWSConfig is the AWS configuration of a Lambda function, from the variables Lambda sets: the
// region and the execution role's credentials (and AWS_ENDPOINT_URL, under sam local). Read
// directly rather than through the SDK's config loader, which links and initialises the
// clients of every other way of finding credentials (SSO, STS, IMDS) that Lambda never uses.
func AWSConfig(getenv func(string) string) aws.Config {
	region := getenv("AWS_REGION")
	if region == "" {
		region = getenv("AWS_DEFAULT_REGION")
	}
	cfg := aws.Config{
		Region: region,
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(
			getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"), getenv("AWS_SESSION_TOKEN"))),
	}
	if u := getenv("AWS_ENDPOINT_URL"); u != "" {
		cfg.BaseEndpoint = aws.String(u)
	}
	return cfg
}

// Main runs the named function: it builds the function from the environment and its plugs,
// once for this execution environment, and hands the handler to the Lambda runtime. A wiring
// or configuration error fails the cold start with one log line.
func Main(function string, plugs ...Plug) {
	w, err := Build(context.Background(), function, os.Getenv, AWSConfig(os.Getenv), BuildOptions{}, plugs...)
	if err != nil {
		cfg, _ := config.FromEnv(os.Getenv)
		cfg.Logger().Error("cold start failed", "function", function, "err", err.Error())
		if rerr := ReportInitError(os.Getenv, &http.Client{Timeout: 2 * time.Second}, err); rerr != nil {
			cfg.Logger().Error("cold start failure not reported to the runtime", "err", rerr.Error())
		}
		os.Exit(1)
	}
	LibraryLogsTo(w.Log)
	lambda.Start(w.Handler())
}

// LibraryLogsTo sends the standard log package's lines (aws-lambda-go prints an invocation's
// error and a panic with log.Printf) through l, the function's JSON logger, at ERROR: not as
// plain text among its records, and not at a level a warn-level logger would drop.
func LibraryLogsTo(l *slog.Logger) {
	slog.SetDefault(l)
	slog.SetLogLoggerLevel(slog.LevelError)
}

// InitErrorType is the error type a failed cold start reports (Lambda shows it with the
// message in the invocation's answer instead of a bare Runtime.ExitError).
const InitErrorType = "Runtime.ColdStartFailed"

// ReportInitError tells the Lambda Runtime API why the cold start failed (POST
// /runtime/init/error, as a custom runtime should). Outside Lambda (no AWS_LAMBDA_RUNTIME_API)
// it does nothing. The message is a configuration or wiring error: names of variables and
// ports, no secret.
func ReportInitError(getenv func(string) string, client *http.Client, cause error) error {
	host := getenv("AWS_LAMBDA_RUNTIME_API")
	if host == "" {
		return nil
	}
	body, _ := json.Marshal(map[string]any{"errorMessage": cause.Error(), "errorType": InitErrorType, "stackTrace": []string{}})
	req, err := http.NewRequest(http.MethodPost, "http://"+host+"/2018-06-01/runtime/init/error", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Lambda-Runtime-Function-Error-Type", InitErrorType)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("runtime API answered %s", resp.Status)
	}
	return nil
}

// Build wires the named function: its configuration (Config), the table with its grant, and
// its plugs, which must build exactly what Ports(function) names beyond the table.
func Build(_ context.Context, function string, getenv func(string) string, awsCfg aws.Config, opts BuildOptions, plugs ...Plug) (*Wiring, error) {
	if !slices.Contains(Names(), function) {
		return nil, fmt.Errorf("no function %q", function)
	}
	cfg, err := Config(function, getenv)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	w := &Wiring{Name: function, Config: cfg, Ports: PortsOf(function), Log: cfg.Logger(), AWS: awsCfg, Now: time.Now,
		webhookPolicy: opts.WebhookPolicy}
	if len(w.Ports.Table) == 0 {
		return nil, fmt.Errorf("%s declares no table actions (lambdafn uses)", function)
	}
	if cfg.StackName != "" {
		out := opts.MetricsOut
		if out == nil {
			out = os.Stdout
		}
		w.Metrics = &metric.EMF{W: out, Stack: cfg.StackName, Now: w.Now}
	}
	db := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, Grant(TableGrant(w.Ports.Table, w.Ports.RateLimited)))
	})
	ds := dynamo.New(db, cfg.TableName)
	ds.SetRetention(cfg.Retention)
	w.Store = ds
	for _, p := range plugs {
		if err := p(w); err != nil {
			return nil, err
		}
	}
	return w, w.checkPlugs()
}

// checkPlugs: what the plugs built is what the ports name, no less and no more.
func (w *Wiring) checkPlugs() error {
	p := w.Ports
	var errs []error
	check := func(what string, needed, built bool) {
		switch {
		case needed && !built:
			errs = append(errs, fmt.Errorf("%s uses %s but no plug built it", w.Name, what))
		case built && !needed:
			errs = append(errs, fmt.Errorf("%s builds %s, which its ports do not name", w.Name, what))
		}
	}
	check("the SES mailer", p.Send, w.Deliverer != nil)
	check("SES identities", len(p.Identities) > 0, w.Identities != nil)
	check("email schedules", len(p.EmailSchedules) > 0, w.EmailScheduler != nil)
	check("campaign schedules", len(p.CampaignSchedules) > 0 || p.CampaignInvoke, w.CampaignScheduler != nil)
	check("campaign invocations", p.CampaignInvoke, w.CampaignInvoke != nil)
	check("natural-language dates", p.Dates, w.Dates != nil)
	check("the unsubscribe keys", p.Unsubscribe >= Read, w.Unsubscribe != nil)
	check("the console's pages", p.Console, w.Console != nil)
	return errors.Join(errs...)
}

// Services builds the API's services on what the function has (api.NewServices).
func (w *Wiring) Services() *api.Services {
	var st store.Store = w.Store
	s := api.NewServices(api.Deps{
		Store: st, Identities: w.Identities, EmailScheduler: w.EmailScheduler, CampaignScheduler: w.CampaignScheduler,
		Dates:   w.Dates,
		Signer:  campaign.Signer{Source: w.Unsubscribe, BaseURL: w.Config.PublicURL},
		Regions: []string{w.AWS.Region}, RateLimit: w.Config.APIRateLimit,
		AuthCacheTTL: w.Config.AuthCacheTTL, Now: w.Now, Log: w.Log, Metrics: w.Metrics,
	})
	if w.webhookPolicy != nil {
		s.Webhooks.Policy = *w.webhookPolicy
	}
	return s
}

// Handler returns the function's Lambda handler: one of the Background functions', otherwise
// the HTTP adapter around its routes. The returned handler does the JSON decoding and encoding
// of the Lambda runtime, so tests invoke it with the raw bytes of a sample event.
func (w *Wiring) Handler() lambda.Handler {
	s := w.Services()
	switch w.Name {
	case SendWorkerFunction:
		return lambda.NewHandler(SendWorker(w.Deliverer, w.Log))
	case ScheduledSendFunction:
		return lambda.NewHandler(ScheduledSend(s.Emails.Fire, w.Log))
	case CampaignBatchFunction:
		return lambda.NewHandler(CampaignBatch(s.Campaigns.Fire, w.Log))
	case SESEventsFunction:
		in := &ingest.Ingester{Store: w.Store, Log: w.Log, Now: w.Now, Metrics: w.Metrics, Contacts: s.Contacts}
		return lambda.NewHandler(SESEvents(in.Publish, w.Now, w.Log))
	case ReconcilerFunction:
		rq := &housekeeping.Requeue{Store: w.Store, Now: w.Now, Log: w.Log}
		jobs := housekeeping.Jobs(rq.Run, s.Emails, s.Campaigns, s.Contacts, w.Store)
		return lambda.NewHandler(Housekeeping(func(ctx context.Context) error {
			return housekeeping.Run(ctx, w.Log, jobs)
		}, w.Log))
	case DomainCheckFunction:
		return lambda.NewHandler(Periodic("domain check", func(ctx context.Context) (int, error) {
			return s.Domains.RefreshAll(ctx, w.Store)
		}, w.Log))
	case WebhookEventsFunction:
		return lambda.NewHandler(WebhookEvents(s.Webhooks, w.Store, w.Store.ApplyCounts, w.Log))
	case WebhookRetriesFunction:
		return lambda.NewHandler(Periodic("webhook retries", func(ctx context.Context) (int, error) {
			return s.Webhooks.RunDue(ctx, 500)
		}, w.Log))
	case AuthorizerFunction:
		// No cache of its own: API Gateway caches its verdicts, and a second cache would let a
		// revoked key work longer than that one's TTL.
		return lambda.NewHandler(Authorizer(auth.NewAuthenticator(w.Store, 0).Authenticate, w.Log))
	}
	if w.Console != nil {
		return lambda.NewHandler(HTTP(w.Console(s)))
	}
	return lambda.NewHandler(HTTP(s.FunctionHandler(w.Name)))
}

// BuildVersion is the module's version, or its VCS revision, as the binary was built.
func BuildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, kv := range info.Settings {
		if kv.Key == "vcs.revision" && len(kv.Value) >= 12 {
			return kv.Value[:12]
		}
	}
	return "dev"
}

// Config reads the named function's configuration as its cold start does: the AWS backend,
// whatever BACKEND says, and only the variables its ports read (GlobalEnv and
// Ports(function).Env()), each of which must be set.
func Config(function string, getenv func(string) string) (config.Config, error) {
	ports := PortsOf(function)
	visible := map[string]bool{}
	for _, k := range slices.Concat(GlobalEnv, ports.Env()) {
		visible[k] = true
	}
	own := func(k string) string {
		switch {
		case k == "BACKEND":
			return config.BackendAWS
		case visible[k]:
			return getenv(k)
		}
		return ""
	}
	cfg, err := config.FromEnv(own)
	if err != nil {
		return cfg, err
	}
	return cfg, ports.RequireEnv(own)
}
