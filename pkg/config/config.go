// Package config is Mailroom's configuration, read once from the environment in main: the
// local server and the admin CLI (through pkg/app) and every Lambda function (through
// pkg/lambdafn) read it the same way.
package config

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Backends.
const (
	BackendEmbedded = "embedded"
	BackendAWS      = "aws"
)

// maxRetentionDays is the longest RETENTION_DAYS: a hundred years (a longer one would
// overflow the durations it is computed into).
const maxRetentionDays = 36500

// MaxWorkers is the most delivery goroutines WORKERS may ask for.
const MaxWorkers = 1000

// Config is everything read from the environment, once, in main.
type Config struct {
	Backend          string // BACKEND: embedded (default) or aws
	Host             string // HOST (127.0.0.1)
	Port             int    // PORT (3000)
	DataDir          string // DATA_DIR (./.data): embedded database and outbox
	TableName        string // TABLE_NAME (mailroom)
	ConfigurationSet string // SES_CONFIGURATION_SET: SES configuration set for sends
	// SESMaxSendRate is SES_MAX_SEND_RATE, sends per second across every worker: it overrides
	// the account's rate (SES GetAccount) on AWS; locally, sends are paced only when it is set.
	SESMaxSendRate float64
	// Retention is RETENTION_DAYS (90): how long emails, their content and their events are
	// kept; 0 keeps them for ever.
	Retention       time.Duration
	BootstrapAPIKey string // BOOTSTRAP_API_KEY: make sure a team with this FULL key exists
	Workers         int    // WORKERS (16): local delivery goroutines
	// StreamCounts is STREAM_COUNTS (on): a local server on the AWS backend reads the table's
	// stream itself for the counts and the webhook calls, and attempts the calls due again
	// (off: a deployed stack's WebhookEvents and WebhookRetries functions do).
	StreamCounts bool
	AuthCacheTTL time.Duration // AUTH_CACHE_TTL (60s): how long a key stays cached
	LogLevel     slog.Level    // LOG_LEVEL (info)
	// CreateTable makes the server create the DynamoDB table when missing (local server only).
	CreateTable bool

	// EventBridge Scheduler, for scheduled sends in Lambda (the local server schedules in
	// process): SCHEDULE_GROUP, SCHEDULE_TARGET_ARN (the scheduled-send function),
	// SCHEDULE_ROLE_ARN (assumed by the scheduler to invoke it), SCHEDULE_DLQ_ARN.
	ScheduleGroup     string
	ScheduleTargetARN string
	ScheduleRoleARN   string
	ScheduleDLQARN    string
	// CAMPAIGN_TARGET_ARN: the campaign batch function, target of campaign schedules.
	CampaignTargetARN string

	// PublicURL is the base of links in emails (one-click unsubscribe): PUBLIC_URL; the local
	// server uses its own address when unset.
	PublicURL string
	// StackName is the CloudFormation stack a Lambda function belongs to (STACK_NAME): the
	// Stack dimension of the metrics it writes. Unset (the local server), no metrics are written.
	StackName string

	// UnsubscribeSecret signs unsubscribe links on the local server: UNSUBSCRIBE_SECRET, a key
	// or a keyring (campaign.ParseKeyring); when unset a random key is kept in
	// DATA_DIR/unsubscribe.key.
	UnsubscribeSecret string
	// APIRateLimit is the API requests per second of a team without its own limit:
	// API_RATE_LIMIT (0 or unset: none; the template sets 10 on AWS).
	APIRateLimit int64
	// MaxScheduled caps a team's emails waiting in SCHEDULED on the local server:
	// MAX_SCHEDULED_EMAILS (email.DefaultMaxScheduled when unset or 0).
	MaxScheduled int
	// UnsubscribeSecretID names the Secrets Manager secret that holds the keyring on AWS
	// (UNSUBSCRIBE_SECRET_ID, an ARN or a name): a Lambda function reads it at cold start.
	UnsubscribeSecretID string
}

// Var is one environment variable FromEnv reads.
type Var struct {
	Name, Default, Meaning string
	// AWS marks the variables the template sets for the Lambda functions; the local server
	// needs none of them.
	AWS bool
}

// Vars are every variable FromEnv reads, in the order `mailroom -h` and the README list them.
var Vars = []Var{
	{Name: "HOST", Default: "127.0.0.1", Meaning: "address to listen on"},
	{Name: "PORT", Default: "3000", Meaning: "port to listen on (0: a free one, the same again at the next start if it is free)"},
	{Name: "DATA_DIR", Default: ".data", Meaning: "embedded database and outbox"},
	{Name: "PUBLIC_URL", Default: "the server's own address", Meaning: "base of the links in emails (one-click unsubscribe)"},
	{Name: "BOOTSTRAP_API_KEY", Meaning: "us_<10 [0-9a-z]>_<32 hex>: make sure a team with this FULL key exists"},
	{Name: "BACKEND", Default: "embedded", Meaning: "embedded, or aws (DynamoDB, SES v2)"},
	{Name: "TABLE_NAME", Default: "mailroom", Meaning: "DynamoDB table (BACKEND=aws)"},
	{Name: "SES_CONFIGURATION_SET", Meaning: "base SES configuration set to send through (BACKEND=aws)"},
	{Name: "WORKERS", Default: "16", Meaning: "local delivery goroutines (1 to 1000)"},
	{Name: "STREAM_COUNTS", Default: "on", Meaning: "BACKEND=aws: the server reads the table's stream itself for the counts and the webhook calls; off against a deployed stack, whose functions do (a stream shard takes two readers)"},
	{Name: "RETENTION_DAYS", Default: "90", Meaning: "days emails, their content and their events are kept (0: for ever; at most 36500)"},
	{Name: "SES_MAX_SEND_RATE", Meaning: "sends per second across every worker; locally, unset means unpaced"},
	{Name: "API_RATE_LIMIT", Meaning: "API requests per second of a team without its own limit (unset or 0: none)"},
	{Name: "MAX_SCHEDULED_EMAILS", Default: "10000", Meaning: "a team's emails waiting in SCHEDULED (0: the default)"},
	{Name: "UNSUBSCRIBE_SECRET", Default: "a random key kept in DATA_DIR/unsubscribe.key", Meaning: "key (or keyring) that signs unsubscribe links"},
	{Name: "AUTH_CACHE_TTL", Default: "60s", Meaning: "how long a looked-up API key is cached"},
	{Name: "LOG_LEVEL", Default: "info", Meaning: "debug, info, warn or error; logs are JSON on stderr"},
	{Name: "SCHEDULE_GROUP", Meaning: "EventBridge Scheduler group of scheduled sends", AWS: true},
	{Name: "SCHEDULE_TARGET_ARN", Meaning: "the scheduled-send function", AWS: true},
	{Name: "SCHEDULE_ROLE_ARN", Meaning: "role EventBridge Scheduler assumes to invoke it", AWS: true},
	{Name: "SCHEDULE_DLQ_ARN", Meaning: "dead-letter queue of schedules", AWS: true},
	{Name: "CAMPAIGN_TARGET_ARN", Meaning: "the campaign batch function, target of campaign schedules", AWS: true},
	{Name: "STACK_NAME", Meaning: "the stack: the Stack dimension of the metrics", AWS: true},
	{Name: "UNSUBSCRIBE_SECRET_ID", Meaning: "Secrets Manager secret holding the unsubscribe keyring", AWS: true},
}

// FromEnv reads the configuration; getenv is os.Getenv outside tests.
func FromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{
		Backend:          strings.ToLower(or(getenv("BACKEND"), BackendEmbedded)),
		Host:             or(getenv("HOST"), "127.0.0.1"),
		DataDir:          or(getenv("DATA_DIR"), ".data"),
		TableName:        or(getenv("TABLE_NAME"), "mailroom"),
		ConfigurationSet: getenv("SES_CONFIGURATION_SET"),
		BootstrapAPIKey:  strings.TrimSpace(getenv("BOOTSTRAP_API_KEY")),

		ScheduleGroup:       getenv("SCHEDULE_GROUP"),
		ScheduleTargetARN:   getenv("SCHEDULE_TARGET_ARN"),
		ScheduleRoleARN:     getenv("SCHEDULE_ROLE_ARN"),
		ScheduleDLQARN:      getenv("SCHEDULE_DLQ_ARN"),
		CampaignTargetARN:   getenv("CAMPAIGN_TARGET_ARN"),
		PublicURL:           getenv("PUBLIC_URL"),
		StackName:           getenv("STACK_NAME"),
		UnsubscribeSecret:   getenv("UNSUBSCRIBE_SECRET"),
		UnsubscribeSecretID: getenv("UNSUBSCRIBE_SECRET_ID"),
	}
	var err error
	if c.Port, err = intEnv(getenv, "PORT", 3000); err != nil {
		return c, err
	}
	if c.Port > 65535 {
		return c, fmt.Errorf("PORT: %d is not a port (0 to 65535)", c.Port)
	}
	switch v := or(getenv("STREAM_COUNTS"), "on"); v {
	case "on", "off":
		c.StreamCounts = v == "on"
	default:
		return c, fmt.Errorf("STREAM_COUNTS: %q is neither on nor off", v)
	}
	if c.Workers, err = intEnv(getenv, "WORKERS", 16); err != nil || c.Workers < 1 || c.Workers > MaxWorkers {
		// None would leave emails QUEUED for ever; each holds a goroutine and a message in
		// memory, so millions would exhaust it before the first send.
		return c, fmt.Errorf("WORKERS: want 1 to %d delivery goroutines", MaxWorkers)
	}
	if !hostLike(c.Host) {
		return c, fmt.Errorf("HOST: %q is not an address to listen on (an IP address or a host name)", c.Host)
	}
	if c.PublicURL != "" {
		// Links are made by appending their path: a query or a fragment would swallow it.
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			strings.ContainsFunc(c.PublicURL, unicode.IsSpace) || strings.ContainsAny(c.PublicURL, "?#") || u.User != nil {
			return c, fmt.Errorf("PUBLIC_URL: %q is not an http(s) URL without a query or fragment", c.PublicURL)
		}
		c.PublicURL = strings.TrimSuffix(c.PublicURL, "/")
	}
	rate, err := intEnv(getenv, "API_RATE_LIMIT", 0)
	if err != nil || rate < 0 {
		return c, fmt.Errorf("API_RATE_LIMIT: want a whole number of requests per second (0 for none)")
	}
	c.APIRateLimit = int64(rate)
	if c.MaxScheduled, err = intEnv(getenv, "MAX_SCHEDULED_EMAILS", 0); err != nil || c.MaxScheduled < 0 {
		return c, fmt.Errorf("MAX_SCHEDULED_EMAILS: want a number of emails (0 for the default)")
	}
	days, err := intEnv(getenv, "RETENTION_DAYS", 90)
	if err != nil || days < 0 || days > maxRetentionDays {
		return c, fmt.Errorf("RETENTION_DAYS: want a number of days up to %d (0 keeps emails for ever)", maxRetentionDays)
	}
	c.Retention = time.Duration(days) * 24 * time.Hour
	if v := getenv("SES_MAX_SEND_RATE"); v != "" {
		c.SESMaxSendRate, err = strconv.ParseFloat(v, 64)
		if err != nil || !(c.SESMaxSendRate >= 0) || math.IsInf(c.SESMaxSendRate, 0) { // NaN too
			return c, fmt.Errorf("SES_MAX_SEND_RATE: %q is not a rate (sends per second, 0 for the account's)", v)
		}
	}
	ttl := or(getenv("AUTH_CACHE_TTL"), "60s")
	if c.AuthCacheTTL, err = time.ParseDuration(ttl); err != nil || c.AuthCacheTTL < 0 {
		return c, fmt.Errorf("AUTH_CACHE_TTL: %q is not a duration such as 60s", ttl)
	}
	// The four levels only: slog would also take offsets such as DEBUG+3.
	switch v := strings.ToLower(or(getenv("LOG_LEVEL"), "info")); v {
	case "debug", "info", "warn", "error":
		_ = c.LogLevel.UnmarshalText([]byte(v))
	default:
		return c, fmt.Errorf("LOG_LEVEL: %q is not debug, info, warn or error", getenv("LOG_LEVEL"))
	}
	if c.Backend != BackendEmbedded && c.Backend != BackendAWS {
		return c, fmt.Errorf("BACKEND must be %q or %q, not %q", BackendEmbedded, BackendAWS, c.Backend)
	}
	return c, nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func intEnv(getenv func(string) string, name string, def int) (int, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s must be a non-negative integer", name)
	}
	return n, nil
}

// Logger returns the JSON logger every process uses. The time is written as "timestamp", the
// key Lambda's JSON log format recognises, so that a line keeps its own time and level there.
func (c Config) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: c.LogLevel,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				a.Key = "timestamp"
			}
			return a
		}}))
}

// hostLike reports whether h is an IP address (an IPv6 one with its zone too) or a host name's
// syntax (letters, digits, hyphens, underscores as container names have, dots; not all digits,
// which would be a mistyped IPv4 address).
func hostLike(h string) bool {
	ip, _, _ := strings.Cut(h, "%")
	if net.ParseIP(ip) != nil {
		return true
	}
	if h == "" || len(h) > 253 {
		return false
	}
	digits := true
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			switch {
			case r >= '0' && r <= '9':
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '-', r == '_':
				digits = false
			default:
				return false
			}
		}
	}
	return !digits
}
