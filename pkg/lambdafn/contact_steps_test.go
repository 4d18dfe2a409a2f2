package lambdafn_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/lambdafn"
	"github.com/mailroom/mailroom/pkg/sesevent"
	"github.com/mailroom/mailroom/pkg/store"
)

// The contacts of the samples: bulk-create-contacts.json adds five (charles unsubscribed),
// create-contact.json margaret; delete-contact.json removes edsger and
// bulk-delete-contacts.json katherine, which leaves three subscribed contacts for the
// campaign, sent two per batch step (schedule-campaign.json).
const (
	margaret = "margaret@example.org"
	edsger   = "edsger@example.org"
	kath     = "katherine@example.org"
	charles  = "charles@example.org"
)

var campaignRecipients = []string{"alan@example.org", "grace@example.org", margaret}

func bookPath(e *env, raw []byte) []byte {
	return pathID("contactBookId", func(e *env) string { return e.bookID })(e, raw)
}

func campaignPath(e *env, raw []byte) []byte {
	return pathID("campaignId", func(e *env) string { return e.campaignID })(e, raw)
}

func contactPath(addr string) func(*env, []byte) []byte {
	return pathID("contactId", func(e *env) string {
		if addr == margaret && e.contactID != "" {
			return e.contactID
		}
		return e.contacts[addr]
	})
}

var contactSteps = []step{
	{function: "CreateContactBook", check: func(e *env, b map[string]any) {
		e.wantField(b, "name", "Newsletter")
		e.bookID, _ = b["id"].(string)
		if !strings.HasPrefix(e.bookID, "cb") {
			e.t.Fatalf("create book answered %v", b)
		}
	}},
	{function: "ListContactBooks", check: func(e *env, b map[string]any) {
		if list := e.list(b, ""); len(list) != 1 || list[0]["id"] != e.bookID {
			e.t.Errorf("books = %v, want the one created", list)
		}
	}},
	{function: "GetContactBook", prepare: bookPath, check: func(e *env, b map[string]any) {
		e.wantField(b, "id", e.bookID)
		e.wantField(b, "name", "Newsletter")
	}},
	{function: "UpdateContactBook", prepare: bookPath, check: func(e *env, b map[string]any) {
		e.wantField(b, "name", "Product updates")
	}},
	{function: "BulkCreateContacts", prepare: bookPath, check: func(e *env, b map[string]any) {
		e.wantField(b, "count", float64(5))
		e.contacts = e.fixture.contacts(e)
		if c := e.fixture.contact(e, e.contacts[charles]); c.Subscribed {
			e.t.Errorf("%s is subscribed; the sample says not", charles)
		}
	}},
	{function: "CreateContact", prepare: bookPath, check: func(e *env, b map[string]any) {
		e.contactID, _ = b["contactId"].(string)
		if !strings.HasPrefix(e.contactID, "ct") {
			e.t.Fatalf("create contact answered %v", b)
		}
	}},
	// PUT upserts by the body's email: the same contact, its properties replaced.
	{function: "UpsertContact", prepare: both(bookPath, contactPath(margaret)), check: func(e *env, b map[string]any) {
		e.wantField(b, "contactId", e.contactID)
		if c := e.fixture.contact(e, e.contactID); c.Properties["company"] != "NASA" || !c.Subscribed {
			e.t.Errorf("contact %+v, want company NASA, subscribed", c)
		}
	}},
	{function: "UpdateContact", prepare: both(bookPath, contactPath(margaret)), check: func(e *env, b map[string]any) {
		e.wantField(b, "contactId", e.contactID)
	}},
	{function: "GetContact", prepare: both(bookPath, contactPath(margaret)), check: func(e *env, b map[string]any) {
		e.wantField(b, "id", e.contactID)
		e.wantField(b, "email", margaret)
		e.wantField(b, "firstName", "Maggie")
		e.wantField(b, "lastName", "Hamilton")
		e.wantField(b, "subscribed", true)
		e.wantField(b, "contactBookId", e.bookID)
	}},
	{function: "ListContacts", prepare: bookPath, check: func(e *env, b map[string]any) {
		list := e.list(b, "")
		var got []string
		for _, c := range list {
			got = append(got, fmt.Sprint(c["email"]))
			if e.contacts[fmt.Sprint(c["email"])] != fmt.Sprint(c["id"]) && c["id"] != e.contactID {
				e.t.Errorf("listed %v, whose id is not the one created", c)
			}
		}
		want := []string{"alan@example.org", charles, edsger, "grace@example.org", kath, margaret}
		if !slices.Equal(got, want) {
			e.t.Errorf("contacts %v, want %v (in email order)", got, want)
		}
	}},
	{function: "DeleteContact", prepare: both(bookPath, contactPath(edsger)), check: func(e *env, b map[string]any) {
		e.wantField(b, "success", true)
		e.fixture.wantNoContact(e, edsger)
	}},
	{function: "BulkDeleteContacts", prepare: both(bookPath, rewriteBody(func(e *env, body map[string]any) {
		body["contactIds"] = []string{e.contacts[kath]}
	})), check: func(e *env, b map[string]any) {
		e.wantField(b, "count", float64(1))
		e.fixture.wantNoContact(e, kath)
	}},
	// A draft campaign to the book, scheduled in an hour, paused, resumed (now).
	{function: "CreateCampaign", prepare: rewriteBody(func(e *env, body map[string]any) {
		body["contactBookId"] = e.bookID
	}), check: func(e *env, b map[string]any) {
		e.campaignID, _ = b["id"].(string)
		if !strings.HasPrefix(e.campaignID, "cp") {
			e.t.Fatalf("create campaign answered %v", b)
		}
		e.wantField(b, "status", store.CampaignDraft)
		e.wantField(b, "contactBookId", e.bookID)
		if _, err := e.fixture.campaignSchedule(e); err == nil {
			e.t.Error("a draft has a schedule")
		}
	}},
	{function: "ListCampaigns", check: func(e *env, b map[string]any) {
		if list := e.list(b, "campaigns"); len(list) != 1 || list[0]["id"] != e.campaignID {
			e.t.Errorf("campaigns = %v, want the one created", list)
		}
		e.wantField(b, "totalPage", float64(1))
	}},
	{function: "GetCampaign", prepare: campaignPath, check: func(e *env, b map[string]any) {
		e.wantField(b, "id", e.campaignID)
		e.wantField(b, "status", store.CampaignDraft)
	}},
	{function: "ScheduleCampaign", prepare: both(campaignPath, scheduleAt(time.Hour)), check: func(e *env, b map[string]any) {
		e.wantField(b, "success", true)
		c := e.fixture.campaign(e)
		if c.Status != store.CampaignScheduled || c.BatchSize != 2 || c.ScheduledAt == nil {
			e.t.Fatalf("campaign is %s, batch size %d, at %v; want SCHEDULED, 2", c.Status, c.BatchSize, c.ScheduledAt)
		}
		e.fixture.checkCampaignSchedule(e, *c.ScheduledAt, 0)
	}},
	{function: "PauseCampaign", prepare: campaignPath, check: func(e *env, b map[string]any) {
		e.wantField(b, "success", true)
		if c := e.fixture.campaign(e); c.Status != store.CampaignPaused {
			e.t.Errorf("campaign is %s, want PAUSED", c.Status)
		}
	}},
	{function: "ResumeCampaign", prepare: campaignPath, check: func(e *env, b map[string]any) {
		e.wantField(b, "success", true)
		c := e.fixture.campaign(e)
		// Paused before its start, it goes back to waiting for its time: resuming must not
		// send it early. Its schedule runs step 0 at the original time.
		if c.Status != store.CampaignScheduled || c.ScheduledAt == nil {
			e.t.Fatalf("campaign is %s, want SCHEDULED", c.Status)
		}
		e.fixture.checkCampaignSchedule(e, *c.ScheduledAt, 0)
	}},
	// The schedule's payload, with a Lambda deadline too close for a second step: the function
	// runs step 0 and schedules step 1; its after check fires that one as the scheduler would.
	{function: lambdafn.CampaignBatchFunction, prepare: campaignPayload, deadline: 90 * time.Second, after: checkCampaignBatch},
	// The unsubscribe link of the email to margaret: GET shows the form, POST unsubscribes.
	{function: "Unsubscribe", prepare: unsubscribeToken, page: func(e *env, resp events.APIGatewayV2HTTPResponse) {
		wantPage(e, resp, "<form")
		if c := e.fixture.contact(e, e.contactID); !c.Subscribed {
			e.t.Error("the GET unsubscribed the contact; only the POST may")
		}
	}},
	{function: "Unsubscribe", sample: "unsubscribe-post", prepare: unsubscribeToken, page: func(e *env, resp events.APIGatewayV2HTTPResponse) {
		wantPage(e, resp, "Unsubscribed")
		if c := e.fixture.contact(e, e.contactID); c.Subscribed {
			e.t.Error("the contact is still subscribed")
		}
		if n := e.fixture.campaign(e).Counters[store.CountUnsubscribed]; n != 1 {
			e.t.Errorf("unsubscribed counter %d, want 1", n)
		}
		// A second click (or a scanner's retry) changes nothing and still answers the page.
		out, err := e.handler.Invoke(context.Background(), unsubscribeToken(e, readSample(e.t, "unsubscribe-post")))
		if err != nil {
			e.t.Fatal(err)
		}
		var again events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(out, &again); err != nil || again.StatusCode != 200 {
			e.t.Errorf("second POST: %d (%v)", again.StatusCode, err)
		}
		if n := e.fixture.campaign(e).Counters[store.CountUnsubscribed]; n != 1 {
			e.t.Errorf("after a second POST the unsubscribed counter is %d, want 1", n)
		}
	}},
	// Double opt-in: the book turns it on and CreateContact adds ada, who waits for her
	// confirmation email's link (confirmToken); its GET shows the button, its POST subscribes.
	{function: "ConfirmSubscription", prepare: confirmToken, page: func(e *env, resp events.APIGatewayV2HTTPResponse) {
		wantPage(e, resp, ">Confirm</button>")
		if c := e.fixture.contact(e, e.doiContactID); c.Subscribed || !c.Pending {
			e.t.Errorf("after the GET: %+v; want the contact still waiting, not subscribed", c)
		}
	}},
	{function: "ConfirmSubscription", sample: "confirm-subscription-post", prepare: confirmToken, page: func(e *env, resp events.APIGatewayV2HTTPResponse) {
		wantPage(e, resp, "Subscription confirmed")
		if c := e.fixture.contact(e, e.doiContactID); !c.Subscribed || c.Pending {
			e.t.Errorf("after the POST: %+v; want the contact subscribed", c)
		}
		// An unsubscribe link is no confirmation link: it subscribes nobody.
		out, err := e.handler.Invoke(context.Background(), unsubscribeToken(e, readSample(e.t, "confirm-subscription-post")))
		if err != nil {
			e.t.Fatal(err)
		}
		var r events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(out, &r); err != nil || r.StatusCode != 404 {
			e.t.Errorf("an unsubscribe token at /subscribe: %d (%v), want 404", r.StatusCode, err)
		}
	}},
	// A complaint about the campaign's email to alan unsubscribes him, for that reason, and the
	// campaign counts him unsubscribed: through the SESEvents function's own grants.
	{function: lambdafn.SESEventsFunction, sample: "ses-events-complaint", prepare: campaignComplaint, after: func(e *env, out []byte) {
		check := func(when string) {
			if c := e.fixture.contact(e, e.contacts["alan@example.org"]); c.Subscribed || c.UnsubscribeReason != store.UnsubscribeComplained {
				e.t.Errorf("%s: alan subscribed %v, reason %q; want unsubscribed, COMPLAINED", when, c.Subscribed, c.UnsubscribeReason)
			}
			if n := e.fixture.campaign(e).Counters[store.CountUnsubscribed]; n != 2 {
				e.t.Errorf("%s: unsubscribed counter %d, want 2 (margaret's link, alan's complaint)", when, n)
			}
		}
		check("after the complaint")
		// EventBridge delivers at least once: a second delivery counts nothing more.
		if _, err := e.handler.Invoke(context.Background(), campaignComplaint(e, readSample(e.t, "ses-events-complaint"))); err != nil {
			e.t.Fatal(err)
		}
		check("after a redelivery")
	}},
	{function: "DeleteCampaign", prepare: campaignPath, check: func(e *env, b map[string]any) {
		e.wantField(b, "id", e.campaignID)
		if _, err := e.fixture.admin.Store.GetCampaign(context.Background(), e.teamID, e.campaignID); !errors.Is(err, store.ErrNotFound) {
			e.t.Errorf("campaign after delete: %v, want not found", err)
		}
		if _, err := e.fixture.campaignSchedule(e); err == nil {
			e.t.Error("the deleted campaign's schedule still exists")
		}
	}},
	{function: "DeleteContactBook", prepare: bookPath, check: func(e *env, b map[string]any) {
		e.wantField(b, "success", true)
		if _, err := e.fixture.admin.Store.GetContactBook(context.Background(), e.teamID, e.bookID); !errors.Is(err, store.ErrNotFound) {
			e.t.Errorf("book after delete: %v, want not found", err)
		}
	}},
	// The periodic function removes the deleted book's contacts.
	{function: lambdafn.ReconcilerFunction,
		prepare: func(e *env, raw []byte) []byte {
			if !e.fixture.bookPending(e) {
				e.t.Fatal("the deleted book is not waiting for its contacts to be removed")
			}
			return raw
		},
		after: func(e *env, out []byte) {
			if e.fixture.bookPending(e) {
				e.t.Error("the deleted book's contacts are still there")
			}
		}},
}

// contacts reads the book's contacts by email.
func (f *fixture) contacts(e *env) map[string]string {
	e.t.Helper()
	list, err := f.admin.Store.ContactsAfter(context.Background(), e.teamID, e.bookID, "", 100)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range list {
		out[c.Email] = c.ID
	}
	return out
}

func (f *fixture) contact(e *env, id string) store.Contact {
	e.t.Helper()
	c, err := f.admin.Store.GetContact(context.Background(), e.teamID, e.bookID, id)
	if err != nil {
		e.t.Fatalf("contact %s: %v", id, err)
	}
	return c
}

func (f *fixture) wantNoContact(e *env, addr string) {
	e.t.Helper()
	if _, err := f.admin.Store.GetContact(context.Background(), e.teamID, e.bookID, e.contacts[addr]); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("%s after delete: %v, want not found", addr, err)
	}
}

// bookPending: the deleted book is listed as having contacts left to remove.
func (f *fixture) bookPending(e *env) bool {
	e.t.Helper()
	list, err := f.admin.Store.DeletedContactBooks(context.Background(), 100)
	if err != nil {
		e.t.Fatal(err)
	}
	return slices.ContainsFunc(list, func(b store.DeletedBook) bool { return b.BookID == e.bookID })
}

func (f *fixture) campaign(e *env) store.Campaign {
	e.t.Helper()
	settled(e, nil) // its counters, from the stream
	c, err := f.admin.Store.GetCampaign(context.Background(), e.teamID, e.campaignID)
	if err != nil {
		e.t.Fatalf("campaign %s: %v", e.campaignID, err)
	}
	return c
}

// campaignSchedule reads the schedule of the campaign's start from moto's EventBridge Scheduler.
func (f *fixture) campaignSchedule(e *env) (*scheduler.GetScheduleOutput, error) {
	return scheduler.NewFromConfig(f.awsCfg).GetSchedule(context.Background(), &scheduler.GetScheduleInput{
		Name: aws.String(campaign.ScheduleName(e.campaignID, 0, 0)), GroupName: aws.String(f.cfg.ScheduleGroup),
	})
}

// checkCampaignSchedule: the campaign's schedule fires the campaign batch function at about
// at, as the template's role, with the dead-letter queue, with the payload of step.
func (f *fixture) checkCampaignSchedule(e *env, at time.Time, step int) campaign.Payload {
	e.t.Helper()
	sch, err := f.campaignSchedule(e)
	if err != nil {
		e.t.Fatalf("schedule of campaign %s: %v", e.campaignID, err)
	}
	expr := aws.ToString(sch.ScheduleExpression)
	got, err := time.Parse("at(2006-01-02T15:04:05)", expr)
	if err != nil || got.Sub(at).Abs() > time.Minute {
		e.t.Errorf("schedule expression %q, want about %s", expr, at.UTC().Format(time.RFC3339))
	}
	tg := sch.Target
	if aws.ToString(tg.Arn) != f.cfg.CampaignTargetARN || aws.ToString(tg.RoleArn) != f.cfg.ScheduleRoleARN ||
		tg.DeadLetterConfig == nil || aws.ToString(tg.DeadLetterConfig.Arn) != f.cfg.ScheduleDLQARN {
		e.t.Errorf("schedule target %+v, want the campaign batch function, the role and the queue", tg)
	}
	var p campaign.Payload
	if err := json.Unmarshal([]byte(aws.ToString(tg.Input)), &p); err != nil || p.CampaignID != e.campaignID ||
		p.TeamID != e.teamID || p.Step != step {
		e.t.Errorf("schedule input %s (%v), want step %d of this campaign", aws.ToString(tg.Input), err, step)
	}
	return p
}

// checkCampaignInvoked: the function invoked the campaign batch function once, asynchronously,
// with the payload of step (a step due now is an invocation, not a schedule at a past time).
func (f *fixture) checkCampaignInvoked(e *env, step int) []byte {
	e.t.Helper()
	got := f.invocations.Take()
	if len(got) != 1 {
		e.t.Fatalf("%d direct invocations, want 1: %+v", len(got), got)
	}
	inv := got[0]
	if inv.Function != f.cfg.CampaignTargetARN || inv.Type != "Event" {
		e.t.Errorf("invoked %s as %q, want the campaign batch function as Event", inv.Function, inv.Type)
	}
	var p campaign.Payload
	if err := json.Unmarshal(inv.Payload, &p); err != nil || p.CampaignID != e.campaignID ||
		p.TeamID != e.teamID || p.Step != step {
		e.t.Errorf("invocation payload %s (%v), want step %d of this campaign", inv.Payload, err, step)
	}
	return inv.Payload
}

// campaignPayload is what the campaign's schedule delivers (the sample's shape, checked).
func campaignPayload(e *env, raw []byte) []byte {
	var p map[string]any
	if err := json.Unmarshal(raw, &p); err != nil {
		e.t.Fatal(err)
	}
	if len(p) != 3 || p["campaignId"] == nil || p["teamId"] == nil || p["step"] == nil {
		e.t.Fatalf("campaign-batch sample %v, want {campaignId, teamId, step}", p)
	}
	sch, err := e.fixture.campaignSchedule(e)
	if err != nil {
		e.t.Fatalf("schedule of campaign %s: %v", e.campaignID, err)
	}
	// The service deletes a schedule once it has fired (ActionAfterCompletion: DELETE).
	if _, err := scheduler.NewFromConfig(e.fixture.awsCfg).DeleteSchedule(context.Background(), &scheduler.DeleteScheduleInput{
		Name: sch.Name, GroupName: sch.GroupName,
	}); err != nil {
		e.t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(aws.ToString(sch.Target.Input)), &got); err != nil {
		e.t.Fatal(err)
	}
	for k := range p {
		if _, ok := got[k]; !ok || len(got) != len(p) {
			e.t.Fatalf("schedule input %v does not have the sample's fields %v", got, p)
		}
	}
	// The scheduler fires at the campaign's time; the test cannot wait an hour, so that time is
	// moved into the past, as if it had come (a start that fires early only re-arms itself).
	past := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	if _, err := e.fixture.admin.Store.UpdateCampaign(context.Background(), e.teamID, e.campaignID, func(c *store.Campaign) error {
		c.ScheduledAt = &past
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return []byte(aws.ToString(sch.Target.Input))
}

// checkCampaignBatch: the first invocation ran step 0 (alan and grace: charles, unsubscribed,
// takes no place in the batch of 2) and, its deadline near, scheduled step 1; firing that runs
// the rest (margaret, and the book is done). Every subscribed contact has one email, queued, with
// its one-click unsubscribe headers, and the campaign is SENT with a total of 3.
func checkCampaignBatch(e *env, out []byte) {
	ctx := context.Background()
	if string(out) != "null" {
		e.t.Errorf("output %s", out)
	}
	c := e.fixture.campaign(e)
	if c.BatchesDone != 1 || c.Status != store.CampaignRunning || c.Counters[store.CountTotal] != 2 {
		e.t.Fatalf("after the first invocation: %s, %d steps, total %d; want RUNNING, 1, 2",
			c.Status, c.BatchesDone, c.Counters[store.CountTotal])
	}
	next := e.fixture.checkCampaignInvoked(e, 1)
	if _, err := e.handler.Invoke(ctx, next); err != nil {
		e.t.Fatalf("fire step 1: %v", err)
	}
	c = e.fixture.campaign(e)
	if c.Status != store.CampaignSent || c.Counters[store.CountTotal] != int64(len(campaignRecipients)) {
		e.t.Fatalf("campaign is %s with total %d, want SENT, %d", c.Status, c.Counters[store.CountTotal], len(campaignRecipients))
	}
	prefix := e.fixture.cfg.PublicURL + "/unsubscribe/"
	for _, addr := range campaignRecipients {
		id := e.contacts[addr]
		if addr == margaret {
			id = e.contactID
		}
		em, err := e.fixture.admin.Store.GetEmail(ctx, campaign.EmailID(e.campaignID, id))
		if err != nil {
			e.t.Errorf("email to %s: %v", addr, err)
			continue
		}
		if em.Status != store.StatusQueued || em.CampaignID != e.campaignID || len(em.To) != 1 || !strings.Contains(em.To[0], addr) {
			e.t.Errorf("email to %s: %s, campaign %q, to %v", addr, em.Status, em.CampaignID, em.To)
		}
		link := ""
		for _, h := range em.Content.Headers {
			if h.Name == "List-Unsubscribe" {
				link = strings.Trim(h.Value, "<>")
			}
		}
		token, ok := strings.CutPrefix(link, prefix)
		if !ok || token == "" {
			e.t.Errorf("email to %s: List-Unsubscribe %q, want a link under %s", addr, link, prefix)
		}
		if em.Content.HTML == nil || !strings.Contains(*em.Content.HTML, link) {
			e.t.Errorf("email to %s: the body does not carry its unsubscribe link", addr)
		}
		if addr == margaret {
			e.unsubToken = token
		}
	}
	if _, err := e.fixture.admin.Store.GetEmail(ctx, campaign.EmailID(e.campaignID, e.contacts[charles])); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("email to the unsubscribed %s: %v, want none", charles, err)
	}
	// The scheduler is at least once: a step that already ran does nothing.
	if _, err := e.handler.Invoke(ctx, next); err != nil {
		e.t.Errorf("second fire: %v", err)
	}
	if again := e.fixture.campaign(e); again.BatchesDone != c.BatchesDone || again.Counters[store.CountTotal] != c.Counters[store.CountTotal] {
		e.t.Errorf("second fire moved the campaign: %d steps, total %d", again.BatchesDone, again.Counters[store.CountTotal])
	}
}

// unsubscribeToken points an unsubscribe sample at the link of the email to margaret.
func unsubscribeToken(e *env, raw []byte) []byte {
	if e.unsubToken == "" {
		e.t.Fatal("no unsubscribe link was found in the campaign's emails")
	}
	return pathID("token", func(e *env) string { return e.unsubToken })(e, raw)
}

func wantPage(e *env, resp events.APIGatewayV2HTTPResponse, text string) {
	e.t.Helper()
	if ct := resp.Headers["Content-Type"]; !strings.HasPrefix(ct, "text/html") {
		e.t.Errorf("Content-Type = %q, want an HTML page", ct)
	}
	if !strings.Contains(resp.Body, text) {
		e.t.Errorf("page does not contain %q:\n%s", text, resp.Body)
	}
}

// confirmToken turns double opt-in on for the book, adds ada through the CreateContact function
// (she waits for her confirmation) and puts the token of the link in her confirmation email
// into the sample.
func confirmToken(e *env, raw []byte) []byte {
	if e.confirmToken == "" {
		e.confirmToken = e.fixture.doubleOptIn(e)
	}
	return pathID("token", func(e *env) string { return e.confirmToken })(e, raw)
}

func (f *fixture) doubleOptIn(e *env) string {
	ctx := context.Background()
	const ada = "ada@example.org"
	if _, err := f.admin.Store.UpdateContactBook(ctx, e.teamID, e.bookID, func(b *store.ContactBook) error {
		b.DoubleOptInEnabled, b.DoubleOptInSubject = true, "Confirm, {{firstName}}"
		b.DoubleOptInContent = `<p>Hi {{firstName}}, <a href="{{doubleOptInUrl}}">confirm</a></p>`
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	var req events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(bookPath(e, readSample(e.t, "create-contact")), &req); err != nil {
		e.t.Fatal(err)
	}
	req.Body = `{"email":"` + ada + `","firstName":"Ada"}`
	in, _ := json.Marshal(req)
	out, err := f.handler(e.t, "CreateContact").Invoke(ctx, in)
	var resp events.APIGatewayV2HTTPResponse
	if err != nil || json.Unmarshal(out, &resp) != nil || resp.StatusCode != 200 {
		e.t.Fatalf("CreateContact of %s: %v %s", ada, err, out)
	}
	var created struct{ ContactID string }
	_ = json.Unmarshal([]byte(resp.Body), &created)
	e.doiContactID = created.ContactID
	if c := f.contact(e, e.doiContactID); c.Subscribed || !c.Pending {
		e.t.Fatalf("%s in a book with double opt-in: %+v; want waiting for her confirmation", ada, c)
	}
	list, _, err := f.admin.Store.ListEmails(ctx, store.EmailFilter{TeamID: e.teamID, Limit: 20})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, m := range list {
		if len(m.To) != 1 || m.To[0] != ada {
			continue
		}
		full, err := f.admin.Store.GetEmail(ctx, m.ID)
		if err != nil || full.Content.HTML == nil || full.Subject != "Confirm, Ada" || full.ContactID != e.doiContactID {
			e.t.Fatalf("the confirmation email: %+v, %v", full, err)
		}
		if tok := confirmLink.FindStringSubmatch(*full.Content.HTML); tok != nil {
			return tok[1]
		}
		e.t.Fatalf("no confirmation link in %s", *full.Content.HTML)
	}
	e.t.Fatalf("no confirmation email to %s among %d emails", ada, len(list))
	return ""
}

// confirmLink is the whole link, on the stack's PUBLIC_URL: a recipient's mail client has no
// other base to resolve it against.
var confirmLink = regexp.MustCompile(`href="https?://[^"/]+[^"]*/subscribe/([A-Za-z0-9._-]+)"`)

// campaignComplaint is the complaint sample about the campaign's email to alan.
func campaignComplaint(e *env, raw []byte) []byte {
	const alan = "alan@example.org"
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		e.t.Fatal(err)
	}
	id := campaign.EmailID(e.campaignID, e.contacts[alan])
	mail, _ := path(ev, "detail", "mail").(map[string]any)
	mail["messageId"], mail["destination"] = "0100-campaign-complaint-"+id, []string{alan}
	for _, h := range mail["headers"].([]any) {
		if h := h.(map[string]any); strings.EqualFold(fmt.Sprint(h["name"]), sesevent.EmailIDHeader) {
			h["value"] = id
		}
	}
	complaint, _ := path(ev, "detail", "complaint").(map[string]any)
	complaint["complainedRecipients"] = []any{map[string]any{"emailAddress": alan}}
	b, err := json.Marshal(ev)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}
