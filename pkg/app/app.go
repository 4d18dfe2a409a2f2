// Package app wires Mailroom together for the local server and the admin CLI: the adapters of
// the chosen backend (embedded or AWS) and the services on top. (A Lambda function wires only
// what its handler uses: pkg/lambdafn.)
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/config"
	"github.com/mailroom/mailroom/pkg/contact"
	"github.com/mailroom/mailroom/pkg/deliver"
	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/hooks"
	"github.com/mailroom/mailroom/pkg/housekeeping"
	"github.com/mailroom/mailroom/pkg/identity"
	idlocal "github.com/mailroom/mailroom/pkg/identity/local"
	idses "github.com/mailroom/mailroom/pkg/identity/ses"
	"github.com/mailroom/mailroom/pkg/ingest"
	"github.com/mailroom/mailroom/pkg/mail"
	"github.com/mailroom/mailroom/pkg/mail/outbox"
	mailses "github.com/mailroom/mailroom/pkg/mail/ses"
	"github.com/mailroom/mailroom/pkg/metric"
	"github.com/mailroom/mailroom/pkg/naturaldate"
	"github.com/mailroom/mailroom/pkg/schedule/eventbridge"
	"github.com/mailroom/mailroom/pkg/schedule/lambdainvoke"
	schedlocal "github.com/mailroom/mailroom/pkg/schedule/local"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/bolt"
	"github.com/mailroom/mailroom/pkg/store/dynamo"
	"github.com/mailroom/mailroom/pkg/store/dynamo/streams"
	"github.com/mailroom/mailroom/pkg/streamhooks"
)

// App is a wired Mailroom: adapters plus services.
type App struct {
	Config     config.Config
	Log        *slog.Logger
	Store      store.Store
	Mailer     mail.Mailer
	Identities identity.Identities
	Services   *api.Services
	Worker     *deliver.Worker
	Ingester   *ingest.Ingester
	// Metrics counts emails by outcome (nil outside a deployed function).
	Metrics metric.Counter
	// Pool is the in-process delivery pool (local server only; nil in Lambda).
	Pool *deliver.Pool

	pruneMu  sync.Mutex
	prunedAt time.Time // the outbox's last pruning (pruneOutbox)
	// EmailScheduler fires scheduled emails: in process with Options.Local, else EventBridge
	// Scheduler (nil with the embedded backend outside Options.Local).
	EmailScheduler email.Scheduler
	// CampaignScheduler fires campaigns' steps (locally the same in-process scheduler).
	CampaignScheduler campaign.Scheduler
	local             *schedlocal.Scheduler
	runs              sync.WaitGroup // campaign runs started by local schedules
	regions           []string       // regions domains may use (AWS: the deployment's)
	stop              context.CancelFunc
	runCtx            context.Context // campaign runs; cancelled by Close
	cancelRuns        context.CancelFunc
	loops             sync.WaitGroup
	hookPool          *hooks.Pool // the local webhook runner's workers, waited for after loops
	// OutboxDir is where the local mailer writes .eml files ("" on the SES mailer).
	OutboxDir string
	// keys sign and check unsubscribe links (see secret); secrets reads them on AWS. The
	// services read them through keySource, which a rotation by this process updates.
	keys      campaign.Keyring
	keySource *campaign.KeySource
	secrets   *secretsmanager.Client

	closers []func(context.Context) error
	// closeStore runs after the closers, so that what they flush (the outbox's last events)
	// is in the store when Close counts what is still queued.
	closeStore func() error
	queued     int
}

// Options choose how much of the app a process needs.
type Options struct {
	// Local runs delivery in process (worker pool) instead of relying on the table stream.
	Local bool
	// Now is the clock (time.Now unless set).
	Now func() time.Time
	// MetricsOut is where a deployed function's metric lines go (os.Stdout unless set).
	MetricsOut io.Writer
}

// New builds the app for cfg; the AWS backend reads the SDK's standard configuration
// (credentials, region, AWS_ENDPOINT_URL).
func New(ctx context.Context, cfg config.Config, opts Options) (*App, error) {
	if cfg.Backend != config.BackendAWS {
		return build(ctx, cfg, nil, opts)
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	return build(ctx, cfg, &awsCfg, opts)
}

// NewWithAWS builds an AWS-backed app from an explicit aws.Config (tests point it at moto).
func NewWithAWS(ctx context.Context, cfg config.Config, awsCfg aws.Config, opts Options) (*App, error) {
	cfg.Backend = config.BackendAWS
	return build(ctx, cfg, &awsCfg, opts)
}

func build(ctx context.Context, cfg config.Config, awsCfg *aws.Config, opts Options) (*App, error) {
	a := &App{Config: cfg, Log: cfg.Logger()}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	if cfg.StackName != "" { // a deployed function: CloudWatch metrics through its log
		out := opts.MetricsOut
		if out == nil {
			out = os.Stdout
		}
		a.Metrics = &metric.EMF{W: out, Stack: cfg.StackName, Now: now}
	}
	a.Ingester = &ingest.Ingester{Log: a.Log, Now: now, Metrics: a.Metrics}
	var err error
	if awsCfg != nil {
		err = a.useAWS(ctx, *awsCfg, cfg.CreateTable, !opts.Local)
	} else {
		err = a.useEmbedded()
	}
	if err == nil && opts.Local {
		err = a.useLocalScheduler()
	}
	if err != nil {
		_ = a.Close(ctx)
		return nil, err
	}
	if a.Ingester.Store == nil {
		// (The embedded store's are set before its outbox starts, which may publish at once:
		// setting them again here raced with it.)
		a.Ingester.Store = a.Store
		a.Ingester.Contacts = &contact.Service{Store: a.Store, Now: now, Log: a.Log}
	}
	if err := a.secret(ctx); err != nil {
		_ = a.Close(ctx)
		return nil, err
	}
	a.runCtx, a.cancelRuns = context.WithCancel(context.Background())
	a.wire(now, opts.Local)
	return a, nil
}

// secret finds the unsubscribe keyring (readKeyring).
func (a *App) secret(ctx context.Context) error {
	keys, err := a.readKeyring(ctx)
	a.keys = keys
	return err
}

// readKeyring reads the unsubscribe keyring: UNSUBSCRIBE_SECRET, else on AWS the secret
// UNSUBSCRIBE_SECRET_ID names, else locally DATA_DIR/unsubscribe.key (a random key made on
// first start) so links keep working across restarts.
func (a *App) readKeyring(ctx context.Context) (campaign.Keyring, error) {
	text, from := a.Config.UnsubscribeSecret, "UNSUBSCRIBE_SECRET"
	switch {
	case text != "":
	case a.secrets != nil:
		var err error
		from = "the secret UNSUBSCRIBE_SECRET_ID names"
		if text, err = a.readSecret(ctx); err != nil {
			return campaign.Keyring{}, err
		}
	case a.local == nil && a.OutboxDir == "":
		// Lambda without the template's secret (or the admin CLI, which signs nothing):
		// campaign steps refuse to run and links do not verify, see campaign.Signer.
		return campaign.Keyring{}, nil
	default:
		var err error
		from = filepath.Join(a.Config.DataDir, "unsubscribe.key")
		if text, err = a.keyFile(); err != nil {
			return campaign.Keyring{}, err
		}
	}
	k, err := campaign.ParseKeyring(text)
	if err != nil {
		return k, fmt.Errorf("%s: %w", from, err) // which one to fix
	}
	if key := k.Keys[""]; k.Current == "" && key != nil && len(key) < campaign.MinKeyLength {
		// A single key set by hand before keyrings is taken (its links are in mailboxes), but
		// a short one is guessable.
		a.Log.Warn("the unsubscribe key is short: links signed with it could be forged; use a key of at least 32 characters (README: Where secrets live)",
			"source", from, "length", len(key), "want", campaign.MinKeyLength)
	}
	return k, nil
}

// keyFile returns the text of DATA_DIR/unsubscribe.key, made with a random key on first use.
func (a *App) keyFile() (string, error) {
	if err := os.MkdirAll(a.Config.DataDir, 0o755); err != nil {
		return "", err
	}
	return campaign.KeyringFile(filepath.Join(a.Config.DataDir, "unsubscribe.key"))
}

func (a *App) readSecret(ctx context.Context) (string, error) {
	out, err := a.secrets.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(a.Config.UnsubscribeSecretID)})
	if err != nil {
		return "", fmt.Errorf("read the unsubscribe secret: %w", err)
	}
	return aws.ToString(out.SecretString), nil
}

// RotateUnsubscribeKey adds a new unsubscribe key and makes it the one that signs
// (campaign.RotateKeyring): in the secret UNSUBSCRIBE_SECRET_ID names on AWS, else in
// DATA_DIR/unsubscribe.key. Links signed by the older keys keep working. It returns the new
// key's id and how many keys the ring holds. Run one rotation at a time: the secret is read,
// changed and written back, and Secrets Manager has no compare-and-set.
func (a *App) RotateUnsubscribeKey(ctx context.Context) (string, int, error) {
	var text string
	var err error
	switch {
	case a.secrets != nil:
		text, err = a.readSecret(ctx)
	case a.Config.UnsubscribeSecret != "":
		return "", 0, errors.New("UNSUBSCRIBE_SECRET is set: rotate the keyring where it comes from")
	case a.Config.Backend == config.BackendAWS:
		// Rotating a local file would report success and change nothing the functions read.
		return "", 0, errors.New("UNSUBSCRIBE_SECRET_ID is not set: name the stack's secret (its UnsubscribeSecretArn output)")
	default:
		text, err = a.keyFile()
	}
	if err != nil {
		return "", 0, err
	}
	next, id, err := campaign.RotateKeyring(text)
	if err != nil {
		return "", 0, err
	}
	if a.secrets != nil {
		_, err = a.secrets.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{
			SecretId: aws.String(a.Config.UnsubscribeSecretID), SecretString: aws.String(next)})
	} else {
		err = os.WriteFile(filepath.Join(a.Config.DataDir, "unsubscribe.key"), []byte(next), 0o600)
	}
	if err != nil {
		return "", 0, fmt.Errorf("write the unsubscribe keyring: %w", err)
	}
	keys, err := campaign.ParseKeyring(next)
	if err != nil {
		return "", 0, err
	}
	a.keys = keys
	if a.keySource != nil {
		a.keySource.Set(keys) // the running server signs with the new key at once
	}
	return id, len(keys.Keys), nil
}

// signer signs with the keyring read at start, through a source that reads it again as on AWS
// (KeySource) and that a rotation by this process (mailroom-admin unsubscribe-key rotate
// against the running server) updates at once.
func (a *App) signer() campaign.Signer {
	if len(a.keys.Keys) == 0 {
		return campaign.Signer{BaseURL: a.Config.PublicURL} // nothing to sign with: see secret
	}
	a.keySource = &campaign.KeySource{Load: a.readKeyring}
	a.keySource.Set(a.keys)
	return campaign.Signer{Source: a.keySource, BaseURL: a.Config.PublicURL}
}

// makeDataDir makes DATA_DIR if it is not there; its error names the variable.
func (a *App) makeDataDir() error {
	if err := os.MkdirAll(a.Config.DataDir, 0o755); err != nil {
		return fmt.Errorf("DATA_DIR: %q is not a folder the server can use: %w", a.Config.DataDir, err)
	}
	return nil
}

func (a *App) useEmbedded() error {
	if err := a.makeDataDir(); err != nil {
		return err
	}
	st, err := bolt.Open(filepath.Join(a.Config.DataDir, "mailroom.db"))
	if err != nil {
		return fmt.Errorf("open embedded store: %w", err)
	}
	if st.Replayed > 0 {
		a.Log.Info("emails accepted before the last stop written from the store's log", "emails", st.Replayed)
	}
	st.SetRetention(a.Config.Retention)
	a.Store = st
	// Before the outbox: it may publish events spooled at the last stop.
	a.Ingester.Store = st
	a.Ingester.Contacts = &contact.Service{Store: st, Now: a.Ingester.Now, Log: a.Log}
	a.closeStore = st.Close
	a.OutboxDir = filepath.Join(a.Config.DataDir, "outbox")
	ob, err := outbox.New(a.OutboxDir, a.Ingester, outbox.WithLogger(a.Log))
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	a.Mailer = ob
	// Close the outbox before the store: it flushes its last events into it.
	a.closers = append(a.closers, ob.Close)
	a.Identities = idlocal.New()
	return nil
}

// useLocalScheduler keeps schedules in DATA_DIR/schedules.db and fires them in process.
func (a *App) useLocalScheduler() error {
	if err := a.makeDataDir(); err != nil {
		return err
	}
	// The emails service exists only after wire; the closure reads it when a schedule fires,
	// which is never before Start.
	fire := a.fireLocal
	sch, err := schedlocal.Open(filepath.Join(a.Config.DataDir, "schedules.db"), fire, a.Log)
	if err != nil {
		return fmt.Errorf("open local scheduler: %w", err)
	}
	a.local, a.EmailScheduler, a.CampaignScheduler = sch, sch, sch
	return nil
}

func (a *App) useAWS(ctx context.Context, awsCfg aws.Config, createTable, eventBridge bool) error {
	db := dynamodb.NewFromConfig(awsCfg)
	if createTable {
		if err := dynamo.EnsureTable(ctx, db, a.Config.TableName); err != nil {
			return fmt.Errorf("ensure table %s: %w", a.Config.TableName, err)
		}
	}
	ds := dynamo.New(db, a.Config.TableName)
	ds.SetRetention(a.Config.Retention)
	// The counts follow the table's stream: on AWS the WebhookEvents function applies them; a
	// process of its own (the local server on this backend, Start, unless STREAM_COUNTS=off)
	// reads the stream itself, and tests settle through it.
	ds.ReadStream(streams.New(dynamodbstreams.NewFromConfig(awsCfg)))
	a.Store = ds
	a.regions = []string{awsCfg.Region}
	if a.Config.UnsubscribeSecretID != "" {
		a.secrets = secretsmanager.NewFromConfig(awsCfg)
	}
	ses := sesv2.NewFromConfig(awsCfg, func(o *sesv2.Options) {
		if o.BaseEndpoint != nil { // an emulator, not AWS: see idses.EmulatorTransport
			o.HTTPClient = &http.Client{Transport: idses.EmulatorTransport(http.DefaultTransport)}
		}
	})
	a.Mailer = mailses.New(sesv2.NewFromConfig(awsCfg, func(o *sesv2.Options) {
		if o.BaseEndpoint != nil {
			o.HTTPClient = &http.Client{Transport: idses.EmulatorTransport(http.DefaultTransport)}
		}
		mailses.NoRetries(o)
	}), a.Config.ConfigurationSet)
	a.Identities = idses.New(ses, a.Log, a.Config.TableName)
	if eventBridge {
		a.EmailScheduler = eventbridge.New(scheduler.NewFromConfig(awsCfg), eventbridge.Config{
			Group: a.Config.ScheduleGroup, TargetARN: a.Config.ScheduleTargetARN,
			RoleARN: a.Config.ScheduleRoleARN, DeadLetterARN: a.Config.ScheduleDLQARN,
		})
		a.CampaignScheduler = eventbridge.New(scheduler.NewFromConfig(awsCfg), eventbridge.Config{
			Group: a.Config.ScheduleGroup, TargetARN: a.Config.CampaignTargetARN,
			RoleARN: a.Config.ScheduleRoleARN, DeadLetterARN: a.Config.ScheduleDLQARN,
		}).WithInvoker(lambdainvoke.New(lambda.NewFromConfig(awsCfg), a.Config.CampaignTargetARN))
	}
	return nil
}

func (a *App) wire(now func() time.Time, local bool) {
	a.Worker = &deliver.Worker{
		Store: a.Store, Mailer: a.Mailer, Log: a.Log, Now: now,
		ConfigurationSet: a.Config.ConfigurationSet, Metrics: a.Metrics,
	}
	if local && a.Config.Backend != config.BackendAWS && a.OutboxDir != "" {
		// The local server: its store's file is locked to it and the outbox records its own
		// sends, so a plain send needs no claim in the store.
		a.Worker.Exclusive = deliver.NewClaims()
	}
	if a.Config.SESMaxSendRate > 0 {
		// Paced like the send worker on AWS, against the store's per-second counter.
		a.Worker.Pacer = &deliver.Pacer{Slots: a.Store, Rate: a.Config.SESMaxSendRate, Now: now, Log: a.Log}
	}
	if a.OutboxDir == "" { // SES replaces the Message-ID header with its own
		region := ""
		if len(a.regions) == 1 {
			region = a.regions[0]
		}
		a.Worker.ReplyReference = deliver.SESReplyReference(region)
	}
	d := api.Deps{
		Store: a.Store, Identities: a.Identities, EmailScheduler: a.EmailScheduler, CampaignScheduler: a.CampaignScheduler,
		Dates:        naturaldate.Parse,
		Signer:       a.signer(),
		MaxScheduled: a.Config.MaxScheduled, RateLimit: a.Config.APIRateLimit,
		Regions:      a.regions,
		AuthCacheTTL: a.Config.AuthCacheTTL, Now: now, Log: a.Log, Metrics: a.Metrics,
	}
	if local {
		a.Pool = deliver.NewPool(a.Worker, a.Config.Workers, a.Log)
		d.Dispatcher = a.Pool
		d.StartedAt = time.Now()
	}
	// The local server (and the admin CLI on its database) may call http and loopback
	// receivers: it is a development tool.
	d.LocalWebhooks = local || a.Config.Backend == config.BackendEmbedded
	a.Services = api.NewServices(d)
}

// Start begins the in-process background work of a local run: firing schedules (those that
// came due while the process was down fire at once) and reconciling stuck emails every
// interval.
func (a *App) Start(ctx context.Context, interval time.Duration) error {
	if a.local == nil {
		return nil
	}
	if err := a.local.Start(ctx); err != nil {
		return fmt.Errorf("start scheduler: %w", err)
	}
	// Emails the last process left SENDING (it stopped or crashed mid-send) go back to delivery
	// now, not after the claim's lease: no other process can be sending them.
	rq := a.requeue()
	rq.StartedAt = time.Now()
	if n, err := rq.Run(ctx); n > 0 || err != nil {
		a.Log.Info("resuming emails left by the last run", "count", n, "err", err)
	}
	// Campaigns that were running when the process stopped continue from their cursor.
	if n, err := a.Services.Campaigns.RecoverRunning(ctx, 0); n > 0 || err != nil {
		a.Log.Info("resuming running campaigns", "count", n, "err", err)
	}
	loopCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	a.stop = stop
	a.every(loopCtx, interval, func(ctx context.Context) {
		_ = a.Periodic(ctx) // logged part by part; the next tick retries
	})
	if st, ok := a.Store.(*bolt.Store); ok {
		// The local webhook runner: the store's feed (written with each history entry, so a
		// crash loses none) becomes calls, and calls are attempted when due.
		a.every(loopCtx, webhookPace, func(ctx context.Context) {
			if err := a.pumpWebhooks(ctx, st); err != nil && ctx.Err() == nil {
				a.Log.Error("webhooks", "err", err.Error())
			}
		})
		// Attempts run on their own, webhook by webhook: a slow receiver holds up its own
		// calls only, never another webhook's nor the making of new calls.
		a.hookPool = &hooks.Pool{S: a.Services.Webhooks, Due: st.DueWebhookCallsSkipping}
		a.every(loopCtx, webhookPace, func(ctx context.Context) {
			if _, err := a.hookPool.Run(ctx, 100); err != nil && ctx.Err() == nil {
				a.Log.Error("webhook calls", "err", err.Error())
			}
		})
	}
	if ds, ok := a.Store.(*dynamo.Store); ok && a.Config.StreamCounts {
		// What the WebhookEvents and WebhookRetries functions do on AWS: the counts, then
		// the webhook calls of what the stream brings, and the calls due again.
		ds.AfterCounts(func(ctx context.Context, recs []dynamo.StreamRecord) (bool, error) {
			r, err := streamhooks.Publish(ctx, a.Services.Webhooks, ds, recs)
			for _, u := range r.Undecoded {
				a.Log.WarnContext(ctx, "stream record not decoded", "eventId", u.ID, "err", u.Err.Error())
			}
			if r.Calls > 0 {
				a.Log.DebugContext(ctx, "webhook events", "records", len(recs), "calls", r.Calls, "attempted", r.Attempted)
			}
			return r.Entries+r.Changes > 0, err // events were made of them (a webhook or not)
		})
		a.loops.Add(1)
		go func() {
			defer a.loops.Done()
			ds.RunStream(loopCtx, streamPace, a.Log)
		}()
		a.every(loopCtx, webhookRetryPace, func(ctx context.Context) {
			if _, err := a.Services.Webhooks.RunDue(ctx, 100); err != nil && ctx.Err() == nil {
				a.Log.Warn("webhook calls due not attempted; trying again", "err", err)
			}
		})
	}
	return nil
}

// every runs fn every interval, from one interval on, until ctx ends; Close waits for it.
func (a *App) every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	a.loops.Add(1)
	go func() {
		defer a.loops.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn(store.Unhurried(ctx)) // background work: it waits for the store's pace
			}
		}
	}()
}

// streamPace is how often the local server on the AWS backend reads its table's stream (the
// counts, then the webhook calls).
const streamPace = time.Second

// webhookRetryPace is how often the local server on the AWS backend attempts the webhook calls
// due again (the WebhookRetries function runs every minute on AWS).
const webhookRetryPace = 5 * time.Second

// webhookPace is how often the local server looks for webhook work: new history entries in
// the store's feed, and calls due again.
const webhookPace = 200 * time.Millisecond

// pumpWebhooks publishes the feed's entries as webhook calls (only those of teams with
// webhooks are read); another loop attempts them when due.
func (a *App) pumpWebhooks(ctx context.Context, st *bolt.Store) error {
	h := a.Services.Webhooks
	for ctx.Err() == nil {
		feed, err := st.FeedAfter(ctx, 0, 200)
		if err != nil || len(feed) == 0 {
			break
		}
		var entries []hooks.Entries
		var changes []hooks.Event
		for _, en := range feed {
			if en.Change != nil {
				if ev, ok := hooks.ChangeEvent(*en.Change, "feed/"+strconv.FormatUint(en.Seq, 10)); ok {
					changes = append(changes, ev)
				}
				continue
			}
			entries = append(entries, hooks.Entries{TeamID: en.TeamID, EmailID: en.EmailID, EventIDs: []string{en.EventID}})
		}
		calls, err := h.PublishEntries(ctx, st, entries, changes...)
		if err != nil {
			return err
		}
		if len(calls) > 0 {
			a.Log.DebugContext(ctx, "webhook events", "records", len(feed), "calls", len(calls))
		}
		if err := st.FeedDone(ctx, feed[len(feed)-1].Seq); err != nil {
			return err
		}
	}
	return nil
}

// requeue is the sweep of stuck emails, handing them to in-process delivery locally.
func (a *App) requeue() *housekeeping.Requeue {
	rq := &housekeeping.Requeue{Store: a.Store, Now: time.Now, Log: a.Log}
	if a.Pool != nil { // not a typed nil in the interface
		rq.Dispatcher = a.Pool
	}
	return rq
}

// Periodic is the background housekeeping (pkg/housekeeping): locally it runs on a timer; on
// AWS the Reconciler function runs the same jobs. The error joins the jobs that failed.
func (a *App) Periodic(ctx context.Context) error {
	jobs := housekeeping.Jobs(a.requeue().Run, a.Services.Emails, a.Services.Campaigns, a.Services.Contacts, a.Store)
	if ob, ok := a.Mailer.(*outbox.Outbox); ok && a.Config.Retention > 0 {
		jobs = append(jobs, housekeeping.Job{Name: "removed outbox messages past their retention", Run: func(context.Context) (int, error) {
			return a.pruneOutbox(ob)
		}})
	}
	return housekeeping.Run(ctx, a.Log, jobs)
}

// pruneOutbox removes, at most once an hour (it reads the whole folder), the outbox's message
// files written more than the retention and a day ago: every email they were written for has
// expired by then (an email expires at the end of the day its retention ends, counted from its
// creation or its scheduled time, both before its send).
func (a *App) pruneOutbox(ob *outbox.Outbox) (int, error) {
	a.pruneMu.Lock()
	defer a.pruneMu.Unlock()
	now := time.Now()
	if now.Sub(a.prunedAt) < time.Hour {
		return 0, nil
	}
	a.prunedAt = now
	return ob.Prune(now.Add(-a.Config.Retention - 24*time.Hour))
}

// fireLocal routes a local schedule to its target. A campaign runs apart from the scheduler's
// goroutine (a large one takes minutes and must not hold up scheduled emails); if the process
// stops meanwhile, Start resumes it from its cursor.
func (a *App) fireLocal(ctx context.Context, payload []byte) error {
	var kind struct {
		CampaignID string `json:"campaignId"`
	}
	if json.Unmarshal(payload, &kind) != nil || kind.CampaignID == "" {
		return a.Services.Emails.Fire(ctx, payload)
	}
	a.runs.Add(1)
	go func() {
		defer a.runs.Done()
		if err := a.Services.Campaigns.Fire(a.runCtx, payload); err != nil {
			a.Log.Error("campaign step", "campaignId", kind.CampaignID, "err", err)
		}
	}()
	return nil
}

// Close stops background work and delivery (finishing what is in flight) and closes the
// adapters. Queued then tells how many emails it left waiting for delivery.
func (a *App) Close(ctx context.Context) error {
	if a.stop != nil {
		a.stop()
		a.loops.Wait()
		if a.hookPool != nil {
			a.hookPool.Wait() // the posts under way finish (no run starts more: the loops are done)
		}
	}
	var first error
	// Stop firing first: a schedule that fires now would be acknowledged and then find its
	// campaign run cancelled. What is not fired stays in the schedule file for the next start.
	if a.local != nil {
		first = a.local.Close(ctx)
	}
	if a.cancelRuns != nil {
		a.cancelRuns()
	}
	a.runs.Wait()
	if a.Pool != nil {
		a.Pool.Close(ctx)
	}
	for _, c := range a.closers {
		if err := c(ctx); err != nil && first == nil {
			first = err
		}
	}
	a.queued = -1
	if a.Store != nil {
		if ids, err := a.Store.PendingEmails(ctx, 1_000_000); err == nil {
			a.queued = len(ids)
		}
	}
	if a.closeStore != nil {
		if err := a.closeStore(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Queued is how many emails Close left waiting for delivery (QUEUED, or SENDING with no
// outcome), after the outbox's last events were recorded; -1 when they could not be counted.
func (a *App) Queued() int { return a.queued }
