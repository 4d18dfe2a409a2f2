// Package store declares the persistence port of Mailroom: the records it keeps and the
// operations the product needs on them. Two adapters implement it: pkg/store/bolt (the embedded
// default, one file on disk) and pkg/store/dynamo (one DynamoDB table). Both pass the contract
// suite in pkg/store/storetest, so the product code never knows which one it talks to.
//
// Every guarantee here is a guarantee of both adapters: uniqueness through conditional writes,
// optimistic concurrency for updates, expired idempotency records treated as absent.
package store

import (
	"context"
	"errors"
	"time"
)

// Errors every adapter returns (wrapped or bare) so that callers can use errors.Is.
var (
	// ErrNotFound: the record does not exist (or belongs to another team, or has expired).
	ErrNotFound = errors.New("store: not found")
	// ErrConflict: a uniqueness rule would be broken (domain name, API key id).
	ErrConflict = errors.New("store: conflict")
	// ErrTooLarge: the record is larger than the store can hold in one piece (a DynamoDB item
	// is at most 400 KB: a template's or a campaign's bodies that do not compress enough).
	ErrTooLarge = errors.New("store: record too large")
	// ErrDuplicateEvent: UpdateEmail was given an event whose ID the email already has; nothing
	// was written. Event ingestion treats it as "already recorded".
	ErrDuplicateEvent = errors.New("store: duplicate event")
	// ErrContention: an optimistic update lost to concurrent writers of the same record every
	// time it was tried; nothing was written. Both adapters return it (errors.Is).
	ErrContention = errors.New("store: too much contention")
)

// Permission of an API key.
type Permission string

const (
	PermissionFull    Permission = "FULL"
	PermissionSending Permission = "SENDING"
)

// Team owns everything else.
type Team struct {
	ID        int64
	Name      string
	CreatedAt time.Time
	// APIRateLimit is the team's API requests per second: nil for the server's default
	// (API_RATE_LIMIT), 0 for unlimited.
	APIRateLimit *int64 `json:",omitempty"`
	// DailyEmailLimit caps the emails the team may send in a UTC day (0: unlimited).
	DailyEmailLimit int64 `json:",omitempty"`
}

// APIKey is stored with a hash of its secret only; the secret is shown once, at creation.
type APIKey struct {
	ID         string // the 10-char middle part of us_<id>_<secret>
	TeamID     int64
	Name       string
	SecretHash string // hex SHA-256 of the secret
	Permission Permission
	DomainID   int64 // 0: every domain of the team
	CreatedAt  time.Time
}

// Domain statuses mirror SES identity verification statuses.
const (
	DomainNotStarted       = "NOT_STARTED"
	DomainPending          = "PENDING"
	DomainSuccess          = "SUCCESS"
	DomainFailed           = "FAILED"
	DomainTemporaryFailure = "TEMPORARY_FAILURE"
)

// DNSRecord is one record the user must publish for a domain.
type DNSRecord struct {
	Type        string `json:"type"`
	Name        string `json:"name"`
	Value       string `json:"value"`
	TTL         string `json:"ttl"`
	Status      string `json:"status"`
	Priority    string `json:"priority,omitempty"`
	Recommended bool   `json:"recommended,omitempty"` // DMARC only, as upstream
}

// Domain is a sending domain of a team. PrivateKey never leaves the store through the API.
type Domain struct {
	ID                int64
	TeamID            int64
	Name              string
	Region            string
	Status            string
	Selector          string // DKIM selector
	PublicKey         string // base64 DER (SubjectPublicKeyInfo), as published in DNS
	PrivateKey        string // base64 DER (PKCS#1): no longer stored (SES keeps it); earlier versions' is cleared at the next check
	DNSRecords        []DNSRecord
	ClickTracking     bool
	OpenTracking      bool
	DKIMStatus        string
	SPFDetails        string
	DMARCAdded        bool
	IsVerifying       bool
	ErrorMessage      string
	Subdomain         string
	VerificationError string
	LastCheckedTime   *time.Time
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// Template is a stored subject/html/text with {{name}} placeholders.
type Template struct {
	ID        string
	TeamID    int64
	Name      string
	Subject   string
	HTML      string
	Text      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Email pipeline states (Email.Status). They differ from the public latestStatus: SENDING is
// internal (claimed by a worker) and is never shown.
const (
	StatusScheduled  = "SCHEDULED"
	StatusQueued     = "QUEUED"
	StatusSending    = "SENDING"
	StatusSent       = "SENT"
	StatusFailed     = "FAILED"
	StatusCancelled  = "CANCELLED"
	StatusSuppressed = "SUPPRESSED"
)

// Attachment of an email; Content is base64 as received from the caller.
type Attachment struct {
	Filename string `json:"filename"`
	Content  string `json:"content"`
}

// Header is one custom header, kept in the caller's order (sorted by name on input).
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Content is the heavy part of an email. Adapters may store it apart from the metadata
// (DynamoDB items are limited to 400 KB) but always return it whole.
type Content struct {
	HTML        *string      `json:"html,omitempty"`
	Text        *string      `json:"text,omitempty"`
	Headers     []Header     `json:"headers,omitempty"`
	Attachments []Attachment `json:"attachments,omitempty"`
}

// Email is one message to one set of recipients.
type Email struct {
	ID           string
	TeamID       int64
	DomainID     int64
	From         string
	To           []string
	CC           []string
	BCC          []string
	ReplyTo      []string
	Subject      string
	Content      Content
	InReplyToID  string
	ScheduledAt  *time.Time
	Status       string // pipeline state, see Status* constants
	LatestStatus string // public status, advanced by rank
	MessageID    string // provider message id once sent
	Attempts     int
	ClaimedAt    *time.Time // when a worker moved it to SENDING
	// NotBefore holds a QUEUED email back until then: a send SES throttled, an account whose
	// sending is paused, no send slot within the worker's invocation. The reconciler hands it
	// to the worker again once it has passed.
	NotBefore *time.Time
	// Held marks a QUEUED campaign email whose campaign was paused when a worker took it: it
	// leaves the pending index for its campaign's (HeldEmails) until the campaign resumes or is
	// deleted, so a long pause costs nothing and crowds no other email out of the reconciler.
	Held bool
	// Reschedules counts the caller's reschedules of the email (each adds an event to its
	// history, so their number is capped).
	Reschedules int
	Version     int64 // optimistic concurrency; adapters manage it
	// CampaignID and ContactID tie a campaign email to its campaign and recipient.
	CampaignID string
	ContactID  string
	// Counted lists the counter kinds (Count*) this email has already counted. When an
	// UpdateEmail adds kinds to it (or CreateEmails writes an email with kinds in it) the store
	// increments, exactly once (within the write, or from its change stream: see CreateEmails),
	// the campaign's counters for exactly the new kinds
	// (a campaign email) and the day's analytics counters of its team and domain for the new
	// AnalyticsKinds (any email): each kind counts at most once per email, i.e. per recipient.
	Counted []string
	// ScheduleCounted is maintained by the store: the email counts in its team's
	// ScheduledCount (set when it is written SCHEDULED, cleared when it leaves SCHEDULED).
	ScheduleCounted bool
	CreatedAt       time.Time
	UpdatedAt       time.Time
	// ContentOmitted is set by ListEmails (never stored) when it left a large content out of
	// the list rather than load it: the email's GetEmail has it.
	ContentOmitted bool `json:"-" dynamodbav:"-"`
}

// Event is one entry of an email's history.
type Event struct {
	ID        string // unique within the email; adapters ignore a second event with the same ID
	EmailID   string
	Status    string
	CreatedAt time.Time
	Data      []byte // JSON, may be nil
}

// DeletedBook is a deleted contact book whose contacts remain to be removed.
type DeletedBook struct {
	TeamID int64
	BookID string
}

// Suppression reasons.
const (
	ReasonHardBounce = "HARD_BOUNCE"
	ReasonComplaint  = "COMPLAINT"
	ReasonManual     = "MANUAL"
)

// Suppression is an address a team must not send to. Email is stored lower-cased.
type Suppression struct {
	TeamID    int64
	Email     string
	Reason    string
	EmailID   string // the email whose event caused it, if any
	CreatedAt time.Time
}

// ContactBook is a team's list of contacts (a campaign's audience).
type ContactBook struct {
	ID                 string
	TeamID             int64
	Name               string
	Emoji              string
	Properties         map[string]string
	Variables          []string // personalisation variables its contacts may carry
	DoubleOptInEnabled bool
	DoubleOptInFrom    string
	DoubleOptInSubject string
	DoubleOptInContent string
	ContactCount       int64 // maintained by the store as contacts come and go
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

// Contact is one address in a book; Email is unique within the book (stored lower-cased).
type Contact struct {
	ID         string
	TeamID     int64
	BookID     string
	Email      string
	FirstName  string
	LastName   string
	Properties map[string]string
	Subscribed bool
	// Pending: added to a book with double opt-in, the contact has not confirmed yet (it is
	// not subscribed meanwhile, and campaigns leave it out).
	Pending bool `json:",omitempty" dynamodbav:",omitempty"`
	// SubscribedAt is when the contact last went from unsubscribed to subscribed (zero: never
	// unsubscribed). An unsubscribe link made before it no longer unsubscribes the contact.
	SubscribedAt time.Time
	// UnsubscribeReason says why an unsubscribed contact is (Unsubscribe* constants, as
	// upstream's unsubscribeReason); "" while subscribed or waiting for its confirmation.
	UnsubscribeReason string `json:",omitempty" dynamodbav:",omitempty"`
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// A contact's UnsubscribeReason: it (or its app) unsubscribed it, or a campaign email to it
// bounced for good or was reported as spam.
const (
	UnsubscribeUnsubscribed = "UNSUBSCRIBED"
	UnsubscribeBounced      = "BOUNCED"
	UnsubscribeComplained   = "COMPLAINED"
)

// ContactPut is one upsert of PutContacts: PutContact's email, newID and fn.
type ContactPut struct {
	Email, NewID string
	Fn           func(c *Contact, existed bool) error
}

// ContactFilter selects contacts of one book for a list.
type ContactFilter struct {
	Emails []string // any of (lower-cased); empty means all
	IDs    []string // any of; empty means all
	Offset int
	Limit  int
}

// Campaign statuses.
const (
	CampaignDraft     = "DRAFT"
	CampaignScheduled = "SCHEDULED"
	CampaignRunning   = "RUNNING"
	CampaignPaused    = "PAUSED"
	CampaignSent      = "SENT"
)

// Campaign counter kinds: the names of Campaign's counters and of Email.Counted entries.
const (
	CountTotal        = "total"
	CountSent         = "sent"
	CountDelivered    = "delivered"
	CountOpened       = "opened"
	CountClicked      = "clicked"
	CountBounced      = "bounced"
	CountHardBounced  = "hardBounced"
	CountComplained   = "complained"
	CountUnsubscribed = "unsubscribed"
)

// AnalyticsKinds are the counter kinds the analytics routes report per day and domain: the store
// counts them for every email, campaign or not (see Emails.DailyStats).
var AnalyticsKinds = []string{CountSent, CountDelivered, CountOpened, CountClicked, CountBounced, CountHardBounced, CountComplained}

// DayStats is one day's analytics counts (by AnalyticsKinds kind) of a team or a domain.
type DayStats struct {
	Day    string // YYYY-MM-DD, UTC
	Counts map[string]int64
}

// Campaign is a bulk send to a contact book, run in batches.
type Campaign struct {
	ID                 string
	TeamID             int64
	DomainID           int64
	Name               string
	From               string
	Subject            string
	PreviewText        string
	ContactBookID      string
	HTML               string
	Content            string
	ReplyTo            []string
	CC                 []string
	BCC                []string
	Status             string
	ScheduledAt        *time.Time
	BatchSize          int
	BatchWindowMinutes int
	// Cursor is the Email of the last contact a batch step handled ("" before the first):
	// the next step starts after it (contacts are walked in email order).
	Cursor      string
	BatchesDone int
	// PausedReason says why Mailroom paused the campaign itself (its domain or book is gone);
	// "" for a pause of the team's own, and once resumed.
	PausedReason string
	// Audience is the number of the book's subscribed, unsuppressed contacts when the campaign
	// started sending, counted by its steps from AudienceCursor (the Email of the last contact
	// counted; "" again once counted) until AudienceCounted; 0 and false before, and for a
	// campaign started before it was recorded.
	Audience        int64
	AudienceCursor  string
	AudienceCounted bool
	// Counters, by the Count* kinds, maintained by the store (see CreateEmails, UpdateEmail);
	// an UpdateCampaign fn must not change them.
	Counters  map[string]int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Total is the campaign's recipients: its audience once counted, or the emails it has written
// when more (contacts subscribed after the start and reached by the walk) or while the
// audience is still being counted.
func (c Campaign) Total() int64 {
	if !c.AudienceCounted {
		return c.Counters[CountTotal]
	}
	return max(c.Audience, c.Counters[CountTotal])
}

// CampaignFilter selects a team's campaigns for a list.
type CampaignFilter struct {
	Status   string // "" means any
	Search   string // case-insensitive substring of name or subject; "" means any
	DomainID int64  // the campaigns sending from this domain; 0 means any
	Offset   int
	Limit    int
}

// EmailFilter selects emails of one team for a list.
type EmailFilter struct {
	TeamID    int64
	Start     *time.Time // inclusive
	End       *time.Time // inclusive
	DomainIDs []int64    // any of; empty means all
	Offset    int
	Limit     int
}

// Idempotency record states. A record stays PENDING: the emails its nonce names are its
// outcome. COMPLETE records (with the response) were written by earlier versions and are
// still honoured until they expire.
const (
	IdemPending  = "PENDING"
	IdemComplete = "COMPLETE"
)

// Idempotency is the record of one Idempotency-Key of one team.
type Idempotency struct {
	TeamID      int64
	Key         string
	Fingerprint string
	State       string
	Nonce       string // random, fixed at first claim; email ids derive from it
	Response    []byte // the JSON response once complete
	ClaimedAt   time.Time
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// IdemClaim describes a claim attempt.
type IdemClaim struct {
	TeamID      int64
	Key         string
	Fingerprint string
	Nonce       string        // used when the claim creates a new record
	Now         time.Time     //
	TTL         time.Duration // lifetime of a new record (24 h)
	StaleAfter  time.Duration // a PENDING claim older than this may be taken over (60 s)
}

// Store is the whole port: one interface per record group, so that a consumer names the groups
// it uses (type Store interface { store.Emails; store.Templates }) instead of re-typing their
// methods. Both adapters implement all of it (pkg/store/bolt, pkg/store/dynamo), and the
// contract suite (pkg/store/storetest) runs per group against both.
type Store interface {
	Teams
	Domains
	Templates
	Emails
	IdempotencyKeys
	Contacts
	Campaigns
	Suppressions
	Pacing
	RateLimits
	Webhooks
}

// Record is one contact, domain or campaign: the records whose writes are webhook events
// (contact.*, domain.*, campaign.*). At most one field is set; none for a record that is absent.
type Record struct {
	Contact  *Contact  `json:",omitempty"`
	Domain   *Domain   `json:",omitempty"`
	Campaign *Campaign `json:",omitempty"`
}

// Change is one write to a record: Before is empty when the write created it, After when it
// deleted it. The local store's feed and the table's stream both yield them.
type Change struct {
	Before, After Record
	At            time.Time // when it was written: the event time of a delete
}

// Webhook statuses.
const (
	WebhookActive       = "ACTIVE"
	WebhookPaused       = "PAUSED"
	WebhookAutoDisabled = "AUTO_DISABLED"
)

// Webhook is a team's subscription to its events, called at URL.
type Webhook struct {
	ID          string // wh_…
	TeamID      int64
	URL         string
	EventTypes  []string // empty: every type
	DomainIDs   []int64  // empty: every domain
	Description string
	Status      string
	// SecretSealed is the signing secret, sealed (pkg/webhook); PreviousSealed the one a
	// rotation replaced, which keeps signing until PreviousUntil.
	SecretSealed   string
	PreviousSealed string     `json:",omitempty"`
	PreviousUntil  *time.Time `json:",omitempty"`
	// Failures counts the calls that failed in a row, since FailingSince.
	Failures     int        `json:",omitempty"`
	FailingSince *time.Time `json:",omitempty"`
	// RetryAt, while it is failing, is when its failed call is tried again: its other calls
	// due before then are held until then, not attempted (pkg/hooks).
	RetryAt   *time.Time `json:",omitempty"`
	CreatedAt time.Time
	UpdatedAt time.Time
	Version   int64 // optimistic concurrency; adapters manage it
}

// Webhook call statuses.
const (
	CallPending   = "PENDING"
	CallDelivered = "DELIVERED"
	CallFailed    = "FAILED" // given up after the retries
)

// WebhookCall is one event for one webhook: an entry of its delivery log, and of the queue of
// calls due while PENDING.
type WebhookCall struct {
	ID        string // whc_…: derived from the webhook and the event, so a repeat is the same call; ids sort by the event's time (a test's or a replay's: when it was made)
	WebhookID string
	TeamID    int64
	Type      string
	Data      []byte    // the envelope's data (JSON)
	EventAt   time.Time // when the event happened (the envelope's createdAt)
	Status    string
	Attempts  int
	// The last attempt: its response status (0: none), an excerpt of its body, its error.
	LastStatus    int    `json:",omitempty"`
	LastExcerpt   string `json:",omitempty"`
	LastError     string `json:",omitempty"`
	NextAttemptAt *time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
	Version       int64 // optimistic concurrency; adapters manage it
}

// HoldUntil moves a pending call's next attempt to until when it is due before it (the call
// waits for its failing webhook's retry) and reports whether it did.
func (c *WebhookCall) HoldUntil(until time.Time) bool {
	if c.Status != CallPending || c.NextAttemptAt == nil || !c.NextAttemptAt.Before(until) {
		return false
	}
	c.NextAttemptAt = &until
	return true
}

// Webhooks is the teams' webhooks and their calls.
type Webhooks interface {
	// CreateWebhook fails with ErrConflict when the id is taken.
	CreateWebhook(ctx context.Context, w Webhook) error
	GetWebhook(ctx context.Context, teamID int64, id string) (Webhook, error)
	ListWebhooks(ctx context.Context, teamID int64) ([]Webhook, error) // newest first
	UpdateWebhook(ctx context.Context, teamID int64, id string, fn func(*Webhook) error) (Webhook, error)
	// DeleteWebhook removes the webhook (the delivery service ends its calls still due).
	DeleteWebhook(ctx context.Context, teamID int64, id string) error
	// CreateWebhookCalls writes the calls whose id does not exist yet and returns those: an
	// event seen twice makes one call.
	CreateWebhookCalls(ctx context.Context, calls []WebhookCall) ([]WebhookCall, error)
	GetWebhookCall(ctx context.Context, webhookID, id string) (WebhookCall, error)
	// ListWebhookCalls returns up to limit calls of the webhook, newest event first (by id),
	// before the call id before ("" for the newest).
	ListWebhookCalls(ctx context.Context, webhookID string, limit int, before string) ([]WebhookCall, error)
	UpdateWebhookCall(ctx context.Context, webhookID, id string, fn func(*WebhookCall) error) (WebhookCall, error)
	// HoldWebhookCalls holds each of the webhook's calls ids until until (WebhookCall.HoldUntil):
	// the backlog of a failing webhook waits for its retry. A call it does not hold (settled,
	// due later, gone) stays as it is; an adapter that can holds them all in one write.
	HoldWebhookCalls(ctx context.Context, webhookID string, ids []string, until time.Time) error
	// DueWebhookCalls lists PENDING calls whose NextAttemptAt is not after t, earliest first,
	// at most limit, as webhook id and call id pairs.
	DueWebhookCalls(ctx context.Context, t time.Time, limit int) ([][2]string, error)
	// ExpireWebhookCalls removes up to limit calls made the store's retention ago or earlier
	// (their payloads carry the emails' recipients and subjects) and calls of deleted
	// webhooks, and returns how many it removed. An adapter whose database expires items
	// itself (DynamoDB's TTL) removes none. Either way a call past its retention is not found
	// or listed from then on (CallExpired).
	ExpireWebhookCalls(ctx context.Context, limit int) (int, error)
}

// RateLimits counts each team's API requests per second, across every process (the API's
// rate limit: a fixed one-second window).
type RateLimits interface {
	// TakeRequest counts one request of the team in the second that starts at second (whole
	// seconds, UTC) unless limit are counted there already. It returns the count of that
	// second (this request included when allowed). Counts of seconds past may be forgotten.
	TakeRequest(ctx context.Context, teamID int64, second time.Time, limit int64) (count int64, allowed bool, err error)
}

// Pacing counts sends per second across every worker, so that all of them together stay
// within the mail provider's account rate (deliver.Pacer).
type Pacing interface {
	// TakeSendSlots counts up to n sends in the second that starts at second (whole seconds,
	// UTC), as many as fit under limit there, and returns the position (1..limit) of the first
	// and how many it got: got is 0 when that second is full. The positions first..first+got-1
	// are the caller's. Slots of seconds that have passed may be forgotten.
	TakeSendSlots(ctx context.Context, second time.Time, limit, n int) (first, got int, err error)
}

// Teams is the teams, their API keys and the id sequences.
type Teams interface {
	// NextID returns the next integer of a named sequence ("team", "domain"), starting at 1.
	NextID(ctx context.Context, sequence string) (int64, error)

	CreateTeam(ctx context.Context, t Team) error
	GetTeam(ctx context.Context, id int64) (Team, error)
	// UpdateTeam reads the team, applies fn (ID and CreatedAt are kept) and writes it back
	// (admin only: the last write wins).
	UpdateTeam(ctx context.Context, id int64, fn func(*Team) error) (Team, error)
	ListTeams(ctx context.Context) ([]Team, error) // admin only, never on a request path

	// CreateAPIKey fails with ErrConflict when the key id exists.
	CreateAPIKey(ctx context.Context, k APIKey) error
	GetAPIKey(ctx context.Context, id string) (APIKey, error)
	ListAPIKeys(ctx context.Context, teamID int64) ([]APIKey, error)
	DeleteAPIKey(ctx context.Context, teamID int64, id string) error
}

// Domains is the teams' sending domains.
type Domains interface {
	// CreateDomain fails with ErrConflict when any team has a domain of that name: the
	// provider's identity of a domain belongs to the whole account, so one team only may own it.
	CreateDomain(ctx context.Context, d Domain) error
	GetDomain(ctx context.Context, teamID, id int64) (Domain, error)
	ListDomains(ctx context.Context, teamID int64) ([]Domain, error) // ordered by id
	// UpdateDomain reads, applies fn and writes back atomically (retrying on a lost race).
	UpdateDomain(ctx context.Context, teamID, id int64, fn func(*Domain) error) (Domain, error)
	// DeleteDomain removes the domain and frees its name.
	DeleteDomain(ctx context.Context, teamID, id int64) error
	// DomainNameHeld reports whether any team has a domain of that name (case-insensitive).
	DomainNameHeld(ctx context.Context, name string) (bool, error)
}

// Templates is the teams' templates.
type Templates interface {
	CreateTemplate(ctx context.Context, t Template) error
	GetTemplate(ctx context.Context, teamID int64, id string) (Template, error)
	ListTemplates(ctx context.Context, teamID int64) ([]Template, error) // newest first
	UpdateTemplate(ctx context.Context, teamID int64, id string, fn func(*Template) error) (Template, error)
	DeleteTemplate(ctx context.Context, teamID int64, id string) error
}

// Emails is the emails, their events and the work indexes.
type Emails interface {
	// CreateEmails writes each email that does not exist yet together with its first events,
	// atomically per email, and counts it (the list counts and, for a campaign email, the
	// campaign's counters of its Counted kinds, e.g. total). An email whose id already exists is
	// left untouched (that is how a retried request after a crash stays exactly-once) and is not
	// counted again.
	//
	// Counts. Every count (list counts, campaign counters, DailyStats, ScheduledCount) moves
	// exactly once per email and kind. An adapter may move them within the write (bbolt) or
	// after it, from a change stream of its writes (DynamoDB: about a second later); such an
	// adapter has a Settle(ctx) method that returns once every earlier write is counted.
	CreateEmails(ctx context.Context, emails []Email, firstEvents []Event) error
	GetEmail(ctx context.Context, id string) (Email, error)
	// GetEmailDetail returns the email and its events sorted by CreatedAt then ID.
	GetEmailDetail(ctx context.Context, id string) (Email, []Event, error)
	// ListEmails returns one page, newest first, and the number of emails matching the filter.
	ListEmails(ctx context.Context, f EmailFilter) ([]Email, int, error)
	// UpdateEmail reads the email, applies fn and writes it back together with the events fn
	// returns, atomically, failing the write if someone else changed the email in between (then
	// it re-reads and calls fn again). fn returning an error aborts with that error. When an
	// event's ID already exists for the email, nothing is written and ErrDuplicateEvent returned.
	UpdateEmail(ctx context.Context, id string, fn func(*Email) ([]Event, error)) (Email, error)
	// FindEmailByMessageID finds the email the provider knows by messageID (set through
	// UpdateEmail), for the events of an email that went out without its id as a tag (sent
	// before every send carried it). An adapter may index only such emails: it answers
	// ErrNotFound for any other id.
	FindEmailByMessageID(ctx context.Context, messageID string) (Email, error)
	// PendingEmails lists ids of emails in QUEUED or SENDING, oldest first, at most limit.
	PendingEmails(ctx context.Context, limit int) ([]string, error)
	// OverdueScheduled lists ids of SCHEDULED emails whose scheduledAt is before t, earliest
	// first, at most limit (the backstop for a schedule that never fired).
	OverdueScheduled(ctx context.Context, before time.Time, limit int) ([]string, error)
	// ExpireEmails removes up to limit emails (with their content and events) created before
	// the store's retention, and returns how many it removed; campaign counters keep their
	// counts. An adapter whose database expires items itself (DynamoDB's TTL) removes none.
	// Either way, an email past its retention is not found, listed or counted from then on.
	ExpireEmails(ctx context.Context, limit int) (int, error)
	// DailyStats returns the analytics counts of the team (domainID 0) or of one of its
	// domains for each day from..to (YYYY-MM-DD, inclusive) that has any, oldest first. A kind
	// counts on the UTC day of the write that added it to an email's Counted (the email's
	// UpdatedAt, its CreatedAt for CreateEmails). Counts outlive the emails' retention.
	DailyStats(ctx context.Context, teamID, domainID int64, from, to string) ([]DayStats, error)
	// ScheduledCount is the number of the team's emails in SCHEDULED: CreateEmails counts an
	// email it writes SCHEDULED, and UpdateEmail uncounts it when it leaves SCHEDULED (or counts
	// it when it enters), exactly once (see CreateEmails on counts). Emails written SCHEDULED before the count
	// existed are not in it; it is never below 0.
	ScheduledCount(ctx context.Context, teamID int64) (int64, error)
	// HeldEmails lists ids of the campaign's held emails (QUEUED with Held), oldest first, at
	// most limit. PendingEmails does not list them.
	HeldEmails(ctx context.Context, teamID int64, campaignID string, limit int) ([]string, error)
}

// IdempotencyKeys is the Idempotency-Key records.
type IdempotencyKeys interface {
	// ClaimIdempotency creates a PENDING record, or takes over an expired record or a stale
	// PENDING one. claimed reports whether the caller now owns the record; rec is the record as
	// it stands after the call (the caller's when claimed, the existing one otherwise).
	ClaimIdempotency(ctx context.Context, c IdemClaim) (rec Idempotency, claimed bool, err error)
	// ReleaseIdempotency deletes a PENDING record after a failed request so it can be retried.
	ReleaseIdempotency(ctx context.Context, teamID int64, key string) error
	// ExpireIdempotency removes up to limit records past their ExpiresAt and returns how many
	// it removed (a key used once would otherwise stay for ever). An adapter whose database
	// expires items itself (DynamoDB's TTL) removes none; an expired record is absent to
	// ClaimIdempotency either way.
	ExpireIdempotency(ctx context.Context, limit int) (int, error)
}

// Contacts is the contact books and their contacts.
type Contacts interface {
	CreateContactBook(ctx context.Context, b ContactBook) error
	GetContactBook(ctx context.Context, teamID int64, id string) (ContactBook, error)
	ListContactBooks(ctx context.Context, teamID int64) ([]ContactBook, error) // newest first
	// UpdateContactBook must not change ContactCount (the store keeps it).
	UpdateContactBook(ctx context.Context, teamID int64, id string, fn func(*ContactBook) error) (ContactBook, error)
	// DeleteContactBook removes the book at once; its contacts are removed afterwards, page by
	// page, by DeleteContactsOfBook (a background step: no request waits on it).
	DeleteContactBook(ctx context.Context, teamID int64, id string) error
	// DeleteContactsOfBook deletes up to limit contacts of a deleted book and reports how many
	// it deleted (0: none left).
	DeleteContactsOfBook(ctx context.Context, teamID int64, bookID string, limit int) (int, error)
	// DeletedContactBooks lists ids of deleted books whose contacts are not all gone yet.
	DeletedContactBooks(ctx context.Context, limit int) ([]DeletedBook, error)

	// PutContact creates the contact with that email in the book or updates the existing one,
	// atomically: fn receives the contact (zero but for TeamID, BookID and Email when new) and
	// whether it existed. A new contact gets ID newID and raises the book's ContactCount.
	// ErrNotFound when the book does not exist.
	PutContact(ctx context.Context, teamID int64, bookID, email, newID string, fn func(c *Contact, existed bool) error) (Contact, error)
	// PutContacts is PutContact for each put, in order (a later put of the same email sees the
	// earlier one's contact). On the embedded store they are one transaction: all or nothing,
	// one disk sync for a bulk import; on DynamoDB each is its own write, and an error stops
	// at the put it names (those before are written).
	PutContacts(ctx context.Context, teamID int64, bookID string, puts []ContactPut) ([]Contact, error)
	GetContact(ctx context.Context, teamID int64, bookID, id string) (Contact, error)
	// ListContacts pages a book's contacts in email order; the int is the total matching.
	ListContacts(ctx context.Context, teamID int64, bookID string, f ContactFilter) ([]Contact, int, error)
	// ContactsAfter returns up to limit contacts of the book whose Email sorts after cursor, in
	// email order: how a campaign walks its audience.
	ContactsAfter(ctx context.Context, teamID int64, bookID, cursor string, limit int) ([]Contact, error)
	// UpdateContact changes a contact; a change of Email is refused with ErrConflict when
	// another contact of the book has it.
	UpdateContact(ctx context.Context, teamID int64, bookID, id string, fn func(*Contact) error) (Contact, error)
	// DeleteContacts deletes the given contacts of the book and reports how many existed.
	DeleteContacts(ctx context.Context, teamID int64, bookID string, ids []string) (int, error)
}

// Campaigns is the campaigns (their counters move with the emails that count).
type Campaigns interface {
	CreateCampaign(ctx context.Context, c Campaign) error
	GetCampaign(ctx context.Context, teamID int64, id string) (Campaign, error)
	// GetCampaignState is GetCampaign without the counters (Counters nil): what a send checks
	// (status, book), in one read of the campaign however its counters are stored.
	GetCampaignState(ctx context.Context, teamID int64, id string) (Campaign, error)
	// ListCampaigns pages a team's campaigns, newest first; the int is the total matching.
	ListCampaigns(ctx context.Context, teamID int64, f CampaignFilter) ([]Campaign, int, error)
	// UpdateCampaign: optimistic read-modify-write like UpdateEmail; Counters are not written.
	UpdateCampaign(ctx context.Context, teamID int64, id string, fn func(*Campaign) error) (Campaign, error)
	DeleteCampaign(ctx context.Context, teamID int64, id string) error
}

// Suppressions is the teams' suppression lists.
type Suppressions interface {
	// PutSuppression adds or replaces the suppression of (TeamID, Email).
	PutSuppression(ctx context.Context, s Suppression) error
	// GetSuppressions returns the suppressions among the given addresses (lower-cased keys).
	GetSuppressions(ctx context.Context, teamID int64, emails []string) (map[string]Suppression, error)
	// ListSuppressions pages a team's suppressions, newest first; reason "" means any. The int
	// is the total matching.
	ListSuppressions(ctx context.Context, teamID int64, reason string, offset, limit int) ([]Suppression, int, error)
	DeleteSuppression(ctx context.Context, teamID int64, email string) error
}

// ExpiresAt is when an email kept for retention expires: at the end of the UTC day, retention
// after the later of its creation and its scheduled time (whole days, so that a list's window
// starts at midnight and needs no partial-day count). Zero retention keeps it: the zero time.
func ExpiresAt(e Email, retention time.Duration) time.Time {
	if retention <= 0 {
		return time.Time{}
	}
	base := e.CreatedAt
	if e.ScheduledAt != nil && e.ScheduledAt.After(base) {
		base = *e.ScheduledAt
	}
	return base.UTC().Truncate(24 * time.Hour).Add(retention + 24*time.Hour)
}

// CallExpired reports whether a webhook call has passed retention at now: it is kept
// retention after it was made (zero retention: for ever).
func CallExpired(c WebhookCall, retention time.Duration, now time.Time) bool {
	return retention > 0 && !now.Before(c.CreatedAt.Add(retention))
}

// Expired reports whether e has expired at now under retention.
func Expired(e Email, retention time.Duration, now time.Time) bool {
	at := ExpiresAt(e, retention)
	return !at.IsZero() && !now.Before(at)
}

// RetainedFrom is the first creation day whose emails a list shows at now under retention:
// every email created earlier has expired (zero retention: the zero time, all of them).
func RetainedFrom(now time.Time, retention time.Duration) time.Time {
	if retention <= 0 {
		return time.Time{}
	}
	return now.UTC().Add(-retention - 24*time.Hour).Truncate(24 * time.Hour).Add(24 * time.Hour)
}

type unhurriedKey struct{}

// Unhurried marks ctx as background work (local delivery) that a store may keep waiting while
// it puts its own work off for the foreground: the embedded store holds back writing logged
// emails into its database during a burst of sends, and a read on behalf of a caller who waits
// (an API request) ends that hold at once, a read on an unhurried context does not. Adapters
// with no such work ignore it.
func Unhurried(ctx context.Context) context.Context {
	return context.WithValue(ctx, unhurriedKey{}, true)
}

// IsUnhurried reports whether ctx was marked by Unhurried.
func IsUnhurried(ctx context.Context) bool {
	v, _ := ctx.Value(unhurriedKey{}).(bool)
	return v
}
