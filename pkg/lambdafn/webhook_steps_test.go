package lambdafn_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mailroom/mailroom/pkg/lambdafn"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/webhook"
)

// hookReceiver is the webhooks' receiver of TestSamples: a real HTTP server on loopback (a
// deployed function may never call one: the fixture's functions are built with a policy that
// allows it, webhook.Policy{AllowLocal: true}).
type hookReceiver struct {
	mu  sync.Mutex
	srv *httptest.Server
	got []hookReceived
}

type hookReceived struct {
	header http.Header
	body   []byte
}

var receiver = func() func(t *testing.T) *hookReceiver {
	var (
		once sync.Once
		r    *hookReceiver
	)
	return func(t *testing.T) *hookReceiver {
		once.Do(func() {
			r = &hookReceiver{}
			r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				b, _ := io.ReadAll(req.Body)
				r.mu.Lock()
				r.got = append(r.got, hookReceived{req.Header.Clone(), b})
				r.mu.Unlock()
				w.WriteHeader(http.StatusOK)
			}))
		})
		return r
	}
}()

// last returns the last call received, checking its signature with secret.
func (r *hookReceiver) last(e *env, secret string) (hookReceived, webhook.Envelope) {
	e.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) == 0 {
		e.t.Fatal("the receiver got no call")
	}
	c := r.got[len(r.got)-1]
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(c.header.Get(webhook.HeaderTimestamp) + "." + string(c.body)))
	if c.header.Get(webhook.HeaderSignature) != "v1="+hex.EncodeToString(m.Sum(nil)) {
		e.t.Fatalf("the call's signature does not verify with the secret: %v", c.header)
	}
	var env webhook.Envelope
	if err := json.Unmarshal(c.body, &env); err != nil {
		e.t.Fatalf("envelope %s: %v", c.body, err)
	}
	return c, env
}

// webhookSteps manage a webhook, call it through the stream function and the retries, after
// SES's events about the email SendEmail sent.
var webhookSteps = []step{
	{function: "CreateWebhook", prepare: rewriteBody(func(e *env, body map[string]any) {
		body["url"] = receiver(e.t).srv.URL + "/mailroom"
		delete(body, "eventTypes") // every event
	}), check: func(e *env, b map[string]any) {
		e.webhookID, _ = b["id"].(string)
		e.webhookSecret, _ = b["secret"].(string)
		if !webhook.ValidSecret(e.webhookSecret) || !strings.HasPrefix(e.webhookID, "wh_") {
			e.t.Fatalf("created %v", b)
		}
	}},
	{function: "ListWebhooks", check: func(e *env, b map[string]any) {
		if list := e.list(b, "data"); len(list) != 1 || list[0]["id"] != e.webhookID || list[0]["secret"] != nil {
			e.t.Errorf("list %v", b)
		}
	}},
	{function: "GetWebhook", prepare: pathID("id", func(e *env) string { return e.webhookID }),
		check: func(e *env, b map[string]any) { e.wantField(b, "url", receiver(e.t).srv.URL+"/mailroom") }},
	{function: "UpdateWebhook", prepare: pathID("id", func(e *env) string { return e.webhookID }),
		check: func(e *env, b map[string]any) { e.wantField(b, "description", "every email event") }},
	{function: "RotateWebhookSecret", prepare: pathID("id", func(e *env) string { return e.webhookID }),
		check: func(e *env, b map[string]any) {
			next, _ := b["secret"].(string)
			if !webhook.ValidSecret(next) || next == e.webhookSecret {
				e.t.Fatalf("rotated %v", b)
			}
			e.webhookOldSecret, e.webhookSecret = e.webhookSecret, next
		}},
	{function: "TestWebhook", prepare: pathID("id", func(e *env) string { return e.webhookID }),
		check: func(e *env, b map[string]any) {
			e.wantField(b, "type", webhook.TestEvent)
			e.wantField(b, "status", store.CallDelivered)
			c, env := receiver(e.t).last(e, e.webhookSecret)
			m := hmac.New(sha256.New, []byte(e.webhookOldSecret))
			m.Write([]byte(c.header.Get(webhook.HeaderTimestamp) + "." + string(c.body)))
			if c.header.Get(webhook.HeaderPrevious) != "v1="+hex.EncodeToString(m.Sum(nil)) || env.Type != webhook.TestEvent {
				e.t.Errorf("after a rotation the old secret signs too: %v", c.header)
			}
		}},
	// The stream record of the email's last write (the last SES event recorded): its new
	// history entry reaches the webhook.
	{function: lambdafn.WebhookEventsFunction, prepare: webhookStreamRecord, after: func(e *env, out []byte) {
		var resp events.DynamoDBTimeWindowEventResponse
		if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) != 0 || resp.State == nil {
			e.t.Fatalf("response %s (a tumbling window's response must carry a state)", out)
		}
		// The counts: the shard's marker moved past the batch.
		var sample events.DynamoDBTimeWindowEvent
		_ = json.Unmarshal(readSample(e.t, lambdafn.WebhookEventsFunction), &sample)
		marker := e.fixture.item(e, "COUNTS#"+sample.ShardID, "COUNTS")
		last := sample.Records[len(sample.Records)-1].Change.SequenceNumber
		if seq, _ := marker["seq"].(*types.AttributeValueMemberS); seq == nil || !strings.HasSuffix(seq.Value, last) {
			e.t.Errorf("count marker of the sample's shard %v, want it at %s", marker, last)
		}
		r := receiver(e.t)
		_, env := r.last(e, e.webhookSecret)
		var domain struct {
			ID            int64
			ClickTracking bool
		}
		_ = json.Unmarshal(env.Data, &domain)
		if env.Type != "domain.updated" || fmt.Sprint(domain.ID) != e.domainID || !domain.ClickTracking {
			e.t.Errorf("the domain's stream record made the call %s %s", env.Type, env.Data)
		}
		r.mu.Lock()
		r.got = r.got[:len(r.got)-1]
		r.mu.Unlock()
		_, env = r.last(e, e.webhookSecret)
		var data struct{ ID, Status string }
		_ = json.Unmarshal(env.Data, &data)
		if env.Type != "email.rendering_failure" || data.ID != e.emailID || env.Attempt != 1 {
			e.t.Errorf("the email's stream record made the call %s", env.Type)
		}
	}},
	{function: "ListWebhookCalls", prepare: pathID("id", func(e *env) string { return e.webhookID }),
		check: func(e *env, b map[string]any) {
			// Newest event first: the sample's SES event happened before the test call, the
			// domain's write after.
			list := e.list(b, "data")
			if len(list) != 3 || list[0]["type"] != "domain.updated" || list[1]["type"] != webhook.TestEvent ||
				list[2]["type"] != "email.rendering_failure" {
				e.t.Fatalf("delivery log %v", b)
			}
			e.webhookCallID, _ = list[2]["id"].(string)
		}},
	{function: "ReplayWebhookCall", prepare: both(pathID("id", func(e *env) string { return e.webhookID }),
		pathID("callId", func(e *env) string { return e.webhookCallID })),
		check: func(e *env, b map[string]any) {
			e.wantField(b, "type", "email.rendering_failure")
			e.wantField(b, "status", store.CallDelivered)
			if b["id"] == e.webhookCallID {
				e.t.Error("a replay is a new call")
			}
		}},
	// A call that failed is attempted again by the retries function. Made by a service with
	// the deployed functions' own policy, the call to the loopback receiver is refused at
	// connection time (no request leaves), and stays due.
	{function: lambdafn.WebhookRetriesFunction, prepare: func(e *env, raw []byte) []byte {
		c, err := e.fixture.admin.Services.Webhooks.Test(context.Background(), e.teamID, e.webhookID)
		if err != nil || c.Status != store.CallPending || c.LastStatus != 0 || !strings.Contains(c.LastError, "loopback") {
			e.t.Fatalf("a call to a loopback receiver under the AWS policy: %+v, %v", c, err)
		}
		past := time.Now().Add(-time.Second)
		if _, err := e.fixture.admin.Store.UpdateWebhookCall(context.Background(), e.webhookID, c.ID, func(c *store.WebhookCall) error {
			c.NextAttemptAt = &past // due now, not after its backoff
			return nil
		}); err != nil {
			e.t.Fatal(err)
		}
		// The webhook holds its calls until the failed one's retry: that time has come too.
		if _, err := e.fixture.admin.Store.UpdateWebhook(context.Background(), e.teamID, e.webhookID, func(w *store.Webhook) error {
			if w.RetryAt == nil {
				return errors.New("the failing webhook has no retry time")
			}
			w.RetryAt = &past
			return nil
		}); err != nil {
			e.t.Fatal(err)
		}
		e.webhookCallID = c.ID
		return raw
	}, after: func(e *env, out []byte) {
		c, err := e.fixture.admin.Store.GetWebhookCall(context.Background(), e.webhookID, e.webhookCallID)
		if err != nil || c.Status != store.CallDelivered || c.Attempts != 2 {
			e.t.Fatalf("the retried call: %+v, %v", c, err)
		}
		if _, env := receiver(e.t).last(e, e.webhookSecret); env.Attempt != 2 || env.ID != c.ID {
			e.t.Errorf("the retry's envelope: attempt %d", env.Attempt)
		}
	}},
	{function: "DeleteWebhook", prepare: pathID("id", func(e *env) string { return e.webhookID }),
		check: func(e *env, b map[string]any) { e.wantField(b, "success", true) }},
}

// webhookStreamRecord points the sample's first record at the email SendEmail sent, with its
// item's image, and its second at the domain, as a write that turned click tracking on.
func webhookStreamRecord(e *env, raw []byte) []byte {
	var ev events.DynamoDBTimeWindowEvent
	if err := json.Unmarshal(raw, &ev); err != nil || len(ev.Records) != 2 || ev.ShardID == "" {
		e.t.Fatalf("the webhook events sample (two records and a shard id): %v", err)
	}
	emailItem := e.fixture.emailItem(e, e.emailID)
	image := streamImage(e.t, emailItem)
	// The write before it had counted one kind less: the record counts that kind.
	counted, _ := emailItem["Counted"].(*types.AttributeValueMemberL)
	if counted == nil || len(counted.Value) == 0 {
		e.t.Fatal("the email item has counted nothing")
	}
	before := maps.Clone(emailItem)
	before["Counted"] = &types.AttributeValueMemberL{Value: counted.Value[:len(counted.Value)-1]}
	if _, ok := image["nev"]; !ok {
		e.t.Fatal("the email item names no new history entry (nev)")
	}
	id, _ := strconv.ParseInt(e.domainID, 10, 64)
	item := e.fixture.item(e, "TEAM#"+strconv.FormatInt(e.teamID, 10), fmt.Sprintf("DOMAIN#%020d", id))
	item["UpdatedAt"] = &types.AttributeValueMemberS{Value: time.Now().UTC().Format(time.RFC3339Nano)}
	item["ClickTracking"] = &types.AttributeValueMemberBOOL{Value: true}
	domain := streamImage(e.t, item)
	item["ClickTracking"] = &types.AttributeValueMemberBOOL{Value: false}
	old := streamImage(e.t, item)
	for i, image := range []map[string]events.DynamoDBAttributeValue{image, domain} {
		for name, v := range ev.Records[i].Change.NewImage {
			if got, ok := image[name]; ok && got.DataType() != v.DataType() {
				e.t.Errorf("sample record %d NewImage %s has type %v, the item %v", i, name, v.DataType(), got.DataType())
			}
		}
		ev.Records[i].Change.Keys = map[string]events.DynamoDBAttributeValue{"PK": image["PK"], "SK": image["SK"]}
		ev.Records[i].Change.NewImage = image
	}
	ev.Records[0].Change.OldImage = streamImage(e.t, before)
	ev.Records[1].Change.OldImage = old
	b, err := json.Marshal(ev)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}
