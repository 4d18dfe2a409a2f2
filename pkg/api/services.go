package api

import (
	"log/slog"
	"time"

	"github.com/mailroom/mailroom/pkg/analytics"
	"github.com/mailroom/mailroom/pkg/auth"
	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/contact"
	"github.com/mailroom/mailroom/pkg/domain"
	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/hooks"
	"github.com/mailroom/mailroom/pkg/identity"
	"github.com/mailroom/mailroom/pkg/metric"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/suppression"
	"github.com/mailroom/mailroom/pkg/template"
	"github.com/mailroom/mailroom/pkg/webhook"
)

// Deps are what the services are built on. Only Store is required: a port left nil is one the
// process does not build (a Lambda function builds what its routes call), and a service that
// would need it is not called there.
type Deps struct {
	Store             store.Store
	Identities        identity.Identities
	EmailScheduler    email.Scheduler
	CampaignScheduler campaign.Scheduler
	// Dispatcher hands queued emails to in-process delivery (the local server; nil on AWS,
	// where the table's stream does).
	Dispatcher email.Dispatcher
	// Dates reads campaigns' scheduledAt in natural language (nil: RFC 3339 only).
	Dates func(string, time.Time) (time.Time, error)
	// Signer signs and checks unsubscribe links.
	Signer campaign.Signer
	// Regions are the SES regions domains may use (nil: any).
	Regions []string
	// MaxScheduled caps a team's scheduled emails (email.DefaultMaxScheduled when 0).
	MaxScheduled int
	// RateLimit is a team's API requests per second unless it has its own (0: none), counted
	// by the store (store.RateLimits).
	RateLimit int64
	// LocalWebhooks lets webhooks call http and loopback URLs (the local server, a development
	// tool); on AWS only https to public addresses.
	LocalWebhooks bool
	// StartedAt, when set, is when this process started, and it alone writes the store (the
	// local server holds its data folder): an idempotency claim made before it is stale.
	StartedAt time.Time
	// AuthCacheTTL is how long a looked-up API key is cached.
	AuthCacheTTL time.Duration
	Now          func() time.Time
	Log          *slog.Logger
	Metrics      metric.Counter
}

// NewServices builds every service on d: the one place the local server and the Lambda
// functions wire them.
func NewServices(d Deps) *Services {
	dir := &domain.Directory{Domains: d.Store, TTL: 30 * time.Second, Now: d.Now}
	contacts := &contact.Service{Store: d.Store, Now: d.Now, Log: d.Log, Domains: dir,
		DoubleOptIn: &campaign.DoubleOptIn{Store: d.Store, Domains: dir, Signer: d.Signer, Dispatcher: d.Dispatcher,
			Now: d.Now, Metrics: d.Metrics}}
	return &Services{
		Auth: auth.NewAuthenticator(d.Store, d.AuthCacheTTL),
		Emails: &email.Service{Store: d.Store, Domains: dir, Scheduler: d.EmailScheduler, Dispatcher: d.Dispatcher,
			Now: d.Now, Log: d.Log, Metrics: d.Metrics, MaxScheduled: d.MaxScheduled, StartedAt: d.StartedAt},
		Domains: &domain.Service{Store: d.Store, Identities: d.Identities, Now: d.Now, OnChange: dir.Forget,
			Regions: d.Regions},
		Templates: &template.Service{Store: d.Store, Now: d.Now},
		Analytics: &analytics.Service{Store: d.Store, Now: d.Now},
		Webhooks: &hooks.Service{Store: d.Store, Sealer: hooks.Sealer{Ring: d.Signer.Ring},
			Policy: webhook.Policy{AllowLocal: d.LocalWebhooks}, Now: d.Now, Log: d.Log},
		Suppressions: &suppression.Service{Store: d.Store, Now: d.Now},
		Contacts:     contacts,
		Campaigns: &campaign.Service{Store: d.Store, Domains: dir, Scheduler: d.CampaignScheduler,
			Dispatcher: d.Dispatcher, Contacts: contacts, Now: d.Now, Log: d.Log, Metrics: d.Metrics,
			Dates: d.Dates, Signer: d.Signer},
		Log: d.Log, Limiter: d.Store, DefaultRateLimit: d.RateLimit, now: d.Now,
	}
}
