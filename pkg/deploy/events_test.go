package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/lambdafn"
	"github.com/mailroom/mailroom/pkg/sesevent"
)

// configurationSetIDs are the SES configuration sets, base first, and the suffix the send
// worker appends to the base name for a domain's tracking flags (pkg/deliver: -open, then
// -click).
var configurationSetIDs = []string{"ConfigurationSet", "ConfigurationSetOpen", "ConfigurationSetClick", "ConfigurationSetOpenClick"}

var configurationSetSuffix = map[string]string{
	"ConfigurationSet": "", "ConfigurationSetOpen": "-open", "ConfigurationSetClick": "-click",
	"ConfigurationSetOpenClick": "-open-click",
}

// sesEventTypes maps each SES event type Mailroom records to its name in a CloudFormation event
// destination's MatchingEventTypes.
var sesEventTypes = map[string]string{
	sesevent.TypeSend: "send", sesevent.TypeReject: "reject", sesevent.TypeBounce: "bounce",
	sesevent.TypeComplaint: "complaint", sesevent.TypeDelivery: "delivery",
	sesevent.TypeDeliveryDelay: "deliveryDelay", sesevent.TypeRenderingFailure: "renderingFailure",
	sesevent.TypeOpen: "open", sesevent.TypeClick: "click",
}

// defaultStack is the stack the samples assume (samconfig.toml's stack_name).
const defaultStack = "mailroom"

// setName resolves a configuration set's Name for the default stack.
func setName(t *testing.T, tpl map[string]any, id string) string {
	t.Helper()
	cs, ok := resources(t, tpl, "AWS::SES::ConfigurationSet")[id]
	if !ok {
		t.Fatalf("no configuration set %s", id)
	}
	name := path(t, cs, "Properties", "Name").(map[string]any)
	if reflect.DeepEqual(name, ref("AWS::StackName")) {
		return defaultStack
	}
	sub, ok := name["Fn::Sub"].(string)
	if !ok {
		t.Fatalf("%s: Name is neither the stack's name nor a !Sub", id)
	}
	sub = strings.ReplaceAll(sub, "${AWS::StackName}", defaultStack)
	if strings.Contains(sub, "${ConfigurationSet}") {
		sub = strings.ReplaceAll(sub, "${ConfigurationSet}", setName(t, tpl, "ConfigurationSet"))
	}
	return sub
}

// TestConfigurationSets: four sets, named after the base as the worker names them, each
// publishing to the default event bus every event Mailroom records, opens and clicks only where
// the name says so.
func TestConfigurationSets(t *testing.T) {
	tpl := loadTemplate(t)
	sets := resources(t, tpl, "AWS::SES::ConfigurationSet")
	var ids []string
	for id := range sets {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	want := slices.Clone(configurationSetIDs)
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("configuration sets %v, want %v", ids, want)
	}
	if got := setName(t, tpl, "ConfigurationSet"); got != defaultStack {
		t.Errorf("base configuration set name %q", got)
	}
	for _, id := range configurationSetIDs[1:] {
		want := map[string]any{"Fn::Sub": "${ConfigurationSet}" + configurationSetSuffix[id]}
		if got := path(t, sets[id], "Properties", "Name"); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Name %v, want %v", id, got, want)
		}
	}

	dests := map[string]map[string]any{}
	for did, d := range resources(t, tpl, "AWS::SES::ConfigurationSetEventDestination") {
		cs, _ := path(t, d, "Properties", "ConfigurationSetName").(map[string]any)["Ref"].(string)
		if _, dup := dests[cs]; dup {
			t.Errorf("%s: a second event destination for %s", did, cs)
		}
		dests[cs] = path(t, d, "Properties", "EventDestination").(map[string]any)
	}
	bus := map[string]any{"Fn::Sub": "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/default"}
	for _, id := range configurationSetIDs {
		d, ok := dests[id]
		if !ok {
			t.Errorf("%s has no event destination", id)
			continue
		}
		if d["Enabled"] != true || !reflect.DeepEqual(path(t, d, "EventBridgeDestination", "EventBusArn"), bus) {
			t.Errorf("%s: destination %v, want enabled, to the default event bus", id, d)
		}
		var got []string
		for _, e := range d["MatchingEventTypes"].([]any) {
			got = append(got, e.(string))
		}
		want := []string{"bounce", "complaint", "delivery", "deliveryDelay", "reject", "renderingFailure", "send"}
		if strings.Contains(configurationSetSuffix[id], "open") {
			want = append(want, "open")
		}
		if strings.Contains(configurationSetSuffix[id], "click") {
			want = append(want, "click")
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: event types %v, want %v", id, got, want)
		}
	}
}

// ebMatches is the subset of EventBridge pattern matching the rule uses: nested objects, and
// arrays of allowed values at the leaves, which match a scalar, or any element of an array.
func ebMatches(pattern, event map[string]any) bool {
	for k, want := range pattern {
		got, ok := event[k]
		if !ok {
			return false
		}
		switch w := want.(type) {
		case map[string]any:
			g, isMap := got.(map[string]any)
			if !isMap || !ebMatches(w, g) {
				return false
			}
		case []any:
			vals, isArr := got.([]any)
			if !isArr {
				vals = []any{got}
			}
			if !slices.ContainsFunc(vals, func(v any) bool {
				return slices.ContainsFunc(w, func(x any) bool { return reflect.DeepEqual(x, v) })
			}) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// resolveRefs replaces !Ref <configuration set> by the set's name (default stage).
func resolveRefs(t *testing.T, tpl map[string]any, v any) any {
	switch v := v.(type) {
	case map[string]any:
		if id, ok := v["Ref"].(string); ok && len(v) == 1 {
			return setName(t, tpl, id)
		}
		out := map[string]any{}
		for k, x := range v {
			out[k] = resolveRefs(t, tpl, x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = resolveRefs(t, tpl, x)
		}
		return out
	}
	return v
}

func readJSON(t *testing.T, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return m
}

// TestSESEventsRule: one rule takes the SES events of the four sets (and no other sender's) to
// the SESEvents function, with retries and a dead-letter queue EventBridge may write to; every
// events/ses-events*.json sample passes it and is an event its set publishes.
func TestSESEventsRule(t *testing.T) {
	tpl := loadTemplate(t)
	var rule map[string]any
	ruleID := ""
	for id, r := range resources(t, tpl, "AWS::Events::Rule") {
		for _, tg := range path(t, r, "Properties", "Targets").([]any) {
			if reflect.DeepEqual(tg.(map[string]any)["Arn"], getAtt("SESEventsFunction", "Arn")) {
				rule, ruleID = r, id
			}
		}
	}
	if rule == nil {
		t.Fatal("no AWS::Events::Rule targets SESEventsFunction")
	}
	props := path(t, rule, "Properties").(map[string]any)
	if props["State"] != "ENABLED" || (props["EventBusName"] != nil && props["EventBusName"] != "default") {
		t.Errorf("rule state %v on bus %v, want ENABLED on the default bus", props["State"], props["EventBusName"])
	}
	pattern := props["EventPattern"].(map[string]any)
	if !reflect.DeepEqual(pattern["source"], []any{sesevent.Source}) {
		t.Errorf("source %v, want [%s]", pattern["source"], sesevent.Source)
	}
	var detailTypes []string
	for _, d := range pattern["detail-type"].([]any) {
		detailTypes = append(detailTypes, d.(string))
	}
	var wantTypes []string
	for typ := range sesEventTypes {
		wantTypes = append(wantTypes, sesevent.DetailType(typ))
	}
	slices.Sort(detailTypes)
	slices.Sort(wantTypes)
	if !slices.Equal(detailTypes, wantTypes) {
		t.Errorf("detail-types %v, want %v", detailTypes, wantTypes)
	}
	var refs []any
	for _, id := range configurationSetIDs {
		refs = append(refs, ref(id))
	}
	if got := path(t, pattern, "detail", "mail", "tags", "ses:configuration-set"); !reflect.DeepEqual(got, refs) {
		t.Errorf("configuration sets %v, want %v", got, refs)
	}

	var target map[string]any
	for _, tg := range props["Targets"].([]any) {
		target = tg.(map[string]any)
	}
	if n, ok := path(t, target, "RetryPolicy", "MaximumRetryAttempts").(int); !ok || n < 1 {
		t.Errorf("retry policy %v", target["RetryPolicy"])
	}
	dlq := path(t, target, "DeadLetterConfig", "Arn")
	if !reflect.DeepEqual(dlq, getAtt("SESEventsDeadLetterQueue", "Arn")) {
		t.Errorf("dead-letter queue %v", dlq)
	}
	// EventBridge may write to it (for this rule only) and the function's failures land there.
	allowed := false
	for _, qp := range resources(t, tpl, "AWS::SQS::QueuePolicy") {
		p := path(t, qp, "Properties").(map[string]any)
		if !slices.ContainsFunc(p["Queues"].([]any), func(q any) bool { return reflect.DeepEqual(q, ref("SESEventsDeadLetterQueue")) }) {
			continue
		}
		for _, st := range path(t, p, "PolicyDocument", "Statement").([]any) {
			st := st.(map[string]any)
			allowed = allowed || (reflect.DeepEqual(st["Principal"], map[string]any{"Service": "events.amazonaws.com"}) &&
				st["Action"] == "sqs:SendMessage" && reflect.DeepEqual(st["Resource"], dlq) &&
				reflect.DeepEqual(path(t, st, "Condition", "ArnEquals", "aws:SourceArn"), getAtt(ruleID, "Arn")))
		}
	}
	if !allowed {
		t.Error("no queue policy lets the rule write to SESEventsDeadLetterQueue")
	}
	fn := resources(t, tpl, "AWS::Serverless::Function")["SESEventsFunction"]
	if got := path(t, fn, "Properties", "EventInvokeConfig", "DestinationConfig", "OnFailure"); !reflect.DeepEqual(got,
		map[string]any{"Type": "SQS", "Destination": dlq}) {
		t.Errorf("SESEventsFunction on failure: %v, want the same queue", got)
	}
	permitted := false
	for _, p := range resources(t, tpl, "AWS::Lambda::Permission") {
		pp := path(t, p, "Properties").(map[string]any)
		permitted = permitted || (reflect.DeepEqual(pp["FunctionName"], ref("SESEventsFunction")) &&
			pp["Principal"] == "events.amazonaws.com" && pp["Action"] == "lambda:InvokeFunction" &&
			reflect.DeepEqual(pp["SourceArn"], getAtt(ruleID, "Arn")))
	}
	if !permitted {
		t.Errorf("no lambda permission lets %s invoke SESEventsFunction", ruleID)
	}

	// The samples pass the rule, and each is an event its configuration set publishes.
	resolved := resolveRefs(t, tpl, pattern).(map[string]any)
	published := map[string][]any{}
	for _, d := range resources(t, tpl, "AWS::SES::ConfigurationSetEventDestination") {
		id := path(t, d, "Properties", "ConfigurationSetName").(map[string]any)["Ref"].(string)
		published[setName(t, tpl, id)] = path(t, d, "Properties", "EventDestination", "MatchingEventTypes").([]any)
	}
	samples, _ := filepath.Glob(filepath.Join(root, "events", "ses-events*.json"))
	if len(samples) != len(sesEventTypes) {
		t.Errorf("%d SES event samples, want one per event type (%d)", len(samples), len(sesEventTypes))
	}
	seen := map[string]bool{}
	for _, file := range samples {
		ev := readJSON(t, file)
		name := filepath.Base(file)
		if !ebMatches(resolved, ev) {
			t.Errorf("%s does not pass the rule", name)
		}
		typ, _ := path(t, ev, "detail", "eventType").(string)
		seen[typ] = true
		if ev["detail-type"] != sesevent.DetailType(typ) {
			t.Errorf("%s: detail-type %v for a %s event", name, ev["detail-type"], typ)
		}
		for _, cs := range path(t, ev, "detail", "mail", "tags", "ses:configuration-set").([]any) {
			if !slices.Contains(published[cs.(string)], any(sesEventTypes[typ])) {
				t.Errorf("%s: configuration set %v does not publish %s events", name, cs, typ)
			}
		}
		// The same event from a configuration set that is not Mailroom's does not pass.
		c := clone(t, ev)
		setPath(c, []any{"someone-else"}, "detail", "mail", "tags", "ses:configuration-set")
		if ebMatches(resolved, c) {
			t.Errorf("%s passes the rule from another configuration set", name)
		}
	}
	for typ := range sesEventTypes {
		if !seen[typ] {
			t.Errorf("no events/ses-events*.json sample of a %s event", typ)
		}
	}
}

// TestScheduledSends: the schedule group, the role the scheduler assumes (it may only invoke
// the scheduled-send function and write to the schedule dead-letter queue), and that function's
// own failures landing in the same queue.
func TestScheduledSends(t *testing.T) {
	tpl := loadTemplate(t)
	if _, ok := resources(t, tpl, "AWS::Scheduler::ScheduleGroup")["ScheduleGroup"]; !ok {
		t.Fatal("no AWS::Scheduler::ScheduleGroup ScheduleGroup")
	}
	role, ok := resources(t, tpl, "AWS::IAM::Role")["SchedulerRole"]
	if !ok {
		t.Fatal("no AWS::IAM::Role SchedulerRole")
	}
	trust := path(t, role, "Properties", "AssumeRolePolicyDocument", "Statement").([]any)
	if len(trust) != 1 || !reflect.DeepEqual(trust[0].(map[string]any)["Principal"], map[string]any{"Service": "scheduler.amazonaws.com"}) ||
		trust[0].(map[string]any)["Action"] != "sts:AssumeRole" {
		t.Errorf("trust policy %v, want scheduler.amazonaws.com only", trust)
	}
	if got := path(t, trust[0], "Condition", "StringEquals", "aws:SourceAccount"); !reflect.DeepEqual(got, ref("AWS::AccountId")) {
		t.Errorf("trust policy source account %v", got)
	}
	got := map[string][]any{}
	for _, p := range path(t, role, "Properties", "Policies").([]any) {
		for _, st := range path(t, p, "PolicyDocument", "Statement").([]any) {
			st := st.(map[string]any)
			if st["Effect"] != "Allow" {
				t.Errorf("statement %v", st)
			}
			res, ok := st["Resource"].([]any)
			if !ok {
				res = []any{st["Resource"]}
			}
			got[st["Action"].(string)] = append(got[st["Action"].(string)], res...)
		}
	}
	// The two schedule targets, by the ARNs of their fixed names (they refer to the role, so
	// the role cannot refer to them).
	want := map[string][]any{
		"lambda:InvokeFunction": {functionARN("ScheduledSend"), functionARN("CampaignBatch")},
		"sqs:SendMessage":       {getAtt("ScheduleDeadLetterQueue", "Arn")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SchedulerRole may %v, want %v", got, want)
	}
	fns := resources(t, tpl, "AWS::Serverless::Function")
	for _, id := range []string{"ScheduledSendFunction", "CampaignBatchFunction"} {
		props := path(t, fns[id], "Properties").(map[string]any)
		if _, ok := props["Events"]; ok {
			t.Errorf("%s has events; only the scheduler invokes it", id)
		}
		if got := path(t, props, "EventInvokeConfig", "DestinationConfig", "OnFailure"); !reflect.DeepEqual(got,
			map[string]any{"Type": "SQS", "Destination": getAtt("ScheduleDeadLetterQueue", "Arn")}) {
			t.Errorf("%s on failure: %v, want the schedule dead-letter queue", id, got)
		}
		if n, ok := path(t, props, "EventInvokeConfig", "MaximumRetryAttempts").(int); !ok || n < 1 {
			t.Errorf("%s must retry (a step or email not written yet, a throttled table)", id)
		}
	}
	// A campaign step writes up to a batch of emails and loops while its deadline allows.
	props := path(t, fns["CampaignBatchFunction"], "Properties").(map[string]any)
	if props["Timeout"] != 900 || props["MemorySize"] != 1024 {
		t.Errorf("CampaignBatchFunction: Timeout %v, MemorySize %v; want 900, 1024", props["Timeout"], props["MemorySize"])
	}
	for _, n := range []string{"ScheduledSend", "CampaignBatch"} {
		name := path(t, fns[n+"Function"], "Properties", "FunctionName")
		if want := functionName(n); !reflect.DeepEqual(name, want) {
			t.Errorf("%sFunction: FunctionName %v, want %v", n, name, want)
		}
	}
}

// TestCampaignBatchSample: events/campaign-batch.json is what a campaign's schedule delivers,
// the raw payload {"campaignId","teamId","step"} (campaign.Payload), no envelope.
func TestCampaignBatchSample(t *testing.T) {
	sample := readJSON(t, filepath.Join(root, "events", "campaign-batch.json"))
	b, _ := json.Marshal(sample)
	var p campaign.Payload
	if err := json.Unmarshal(b, &p); err != nil || len(sample) != 3 || p.CampaignID == "" || p.TeamID < 1 || p.Step != 0 {
		t.Errorf("campaign-batch.json = %v, want {campaignId, teamId, step 0}", sample)
	}
	if !strings.HasPrefix(p.CampaignID, "cp") {
		t.Errorf("campaignId %q is not a campaign id", p.CampaignID)
	}
}

// TestPeriodicFunctions: the reconciler every 5 minutes and the domain check hourly, on an
// EventBridge schedule whose event is their sample's shape, without retries (the next run is
// the retry).
func TestPeriodicFunctions(t *testing.T) {
	tpl := loadTemplate(t)
	fns := resources(t, tpl, "AWS::Serverless::Function")
	for id, rate := range map[string]string{"ReconcilerFunction": "rate(5 minutes)", "DomainCheckFunction": "rate(1 hour)"} {
		props := path(t, fns[id], "Properties").(map[string]any)
		evs := props["Events"].(map[string]any)
		if len(evs) != 1 {
			t.Errorf("%s: %d events, want one schedule", id, len(evs))
		}
		for name, e := range evs {
			e := e.(map[string]any)
			if e["Type"] != "Schedule" || path(t, e, "Properties", "Schedule") != rate {
				t.Errorf("%s.%s: %v, want a Schedule %s", id, name, e, rate)
			}
		}
		if n := path(t, props, "EventInvokeConfig", "MaximumRetryAttempts"); n != 0 {
			t.Errorf("%s: MaximumRetryAttempts %v, want 0", id, n)
		}
		sample := readJSON(t, filepath.Join(root, "events", lambdafn.Dir(strings.TrimSuffix(id, "Function"))+".json"))
		if sample["source"] != "aws.events" || sample["detail-type"] != "Scheduled Event" {
			t.Errorf("%s: sample is %v/%v, want an aws.events Scheduled Event", id, sample["source"], sample["detail-type"])
		}
	}
}
