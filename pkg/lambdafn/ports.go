package lambdafn

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Access is how much of a resource a process may use.
type Access int

// Access levels.
const (
	None Access = iota
	Read
	Write // read and write
)

// Ports says what one function builds: which adapters, and for each AWS one the operations it
// may call (the uses table in lambdafn.go). The function's wiring builds exactly these (Build
// refuses a missing or a superfluous plug), the deployment gives it exactly the environment
// variables (Env) and IAM actions (IAM) that follow from them, and nothing else (pkg/deploy
// renders template.yaml from this). Every AWS call is checked against the ports in the SDK
// client itself (Grant), so a function that calls an operation its ports do not name fails
// the same way in a test as it would at AWS, where the template gives it no permission for it.
type Ports struct {
	// Table lists the DynamoDB actions the function may call on the table and its indexes, as
	// IAM names them (TableActions: a transaction is authorised as its elements' actions):
	// TableRead for a function that only reads, that plus the writes its store calls make
	// (Writes) for the others.
	Table []string
	// Send is the SES mailer: SendEmail through the configuration sets.
	Send bool
	// Identities are the SES identity operations the domain service calls (CreateEmailIdentity,
	// GetEmailIdentity, PutEmailIdentityMailFromAttributes, DeleteEmailIdentity).
	Identities []string
	// EmailSchedules and CampaignSchedules are the EventBridge Scheduler operations on
	// scheduled emails' schedules (email-*) and campaigns' (campaign-*): CreateSchedule,
	// UpdateSchedule (a Put does both), DeleteSchedule.
	EmailSchedules    []string
	CampaignSchedules []string
	// CampaignInvoke: the function starts campaign steps that are due now with a direct
	// asynchronous invocation of the campaign-batch function (lambda:InvokeFunction).
	CampaignInvoke bool
	// Unsubscribe is the unsubscribe keyring, read from Secrets Manager at cold start
	// (secretsmanager:GetSecretValue on that one secret): Read checks links (and reads the ring
	// again for a key rotated in since), Write also signs them (and so needs the public URL
	// they point at).
	Unsubscribe Access
	// Dates: the function reads campaigns' scheduledAt in natural language (pkg/naturaldate).
	Dates bool
	// RateLimited: the function serves authenticated routes, so it counts each request in its
	// team's rate-limit item (an UpdateItem of a RATE# key, whatever its Table allows).
	RateLimited bool
	// Console: the function serves the mail console's pages (withconsole). Only it links the
	// console: its html/template keeps every exported method of every type in a binary (the
	// SDK's whole API), which doubled every other function's size and slowed its cold start.
	Console bool
}

// Scheduler operation sets.
var (
	SchedulePut    = []string{"CreateSchedule", "UpdateSchedule"}
	ScheduleDelete = []string{"DeleteSchedule"}
	SchedulePutDel = []string{"CreateSchedule", "DeleteSchedule", "UpdateSchedule"}
)

// Environment variables of the ports (GlobalEnv are every function's).
const (
	EnvConfigurationSet  = "SES_CONFIGURATION_SET"
	EnvMaxSendRate       = "SES_MAX_SEND_RATE"
	EnvScheduleGroup     = "SCHEDULE_GROUP"
	EnvScheduleRole      = "SCHEDULE_ROLE_ARN"
	EnvScheduleDLQ       = "SCHEDULE_DLQ_ARN"
	EnvScheduleTarget    = "SCHEDULE_TARGET_ARN"
	EnvCampaignTarget    = "CAMPAIGN_TARGET_ARN"
	EnvUnsubscribeSecret = "UNSUBSCRIBE_SECRET_ID"
	EnvPublicURL         = "PUBLIC_URL"
)

// GlobalEnv are the variables every deployed function reads (the template's Globals).
// AWS_ENDPOINT_URL is the AWS SDK's own: empty on AWS, an emulator's URL under sam local.
var GlobalEnv = []string{"API_RATE_LIMIT", "AUTH_CACHE_TTL", "AWS_ENDPOINT_URL", "BACKEND", "LOG_LEVEL", "RETENTION_DAYS", "STACK_NAME", "TABLE_NAME"}

// Env lists, sorted, the variables the ports read beyond GlobalEnv; each is required.
func (p Ports) Env() []string {
	var env []string
	if p.Send {
		env = append(env, EnvConfigurationSet, EnvMaxSendRate)
	}
	if len(p.EmailSchedules) > 0 || len(p.CampaignSchedules) > 0 {
		env = append(env, EnvScheduleGroup)
	}
	if slices.Contains(p.EmailSchedules, "CreateSchedule") || slices.Contains(p.CampaignSchedules, "CreateSchedule") {
		// What a created schedule carries: the role the service assumes and the dead letters.
		env = append(env, EnvScheduleRole, EnvScheduleDLQ)
	}
	if slices.Contains(p.EmailSchedules, "CreateSchedule") {
		env = append(env, EnvScheduleTarget)
	}
	if slices.Contains(p.CampaignSchedules, "CreateSchedule") || p.CampaignInvoke {
		env = append(env, EnvCampaignTarget)
	}
	if p.Unsubscribe >= Read {
		env = append(env, EnvUnsubscribeSecret)
	}
	if p.Unsubscribe == Write {
		env = append(env, EnvPublicURL)
	}
	slices.Sort(env)
	return env
}

// Statement is one IAM permission: actions on a kind of resource.
type Statement struct {
	// LeadingKeys, when set, limits a table statement to items whose partition key matches
	// one of these patterns (IAM's dynamodb:LeadingKeys).
	LeadingKeys []string
	// Resource names the kind of resource, for the template to spell as an ARN: "identity",
	// "configuration-set", "schedule/email", "schedule/campaign", "scheduler-role",
	// "campaign-function", "unsubscribe-secret", "table".
	Resource []string
	Actions  []string
}

// IAM lists the permissions the ports use, beyond the table's (Table says read or write).
func (p Ports) IAM() []Statement {
	var out []Statement
	if p.Send {
		// SES v2 SendEmail is authorised as ses:SendEmail, and with raw content (what the
		// mailer sends) as ses:SendRawEmail too; AWS's own grant for sending gives both.
		out = append(out, Statement{Resource: []string{"identity", "configuration-set"},
			Actions: []string{"ses:SendEmail", "ses:SendRawEmail"}})
		// The pacer reads the account's rate and quota; GetAccount has no resource.
		out = append(out, Statement{Resource: []string{"account"}, Actions: []string{"ses:GetAccount"}})
	}
	if len(p.Identities) > 0 {
		actions := prefixed("ses:", p.Identities)
		if slices.Contains(p.Identities, "CreateEmailIdentity") {
			// The identity is created with its owner tag (pkg/identity/ses), and tagging on
			// creation is authorised as ses:TagResource too.
			actions = append(actions, "ses:TagResource")
			slices.Sort(actions)
		}
		out = append(out, Statement{Resource: []string{"identity"}, Actions: actions})
	}
	if len(p.EmailSchedules) > 0 {
		out = append(out, Statement{Resource: []string{"schedule/email"}, Actions: prefixed("scheduler:", p.EmailSchedules)})
	}
	if len(p.CampaignSchedules) > 0 {
		out = append(out, Statement{Resource: []string{"schedule/campaign"}, Actions: prefixed("scheduler:", p.CampaignSchedules)})
	}
	if slices.Contains(p.EmailSchedules, "CreateSchedule") || slices.Contains(p.CampaignSchedules, "CreateSchedule") {
		out = append(out, Statement{Resource: []string{"scheduler-role"}, Actions: []string{"iam:PassRole"}})
	}
	if p.CampaignInvoke {
		out = append(out, Statement{Resource: []string{"campaign-function"}, Actions: []string{"lambda:InvokeFunction"}})
	}
	if p.Unsubscribe >= Read {
		out = append(out, Statement{Resource: []string{"unsubscribe-secret"}, Actions: []string{"secretsmanager:GetSecretValue"}})
	}
	if p.RateLimited && !slices.Contains(p.Table, UpdateItem) {
		out = append(out, Statement{Resource: []string{"table"}, Actions: []string{"dynamodb:UpdateItem"},
			LeadingKeys: []string{RateKeyPattern}})
	}
	return out
}

func prefixed(prefix string, ops []string) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = prefix + o
	}
	slices.Sort(out)
	return out
}

// RequireEnv fails when a variable the ports read is empty: a deployment that does not
// configure a port its function builds fails at cold start, not at the first call.
func (p Ports) RequireEnv(getenv func(string) string) error {
	var missing []string
	// TABLE_NAME too: the local default ("mailroom") would quietly be any table of that name.
	for _, k := range append([]string{"TABLE_NAME"}, p.Env()...) {
		if getenv(k) == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing environment variables %s", strings.Join(missing, ", "))
	}
	return nil
}

// TableRead are the DynamoDB actions of reading (TransactGetItems is authorised as GetItem).
var TableRead = []string{"BatchGetItem", "GetItem", "Query"}

// The DynamoDB write actions a function's store calls can make.
const (
	PutItem            = "PutItem"
	UpdateItem         = "UpdateItem"
	DeleteItem         = "DeleteItem"
	BatchWriteItem     = "BatchWriteItem"
	ConditionCheckItem = "ConditionCheckItem"
)

// Writes is TableRead and the given write actions, sorted.
func Writes(actions ...string) []string {
	out := slices.Concat(TableRead, actions)
	slices.Sort(out)
	return slices.Compact(out)
}

// ReadOnly: the actions only read.
func ReadOnly(actions []string) bool {
	for _, a := range actions {
		if !slices.Contains(TableRead, a) {
			return false
		}
	}
	return true
}

// ErrNotGranted is the error of an AWS call outside a process's ports.
var ErrNotGranted = fmt.Errorf("operation not granted to this function")

// Grant returns an SDK client option that refuses, before anything is sent, every operation
// allowed does not return true for (input is the operation's input, to check names against
// the IAM resource).
func Grant(allowed func(op string, input any) bool) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("MailroomGrant",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				op := strings.TrimSuffix(reflect.TypeOf(in.Parameters).Elem().Name(), "Input")
				if !allowed(op, in.Parameters) {
					return middleware.InitializeOutput{}, middleware.Metadata{}, fmt.Errorf("%s: %w", op, ErrNotGranted)
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	}
}

// RateKeyPattern is the partition keys of the rate-limit counters (dynamo.rateKey), as IAM's
// dynamodb:LeadingKeys condition spells a prefix.
const RateKeyPattern = "RATE#*"

// TableGrant allows the table calls whose IAM actions (TableActions) are all in actions, and
// with rateLimited an UpdateItem of a rate-limit counter.
func TableGrant(actions []string, rateLimited bool) func(string, any) bool {
	return func(op string, in any) bool {
		if u, ok := in.(*dynamodb.UpdateItemInput); ok && rateLimited {
			if pk, ok := u.Key["PK"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, strings.TrimSuffix(RateKeyPattern, "*")) {
				return true
			}
		}
		for _, a := range TableActions(op, in) {
			if !slices.Contains(actions, a) {
				return false
			}
		}
		return true
	}
}

// OpsGrant allows a list of operations.
func OpsGrant(ops ...string) func(string, any) bool {
	return func(op string, _ any) bool { return slices.Contains(ops, op) }
}

// ScheduleGrant allows ops on the schedules whose names start with prefix (email- or
// campaign-), as the IAM resource schedule/<group>/<prefix>* does.
func ScheduleGrant(prefix string, ops []string) func(string, any) bool {
	return func(op string, in any) bool {
		if !slices.Contains(ops, op) {
			return false
		}
		name := reflect.ValueOf(in).Elem().FieldByName("Name")
		if !name.IsValid() || name.Kind() != reflect.Pointer || name.IsNil() {
			return false
		}
		return strings.HasPrefix(name.Elem().String(), prefix)
	}
}

// TableActions are the IAM actions of a DynamoDB call: its own, except for the transactions,
// which IAM authorises element by element (TransactWriteItems as the PutItem, UpdateItem,
// DeleteItem and ConditionCheckItem of its elements, TransactGetItems as GetItem).
func TableActions(op string, input any) []string {
	switch in := input.(type) {
	case *dynamodb.TransactWriteItemsInput:
		var out []string
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				out = append(out, "PutItem")
			case it.Update != nil:
				out = append(out, "UpdateItem")
			case it.Delete != nil:
				out = append(out, "DeleteItem")
			case it.ConditionCheck != nil:
				out = append(out, "ConditionCheckItem")
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	case *dynamodb.TransactGetItemsInput:
		return []string{"GetItem"}
	}
	return []string{op}
}
