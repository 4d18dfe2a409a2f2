package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/deploy"
)

// samTransform runs the SAM transform (pkg/deploy/testdata/sam_transform.py, on the
// aws-sam-translator that cfn-lint uses) on template.yaml for a stack name and returns the
// CloudFormation template it becomes. Without python3 and the translator the test is skipped,
// except under CI, which must never pass by skipping.
func samTransform(t *testing.T, stack string) map[string]any {
	t.Helper()
	if err := exec.Command("python3", "-c", "import samtranslator, cfnlint").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3 with aws-sam-translator and cfn-lint is required under CI: %v", err)
		}
		t.Skip("aws-sam-translator not installed")
	}
	cmd := exec.Command("python3", filepath.Join("testdata", "sam_transform.py"), filepath.Join(root, "template.yaml"), stack)
	cmd.Env = append(os.Environ(), "AWS_DEFAULT_REGION=us-east-1")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("SAM transform for %s: %v\n%s", stack, err, stderr)
	}
	var tpl map[string]any
	if err := json.Unmarshal(out, &tpl); err != nil {
		t.Fatal(err)
	}
	return tpl
}

// physicalNames are the properties that name a resource in the account and region, by type.
var physicalNames = map[string]string{
	"AWS::Lambda::Function":         "FunctionName",
	"AWS::Logs::LogGroup":           "LogGroupName",
	"AWS::CloudWatch::Alarm":        "AlarmName",
	"AWS::CloudWatch::Dashboard":    "DashboardName",
	"AWS::SES::ConfigurationSet":    "Name",
	"AWS::Scheduler::ScheduleGroup": "Name",
	"AWS::Events::Rule":             "Name",
	"AWS::SQS::Queue":               "QueueName",
	"AWS::SNS::Topic":               "TopicName",
	"AWS::IAM::Role":                "RoleName",
	"AWS::SecretsManager::Secret":   "Name",
	"AWS::DynamoDB::Table":          "TableName",
	"AWS::ApiGatewayV2::DomainName": "DomainName",
	// Resources that have no name of their own in the account (they belong to another).
	"AWS::Lambda::EventSourceMapping":            "",
	"AWS::Lambda::Permission":                    "",
	"AWS::Lambda::EventInvokeConfig":             "",
	"AWS::SQS::QueuePolicy":                      "",
	"AWS::SES::ConfigurationSetEventDestination": "",
	"AWS::ApiGatewayV2::Stage":                   "",
	"AWS::ApiGatewayV2::ApiMapping":              "",
	"AWS::ApiGatewayV2::Api":                     "",
	"AWS::SNS::Subscription":                     "",
}

var subVar = regexp.MustCompile(`\$\{([^}!]+)\}`)

// resolve evaluates the intrinsics a name can use, for one stack: pseudo parameters and the
// template's parameters (their defaults). A name built from another resource (a !Ref or
// !GetAtt of it) is CloudFormation's to make unique: ok is false.
func resolve(tpl map[string]any, stack string, v any) (string, bool) {
	pseudo := map[string]string{"AWS::StackName": stack, "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012",
		"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com"}
	params, _ := tpl["Parameters"].(map[string]any)
	lookup := func(name string) (string, bool) {
		if s, ok := pseudo[name]; ok {
			return s, true
		}
		if p, ok := params[name].(map[string]any); ok {
			return fmt.Sprint(p["Default"]), true
		}
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, true
	case map[string]any:
		if r, ok := x["Ref"].(string); ok {
			return lookup(r)
		}
		if sub, ok := x["Fn::Sub"]; ok {
			s, vars := "", map[string]any{}
			switch sx := sub.(type) {
			case string:
				s = sx
			case []any:
				s, _ = sx[0].(string)
				vars, _ = sx[1].(map[string]any)
			}
			resolved := true
			out := subVar.ReplaceAllStringFunc(s, func(m string) string {
				name := m[2 : len(m)-1]
				if val, ok := vars[name]; ok {
					r, ok := resolve(tpl, stack, val)
					resolved = resolved && ok
					return r
				}
				r, ok := lookup(name)
				resolved = resolved && ok
				return r
			})
			return out, resolved
		}
	}
	return "", false
}

// namesOf lists the physical names a transformed template sets explicitly, resource by
// resource, resolved for its stack.
func namesOf(t *testing.T, tpl map[string]any, stack string) map[string]string {
	t.Helper()
	names := map[string]string{}
	for id, r := range tpl["Resources"].(map[string]any) {
		res := r.(map[string]any)
		typ := res["Type"].(string)
		prop, known := physicalNames[typ]
		if !known {
			t.Errorf("%s: a resource of type %s: say in physicalNames which property names it", id, typ)
			continue
		}
		props, _ := res["Properties"].(map[string]any)
		if prop == "" || props[prop] == nil {
			continue
		}
		if cond, _ := res["Condition"].(string); cond == "HasCustomDomain" {
			continue // the user's own domain name, absent by default
		}
		if name, ok := resolve(tpl, stack, props[prop]); ok {
			names[typ+" "+name] = id
		}
	}
	return names
}

// TestTwoStacksSideBySide: the SAM transform of template.yaml for two stack names in one
// account and region shares no physical name, so mailroom-a and mailroom-b deploy side by side.
func TestTwoStacksSideBySide(t *testing.T) {
	a, b := samTransform(t, "mailroom-a"), samTransform(t, "mailroom-b")
	na, nb := namesOf(t, a, "mailroom-a"), namesOf(t, b, "mailroom-b")
	if len(na) < 100 {
		t.Fatalf("only %d named resources found; the check looks at nothing", len(na))
	}
	for name, id := range na {
		if other, ok := nb[name]; ok {
			t.Errorf("%s is named the same in both stacks (%s, %s)", name, id, other)
		}
	}
	// Every function's name fits Lambda's 64 characters for a stack name of the longest length
	// the README allows.
	for name := range na {
		if fn, ok := strings.CutPrefix(name, "AWS::Lambda::Function "); ok {
			if l := len(fn) - len("mailroom-a") + maxStack; l > 64 {
				t.Errorf("function %s: %d characters with the longest stack name, Lambda allows 64", fn, l)
			}
		}
	}
}

// maxStack is the longest stack name the README and the template's description allow.
var maxStack = deploy.MaxStackName()

// TestEveryRouteHasTheChosenAuthorization: sam deploy --guided asks about every function with
// an HttpApi event that has no Auth of its own while its API has none (SAM CLI's
// auth_per_resource); the answer chosen is the Lambda authorizer as the API's default, so it
// asks nothing. After the transform, every route of api.Routes but the public ones uses that
// authorizer (on the Authorization header, through AuthorizerFunction, with simple responses
// and a cache), and the public ones none.
func TestEveryRouteHasTheChosenAuthorization(t *testing.T) {
	src := loadTemplate(t)
	apiAuth, _ := path(t, src, "Resources", "HttpApi", "Properties").(map[string]any)["Auth"].(map[string]any)
	if apiAuth["DefaultAuthorizer"] != "ApiKey" {
		t.Fatalf("HttpApi Auth %v, want DefaultAuthorizer ApiKey", apiAuth)
	}
	for id, fn := range resources(t, src, "AWS::Serverless::Function") {
		evs, _ := path(t, fn, "Properties").(map[string]any)["Events"].(map[string]any)
		for name, e := range evs {
			ev := e.(map[string]any)
			if ev["Type"] != "HttpApi" {
				continue
			}
			p := ev["Properties"].(map[string]any)
			_, own := p["Auth"]
			if !own && (len(apiAuth) == 0 || !reflect.DeepEqual(p["ApiId"], ref("HttpApi"))) {
				t.Errorf("%s.%s: sam deploy --guided would ask whether it may have no authorization", id, name)
			}
		}
	}

	out := samTransform(t, "mailroom")
	httpAPI := out["Resources"].(map[string]any)["HttpApi"].(map[string]any)
	body := path(t, httpAPI, "Properties", "Body").(map[string]any)
	scheme := path(t, body, "components", "securitySchemes", "ApiKey", "x-amazon-apigateway-authorizer").(map[string]any)
	for k, want := range map[string]any{
		"type": "request", "authorizerPayloadFormatVersion": "2.0", "enableSimpleResponses": true,
		"identitySource":               []any{"$request.header.Authorization"},
		"authorizerResultTtlInSeconds": float64(deploy.AuthCacheSeconds),
	} {
		if !reflect.DeepEqual(scheme[k], want) {
			t.Errorf("authorizer %s = %v, want %v", k, scheme[k], want)
		}
	}
	if uri, _ := json.Marshal(scheme["authorizerUri"]); !strings.Contains(string(uri), `"AuthorizerFunction","Arn"`) {
		t.Errorf("authorizer uri %s, want AuthorizerFunction's", uri)
	}
	paths := body["paths"].(map[string]any)
	covered := 0
	routes := slices.Concat(api.Routes, api.ConsoleRoutes)
	for _, r := range routes {
		method := strings.ToLower(r.Method)
		if r.Method == "ANY" {
			method = "x-amazon-apigateway-any-method"
		}
		m, ok := paths[r.Path].(map[string]any)[method].(map[string]any)
		if !ok {
			t.Errorf("%s is not a route of the transformed API", r.Pattern())
			continue
		}
		want := []any{map[string]any{"ApiKey": []any{}}}
		if r.Public {
			want = []any{map[string]any{"NONE": []any{}}}
		}
		if !reflect.DeepEqual(m["security"], want) {
			t.Errorf("%s: security %v, want %v", r.Pattern(), m["security"], want)
		}
		covered++
	}
	n := 0
	for _, methods := range paths {
		n += len(methods.(map[string]any))
	}
	if n != covered || n != len(routes) {
		t.Errorf("the transformed API has %d routes, api.Routes and the console's %d", n, len(routes))
	}
	// API Gateway may invoke the authorizer.
	permitted := false
	for _, r := range out["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] != "AWS::Lambda::Permission" {
			continue
		}
		p := res["Properties"].(map[string]any)
		fn, _ := json.Marshal(p["FunctionName"])
		permitted = permitted || (strings.Contains(string(fn), "AuthorizerFunction") && p["Principal"] == "apigateway.amazonaws.com")
	}
	if !permitted {
		t.Error("no permission lets API Gateway invoke AuthorizerFunction")
	}
}
