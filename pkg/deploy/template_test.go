package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"gopkg.in/yaml.v3"

	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/lambdafn"
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
	for _, r := range api.Routes {
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

// sendingFunctions send through SES: the send worker and the reconciler (which delivers what
// the worker left).
var sendingFunctions = []string{"SendWorkerFunction", "ReconcilerFunction"}

// schedulingFunctions create, change or delete scheduled emails' schedules, with the actions
// each needs (pkg/email: Send and Reschedule put, Reschedule and Cancel delete).
var schedulingFunctions = map[string][]string{
	"SendEmailFunction":   {"scheduler:CreateSchedule", "scheduler:UpdateSchedule"},
	"SendBatchFunction":   {"scheduler:CreateSchedule", "scheduler:UpdateSchedule"},
	"UpdateEmailFunction": {"scheduler:CreateSchedule", "scheduler:DeleteSchedule", "scheduler:UpdateSchedule"},
	"CancelEmailFunction": {"scheduler:DeleteSchedule"},
}

// campaignSchedulingFunctions put or delete campaigns' schedules (pkg/campaign: create with
// sendNow or scheduledAt, schedule, resume, each batch step and the periodic recovery of
// stalled campaigns put; delete deletes).
var campaignSchedulingFunctions = map[string][]string{
	"CreateCampaignFunction":   {"scheduler:CreateSchedule", "scheduler:UpdateSchedule"},
	"ScheduleCampaignFunction": {"scheduler:CreateSchedule", "scheduler:UpdateSchedule"},
	"ResumeCampaignFunction":   {"scheduler:CreateSchedule", "scheduler:UpdateSchedule"},
	"CampaignBatchFunction":    {"scheduler:CreateSchedule", "scheduler:UpdateSchedule"},
	"ReconcilerFunction":       {"scheduler:CreateSchedule", "scheduler:UpdateSchedule"},
	"DeleteCampaignFunction":   {"scheduler:DeleteSchedule"},
}

// campaignBatchName is CampaignBatchFunction's FunctionName, and campaignBatchARN its ARN as
// the template writes it (the function cannot be referred to: see template.yaml).
var (
	campaignBatchName = map[string]any{"Fn::Sub": "mailroom-${Stage}-campaign-batch"}
	campaignBatchARN  = map[string]any{"Fn::Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:mailroom-${Stage}-campaign-batch"}
)

// unsubscribeSecretRef is how functions get the unsubscribe secret: a dynamic reference that
// CloudFormation resolves at deploy time.
var unsubscribeSecretRef = map[string]any{"Fn::Sub": "{{resolve:secretsmanager:${UnsubscribeSecret}:SecretString}}"}

// envOf returns a function's own environment variables.
func envOf(fn map[string]any) map[string]any {
	e, _ := fn["Properties"].(map[string]any)["Environment"].(map[string]any)
	v, _ := e["Variables"].(map[string]any)
	return v
}

// statements returns a function's inline policy statements.
func statements(t *testing.T, fn map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	pols, _ := path(t, fn, "Properties").(map[string]any)["Policies"].([]any)
	for _, p := range pols {
		if pm, ok := p.(map[string]any); ok {
			if st, ok := pm["Statement"].([]any); ok {
				for _, s := range st {
					out = append(out, s.(map[string]any))
				}
			}
		}
	}
	return out
}

// TestSendingFunctions: the functions that send get the configuration sets' base name and may
// send through the four sets (the worker picks one by the domain's tracking flags) and the
// account's identities, nothing else of SES.
func TestSendingFunctions(t *testing.T) {
	tpl := loadTemplate(t)
	fns := resources(t, tpl, "AWS::Serverless::Function")
	wantRes := []any{map[string]any{"Fn::Sub": "arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:identity/*"}}
	for _, cs := range configurationSetIDs {
		wantRes = append(wantRes, map[string]any{"Fn::Sub": "arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:configuration-set/${" + cs + "}"})
	}
	for id, fn := range fns {
		env := envOf(fn)
		sends := slices.Contains(sendingFunctions, id)
		if got, ok := env["SES_CONFIGURATION_SET"]; ok != sends || (sends && !reflect.DeepEqual(got, ref("ConfigurationSet"))) {
			t.Errorf("%s: SES_CONFIGURATION_SET = %v, want !Ref ConfigurationSet only on %v", id, got, sendingFunctions)
		}
		for _, st := range statements(t, fn) {
			if slices.Contains(st["Action"].([]any), any("ses:SendRawEmail")) && !reflect.DeepEqual(st["Resource"], wantRes) {
				t.Errorf("%s: sends on %v, want %v", id, st["Resource"], wantRes)
			}
		}
	}
}

// TestSchedulingFunctions: the functions that schedule get the schedule settings from the
// stack (the target of their kind of schedule only), may manage their kind's schedules
// (email-* or campaign-*) in the group only, and pass only the scheduler's role, only to the
// scheduler.
func TestSchedulingFunctions(t *testing.T) {
	tpl := loadTemplate(t)
	common := map[string]any{
		"SCHEDULE_GROUP":    ref("ScheduleGroup"),
		"SCHEDULE_ROLE_ARN": getAtt("SchedulerRole", "Arn"),
		"SCHEDULE_DLQ_ARN":  getAtt("ScheduleDeadLetterQueue", "Arn"),
	}
	schedule := func(kind string) map[string]any {
		return map[string]any{"Fn::Sub": "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${ScheduleGroup}/" + kind + "-*"}
	}
	for id, fn := range resources(t, tpl, "AWS::Serverless::Function") {
		env := envOf(fn)
		_, emails := schedulingFunctions[id]
		_, campaigns := campaignSchedulingFunctions[id]
		want := map[string]any{}
		if emails || campaigns {
			maps.Copy(want, common)
		}
		if emails {
			want["SCHEDULE_TARGET_ARN"] = getAtt("ScheduledSendFunction", "Arn")
		}
		if campaigns {
			want["CAMPAIGN_TARGET_ARN"] = campaignBatchARN
		}
		for _, k := range []string{"SCHEDULE_GROUP", "SCHEDULE_ROLE_ARN", "SCHEDULE_DLQ_ARN", "SCHEDULE_TARGET_ARN", "CAMPAIGN_TARGET_ARN"} {
			got, ok := env[k]
			if w, should := want[k]; ok != should || (ok && !reflect.DeepEqual(got, w)) {
				t.Errorf("%s: %s = %v (set: %v), want %v (set: %v)", id, k, got, ok, w, should)
			}
		}
		for _, st := range statements(t, fn) {
			for _, a := range st["Action"].([]any) {
				switch {
				case strings.HasPrefix(a.(string), "scheduler:"):
					var res []any
					if emails {
						res = append(res, schedule("email"))
					}
					if campaigns {
						res = append(res, schedule("campaign"))
					}
					if !slices.ContainsFunc(res, func(r any) bool { return reflect.DeepEqual(st["Resource"], r) }) {
						t.Errorf("%s: %s on %v, want one of %v", id, a, st["Resource"], res)
					}
				case a == "iam:PassRole":
					if !reflect.DeepEqual(st["Resource"], getAtt("SchedulerRole", "Arn")) ||
						!reflect.DeepEqual(st["Condition"], map[string]any{"StringEquals": map[string]any{"iam:PassedToService": "scheduler.amazonaws.com"}}) {
						t.Errorf("%s: iam:PassRole on %v if %v, want SchedulerRole to scheduler.amazonaws.com", id, st["Resource"], st["Condition"])
					}
				}
			}
		}
	}
	// The ARN the schedules target is CampaignBatchFunction's.
	fn := resources(t, tpl, "AWS::Serverless::Function")["CampaignBatchFunction"]
	if fn == nil {
		t.Fatal("no CampaignBatchFunction")
	}
	name := path(t, fn, "Properties", "FunctionName")
	if !reflect.DeepEqual(name, campaignBatchName) ||
		!strings.HasSuffix(campaignBatchARN["Fn::Sub"].(string), ":function:"+name.(map[string]any)["Fn::Sub"].(string)) {
		t.Errorf("CampaignBatchFunction is named %v; CAMPAIGN_TARGET_ARN is %v", name, campaignBatchARN)
	}
}

// TestUnsubscribeLinks: the functions that sign (CampaignBatch) or check (Unsubscribe)
// unsubscribe links get the secret, a generated one kept with the stack's data, through a
// dynamic reference (never a plain parameter or a literal); only the signer gets PUBLIC_URL,
// the API's URL; the unsubscribe routes are the API's.
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
	if sec["DeletionPolicy"] != "Retain" || sec["UpdateReplacePolicy"] != "Retain" {
		t.Error("UnsubscribeSecret must be retained: links in mailboxes outlive the stack")
	}
	apiURL := path(t, tpl, "Outputs", "ApiUrl", "Value")
	users := map[string]map[string]any{
		"CampaignBatchFunction": {"UNSUBSCRIBE_SECRET": unsubscribeSecretRef, "PUBLIC_URL": apiURL},
		"UnsubscribeFunction":   {"UNSUBSCRIBE_SECRET": unsubscribeSecretRef},
	}
	for id, fn := range resources(t, tpl, "AWS::Serverless::Function") {
		env := envOf(fn)
		for _, k := range []string{"UNSUBSCRIBE_SECRET", "PUBLIC_URL"} {
			got, ok := env[k]
			want, should := users[id][k]
			if ok != should || (ok && !reflect.DeepEqual(got, want)) {
				t.Errorf("%s: %s = %v (set: %v), want %v (set: %v)", id, k, got, ok, want, should)
			}
		}
	}
	params, _ := tpl["Parameters"].(map[string]any)
	for name := range params {
		if strings.Contains(strings.ToLower(name), "secret") {
			t.Errorf("parameter %s: the secret is a resource, not a parameter", name)
		}
	}
	// The public routes are on the API, with no authorizer: the token is the credential.
	var public []string
	for _, r := range api.Routes {
		if r.Public {
			public = append(public, r.Pattern())
		}
	}
	slices.Sort(public)
	if want := []string{"GET /unsubscribe/{token}", "POST /unsubscribe/{token}"}; !slices.Equal(public, want) {
		t.Errorf("public routes %v, want %v", public, want)
	}
	for id, fn := range resources(t, tpl, "AWS::Serverless::Function") {
		evs, _ := path(t, fn, "Properties").(map[string]any)["Events"].(map[string]any)
		for name, e := range evs {
			if p, ok := e.(map[string]any)["Properties"].(map[string]any); ok {
				if _, auth := p["Auth"]; auth {
					t.Errorf("%s.%s has an Auth setting; the API authenticates in the function", id, name)
				}
			}
		}
	}
}

// TestLeastPrivilege: a function that only reads (all its routes are GETs) gets read access to
// the table and nothing else; no function gets access to another table, or to SES, EventBridge
// Scheduler or IAM beyond the calls it makes.
func TestLeastPrivilege(t *testing.T) {
	tpl := loadTemplate(t)
	readOnly := map[string]bool{}
	for _, r := range api.Routes {
		id := r.Function + "Function"
		if _, seen := readOnly[id]; !seen {
			readOnly[id] = true
		}
		readOnly[id] = readOnly[id] && r.Method == "GET"
	}
	sesAllowed := map[string][]string{
		"CreateDomainFunction": {"ses:CreateEmailIdentity", "ses:GetEmailIdentity", "ses:PutEmailIdentityMailFromAttributes"},
		"VerifyDomainFunction": {"ses:GetEmailIdentity"},
		"DeleteDomainFunction": {"ses:DeleteEmailIdentity"},
		"DomainCheckFunction":  {"ses:GetEmailIdentity"},
	}
	for _, id := range sendingFunctions {
		sesAllowed[id] = []string{"ses:SendEmail", "ses:SendRawEmail"}
	}
	for _, m := range []map[string][]string{schedulingFunctions, campaignSchedulingFunctions} {
		for id, actions := range m {
			sesAllowed[id] = append(sesAllowed[id], actions...)
			if slices.Contains(actions, "scheduler:CreateSchedule") {
				sesAllowed[id] = append(sesAllowed[id], "iam:PassRole")
			}
			slices.Sort(sesAllowed[id])
		}
	}
	for id, fn := range resources(t, tpl, "AWS::Serverless::Function") {
		pols, _ := path(t, fn, "Properties").(map[string]any)["Policies"].([]any)
		var sesActions []string
		for _, p := range pols {
			pm, ok := p.(map[string]any)
			if !ok {
				t.Errorf("%s: policy %v is not a mapping (managed policies are too broad)", id, p)
				continue
			}
			for name, v := range pm {
				switch name {
				case "DynamoDBReadPolicy", "DynamoDBCrudPolicy":
					if !reflect.DeepEqual(v, map[string]any{"TableName": map[string]any{"Ref": "Table"}}) {
						t.Errorf("%s: %s on %v, want the Table only", id, name, v)
					}
					if name == "DynamoDBCrudPolicy" && readOnly[id] {
						t.Errorf("%s only serves GETs but has %s", id, name)
					}
				case "Statement":
					for _, s := range v.([]any) {
						for _, a := range s.(map[string]any)["Action"].([]any) {
							sesActions = append(sesActions, a.(string))
						}
					}
				default:
					t.Errorf("%s: unexpected policy %s", id, name)
				}
			}
		}
		slices.Sort(sesActions)
		if want := sesAllowed[id]; !slices.Equal(sesActions, want) {
			t.Errorf("%s: statement actions %v, want %v", id, sesActions, want)
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
		if !ok || sel.Sel.Name != "Main" || len(call.Args) != 1 {
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
	fn := resources(t, tpl, "AWS::Serverless::Function")["SendWorkerFunction"]
	if fn == nil {
		t.Fatal("no SendWorkerFunction")
	}
	var stream map[string]any
	for _, e := range path(t, fn, "Properties", "Events").(map[string]any) {
		if ev := e.(map[string]any); ev["Type"] == "DynamoDB" {
			stream = path(t, ev, "Properties").(map[string]any)
		}
	}
	if stream == nil {
		t.Fatal("SendWorkerFunction has no DynamoDB event")
	}
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

	var patterns []map[string]any
	for _, f := range path(t, stream, "FilterCriteria", "Filters").([]any) {
		var p map[string]any
		if err := json.Unmarshal([]byte(path(t, f, "Pattern").(string)), &p); err != nil {
			t.Fatalf("filter pattern: %v", err)
		}
		patterns = append(patterns, p)
	}
	passes := func(rec map[string]any) bool {
		for _, p := range patterns {
			if matches(p, rec) {
				return true
			}
		}
		return false
	}

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

// matches is the subset of Lambda event filtering the template uses: nested objects, and
// arrays of allowed scalar values at the leaves.
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
			if !ok || !slices.ContainsFunc(w, func(v any) bool { return reflect.DeepEqual(v, got) }) {
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
	if len(queues) != 3 {
		t.Errorf("%d queues, want the send, schedule and SES events dead-letter queues", len(queues))
	}
	out := path(t, tpl, "Outputs").(map[string]any)
	for id := range queues {
		alarmed := false
		for _, a := range resources(t, tpl, "AWS::CloudWatch::Alarm") {
			p := path(t, a, "Properties").(map[string]any)
			for _, d := range p["Dimensions"].([]any) {
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
