// Package deploy describes Mailroom's AWS deployment and renders template.yaml from it: every
// Lambda function of lambdafn.Names(), with the environment variables and IAM permissions that
// follow from the ports its wiring builds (lambdafn.Ports, lambdafn.Ports.Env and lambdafn.Ports.IAM),
// its log group, its alarms and its place on the dashboard. template.yaml is this package's
// output, checked in so that `sam build` and `sam deploy` work on a clone; `make template`
// writes it again, and a test fails when the two differ.
package deploy

import (
	"bytes"
	_ "embed"
	"fmt"
	"go/format"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"unicode"

	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/lambdafn"
	"github.com/mailroom/mailroom/pkg/metric"
)

//go:embed template.yaml.tmpl
var templateText string

// Function is one Lambda function of the stack.
type Function struct {
	Name        string // SendEmail
	LogicalID   string // SendEmailFunction
	Dir         string // send-email: functions/<Dir>, events/<Dir>.json, the function's name suffix
	Description string
	Ports       lambdafn.Ports
	Routes      []api.Route // its HTTP API routes; none for the background functions
	Timeout     int         // seconds, when not the Globals' 15
}

// httpTimeouts are the HTTP functions that may need longer than the Globals' 15 seconds: a
// bulk request of 1,000 contacts is 1,000 conditional writes one after the other (each a
// transaction with the book's count, which concurrent writes would conflict on), about 20
// seconds. 29 stays within the HTTP API's 30-second limit.
var httpTimeouts = map[string]int{"BulkCreateContacts": 29, "BulkDeleteContacts": 29}

// background describes the functions that serve no route.
var background = map[string]string{
	lambdafn.SendWorkerFunction:     "Delivers QUEUED emails from the table stream through SES",
	lambdafn.ScheduledSendFunction:  "Queues a scheduled email when its EventBridge Scheduler schedule fires",
	lambdafn.CampaignBatchFunction:  "Writes a campaign's emails, a batch step at a time (EventBridge Scheduler)",
	lambdafn.SESEventsFunction:      "Records the SES events of Mailroom's configuration sets (EventBridge)",
	lambdafn.ReconcilerFunction:     "Re-queues stuck and overdue emails, restarts stalled campaigns, purges deleted books (every 5 minutes)",
	lambdafn.DomainCheckFunction:    "Refreshes every domain's SES verification status, removes claims unverified after 72 hours (hourly)",
	lambdafn.AuthorizerFunction:     "Authenticates API keys for the HTTP API (Lambda authorizer)",
	lambdafn.WebhookEventsFunction:  "Applies the counts of email writes, turns emails' new history entries and writes to contacts, domains and campaigns into webhook calls, and makes their first attempts",
	lambdafn.WebhookRetriesFunction: "Attempts the webhook calls due again (every minute)",
}

// Functions lists every function, in lambdafn.Names() order.
func Functions() []Function {
	var fns []Function
	for _, n := range lambdafn.Names() {
		f := Function{Name: n, LogicalID: n + "Function", Dir: lambdafn.Dir(n), Ports: lambdafn.PortsOf(n),
			Description: background[n], Timeout: httpTimeouts[n]}
		var patterns []string
		for _, r := range slices.Concat(api.Routes, api.ConsoleRoutes) {
			if r.Function == n {
				f.Routes = append(f.Routes, r)
				f.Description = r.Summary
				patterns = append(patterns, r.Method)
			}
		}
		switch {
		case len(f.Routes) > 0 && slices.ContainsFunc(f.Routes, func(r api.Route) bool { return r.Path != f.Routes[0].Path }):
			var rs []string
			for _, r := range f.Routes {
				rs = append(rs, r.Pattern())
			}
			f.Description += " (" + strings.Join(rs, ", ") + ")"
		case len(f.Routes) > 0:
			f.Description += " (" + strings.Join(patterns, " and ") + " " + f.Routes[0].Path + ")"
		}
		fns = append(fns, f)
	}
	return fns
}

// FunctionNameSuffix is what follows the stack name in a function's name: <stack>-<dir>. A
// function name has at most 64 characters, so a stack name has at most 64 - 1 - the longest
// suffix (MaxStackName).
func (f Function) FunctionNameSuffix() string { return "-" + f.Dir }

// MaxStackName is the longest stack name whose function names fit in 64 characters.
func MaxStackName() int {
	longest := 0
	for _, f := range Functions() {
		longest = max(longest, len(f.FunctionNameSuffix()))
	}
	return 64 - longest
}

// EnvValue is how the template spells the value of each variable a port reads: a reference to
// the stack's own resource, never a literal.
var EnvValue = map[string]string{
	lambdafn.EnvConfigurationSet:  "!Ref ConfigurationSet",
	lambdafn.EnvMaxSendRate:       "!Ref SesMaxSendRate",
	lambdafn.EnvScheduleGroup:     "!Ref ScheduleGroup",
	lambdafn.EnvScheduleRole:      "!GetAtt SchedulerRole.Arn",
	lambdafn.EnvScheduleDLQ:       "!GetAtt ScheduleDeadLetterQueue.Arn",
	lambdafn.EnvScheduleTarget:    "!Sub arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}-" + lambdafn.Dir(lambdafn.ScheduledSendFunction),
	lambdafn.EnvCampaignTarget:    "!Sub arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}-" + lambdafn.Dir(lambdafn.CampaignBatchFunction),
	lambdafn.EnvUnsubscribeSecret: "!If [CreateUnsubscribeSecret, !Ref UnsubscribeSecret, !Ref UnsubscribeSecretArn]",
	lambdafn.EnvPublicURL:         "!If [HasCustomDomain, !Sub \"https://${DomainName}\", !Sub \"https://${HttpApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}\"]",
}

// resourceARNs spells the IAM resource kinds of lambdafn.Statement.
var resourceARNs = map[string][]string{
	"identity": {"!Sub arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:identity/*"},
	"configuration-set": {
		"!Sub arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:configuration-set/${ConfigurationSet}",
		"!Sub arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:configuration-set/${ConfigurationSetOpen}",
		"!Sub arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:configuration-set/${ConfigurationSetClick}",
		"!Sub arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:configuration-set/${ConfigurationSetOpenClick}",
	},
	"schedule/email":     {"!Sub arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${ScheduleGroup}/email-*"},
	"schedule/campaign":  {"!Sub arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${ScheduleGroup}/campaign-*"},
	"scheduler-role":     {"!GetAtt SchedulerRole.Arn"},
	"account":            {`"*"`},
	"campaign-function":  {EnvValue[lambdafn.EnvCampaignTarget]},
	"unsubscribe-secret": {EnvValue[lambdafn.EnvUnsubscribeSecret]},
	"table":              {"!GetAtt Table.Arn"},
}

// indent prefixes every line of s with n spaces.
func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pad + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// environment is a function's Environment block (nothing when its ports read no variable
// beyond the globals).
func environment(f Function) string {
	env := f.Ports.Env()
	if len(env) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Environment:\n  Variables:\n")
	for _, k := range env {
		fmt.Fprintf(&b, "    %s: %s\n", k, EnvValue[k])
	}
	return indent(6, b.String())
}

// policies is a function's Policies block: one statement with exactly the table actions its
// ports name (on the table and its indexes), then one per lambdafn.Statement.
func policies(f Function) string {
	var b strings.Builder
	b.WriteString("Policies:\n  - Statement:\n")
	b.WriteString("      - Effect: Allow\n        Action:\n")
	for _, a := range f.Ports.Table {
		fmt.Fprintf(&b, "          - dynamodb:%s\n", a)
	}
	b.WriteString("        Resource:\n          - !GetAtt Table.Arn\n          - !Sub \"${Table.Arn}/index/*\"\n")
	for _, s := range f.Ports.IAM() {
		b.WriteString("      - Effect: Allow\n        Action:\n")
		for _, a := range s.Actions {
			fmt.Fprintf(&b, "          - %s\n", a)
		}
		b.WriteString("        Resource:\n")
		for _, kind := range s.Resource {
			for _, arn := range resourceARNs[kind] {
				fmt.Fprintf(&b, "          - %s\n", arn)
			}
		}
		if slices.Contains(s.Actions, "iam:PassRole") {
			b.WriteString("        Condition:\n          StringEquals:\n            iam:PassedToService: scheduler.amazonaws.com\n")
		}
		if len(s.LeadingKeys) > 0 {
			b.WriteString("        Condition:\n          ForAllValues:StringLike:\n            dynamodb:LeadingKeys:\n")
			for _, k := range s.LeadingKeys {
				fmt.Fprintf(&b, "              - %q\n", k)
			}
		}
	}
	return indent(6, b.String())
}

// eventName names a route's event in its function: Api for a function's only route, else by
// method (Get, Post), and by method and path where a function has several of one method (the
// console's: GetRoot, GetConsole, GetApiV1Doc, GetHealthz; its one ANY route is Any).
func eventName(f Function, r api.Route) string {
	if len(f.Routes) == 1 {
		return "Api"
	}
	title := func(s string) string { return strings.ToUpper(s[:1]) + strings.ToLower(s[1:]) }
	name := title(r.Method)
	if slices.ContainsFunc(f.Routes, func(o api.Route) bool { return o.Method == r.Method && o.Path != r.Path }) {
		words := strings.FieldsFunc(r.Path, func(c rune) bool { return !unicode.IsLetter(c) && !unicode.IsDigit(c) })
		if len(words) == 0 {
			words = []string{"root"}
		}
		for _, w := range words {
			name += title(w)
		}
	}
	return name
}

// AuthCacheSeconds is how long API Gateway caches the authorizer's verdict on an Authorization
// header, and a function its looked-up keys (AUTH_CACHE_TTL): a revoked key works at most this
// long. A literal in the template, not a parameter: API Gateway's OpenAPI import takes the
// cache's TTL as a number, and a CloudFormation parameter reference is a string.
const AuthCacheSeconds = 60

// Render returns template.yaml.
func Render() ([]byte, error) {
	fns := Functions()
	byName := map[string]Function{}
	var http []Function
	for _, f := range fns {
		byName[f.Name] = f
		if len(f.Routes) > 0 {
			http = append(http, f)
		}
	}
	funcs := template.FuncMap{
		"fn": func(name string) (Function, error) {
			f, ok := byName[name]
			if !ok {
				return f, fmt.Errorf("no function %s", name)
			}
			return f, nil
		},
		"environment": environment,
		"policies":    policies,
		"eventName":   eventName,
		"maxStack":    MaxStackName,
		"last":        func(i int, s []Function) bool { return i == len(s)-1 },
	}
	t, err := template.New("template.yaml").Funcs(funcs).Option("missingkey=error").Parse(templateText)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	err = t.Execute(&out, map[string]any{"Functions": fns, "HTTP": http, "EnvValue": EnvValue,
		"EmailMetrics": metric.Emails, "AuthCacheSeconds": AuthCacheSeconds,
		"Namespace": metric.Namespace, "SendingPaused": metric.SendingPaused})
	return out.Bytes(), err
}

// README markers around the generated list of functions.
const (
	FunctionsBegin = "<!-- functions: generated by `make template` from the code; do not edit -->"
	FunctionsEnd   = "<!-- end of functions -->"
)

// FunctionsTable is the README's list of the deployed functions: name, what invokes it, what
// it does, and what its ports give it beyond the table.
func FunctionsTable() string {
	var b strings.Builder
	fns := Functions()
	fmt.Fprintf(&b, "%d Lambda functions (%d behind HTTP API routes):\n\n", len(fns), countHTTP(fns))
	b.WriteString("| Function | Invoked by | What it does | Table | Beyond the table |\n|---|---|---|---|---|\n")
	for _, f := range fns {
		trigger := triggers[f.Name]
		if len(f.Routes) > 0 {
			var rs []string
			for _, r := range f.Routes {
				rs = append(rs, "`"+r.Pattern()+"`")
			}
			trigger = strings.Join(rs, ", ")
		}
		desc := f.Description
		if i := strings.LastIndex(desc, " ("); i > 0 && len(f.Routes) > 0 {
			desc = desc[:i]
		}
		table := "read"
		if !lambdafn.ReadOnly(f.Ports.Table) {
			var w []string
			for _, a := range f.Ports.Table {
				if !slices.Contains(lambdafn.TableRead, a) {
					w = append(w, a)
				}
			}
			table = "read; " + strings.Join(w, ", ")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", f.Name, trigger, desc, table, beyond(f.Ports))
	}
	return b.String()
}

func countHTTP(fns []Function) int {
	n := 0
	for _, f := range fns {
		if len(f.Routes) > 0 {
			n++
		}
	}
	return n
}

// triggers says what invokes each background function.
var triggers = map[string]string{
	lambdafn.SendWorkerFunction:     "the table's stream (emails becoming QUEUED)",
	lambdafn.ScheduledSendFunction:  "EventBridge Scheduler (`email-<id>-*` schedules)",
	lambdafn.CampaignBatchFunction:  "EventBridge Scheduler (`campaign-<id>-*` schedules), direct invocations",
	lambdafn.SESEventsFunction:      "an EventBridge rule on the configuration sets' SES events",
	lambdafn.ReconcilerFunction:     "every 5 minutes",
	lambdafn.DomainCheckFunction:    "hourly",
	lambdafn.AuthorizerFunction:     "API Gateway, once per API key and cache period",
	lambdafn.WebhookEventsFunction:  "the table's stream (email items, and contact, domain and campaign items)",
	lambdafn.WebhookRetriesFunction: "every minute",
}

// beyond lists a function's ports other than the table, as IAM actions.
func beyond(p lambdafn.Ports) string {
	var parts []string
	for _, s := range p.IAM() {
		if slices.Contains(s.Actions, "iam:PassRole") {
			continue
		}
		if len(s.LeadingKeys) > 0 {
			parts = append(parts, strings.Join(s.Actions, ", ")+" of its rate-limit counters ("+strings.Join(s.LeadingKeys, ", ")+")")
			continue
		}
		parts = append(parts, strings.Join(s.Actions, ", ")+" ("+strings.Join(s.Resource, ", ")+")")
	}
	if p.Dates {
		parts = append(parts, "natural-language dates")
	}
	switch p.Unsubscribe {
	case lambdafn.Read:
		parts = append(parts, "checks unsubscribe links")
	case lambdafn.Write:
		parts = append(parts, "signs unsubscribe links")
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, "; ")
}

// README markers around the generated delivery state machine.
const (
	LifecycleBegin = "<!-- lifecycle: generated by `make template` from email.Lifecycle; do not edit -->"
	LifecycleEnd   = "<!-- end of lifecycle -->"
)

// LifecycleTable is the README's table of the delivery state machine (email.Lifecycle): each
// move, who makes it and when.
func LifecycleTable() string {
	var b strings.Builder
	b.WriteString("| From | To | Who | When |\n|---|---|---|---|\n")
	for _, t := range email.Lifecycle {
		from := "—"
		if t.From != "" {
			from = "`" + t.From + "`"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", from, t.To, t.By, t.When)
	}
	return b.String()
}

// UpdateREADME replaces the generated blocks in readme: the list of functions and the
// delivery state machine.
func UpdateREADME(readme []byte) ([]byte, error) {
	s := string(readme)
	for _, blk := range []struct{ begin, end, body string }{
		{FunctionsBegin, FunctionsEnd, FunctionsTable()},
		{LifecycleBegin, LifecycleEnd, LifecycleTable()},
	} {
		i := strings.Index(s, blk.begin)
		j := strings.Index(s, blk.end)
		if i < 0 || j < i {
			return nil, fmt.Errorf("README.md has no %q ... %q block", blk.begin, blk.end)
		}
		s = s[:i] + blk.begin + "\n" + blk.body + s[j:]
	}
	return []byte(s), nil
}

// plugs are the lambdafn plugs, each with what in a function's ports calls for it.
var plugs = []struct {
	needs func(lambdafn.Ports) bool
	pkg   string // under pkg/lambdafn
	name  string
}{
	{func(p lambdafn.Ports) bool { return p.Send }, "withmailer", "Mailer"},
	{func(p lambdafn.Ports) bool { return len(p.Identities) > 0 }, "withses", "Identities"},
	{func(p lambdafn.Ports) bool { return len(p.EmailSchedules) > 0 }, "withscheduler", "Emails"},
	{func(p lambdafn.Ports) bool { return p.CampaignInvoke }, "withlambda", "CampaignInvoke"}, // before Campaigns
	{func(p lambdafn.Ports) bool { return len(p.CampaignSchedules) > 0 || p.CampaignInvoke }, "withscheduler", "Campaigns"},
	{func(p lambdafn.Ports) bool { return p.Dates }, "withdates", "English"},
	{func(p lambdafn.Ports) bool { return p.Unsubscribe >= lambdafn.Read }, "withsecret", "Unsubscribe"},
	{func(p lambdafn.Ports) bool { return p.Console }, "withconsole", "Pages"},
}

// PlugNames lists the plugs a function's main passes, as pkg.Name.
func PlugNames(function string) []string {
	var out []string
	for _, p := range plugs {
		if p.needs(lambdafn.PortsOf(function)) {
			out = append(out, p.pkg+"."+p.name)
		}
	}
	return out
}

// MainSource is functions/<dir>/main.go of a function: lambdafn.Main with the plugs its
// ports call for, nothing else.
func MainSource(f Function) []byte {
	names := PlugNames(f.Name)
	imports := []string{`"github.com/mailroom/mailroom/pkg/lambdafn"`}
	for _, n := range names {
		imp := `"github.com/mailroom/mailroom/pkg/lambdafn/` + strings.Split(n, ".")[0] + `"`
		if !slices.Contains(imports, imp) {
			imports = append(imports, imp)
		}
	}
	slices.Sort(imports) // as gofmt orders them
	var b strings.Builder
	b.WriteString("// Code generated by `make template` (pkg/deploy) from the function's ports; DO NOT EDIT.\n\n")
	fmt.Fprintf(&b, "// Command %s is the %s Lambda function: %s.\npackage main\n\n", f.Dir, f.Name, f.Description)
	if len(imports) == 1 {
		fmt.Fprintf(&b, "import %s\n\n", imports[0])
	} else {
		b.WriteString("import (\n")
		for _, imp := range imports {
			fmt.Fprintf(&b, "\t%s\n", imp)
		}
		b.WriteString(")\n\n")
	}
	args := append([]string{strconv.Quote(f.Name)}, names...)
	fmt.Fprintf(&b, "func main() { lambdafn.Main(%s) }\n", strings.Join(args, ", "))
	src, err := format.Source([]byte(b.String())) // as gofmt lays out a long main
	if err != nil {
		panic(fmt.Sprintf("main of %s: %v", f.Name, err))
	}
	return src
}

// FunctionsMakefile is pkg/deploy/functions.mk, which the Makefile includes: every function
// as Name:dir, so that the Makefile names no function and spells no kebab-case rule itself.
func FunctionsMakefile() []byte {
	var b strings.Builder
	b.WriteString("# Generated by `make template` from lambdafn.Names() and lambdafn.Dir; do not edit.\n")
	b.WriteString("FUNCTION_DIRS := \\\n")
	fns := Functions()
	for i, f := range fns {
		sep := " \\\n"
		if i == len(fns)-1 {
			sep = "\n"
		}
		fmt.Fprintf(&b, "\t%s:%s%s", f.Name, f.Dir, sep)
	}
	return []byte(b.String())
}
