package lambdafn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/app"
	"github.com/mailroom/mailroom/pkg/awstest"
	"github.com/mailroom/mailroom/pkg/lambdafn"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/dynamo"
	"github.com/mailroom/mailroom/pkg/team"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// root is the repository root (this package is pkg/lambdafn).
const root = "../.."

// sampleKey is the API key every HTTP sample in events/ carries.
const sampleKey = "us_samplekey0_0123456789abcdef0123456789abcdef"

// env is what one invocation sees: the ids created by earlier invocations, which the samples
// stand for with their own (a sample's path ids are rewritten to these before it is sent).
type env struct {
	t        *testing.T
	fixture  *fixture
	teamID   int64
	domainID string
	emailID  string
	batchIDs []string
	template string
}

// step invokes one function with its sample and checks the answer. Steps run in order, each
// Lambda function with its own app (its own cold start), all on one moto table.
type step struct {
	function string
	// prepare rewrites the sample to the ids of this run (nil: sent as it is).
	prepare func(e *env, raw []byte) []byte
	// check looks at the response; status 200 is checked for every HTTP step.
	check func(e *env, body map[string]any)
}

var steps = []step{
	{function: "CreateDomain", check: func(e *env, b map[string]any) {
		e.wantField(b, "name", "example.com")
		e.domainID = fmt.Sprint(b["id"])
	}},
	{function: "ListDomains", check: func(e *env, b map[string]any) {
		list := e.list(b, "")
		if len(list) != 1 || fmt.Sprint(list[0]["id"]) != e.domainID {
			e.t.Errorf("domains = %v, want the one created", list)
		}
	}},
	{function: "GetDomain", prepare: pathID("id", func(e *env) string { return e.domainID }),
		check: func(e *env, b map[string]any) { e.wantField(b, "name", "example.com") }},
	{function: "VerifyDomain", prepare: pathID("id", func(e *env) string { return e.domainID }),
		check: func(e *env, b map[string]any) {
			if b["status"] == "" || b["status"] == nil {
				e.t.Errorf("verify answered %v, want a status", b)
			}
			if b["status"] != store.DomainSuccess {
				e.fixture.markVerified(e)
			}
		}},
	{function: "SendEmail", check: func(e *env, b map[string]any) {
		e.emailID, _ = b["emailId"].(string)
		if !strings.HasPrefix(e.emailID, "em") {
			e.t.Fatalf("send answered %v, want an emailId", b)
		}
		e.fixture.checkQueuedItem(e)
	}},
	{function: "SendBatch", check: func(e *env, b map[string]any) {
		for _, it := range e.list(b, "data") {
			e.batchIDs = append(e.batchIDs, fmt.Sprint(it["emailId"]))
		}
		if len(e.batchIDs) != 2 {
			e.t.Errorf("batch answered %v, want two emailIds", b)
		}
	}},
	{function: "ListEmails", check: func(e *env, b map[string]any) {
		var ids []string
		for _, it := range e.list(b, "data") {
			ids = append(ids, fmt.Sprint(it["id"]))
		}
		for _, id := range append([]string{e.emailID}, e.batchIDs...) {
			if !slices.Contains(ids, id) {
				e.t.Errorf("list %v misses %s", ids, id)
			}
		}
		if n, _ := b["count"].(float64); int(n) != 3 {
			e.t.Errorf("count = %v, want 3", b["count"])
		}
	}},
	{function: "GetEmail", prepare: pathID("emailId", func(e *env) string { return e.emailID }),
		check: func(e *env, b map[string]any) {
			e.wantField(b, "id", e.emailID)
			e.wantField(b, "latestStatus", "QUEUED")
		}},
	{function: lambdafn.SendWorkerFunction, prepare: streamRecord},
	{function: "CreateTemplate", check: func(e *env, b map[string]any) {
		e.template, _ = b["id"].(string)
		if !strings.HasPrefix(e.template, "tpl_") {
			e.t.Fatalf("create template answered %v", b)
		}
	}},
	{function: "ListTemplates", check: func(e *env, b map[string]any) {
		if list := e.list(b, "data"); len(list) != 1 || list[0]["id"] != e.template {
			e.t.Errorf("templates = %v, want the one created", list)
		}
	}},
	{function: "GetTemplate", prepare: pathID("id", func(e *env) string { return e.template }),
		check: func(e *env, b map[string]any) { e.wantField(b, "name", "order-shipped") }},
	{function: "UpdateTemplate", prepare: pathID("id", func(e *env) string { return e.template }),
		check: func(e *env, b map[string]any) {
			e.wantField(b, "subject", "Good news: order {{order}} has shipped")
		}},
	{function: "DeleteTemplate", prepare: pathID("id", func(e *env) string { return e.template }),
		check: func(e *env, b map[string]any) { e.wantField(b, "success", true) }},
	{function: "DeleteDomain", prepare: pathID("id", func(e *env) string { return e.domainID }),
		check: func(e *env, b map[string]any) { e.wantField(b, "success", true) }},
}

func (e *env) wantField(b map[string]any, k string, want any) {
	e.t.Helper()
	if b[k] != want {
		e.t.Errorf("%s = %#v, want %#v (body %v)", k, b[k], want, b)
	}
}

// list returns b[key] (or the body itself, key "") as a list of objects.
func (e *env) list(b map[string]any, key string) []map[string]any {
	e.t.Helper()
	var v any = b["_array"]
	if key != "" {
		v = b[key]
	}
	items, ok := v.([]any)
	if !ok {
		e.t.Fatalf("%q is not a list: %v", key, b)
	}
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i], _ = it.(map[string]any)
	}
	return out
}

// pathID rewrites the sample's path parameter (and the same segment of its paths) to an id
// created earlier in the run.
func pathID(param string, id func(*env) string) func(*env, []byte) []byte {
	return func(e *env, raw []byte) []byte {
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			e.t.Fatal(err)
		}
		old, now := ev.PathParameters[param], id(e)
		if old == "" || now == "" {
			e.t.Fatalf("sample has no %s path parameter, or no id to put there", param)
		}
		ev.PathParameters[param] = now
		ev.RawPath = strings.Replace(ev.RawPath, "/"+old, "/"+now, 1)
		ev.RequestContext.HTTP.Path = strings.Replace(ev.RequestContext.HTTP.Path, "/"+old, "/"+now, 1)
		b, err := json.Marshal(ev)
		if err != nil {
			e.t.Fatal(err)
		}
		return b
	}
}

// streamRecord points the sample stream record at the email SendEmail queued, with the item's
// real image, and checks that the sample's image has the real item's shape.
func streamRecord(e *env, raw []byte) []byte {
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		e.t.Fatal(err)
	}
	if len(ev.Records) != 1 {
		e.t.Fatalf("the send worker sample has %d records, want 1", len(ev.Records))
	}
	item := e.fixture.emailItem(e, e.emailID)
	image := streamImage(e.t, item)
	rec := &ev.Records[0]
	for name, v := range rec.Change.NewImage {
		got, ok := image[name]
		if !ok {
			e.t.Errorf("sample NewImage has %s, which an email item does not", name)
		} else if got.DataType() != v.DataType() {
			e.t.Errorf("sample NewImage %s has type %v, an email item %v", name, v.DataType(), got.DataType())
		}
	}
	for _, name := range []string{"PK", "SK", "Status"} {
		if _, ok := rec.Change.NewImage[name]; !ok {
			e.t.Errorf("sample NewImage lacks %s", name)
		}
	}
	rec.Change.Keys = map[string]events.DynamoDBAttributeValue{"PK": image["PK"], "SK": image["SK"]}
	rec.Change.NewImage = image
	b, err := json.Marshal(ev)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// streamImage converts an item read with the SDK into a stream record's image (through the
// attribute values' common JSON form).
func streamImage(t *testing.T, item map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	t.Helper()
	out := map[string]events.DynamoDBAttributeValue{}
	for name, v := range item {
		b, err := json.Marshal(attrJSON(v))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var av events.DynamoDBAttributeValue
		if err := json.Unmarshal(b, &av); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = av
	}
	return out
}

func attrJSON(v types.AttributeValue) map[string]any {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *types.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *types.AttributeValueMemberB:
		return map[string]any{"B": v.Value}
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *types.AttributeValueMemberNULL:
		return map[string]any{"NULL": true}
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": v.Value}
	case *types.AttributeValueMemberNS:
		return map[string]any{"NS": v.Value}
	case *types.AttributeValueMemberBS:
		return map[string]any{"BS": v.Value}
	case *types.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			l[i] = attrJSON(e)
		}
		return map[string]any{"L": l}
	case *types.AttributeValueMemberM:
		m := make(map[string]any, len(v.Value))
		for k, e := range v.Value {
			m[k] = attrJSON(e)
		}
		return map[string]any{"M": m}
	}
	panic(fmt.Sprintf("attribute value %T", v))
}

// fixture is the moto side of the run.
type fixture struct {
	srv    *awstest.Server
	awsCfg aws.Config
	cfg    app.Config
	db     *dynamodb.Client
	admin  *app.App // for setup and for reading results, not for invocations
}

var tableSeq atomic.Int64

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := awstest.Shared(t)
	f := &fixture{srv: srv, awsCfg: srv.Config(t)}
	ctx := context.Background()
	f.db = dynamodb.NewFromConfig(f.awsCfg)
	table := fmt.Sprintf("lambdafn-%d-%d", time.Now().UnixNano(), tableSeq.Add(1))
	if err := dynamo.EnsureTable(ctx, f.db, table); err != nil {
		t.Fatal(err)
	}
	// The configuration set every send names, as template.yaml creates it.
	confSet := table + "-sends"
	ses := sesv2.NewFromConfig(f.awsCfg)
	if _, err := ses.CreateConfigurationSet(ctx, &sesv2.CreateConfigurationSetInput{ConfigurationSetName: aws.String(confSet)}); err != nil {
		t.Fatalf("create configuration set: %v", err)
	}
	vars := map[string]string{"BACKEND": "aws", "TABLE_NAME": table, "SES_CONFIGURATION_SET": confSet, "LOG_LEVEL": "warn"}
	cfg, err := app.ConfigFromEnv(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	f.cfg = cfg
	f.admin = f.newApp(t)
	return f
}

// newApp builds the app as a function's cold start does.
func (f *fixture) newApp(t *testing.T) *app.App {
	t.Helper()
	a, err := app.NewWithAWS(context.Background(), f.cfg, f.awsCfg, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	return a
}

// markVerified makes the domain usable for sending. moto registers the SES identity but has no
// DNS to check, so it may leave it unverified (PENDING): the test then records SUCCESS in the
// store, as a later verify against real SES would.
func (f *fixture) markVerified(e *env) {
	var id int64
	if _, err := fmt.Sscan(e.domainID, &id); err != nil {
		e.t.Fatal(err)
	}
	_, err := f.admin.Store.UpdateDomain(context.Background(), e.teamID, id, func(d *store.Domain) error {
		d.Status = store.DomainSuccess
		d.IsVerifying = false
		return nil
	})
	if err != nil {
		e.t.Fatalf("mark domain verified: %v", err)
	}
}

// emailItem reads an email's item as DynamoDB stores it.
func (f *fixture) emailItem(e *env, id string) map[string]types.AttributeValue {
	out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      aws.String(f.cfg.TableName),
		Key:            map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "EMAIL#" + id}, "SK": &types.AttributeValueMemberS{Value: "EMAIL"}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil || out.Item == nil {
		e.t.Fatalf("email item %s: %v (item %v)", id, err, out)
	}
	return out.Item
}

// checkQueuedItem: the send wrote an email item whose stream image passes template.yaml's
// filter (pkg/deploy checks the filter against events/send-worker.json, whose shape this run
// checks against the real item).
func (f *fixture) checkQueuedItem(e *env) {
	item := f.emailItem(e, e.emailID)
	if s, ok := item["Status"].(*types.AttributeValueMemberS); !ok || s.Value != store.StatusQueued {
		e.t.Errorf("email item Status = %#v, want S QUEUED", item["Status"])
	}
}

func readSample(t *testing.T, function string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "events", lambdafn.Dir(function)+".json"))
	if err != nil {
		t.Fatalf("sample of %s: %v", function, err)
	}
	return b
}

// TestSamples invokes every function's handler, through the Lambda runtime's JSON handling,
// with its sample from events/ against moto.
func TestSamples(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, teamID, err := (&team.Admin{Store: f.admin.Store, Now: time.Now}).Bootstrap(ctx, sampleKey)
	if err != nil {
		t.Fatalf("bootstrap the sample key: %v", err)
	}
	e := &env{fixture: f, teamID: teamID}
	invoked := map[string]bool{}
	for _, s := range steps {
		ok := t.Run(s.function, func(t *testing.T) {
			e.t = t
			h := lambdafn.Handler(f.newApp(t), s.function)
			raw := readSample(t, s.function)
			if s.prepare != nil {
				raw = s.prepare(e, raw)
			}
			out, err := h.Invoke(ctx, raw)
			if err != nil {
				t.Fatalf("invoke: %v", err)
			}
			invoked[s.function] = true
			if s.function == lambdafn.SendWorkerFunction {
				checkSendWorker(t, f, e, out)
				return
			}
			var resp events.APIGatewayV2HTTPResponse
			if err := json.Unmarshal(out, &resp); err != nil {
				t.Fatalf("response: %v\n%s", err, out)
			}
			if resp.StatusCode != 200 {
				t.Fatalf("status %d, want 200: %s", resp.StatusCode, resp.Body)
			}
			if ct := resp.Headers["Content-Type"]; ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			var body map[string]any
			if strings.HasPrefix(resp.Body, "[") {
				var arr []any
				err = json.Unmarshal([]byte(resp.Body), &arr)
				body = map[string]any{"_array": arr}
			} else {
				err = json.Unmarshal([]byte(resp.Body), &body)
			}
			if err != nil {
				t.Fatalf("body: %v\n%s", err, resp.Body)
			}
			if s.check != nil {
				s.check(e, body)
			}
		})
		if !ok {
			break // later steps use what this one created
		}
	}
	for _, n := range lambdafn.Names() {
		if !invoked[n] {
			t.Errorf("%s was not invoked", n)
		}
	}
}

func checkSendWorker(t *testing.T, f *fixture, e *env, out []byte) {
	var resp events.DynamoDBEventResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("response: %v\n%s", err, out)
	}
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %v", resp.BatchItemFailures)
	}
	em, err := f.admin.Store.GetEmail(context.Background(), e.emailID)
	if err != nil {
		t.Fatal(err)
	}
	if em.Status != store.StatusSent || em.MessageID == "" {
		t.Errorf("email %s is %s (message id %q), want SENT with a message id", em.ID, em.Status, em.MessageID)
	}
}

// TestSamplesCoverFunctions: every directory in functions/ has a sample in events/ and a step
// of TestSamples, and every sample is a function's.
func TestSamplesCoverFunctions(t *testing.T) {
	dirs, err := os.ReadDir(filepath.Join(root, "functions"))
	if err != nil {
		t.Fatal(err)
	}
	stepDirs := map[string]bool{}
	for _, s := range steps {
		stepDirs[lambdafn.Dir(s.function)] = true
	}
	fnDirs := map[string]bool{}
	for _, d := range dirs {
		fnDirs[d.Name()] = true
		if _, err := os.Stat(filepath.Join(root, "events", d.Name()+".json")); err != nil {
			t.Errorf("functions/%s has no sample: %v", d.Name(), err)
		}
		if !stepDirs[d.Name()] {
			t.Errorf("functions/%s is not invoked by TestSamples", d.Name())
		}
	}
	samples, _ := filepath.Glob(filepath.Join(root, "events", "*.json"))
	for _, s := range samples {
		if name := strings.TrimSuffix(filepath.Base(s), ".json"); !fnDirs[name] {
			t.Errorf("events/%s.json belongs to no function", name)
		}
	}
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// TestHTTPSamplesMatchRoutes: each HTTP sample is what API Gateway sends for its route.
func TestHTTPSamplesMatchRoutes(t *testing.T) {
	for _, r := range api.Routes {
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(readSample(t, r.Function), &ev); err != nil {
			t.Fatalf("%s: %v", r.Function, err)
		}
		if ev.Version != "2.0" || ev.RouteKey != r.Pattern() || ev.RequestContext.RouteKey != r.Pattern() ||
			ev.RequestContext.HTTP.Method != r.Method {
			t.Errorf("%s: version %q routeKey %q method %q, want 2.0 %q", r.Function, ev.Version, ev.RouteKey,
				ev.RequestContext.HTTP.Method, r.Pattern())
		}
		want := pathParam.ReplaceAllStringFunc(r.Path, func(m string) string {
			return ev.PathParameters[m[1:len(m)-1]]
		})
		if ev.RawPath != want || ev.RequestContext.HTTP.Path != want {
			t.Errorf("%s: rawPath %q, http.path %q, want %q", r.Function, ev.RawPath, ev.RequestContext.HTTP.Path, want)
		}
		if n := len(pathParam.FindAllString(r.Path, -1)); len(ev.PathParameters) != n {
			t.Errorf("%s: %d path parameters, want %d", r.Function, len(ev.PathParameters), n)
		}
		if ev.Headers["authorization"] != "Bearer "+sampleKey {
			t.Errorf("%s: authorization header %q", r.Function, ev.Headers["authorization"])
		}
		if ev.Body != "" && (ev.Headers["content-type"] != "application/json" || !json.Valid([]byte(ev.Body))) {
			t.Errorf("%s: body is not JSON with its content-type", r.Function)
		}
	}
}
