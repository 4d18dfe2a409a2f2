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
	// ErrDuplicateEvent: UpdateEmail was given an event whose ID the email already has; nothing
	// was written. Event ingestion treats it as "already recorded".
	ErrDuplicateEvent = errors.New("store: duplicate event")
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
	Recommended bool   `json:"recommended"`
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
	PrivateKey        string // base64 DER (PKCS#1), handed to SES for BYODKIM only
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
	Version      int64      // optimistic concurrency; adapters manage it
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Event is one entry of an email's history.
type Event struct {
	ID        string // unique within the email; adapters ignore a second event with the same ID
	EmailID   string
	Status    string
	CreatedAt time.Time
	Data      []byte // JSON, may be nil
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

// EmailFilter selects emails of one team for a list.
type EmailFilter struct {
	TeamID    int64
	Start     *time.Time // inclusive
	End       *time.Time // inclusive
	DomainIDs []int64    // any of; empty means all
	Offset    int
	Limit     int
}

// Idempotency record states.
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

// Store is the whole persistence port. Adapters assert `var _ store.Store = (*X)(nil)`.
type Store interface {
	// NextID returns the next integer of a named sequence ("team", "domain"), starting at 1.
	NextID(ctx context.Context, sequence string) (int64, error)

	CreateTeam(ctx context.Context, t Team) error
	GetTeam(ctx context.Context, id int64) (Team, error)
	ListTeams(ctx context.Context) ([]Team, error) // admin only, never on a request path

	// CreateAPIKey fails with ErrConflict when the key id exists.
	CreateAPIKey(ctx context.Context, k APIKey) error
	GetAPIKey(ctx context.Context, id string) (APIKey, error)
	ListAPIKeys(ctx context.Context, teamID int64) ([]APIKey, error)
	DeleteAPIKey(ctx context.Context, teamID int64, id string) error

	// CreateDomain fails with ErrConflict when any team has a domain of that name: the
	// provider's identity of a domain belongs to the whole account, so one team only may own it.
	CreateDomain(ctx context.Context, d Domain) error
	GetDomain(ctx context.Context, teamID, id int64) (Domain, error)
	ListDomains(ctx context.Context, teamID int64) ([]Domain, error) // ordered by id
	// UpdateDomain reads, applies fn and writes back atomically (retrying on a lost race).
	UpdateDomain(ctx context.Context, teamID, id int64, fn func(*Domain) error) (Domain, error)
	// DeleteDomain removes the domain and frees its name.
	DeleteDomain(ctx context.Context, teamID, id int64) error

	CreateTemplate(ctx context.Context, t Template) error
	GetTemplate(ctx context.Context, teamID int64, id string) (Template, error)
	ListTemplates(ctx context.Context, teamID int64) ([]Template, error) // newest first
	UpdateTemplate(ctx context.Context, teamID int64, id string, fn func(*Template) error) (Template, error)
	DeleteTemplate(ctx context.Context, teamID int64, id string) error

	// CreateEmails writes each email that does not exist yet together with its first events and
	// the list counters, atomically per email. An email whose id already exists is left untouched
	// (that is how a retried request after a crash stays exactly-once) and is not counted again.
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
	// UpdateEmail).
	FindEmailByMessageID(ctx context.Context, messageID string) (Email, error)
	// PendingEmails lists ids of emails in QUEUED or SENDING, oldest first, at most limit.
	PendingEmails(ctx context.Context, limit int) ([]string, error)

	// ClaimIdempotency creates a PENDING record, or takes over an expired record or a stale
	// PENDING one. claimed reports whether the caller now owns the record; rec is the record as
	// it stands after the call (the caller's when claimed, the existing one otherwise).
	ClaimIdempotency(ctx context.Context, c IdemClaim) (rec Idempotency, claimed bool, err error)
	// CompleteIdempotency stores the response of the owner's PENDING record.
	CompleteIdempotency(ctx context.Context, teamID int64, key string, response []byte) error
	// ReleaseIdempotency deletes a PENDING record after a failed request so it can be retried.
	ReleaseIdempotency(ctx context.Context, teamID int64, key string) error

	// PutSuppression adds or replaces the suppression of (TeamID, Email).
	PutSuppression(ctx context.Context, s Suppression) error
	// GetSuppressions returns the suppressions among the given addresses (lower-cased keys).
	GetSuppressions(ctx context.Context, teamID int64, emails []string) (map[string]Suppression, error)
	// ListSuppressions pages a team's suppressions, newest first; reason "" means any. The int
	// is the total matching.
	ListSuppressions(ctx context.Context, teamID int64, reason string, offset, limit int) ([]Suppression, int, error)
	DeleteSuppression(ctx context.Context, teamID int64, email string) error
}
