package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"gopkg.in/yaml.v3"

	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/config"
	"github.com/mailroom/mailroom/pkg/deploy"
	"github.com/mailroom/mailroom/pkg/lambdafn"
	"github.com/mailroom/mailroom/pkg/metric"
	"github.com/mailroom/mailroom/pkg/store/dynamo"
)

// root is the repository root (this package is pkg/deploy).
const root = "../.."

// loadTemplate parses template.yaml into plain maps, slices and scalars. CloudFormation's
// short-form intrinsics become their long form: !Ref X → {"Ref": X}, !GetAtt A.B →
// {"Fn::GetAtt": [A, B]}, !Sub s → {"Fn::Sub": s}, and so on.
func loadTemplate(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("template.yaml: %v", err)
	}
	v, err := decode(&doc)
	if err != nil {
		t.Fatalf("template.yaml: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("template.yaml is not a mapping")
	}
	return m
}

func decode(n *yaml.Node) (any, error) {
	var v any
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, fmt.Errorf("line %d: want one document", n.Line)
		}
		return decode(n.Content[0])
	case yaml.AliasNode:
		return decode(n.Alias)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			val, err := decode(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = val
		}
		v = m
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			val, err := decode(c)
			if err != nil {
				return nil, err
			}
			s = append(s, val)
		}
		v = s
	case yaml.ScalarNode:
		// Plain scalars keep YAML's typing (numbers, booleans); a tagged scalar is a string.
		if strings.HasPrefix(n.Tag, "!!") {
			if err := n.Decode(&v); err != nil {
				return nil, fmt.Errorf("line %d: %w", n.Line, err)
			}
		} else {
			v = n.Value
		}
	default:
		return nil, fmt.Errorf("line %d: unexpected YAML node kind %d", n.Line, n.Kind)
	}
	if !strings.HasPrefix(n.Tag, "!") || strings.HasPrefix(n.Tag, "!!") {
		return v, nil
	}
	fn := n.Tag[1:]
	switch fn {
	case "Ref", "Condition":
		return map[string]any{fn: v}, nil
	case "GetAtt":
		if s, ok := v.(string); ok {
			res, attr, found := strings.Cut(s, ".")
			if !found {
				return nil, fmt.Errorf("line %d: !GetAtt %q is not Resource.Attribute", n.Line, s)
			}
			v = []any{res, attr}
		}
	}
	return map[string]any{"Fn::" + fn: v}, nil
}

// path walks nested maps by key.
func path(t *testing.T, v any, keys ...string) any {
	t.Helper()
	for i, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s is not a mapping", strings.Join(keys[:i], "."))
		}
		if v, ok = m[k]; !ok {
			t.Fatalf("%s is missing", strings.Join(keys[:i+1], "."))
		}
	}
	return v
}

func resources(t *testing.T, tpl map[string]any, typ string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for id, r := range path(t, tpl, "Resources").(map[string]any) {
		res, ok := r.(map[string]any)
		if ok && res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

func functionIDs() []string {
	var ids []string
	for _, n := range lambdafn.Names() {
		ids = append(ids, n+"Function")
	}
	slices.Sort(ids)
	return ids
}

// TestTemplateIsRendered: template.yaml is what `make template` writes (pkg/deploy.Render),
// so that no hand edit drifts from the functions' ports.
func TestTemplateIsRendered(t *testing.T) {
	want, err := deploy.Render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("template.yaml differs from what pkg/deploy renders: run `make template` (edit pkg/deploy/template.yaml.tmpl, not template.yaml)")
	}
}

func TestFunctionsMatchNames(t *testing.T) {
	tpl := loadTemplate(t)
	fns := resources(t, tpl, "AWS::Serverless::Function")
	var got []string
	for id := range fns {
		got = append(got, id)
	}
	slices.Sort(got)
	if want := functionIDs(); !slices.Equal(got, want) {
		t.Errorf("template functions:\n got %v\nwant %v", got, want)
	}
}

func TestRoutesMatchAPI(t *testing.T) {
	tpl := loadTemplate(t)
	got := map[string]string{}
	for id, fn := range resources(t, tpl, "AWS::Serverless::Function") {
		evs, _ := path(t, fn, "Properties").(map[string]any)["Events"].(map[string]any)
		for name, e := range evs {
			ev := e.(map[string]any)
			if ev["Type"] != "HttpApi" {
				continue
			}
			p := path(t, ev, "Properties").(map[string]any)
			if !reflect.DeepEqual(p["ApiId"], map[string]any{"Ref": "HttpApi"}) {
				t.Errorf("%s.%s: ApiId = %v, want !Ref HttpApi", id, name, p["ApiId"])
			}
			key := fmt.Sprint(p["Method"], " ", p["Path"])
			if prev, dup := got[key]; dup {
				t.Errorf("%s declared by %s and %s", key, prev, id)
			}
			got[key] = id
		}
	}
	want := map[string]string{}
	for _, r := range slices.Concat(api.Routes, api.ConsoleRoutes) {
		want[r.Pattern()] = r.Function + "Function"
	}
	for k, id := range got {
		if want[k] != id {
			t.Errorf("template routes %s to %s; api.Routes to %q", k, id, want[k])
		}
	}
	for k, id := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("template has no HttpApi event %s (api.Routes: %s)", k, id)
		}
	}
	if _, ok := resources(t, tpl, "AWS::Serverless::HttpApi")["HttpApi"]; !ok {
		t.Error("no AWS::Serverless::HttpApi named HttpApi")
	}
}

func TestGlobals(t *testing.T) {
	tpl := loadTemplate(t)
	g := path(t, tpl, "Globals", "Function").(map[string]any)
	for k, want := range map[string]any{
		"Runtime": "provided.al2023", "Handler": "bootstrap", "MemorySize": 256, "Timeout": 15,
		"Architectures": []any{"arm64"},
	} {
		if !reflect.DeepEqual(g[k], want) {
			t.Errorf("Globals.Function.%s = %#v, want %#v", k, g[k], want)
		}
	}
	if f := path(t, g, "LoggingConfig", "LogFormat"); f != "JSON" {
		t.Errorf("LogFormat = %v, want JSON", f)
	}
	env := path(t, g, "Environment", "Variables").(map[string]any)
	if env["BACKEND"] != "aws" {
		t.Errorf("BACKEND = %v, want aws", env["BACKEND"])
	}
	if !reflect.DeepEqual(env["TABLE_NAME"], map[string]any{"Ref": "Table"}) {
		t.Errorf("TABLE_NAME = %v, want !Ref Table", env["TABLE_NAME"])
	}
	// Only the functions that send name the configuration set (TestSendingFunctions).
	if _, ok := env["SES_CONFIGURATION_SET"]; ok {
		t.Error("SES_CONFIGURATION_SET is global; only the sending functions need it")
	}
}

func ref(id string) map[string]any { return map[string]any{"Ref": id} }

func getAtt(id, attr string) map[string]any { return map[string]any{"Fn::GetAtt": []any{id, attr}} }

// functionName is a function's FunctionName as the template writes it: <stack>-<dir>.
func functionName(name string) map[string]any {
	return map[string]any{"Fn::Sub": "${AWS::StackName}-" + lambdafn.Dir(name)}
}

// functionARN is a function's ARN from its fixed name (how the functions that schedule, and
// the scheduler's role, name the schedule targets without referring to them).
func functionARN(name string) map[string]any {
	return map[string]any{"Fn::Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}-" + lambdafn.Dir(name)}
}

// wantEnv is, for each variable a port can read, the stack's resource it must come from.
var wantEnv = map[string]any{
	lambdafn.EnvConfigurationSet:  ref("ConfigurationSet"),
	lambdafn.EnvMaxSendRate:       ref("SesMaxSendRate"),
	lambdafn.EnvScheduleGroup:     ref("ScheduleGroup"),
	lambdafn.EnvScheduleRole:      getAtt("SchedulerRole", "Arn"),
	lambdafn.EnvScheduleDLQ:       getAtt("ScheduleDeadLetterQueue", "Arn"),
	lambdafn.EnvScheduleTarget:    functionARN(lambdafn.ScheduledSendFunction),
	lambdafn.EnvCampaignTarget:    functionARN(lambdafn.CampaignBatchFunction),
	lambdafn.EnvUnsubscribeSecret: unsubscribeSecretRef,
	lambdafn.EnvPublicURL: map[string]any{"Fn::If": []any{"HasCustomDomain",
		map[string]any{"Fn::Sub": "https://${DomainName}"},
		map[string]any{"Fn::Sub": "https://${HttpApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}"}}},
}

// wantResources is, for each IAM resource kind of lambdafn.Statement, the ARNs it must name.
func wantResources(kind string) []any {
	arn := func(s string) any { return map[string]any{"Fn::Sub": s} }
	switch kind {
	case "identity":
		return []any{arn("arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:identity/*")}
	case "configuration-set":
		var out []any
		for _, cs := range configurationSetIDs {
			out = append(out, arn("arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:configuration-set/${"+cs+"}"))
		}
		return out
	case "schedule/email", "schedule/campaign":
		return []any{arn("arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${ScheduleGroup}/" +
			strings.TrimPrefix(kind, "schedule/") + "-*")}
	case "scheduler-role":
		return []any{getAtt("SchedulerRole", "Arn")}
	case "account":
		return []any{"*"} // ses:GetAccount has no resource
	case "table":
		return []any{getAtt("Table", "Arn")}
	case "unsubscribe-secret":
		return []any{unsubscribeSecretRef}
	case "campaign-function":
		// Named from the stack, so the ARN needs no reference to the function (no cycle).
		return []any{arn("arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}-campaign-batch")}
	}
	return nil
}

// unsubscribeSecretRef is the unsubscribe secret's ARN (the stack's, or the existing one the
// UnsubscribeSecretArn parameter names): what functions get to read it at cold start, and
// what their policy lets them read. Never its value.
var unsubscribeSecretRef = map[string]any{"Fn::If": []any{"CreateUnsubscribeSecret", ref("UnsubscribeSecret"), ref("UnsubscribeSecretArn")}}

// envOf returns a function's own environment variables.
func envOf(fn map[string]any) map[string]any {
	e, _ := fn["Properties"].(map[string]any)["Environment"].(map[string]any)
	v, _ := e["Variables"].(map[string]any)
	return v
}

// TestFunctionsGetWhatTheirPortsUse: each function's environment and IAM policy are exactly
// what the ports its wiring builds read and call (lambdafn.PortsOf: the same value Main builds
// the function from, and against which every AWS call is checked at run time, so TestSamples
// fails for a call the function is not given here). Nothing more: no variable, table access or
// action a function's ports do not use.
func TestFunctionsGetWhatTheirPortsUse(t *testing.T) {
	tpl := loadTemplate(t)
	fns := resources(t, tpl, "AWS::Serverless::Function")
	global := path(t, tpl, "Globals", "Function", "Environment", "Variables").(map[string]any)
	if got := slices.Sorted(maps.Keys(global)); !slices.Equal(got, lambdafn.GlobalEnv) {
		t.Errorf("global variables %v, want lambdafn.GlobalEnv %v", got, lambdafn.GlobalEnv)
	}
	for _, n := range lambdafn.Names() {
		id := n + "Function"
		fn, ok := fns[id]
		if !ok {
			t.Errorf("no %s", id)
			continue
		}
		ports := lambdafn.PortsOf(n)
		want := map[string]any{}
		for _, k := range ports.Env() {
			want[k] = wantEnv[k]
		}
		if got := envOf(fn); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%s: environment %v, want %v", id, got, want)
		}

		var stmts []map[string]any
		for _, p := range path(t, fn, "Properties", "Policies").([]any) {
			pm, ok := p.(map[string]any)
			if !ok {
				t.Errorf("%s: policy %v is not a mapping (managed policies are too broad)", id, p)
				continue
			}
			for name, v := range pm {
				switch name {
				case "Statement":
					for _, s := range v.([]any) {
						stmts = append(stmts, s.(map[string]any))
					}
				default:
					t.Errorf("%s: unexpected policy %s", id, name)
				}
			}
		}
		// The table's actions first: exactly the ports', on the table and its indexes.
		var tableActions []any
		for _, a := range ports.Table {
			tableActions = append(tableActions, "dynamodb:"+a)
		}
		wantStmts := []map[string]any{{"Effect": "Allow", "Action": tableActions, "Resource": []any{
			getAtt("Table", "Arn"), map[string]any{"Fn::Sub": "${Table.Arn}/index/*"}}}}
		for _, s := range ports.IAM() {
			var actions, res []any
			for _, a := range s.Actions {
				actions = append(actions, a)
			}
			for _, k := range s.Resource {
				res = append(res, wantResources(k)...)
			}
			st := map[string]any{"Effect": "Allow", "Action": actions, "Resource": res}
			if slices.Contains(s.Actions, "iam:PassRole") {
				st["Condition"] = map[string]any{"StringEquals": map[string]any{"iam:PassedToService": "scheduler.amazonaws.com"}}
			}
			if len(s.LeadingKeys) > 0 {
				var keys []any
				for _, k := range s.LeadingKeys {
					keys = append(keys, k)
				}
				st["Condition"] = map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": keys}}
			}
			wantStmts = append(wantStmts, st)
		}
		if !reflect.DeepEqual(stmts, wantStmts) {
			t.Errorf("%s: statements\n got %v\nwant %v", id, stmts, wantStmts)
		}
	}
}

// TestPortsFollowWhatFunctionsDo pins the ports of the functions whose handlers call AWS
// beyond the table, so that a change to one is a decision: the send worker and the
// reconciler send; the scheduled-send target re-arms an early schedule; a campaign deletion
// puts its releasing step; a campaign step signs
// links, schedules the next step or invokes it; the reconciler restarts a stalled campaign
// with an invocation; the domain routes call SES's identities.
func TestPortsFollowWhatFunctionsDo(t *testing.T) {
	read := []string{"BatchGetItem", "GetItem", "Query"}
	with := func(w ...string) []string { return slices.Sorted(slices.Values(append(slices.Clone(read), w...))) }
	for name, want := range map[string]lambdafn.Ports{
		"SendWorker":     {Table: with("PutItem", "UpdateItem"), Send: true},
		"ScheduledSend":  {Table: with("PutItem", "UpdateItem"), EmailSchedules: lambdafn.SchedulePut},
		"CampaignBatch":  {Table: with("BatchWriteItem", "PutItem", "UpdateItem"), CampaignSchedules: lambdafn.SchedulePut, CampaignInvoke: true, Unsubscribe: lambdafn.Write},
		"Reconciler":     {Table: with("BatchWriteItem", "DeleteItem", "PutItem", "UpdateItem"), CampaignInvoke: true},
		"ResumeCampaign": {Table: with("PutItem"), CampaignSchedules: lambdafn.SchedulePut, CampaignInvoke: true, RateLimited: true},
		"Authorizer":     {Table: read},
		"CancelEmail":    {Table: with("PutItem", "UpdateItem"), EmailSchedules: lambdafn.ScheduleDelete, RateLimited: true},
		"ListEmails":     {Table: read, RateLimited: true},
		"GetEmail":       {Table: read, RateLimited: true},
		"Unsubscribe":    {Table: with("PutItem", "UpdateItem"), Unsubscribe: lambdafn.Read},
		"DeleteCampaign": {Table: with("DeleteItem"), CampaignSchedules: lambdafn.SchedulePutDel, CampaignInvoke: true, RateLimited: true},
	} {
		if got := lambdafn.PortsOf(name); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: ports %+v, want %+v", name, got, want)
		}
	}
	// Every function names its table actions; a function whose routes only read gets no
	// write, and no function gets an action nothing in Mailroom calls (Scan, DescribeTable,
	// PartiQL).
	known := with("BatchWriteItem", "ConditionCheckItem", "DeleteItem", "PutItem", "UpdateItem")
	for _, n := range lambdafn.Names() {
		p := lambdafn.PortsOf(n)
		if len(p.Table) == 0 {
			t.Errorf("%s names no table actions", n)
		}
		for _, a := range p.Table {
			if !slices.Contains(known, a) {
				t.Errorf("%s: table action %s", n, a)
			}
		}
		onlyGets := true
		for _, r := range api.Routes {
			if r.Function == n && r.Method != http.MethodGet {
				onlyGets = false
			}
		}
		// (The console's routes are its pages, not api.Routes: its keys page writes.)
		if onlyGets && n != lambdafn.ConsoleFunction && slices.Contains(lambdafn.Names()[:len(lambdafn.Names())-len(lambdafn.Background())], n) && !slices.Equal(p.Table, read) {
			t.Errorf("%s only reads, but may %v", n, p.Table)
		}
	}
}

// TestUnsubscribeLinks: the unsubscribe secret is generated and kept with the stack's data (or
// an existing one is named), reaches functions only as its ARN (never its value, in a
// parameter, a literal or an environment variable), and the
// public routes (the unsubscribe and double opt-in links) are the API's, without the authorizer
// (the signed token is the credential);
// every other route uses the API's default authorizer.
func TestUnsubscribeLinks(t *testing.T) {
	tpl := loadTemplate(t)
	secrets := resources(t, tpl, "AWS::SecretsManager::Secret")
	sec, ok := secrets["UnsubscribeSecret"]
	if !ok || len(secrets) != 1 {
		t.Fatalf("secrets %v, want UnsubscribeSecret", secrets)
	}
	props := path(t, sec, "Properties").(map[string]any)
	if _, literal := props["SecretString"]; literal {
		t.Error("UnsubscribeSecret has a SecretString; it must be generated")
	}
	if n, _ := path(t, props, "GenerateSecretString", "PasswordLength").(int); n < 32 {
		t.Errorf("generated secret length %v, want at least 32", n)
	}
	// Retained (except when its stack's first deploy rolls back: no link was sent with it).
	if sec["DeletionPolicy"] != "RetainExceptOnCreate" || sec["UpdateReplacePolicy"] != "Retain" {
		t.Error("UnsubscribeSecret must be retained: links in mailboxes outlive the stack")
	}
	if got := path(t, tpl, "Outputs", "ApiUrl", "Value"); !reflect.DeepEqual(got, wantEnv[lambdafn.EnvPublicURL]) {
		t.Errorf("ApiUrl %v, want what PUBLIC_URL is (%v)", got, wantEnv[lambdafn.EnvPublicURL])
	}
	// The keys never pass through a parameter: only the ARN of an existing secret may, and
	// then the stack makes none. The secret in use is an output, to give a later stack.
	params, _ := tpl["Parameters"].(map[string]any)
	for name := range params {
		if strings.Contains(strings.ToLower(name), "secret") && name != "UnsubscribeSecretArn" {
			t.Errorf("parameter %s: the secret is a resource, not a parameter", name)
		}
	}
	if p := path(t, params, "UnsubscribeSecretArn").(map[string]any); p["Default"] != "" ||
		!strings.Contains(fmt.Sprint(p["AllowedPattern"]), "secretsmanager") {
		t.Errorf("UnsubscribeSecretArn parameter %v: want an optional secret ARN", p)
	}
	if sec["Condition"] != "CreateUnsubscribeSecret" ||
		!reflect.DeepEqual(path(t, tpl, "Conditions", "CreateUnsubscribeSecret"), map[string]any{"Fn::Equals": []any{ref("UnsubscribeSecretArn"), ""}}) {
		t.Errorf("UnsubscribeSecret must be made only when UnsubscribeSecretArn is empty")
	}
	if got := path(t, tpl, "Outputs", "UnsubscribeSecretArn", "Value"); !reflect.DeepEqual(got, unsubscribeSecretRef) {
		t.Errorf("UnsubscribeSecretArn output %v, want %v", got, unsubscribeSecretRef)
	}
	var public []string
	for _, r := range api.Routes {
		if r.Public {
			public = append(public, r.Pattern())
		}
	}
	slices.Sort(public)
	if want := []string{"GET /subscribe/{token}", "GET /unsubscribe/{token}", "POST /subscribe/{token}", "POST /unsubscribe/{token}"}; !slices.Equal(public, want) {
		t.Errorf("public routes %v, want %v", public, want)
	}
	// The console's routes are public at the gateway too: it signs its users in itself.
	for _, r := range api.ConsoleRoutes {
		if !r.Public {
			t.Errorf("console route %s is not public", r.Pattern())
		}
		public = append(public, r.Pattern())
	}
	for id, fn := range resources(t, tpl, "AWS::Serverless::Function") {
		evs, _ := path(t, fn, "Properties").(map[string]any)["Events"].(map[string]any)
		for name, e := range evs {
			p, ok := e.(map[string]any)["Properties"].(map[string]any)
			if !ok || e.(map[string]any)["Type"] != "HttpApi" {
				continue
			}
			isPublic := slices.Contains(public, fmt.Sprint(p["Method"], " ", p["Path"]))
			auth, has := p["Auth"]
			switch {
			case isPublic && !reflect.DeepEqual(auth, map[string]any{"Authorizer": "NONE"}):
				t.Errorf("%s.%s is public: Auth %v, want Authorizer NONE", id, name, auth)
			case !isPublic && has:
				t.Errorf("%s.%s: Auth %v, want the API's default authorizer", id, name, auth)
			}
		}
	}
}

// TestFunctionDirs: every function has functions/<kebab>/main.go calling lambdafn.Main with its
// name, every directory under functions/ is a function, and each has a sample event.
func TestFunctionDirs(t *testing.T) {
	want := map[string]string{}
	for _, n := range lambdafn.Names() {
		want[lambdafn.Dir(n)] = n
	}
	entries, err := os.ReadDir(filepath.Join(root, "functions"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if !e.IsDir() {
			t.Errorf("functions/%s: only directories belong in functions/", e.Name())
			continue
		}
		seen[e.Name()] = true
		name, ok := want[e.Name()]
		if !ok {
			t.Errorf("functions/%s is not a function of lambdafn.Names()", e.Name())
			continue
		}
		if got := mainCall(t, filepath.Join(root, "functions", e.Name(), "main.go")); got != name {
			t.Errorf("functions/%s/main.go calls lambdafn.Main(%q), want %q", e.Name(), got, name)
		}
		if _, err := os.Stat(filepath.Join(root, "events", e.Name()+".json")); err != nil {
			t.Errorf("functions/%s has no sample event: %v", e.Name(), err)
		}
	}
	for dir, name := range want {
		if !seen[dir] {
			t.Errorf("function %s has no functions/%s", name, dir)
		}
	}
}

// mainCall returns the string argument of the lambdafn.Main call in a main.go ("" if none).
func mainCall(t *testing.T, file string) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name.Name != "main" {
		t.Errorf("%s: package %s, want main", file, f.Name.Name)
	}
	name := ""
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Main" || len(call.Args) < 1 {
			return true
		}
		if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "lambdafn" {
			return true
		}
		if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			name, _ = strconv.Unquote(lit.Value)
		}
		return false
	})
	return name
}

// TestMainsAreGenerated: every functions/<dir>/main.go is what `make template` writes: Main with
// exactly the plugs the function's ports call for (pkg/lambdafn's tests build every function
// with those plugs, and Build refuses a missing or superfluous one).
func TestMainsAreGenerated(t *testing.T) {
	for _, f := range deploy.Functions() {
		got, err := os.ReadFile(filepath.Join(root, "functions", f.Dir, "main.go"))
		if err != nil {
			t.Error(err)
			continue
		}
		if !bytes.Equal(got, deploy.MainSource(f)) {
			t.Errorf("functions/%s/main.go is not what the function's ports call for: run `make template`", f.Dir)
		}
	}
}

// TestMakefileListIsGenerated: the Makefile's list of functions (pkg/deploy/functions.mk) is
// what `make template` writes from lambdafn.Names and lambdafn.Dir, the one list and the one
// kebab-case rule.
func TestMakefileListIsGenerated(t *testing.T) {
	got, err := os.ReadFile("functions.mk")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, deploy.FunctionsMakefile()) {
		t.Error("pkg/deploy/functions.mk is not what the code lists: run `make template`")
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "include pkg/deploy/functions.mk") || strings.Contains(string(mk), "SendEmail") {
		t.Error("the Makefile must take its functions from pkg/deploy/functions.mk and name none itself")
	}
}

// TestMakefileBuildTargets: every function is built by `sam build` through BuildMethod
// makefile, from the repository root, by a build-<LogicalId> target that writes
// $(ARTIFACTS_DIR)/bootstrap from its functions/ directory for linux/arm64.
func TestMakefileBuildTargets(t *testing.T) {
	tpl := loadTemplate(t)
	fns := resources(t, tpl, "AWS::Serverless::Function")
	for id, fn := range fns {
		if m := path(t, fn, "Metadata", "BuildMethod"); m != "makefile" {
			t.Errorf("%s: BuildMethod %v, want makefile", id, m)
		}
		if c := path(t, fn, "Properties", "CodeUri"); c != "." {
			t.Errorf("%s: CodeUri %v, want .", id, c)
		}
	}
	if _, err := exec.LookPath("make"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("make is required under CI")
		}
		t.Skip("make not installed")
	}
	artifacts := t.TempDir()
	for _, n := range lambdafn.Names() {
		target := "build-" + n + "Function"
		cmd := exec.Command("make", "--no-print-directory", "-n", "-C", root, target, "ARTIFACTS_DIR="+artifacts)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("make -n %s: %v\n%s", target, err, out)
			continue
		}
		recipe := string(out)
		for _, want := range []string{
			"CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64", "-trimpath", "-tags lambda.norpc",
			`-ldflags="-s -w"`, "-o " + artifacts + "/bootstrap", "./functions/" + lambdafn.Dir(n),
		} {
			if !strings.Contains(recipe, want) {
				t.Errorf("make %s does not contain %q:\n%s", target, want, recipe)
			}
		}
	}
}

// TestTableMatchesStore: the table in template.yaml is exactly dynamo.TableInput (keys,
// indexes, billing, stream) plus what CreateTable cannot say (TTL, point-in-time recovery).
func TestTableMatchesStore(t *testing.T) {
	tpl := loadTemplate(t)
	tables := resources(t, tpl, "AWS::DynamoDB::Table")
	if len(tables) != 1 {
		t.Fatalf("want one table, got %d", len(tables))
	}
	table, ok := tables["Table"]
	if !ok {
		t.Fatal("the table's logical id must be Table (functions reference it)")
	}
	props := path(t, table, "Properties").(map[string]any)
	in := dynamo.TableInput("ignored")

	var wantAttrs []any
	for _, a := range in.AttributeDefinitions {
		wantAttrs = append(wantAttrs, map[string]any{"AttributeName": aws.ToString(a.AttributeName), "AttributeType": string(a.AttributeType)})
	}
	wantKeys := keySchema(in.KeySchema)
	var wantGSIs []any
	for _, g := range in.GlobalSecondaryIndexes {
		wantGSIs = append(wantGSIs, map[string]any{
			"IndexName":  aws.ToString(g.IndexName),
			"KeySchema":  keySchema(g.KeySchema),
			"Projection": map[string]any{"ProjectionType": string(g.Projection.ProjectionType)},
		})
	}
	checks := []struct {
		field     string
		got, want any
	}{
		{"AttributeDefinitions", props["AttributeDefinitions"], wantAttrs},
		{"KeySchema", props["KeySchema"], wantKeys},
		{"GlobalSecondaryIndexes", props["GlobalSecondaryIndexes"], wantGSIs},
		{"BillingMode", props["BillingMode"], string(in.BillingMode)},
		{"StreamSpecification", props["StreamSpecification"], map[string]any{"StreamViewType": string(in.StreamSpecification.StreamViewType)}},
		{"TimeToLiveSpecification", props["TimeToLiveSpecification"], map[string]any{"AttributeName": dynamo.TTLAttribute, "Enabled": true}},
		{"PointInTimeRecoverySpecification", props["PointInTimeRecoverySpecification"], map[string]any{"PointInTimeRecoveryEnabled": true}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("Table %s:\n got %#v\nwant %#v", c.field, c.got, c.want)
		}
	}
	if _, named := props["TableName"]; named {
		t.Error("Table has a TableName: let CloudFormation name it (functions get it from TABLE_NAME)")
	}
}

// keySchema is a key schema as the template spells it.
func keySchema(ks []types.KeySchemaElement) []any {
	var out []any
	for _, k := range ks {
		out = append(out, map[string]any{"AttributeName": aws.ToString(k.AttributeName), "KeyType": string(k.KeyType)})
	}
	return out
}

// TestSendWorkerStream: the send worker reads the table's stream with partial batch failures
// and a dead-letter queue, and its filter passes the sample's QUEUED email inserts but not
// other items or states.
func TestSendWorkerStream(t *testing.T) {
	tpl := loadTemplate(t)
	stream := streamEvent(t, tpl, "SendWorkerFunction")
	for k, want := range map[string]any{
		"Stream":                     map[string]any{"Fn::GetAtt": []any{"Table", "StreamArn"}},
		"StartingPosition":           "LATEST",
		"BisectBatchOnFunctionError": true,
		"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
	} {
		if !reflect.DeepEqual(stream[k], want) {
			t.Errorf("stream %s = %#v, want %#v", k, stream[k], want)
		}
	}
	for _, k := range []string{"BatchSize", "MaximumRetryAttempts"} {
		if _, ok := stream[k].(int); !ok {
			t.Errorf("stream %s = %#v, want a number", k, stream[k])
		}
	}
	dest := path(t, stream, "DestinationConfig", "OnFailure").(map[string]any)
	dlq, ok := dest["Destination"].(map[string]any)["Fn::GetAtt"].([]any)
	if !ok || dest["Type"] != "SQS" || len(dlq) != 2 || dlq[1] != "Arn" {
		t.Fatalf("OnFailure = %v, want an SQS queue's Arn", dest)
	}
	if _, ok := resources(t, tpl, "AWS::SQS::Queue")[dlq[0].(string)]; !ok {
		t.Errorf("OnFailure destination %v is not a queue of the template", dlq[0])
	}

	passes := streamFilter(t, stream)

	b, err := os.ReadFile(filepath.Join(root, "events", "send-worker.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sample struct{ Records []map[string]any }
	if err := json.Unmarshal(b, &sample); err != nil {
		t.Fatal(err)
	}
	if len(sample.Records) == 0 {
		t.Fatal("events/send-worker.json has no records")
	}
	for i, rec := range sample.Records {
		if !passes(rec) {
			t.Errorf("the filter drops sample record %d", i)
		}
		// The same record in another state, or another item of the email, is filtered out.
		for name, change := range map[string]func(m map[string]any){
			"SENDING": func(m map[string]any) { setPath(m, "SENDING", "dynamodb", "NewImage", "Status", "S") },
			"event":   func(m map[string]any) { setPath(m, "EVENT#01", "dynamodb", "Keys", "SK", "S") },
			"REMOVE":  func(m map[string]any) { m["eventName"] = "REMOVE" },
		} {
			c := clone(t, rec)
			change(c)
			if passes(c) {
				t.Errorf("the filter passes sample record %d changed to %s", i, name)
			}
		}
		// What passes the filter is what the handler delivers.
		var typed events.DynamoDBEventRecord
		raw, _ := json.Marshal(rec)
		if err := json.Unmarshal(raw, &typed); err != nil {
			t.Fatal(err)
		}
		if _, ok := lambdafn.EmailID(typed); !ok {
			t.Errorf("sample record %d passes the filter but is not an email to the handler", i)
		}
	}
}

// streamEvent is the properties of a function's DynamoDB stream event.
func streamEvent(t *testing.T, tpl map[string]any, function string) map[string]any {
	t.Helper()
	fn := resources(t, tpl, "AWS::Serverless::Function")[function]
	if fn == nil {
		t.Fatalf("no %s", function)
	}
	for _, e := range path(t, fn, "Properties", "Events").(map[string]any) {
		if ev := e.(map[string]any); ev["Type"] == "DynamoDB" {
			return path(t, ev, "Properties").(map[string]any)
		}
	}
	t.Fatalf("%s has no DynamoDB event", function)
	return nil
}

// streamFilter reports whether a stream event's filters pass a record.
func streamFilter(t *testing.T, stream map[string]any) func(rec map[string]any) bool {
	t.Helper()
	var patterns []map[string]any
	for _, f := range path(t, stream, "FilterCriteria", "Filters").([]any) {
		var p map[string]any
		if err := json.Unmarshal([]byte(path(t, f, "Pattern").(string)), &p); err != nil {
			t.Fatalf("filter pattern: %v", err)
		}
		patterns = append(patterns, p)
	}
	return func(rec map[string]any) bool {
		for _, p := range patterns {
			if matches(p, rec) {
				return true
			}
		}
		return false
	}
}

// TestWebhookEventsStream: the webhook function's filter passes the email items' writes and
// every write to a contact, domain or campaign item (deletes too), and nothing else; what
// passes is what the handler reads.
func TestWebhookEventsStream(t *testing.T) {
	stream := streamEvent(t, loadTemplate(t), "WebhookEventsFunction")
	// The counts it applies need each invocation's shard id (a tumbling window gives it), the
	// shard's order (one batch at a time per shard), every retry until the records expire, and
	// batches no larger than what the local stream reader hands ApplyCounts (the cost bench's
	// figure depends on it).
	for k, want := range map[string]any{
		"ParallelizationFactor": 1, "MaximumRetryAttempts": -1, "BatchSize": dynamo.StreamBatch,
	} {
		if stream[k] != want {
			t.Errorf("stream %s = %#v, want %#v", k, stream[k], want)
		}
	}
	if w, _ := stream["TumblingWindowInSeconds"].(int); w < 1 {
		t.Errorf("stream TumblingWindowInSeconds = %#v, want a window (the shard id comes with it)", stream["TumblingWindowInSeconds"])
	}
	if stream["BisectBatchOnFunctionError"] != nil {
		t.Error("stream BisectBatchOnFunctionError set: a batch fails whole, on DynamoDB errors alone")
	}
	passes := streamFilter(t, stream)
	rec := func(name, pk, sk string) map[string]any {
		return map[string]any{"eventName": name, "dynamodb": map[string]any{
			"Keys": map[string]any{"PK": map[string]any{"S": pk}, "SK": map[string]any{"S": sk}}}}
	}
	pass := []map[string]any{
		rec("INSERT", "EMAIL#e1", "EMAIL"), rec("MODIFY", "EMAIL#e1", "EMAIL"),
		rec("INSERT", "TEAM#1#BOOK#b1", "CONTACT#a@example.com"), rec("REMOVE", "TEAM#1#BOOK#b1", "CONTACT#a@example.com"),
		rec("MODIFY", "TEAM#1", "DOMAIN#00000000000000000001"), rec("REMOVE", "TEAM#1", "DOMAIN#00000000000000000001"),
		rec("MODIFY", "TEAM#1", "CAMPAIGN#c1"),
	}
	for _, r := range pass {
		if !passes(r) {
			t.Errorf("the filter drops %v", r)
		}
	}
	for _, r := range pass[2:] {
		k := r["dynamodb"].(map[string]any)["Keys"].(map[string]any)
		keys := map[string]types.AttributeValue{}
		for n, v := range k {
			keys[n] = &types.AttributeValueMemberS{Value: v.(map[string]any)["S"].(string)}
		}
		item := map[string]types.AttributeValue{"TeamID": &types.AttributeValueMemberN{Value: "1"}}
		if _, ok, err := dynamo.DecodeChange(keys, item, item); !ok || err != nil {
			t.Errorf("%v passes the filter but is no change to the handler (%v)", k, err)
		}
	}
	for _, r := range []map[string]any{
		rec("REMOVE", "EMAIL#e1", "EMAIL"), rec("INSERT", "EMAIL#e1", "EVENT#01"), rec("INSERT", "EMAIL#e1", "CONTENT#ab#00000"),
		rec("MODIFY", "TEAM#1#CAMPAIGN#c1#03", "COUNTERS"), rec("INSERT", "DOMAINNAME#example.com", "DOMAINNAME"),
		rec("MODIFY", "TEAM#1", "TEAM"), rec("MODIFY", "TEAM#1#BOOK#b1#CONTACTID#c1", "CONTACTID"),
	} {
		if passes(r) {
			t.Errorf("the filter passes %v", r)
		}
	}
}

// matches is the subset of Lambda event filtering the template uses: nested objects, and
// arrays of allowed scalar values or {"prefix": ...} at the leaves.
func matches(pattern, event map[string]any) bool {
	for k, want := range pattern {
		got, ok := event[k]
		switch w := want.(type) {
		case map[string]any:
			g, isMap := got.(map[string]any)
			if !ok || !isMap || !matches(w, g) {
				return false
			}
		case []any:
			if !ok || !slices.ContainsFunc(w, func(v any) bool {
				if m, isMap := v.(map[string]any); isMap {
					prefix, isPrefix := m["prefix"].(string)
					s, isString := got.(string)
					return isPrefix && isString && strings.HasPrefix(s, prefix)
				}
				return reflect.DeepEqual(v, got)
			}) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func setPath(m map[string]any, v any, keys ...string) {
	for _, k := range keys[:len(keys)-1] {
		m = m[k].(map[string]any)
	}
	m[keys[len(keys)-1]] = v
}

func clone(t *testing.T, m map[string]any) map[string]any {
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDeadLetterQueuesAlarmed: every queue (they are all dead-letter queues) has an alarm on
// its visible messages, and an output.
func TestDeadLetterQueuesAlarmed(t *testing.T) {
	tpl := loadTemplate(t)
	queues := resources(t, tpl, "AWS::SQS::Queue")
	if len(queues) != 4 {
		t.Errorf("%d queues, want the send, schedule, SES events and webhook events dead-letter queues", len(queues))
	}
	out := path(t, tpl, "Outputs").(map[string]any)
	for id := range queues {
		alarmed := false
		for _, a := range resources(t, tpl, "AWS::CloudWatch::Alarm") {
			p := path(t, a, "Properties").(map[string]any)
			dims, _ := p["Dimensions"].([]any)
			for _, d := range dims {
				if reflect.DeepEqual(d.(map[string]any)["Value"], getAtt(id, "QueueName")) {
					alarmed = p["MetricName"] == "ApproximateNumberOfMessagesVisible" && p["Threshold"] == 0
				}
			}
		}
		if !alarmed {
			t.Errorf("no alarm watches %s", id)
		}
		if o, ok := out[id+"Url"].(map[string]any); !ok || !reflect.DeepEqual(o["Value"], ref(id)) {
			t.Errorf("no output %sUrl = !Ref %s", id, id)
		}
	}
}

func TestOutputs(t *testing.T) {
	tpl := loadTemplate(t)
	out := path(t, tpl, "Outputs").(map[string]any)
	for _, k := range []string{"ApiUrl", "TableName", "ConfigurationSetName", "ScheduleGroupName"} {
		if _, ok := out[k]; !ok {
			t.Errorf("output %s is missing", k)
		}
	}
}

// TestCFNLint runs cfn-lint: any finding fails. Without cfn-lint the test is skipped, except
// under CI, which must never pass by skipping.
func TestCFNLint(t *testing.T) {
	bin, err := exec.LookPath("cfn-lint")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("cfn-lint is required under CI")
		}
		t.Skip("cfn-lint not installed")
	}
	cmd := exec.Command(bin, "template.yaml")
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err != nil || out.Len() > 0 {
		t.Errorf("cfn-lint template.yaml: %v\n%s", err, out.String())
	}
}

// TestREADMEListsTheFunctions: the README's list of functions, with every route of the route
// table and the count, is what `make template` writes from the code.
func TestREADMEListsTheFunctions(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := deploy.UpdateREADME(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Error("README.md's list of functions is not what the code says: run `make template`")
	}
	if !strings.Contains(string(b), fmt.Sprintf("%d Lambda functions", len(lambdafn.Names()))) {
		t.Errorf("README does not say %d Lambda functions", len(lambdafn.Names()))
	}
	for _, r := range api.Routes {
		if !strings.Contains(string(b), "`"+r.Pattern()+"`") {
			t.Errorf("README does not list %s", r.Pattern())
		}
	}
}

// alarmsOn returns the alarms whose metric is namespace/metric, with their dimensions' values
// (by dimension name), and checks that every alarm of the template notifies the stack's topic.
func alarmsOn(t *testing.T, tpl map[string]any, namespace, metric string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for id, a := range resources(t, tpl, "AWS::CloudWatch::Alarm") {
		p := path(t, a, "Properties").(map[string]any)
		topic := []any{ref("AlarmTopic")}
		if !reflect.DeepEqual(p["AlarmActions"], topic) || !reflect.DeepEqual(p["OKActions"], topic) {
			t.Errorf("%s does not notify AlarmTopic: %v", id, p["AlarmActions"])
		}
		if p["Namespace"] != namespace || p["MetricName"] != metric {
			continue
		}
		dims := map[string]any{}
		ds, _ := p["Dimensions"].([]any)
		for _, d := range ds {
			dims[d.(map[string]any)["Name"].(string)] = d.(map[string]any)["Value"]
		}
		out = append(out, map[string]any{"id": id, "dims": dims, "props": p})
	}
	return out
}

// TestOperable: what an operator of the stack gets. Alarms to an SNS topic the stack owns (an
// optional e-mail subscription): every function's errors and throttles, the send worker's
// iterator age, API 5xx, SES reputation at the levels SES reviews an account; a log group per
// function with the retention parameter, and the LogLevel parameter as Lambda's log level; the
// table protected from deletion with a stream of new images only; an optional custom domain
// that the API URL follows; a dashboard.
func TestOperable(t *testing.T) {
	tpl := loadTemplate(t)
	topics := resources(t, tpl, "AWS::SNS::Topic")
	if _, ok := topics["AlarmTopic"]; !ok || len(topics) != 1 {
		t.Fatalf("topics %v, want AlarmTopic", topics)
	}
	// CloudWatch cannot publish to a topic under the AWS-managed SNS key (its policy grants
	// CloudWatch nothing): the alarms would fire and notify no one.
	if k := path(t, topics["AlarmTopic"], "Properties").(map[string]any)["KmsMasterKeyId"]; k != nil {
		t.Errorf("AlarmTopic is encrypted with %v: alarms could not publish to it", k)
	}
	// Levels above INFO would drop the metric lines (INFO) that feed the dashboard.
	if lv := path(t, tpl, "Parameters", "LogLevel", "AllowedValues"); !reflect.DeepEqual(lv, []any{"DEBUG", "INFO"}) {
		t.Errorf("LogLevel allows %v, want DEBUG and INFO only", lv)
	}
	sub := resources(t, tpl, "AWS::SNS::Subscription")["AlarmEmailSubscription"]
	if sub == nil || sub["Condition"] != "HasAlarmEmail" || path(t, sub, "Properties", "Protocol") != "email" ||
		!reflect.DeepEqual(path(t, sub, "Properties", "Endpoint"), ref("AlarmEmail")) {
		t.Errorf("AlarmEmailSubscription %v", sub)
	}
	for _, metric := range []string{"Errors", "Throttles"} {
		watched := map[string]bool{}
		for _, a := range alarmsOn(t, tpl, "AWS/Lambda", metric) {
			if fn, ok := a["dims"].(map[string]any)["FunctionName"].(map[string]any); ok {
				watched[fn["Ref"].(string)] = true
			}
			p := a["props"].(map[string]any)
			if p["Threshold"] != 0 || p["ComparisonOperator"] != "GreaterThanThreshold" {
				t.Errorf("%s: threshold %v %v", a["id"], p["ComparisonOperator"], p["Threshold"])
			}
		}
		for _, id := range functionIDs() {
			if !watched[id] {
				t.Errorf("no %s alarm on %s", metric, id)
			}
		}
	}
	// Each reader of the table's stream: sends and counts must not fall behind.
	lagging := map[string]bool{}
	for _, a := range alarmsOn(t, tpl, "AWS/Lambda", "IteratorAge") {
		if fn, ok := a["dims"].(map[string]any)["FunctionName"].(map[string]any); ok {
			lagging[fn["Ref"].(string)] = true
		}
	}
	if !reflect.DeepEqual(lagging, map[string]bool{"SendWorkerFunction": true, "WebhookEventsFunction": true}) {
		t.Errorf("iterator age alarms on %v, want one on each stream reader (SendWorkerFunction, WebhookEventsFunction)", lagging)
	}
	if a := alarmsOn(t, tpl, "AWS/ApiGateway", "5xx"); len(a) != 1 ||
		!reflect.DeepEqual(a[0]["dims"], map[string]any{"ApiId": ref("HttpApi")}) {
		t.Errorf("API 5xx alarms %v, want one on HttpApi", a)
	}
	for metric, level := range map[string]float64{"Reputation.BounceRate": 0.05, "Reputation.ComplaintRate": 0.001} {
		a := alarmsOn(t, tpl, "AWS/SES", metric)
		if len(a) != 1 || a[0]["props"].(map[string]any)["Threshold"] != level ||
			a[0]["props"].(map[string]any)["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
			t.Errorf("%s alarms %v, want one at ≥ %v", metric, a, level)
		}
	}

	logs := resources(t, tpl, "AWS::Logs::LogGroup")
	for id, fn := range resources(t, tpl, "AWS::Serverless::Function") {
		group, _ := path(t, fn, "Properties", "LoggingConfig", "LogGroup").(map[string]any)["Ref"].(string)
		lg, ok := logs[group]
		if !ok {
			t.Errorf("%s: log group %q is not the stack's", id, group)
			continue
		}
		if !reflect.DeepEqual(path(t, lg, "Properties", "RetentionInDays"), ref("LogRetentionDays")) {
			t.Errorf("%s: retention %v", group, path(t, lg, "Properties", "RetentionInDays"))
		}
	}
	if n, _ := path(t, tpl, "Parameters", "LogRetentionDays", "Default").(int); n != 30 {
		t.Errorf("LogRetentionDays defaults to %v, want 30", n)
	}
	lc := path(t, tpl, "Globals", "Function", "LoggingConfig").(map[string]any)
	if !reflect.DeepEqual(lc["ApplicationLogLevel"], ref("LogLevel")) || lc["LogFormat"] != "JSON" {
		t.Errorf("Globals LoggingConfig %v, want JSON at the LogLevel parameter", lc)
	}

	table := path(t, tpl, "Resources", "Table", "Properties").(map[string]any)
	if table["DeletionProtectionEnabled"] != true {
		t.Error("the table is not protected from deletion")
	}
	if v := path(t, table, "StreamSpecification", "StreamViewType"); v != "NEW_AND_OLD_IMAGES" {
		t.Errorf("stream view %v, want NEW_AND_OLD_IMAGES (webhook events of deletes read the old image)", v)
	}

	domain := resources(t, tpl, "AWS::ApiGatewayV2::DomainName")["ApiDomain"]
	mapping := resources(t, tpl, "AWS::ApiGatewayV2::ApiMapping")["ApiDomainMapping"]
	if domain == nil || mapping == nil || domain["Condition"] != "HasCustomDomain" || mapping["Condition"] != "HasCustomDomain" {
		t.Errorf("custom domain resources %v %v, want both under HasCustomDomain", domain, mapping)
	}
	dash, ok := resources(t, tpl, "AWS::CloudWatch::Dashboard")["Dashboard"]
	if !ok {
		t.Fatal("no dashboard")
	}
	body, _ := path(t, dash, "Properties", "DashboardBody").(map[string]any)["Fn::Sub"].(string)
	var parsed map[string]any
	if err := json.Unmarshal([]byte(regexp.MustCompile(`\$\{[^}]+\}`).ReplaceAllString(body, "x")), &parsed); err != nil {
		t.Fatalf("dashboard body is not JSON: %v", err)
	}
	for _, m := range metric.Emails {
		if !strings.Contains(body, `["Mailroom", "`+m+`", "Stack", "${AWS::StackName}"]`) {
			t.Errorf("dashboard does not plot %s", m)
		}
	}
	for _, id := range functionIDs() {
		if !strings.Contains(body, `"Errors", "FunctionName", "${`+id+`}"`) || !strings.Contains(body, `"Throttles", "FunctionName", "${`+id+`}"`) {
			t.Errorf("dashboard does not plot %s's errors and throttles", id)
		}
	}
}

// TestFunctionsLinkOnlyWhatTheyUse: no function links the local server's parts (bbolt, the
// outbox, the in-process scheduler), and a function links the SES client, the scheduler
// client, the MIME builder or the natural-language dates only when its ports use them.
func TestFunctionsLinkOnlyWhatTheyUse(t *testing.T) {
	cmd := exec.Command("go", "list", "-tags", "lambda.norpc", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./functions/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		deps[strings.TrimPrefix(f[0], "github.com/mailroom/mailroom/functions/")] = f[1:]
	}
	never := []string{"go.etcd.io/bbolt", "github.com/mailroom/mailroom/pkg/mail/outbox",
		"github.com/mailroom/mailroom/pkg/schedule/local", "github.com/mailroom/mailroom/pkg/app",
		"github.com/aws/aws-sdk-go-v2/config"}
	for _, f := range deploy.Functions() {
		d, ok := deps[f.Dir]
		if !ok {
			t.Errorf("go list has no functions/%s", f.Dir)
			continue
		}
		p := f.Ports
		only := map[string]bool{
			"github.com/aws/aws-sdk-go-v2/service/sesv2":           p.Send || len(p.Identities) > 0,
			"github.com/aws/aws-sdk-go-v2/service/scheduler":       len(p.EmailSchedules) > 0 || len(p.CampaignSchedules) > 0 || p.CampaignInvoke,
			"github.com/aws/aws-sdk-go-v2/service/lambda":          p.CampaignInvoke,
			"github.com/wneessen/go-mail":                          p.Send,
			"github.com/mailroom/mailroom/pkg/naturaldate":         p.Dates,
			"github.com/mailroom/mailroom/pkg/deliver":             p.Send,
			"github.com/mailroom/mailroom/pkg/identity/ses":        len(p.Identities) > 0 || p.Send,
			"github.com/mailroom/mailroom/pkg/lambdafn/withses":    p.Send || len(p.Identities) > 0,
			"github.com/mailroom/mailroom/pkg/lambdafn/withmailer": p.Send,
			"github.com/mailroom/mailroom/pkg/lambdafn/withlambda": p.CampaignInvoke,
		}
		for _, pkg := range d {
			if slices.Contains(never, pkg) {
				t.Errorf("%s links %s", f.Name, pkg)
			}
			if allowed, listed := only[pkg]; listed && !allowed {
				t.Errorf("%s links %s, which its ports do not use", f.Name, pkg)
			}
		}
	}
	if d := deps["get-template"]; len(d) == 0 || slices.ContainsFunc(d, func(p string) bool {
		return strings.Contains(p, "bbolt") || strings.Contains(p, "outbox") || strings.Contains(p, "sesv2") ||
			strings.Contains(p, "naturaldate")
	}) {
		t.Error("get-template links bbolt, the outbox, SES v2 or the date rules")
	}
}

// TestEmailWritersFollowTheStreamFunction: on an upgrade, every function that writes email
// items is updated only after the stream function, so that no item marked for counting from
// the stream reaches the former code, which would pass over it uncounted.
func TestEmailWritersFollowTheStreamFunction(t *testing.T) {
	notWriters := map[string]bool{"WebhookEventsFunction": true, "AuthorizerFunction": true,
		"WebhookRetriesFunction": true, "DomainCheckFunction": true}
	for id, fn := range resources(t, loadTemplate(t), "AWS::Serverless::Function") {
		if notWriters[id] {
			continue
		}
		if dep := fn["DependsOn"]; dep != "WebhookEventsFunction" {
			t.Errorf("%s DependsOn %v, want WebhookEventsFunction", id, dep)
		}
	}
}

// TestParametersAdmitOnlyWhatTheFunctionsAccept: every value a stack parameter's constraints
// admit, where the parameter is a function's environment variable, is one the functions'
// configuration accepts: CloudFormation takes a Number of any size with a fraction ("90.5"),
// and a value the code then refuses fails every function at its cold start, after a deploy
// that went through.
func TestParametersAdmitOnlyWhatTheFunctionsAccept(t *testing.T) {
	tpl := loadTemplate(t)
	params, _ := tpl["Parameters"].(map[string]any)
	byVar := map[string]string{} // environment variable → the parameter it is
	collect := func(vars any) {
		m, _ := vars.(map[string]any)
		for name, v := range m {
			intrinsic, _ := v.(map[string]any)
			if ref, ok := intrinsic["Ref"].(string); ok && params[ref] != nil {
				byVar[name] = ref
			}
		}
	}
	collect(path(t, tpl, "Globals", "Function", "Environment", "Variables"))
	for _, r := range tpl["Resources"].(map[string]any) {
		res, _ := r.(map[string]any)
		if res["Type"] != "AWS::Serverless::Function" {
			continue
		}
		props, _ := res["Properties"].(map[string]any)
		if env, ok := props["Environment"].(map[string]any); ok {
			collect(env["Variables"])
		}
	}
	if byVar["RETENTION_DAYS"] == "" || byVar["API_RATE_LIMIT"] == "" {
		t.Fatalf("no RETENTION_DAYS or API_RATE_LIMIT parameter among %v", byVar)
	}
	candidates := []string{"0", "1", "7", "10", "90", "007", "10.5", "90.5", "-1", "1e3", "36500", "36501", "40000", "99999999999", "", " 5", "abc"}
	for name, param := range byVar {
		p := params[param].(map[string]any)
		vals := append([]string{fmt.Sprint(p["Default"])}, candidates...)
		for _, v := range vals {
			if !admits(p, v) {
				continue
			}
			if _, err := config.FromEnv(func(k string) string {
				if k == name {
					return v
				}
				return ""
			}); err != nil && strings.Contains(err.Error(), name) {
				t.Errorf("parameter %s admits %q, which %s refuses: %v", param, v, name, err)
			}
		}
	}
	// And the two that were Numbers refuse what their variables refuse.
	for param, v := range map[string]string{"RetentionDays": "90.5", "ApiRateLimit": "10.5"} {
		if admits(params[param].(map[string]any), v) {
			t.Errorf("parameter %s admits %q", param, v)
		}
	}
}

// admits reports whether CloudFormation takes v for a parameter of these constraints.
func admits(p map[string]any, v string) bool {
	switch p["Type"] {
	case "Number":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return false
		}
		if lo, ok := p["MinValue"].(int); ok && f < float64(lo) {
			return false
		}
		if hi, ok := p["MaxValue"].(int); ok && f > float64(hi) {
			return false
		}
	case "String":
		if pat, ok := p["AllowedPattern"].(string); ok && !regexp.MustCompile("^(?:"+pat+")$").MatchString(v) {
			return false
		}
	}
	if allowed, ok := p["AllowedValues"].([]any); ok {
		return slices.ContainsFunc(allowed, func(a any) bool { return fmt.Sprint(a) == v })
	}
	return true
}
