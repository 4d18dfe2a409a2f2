package cost

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/mailroom/mailroom/pkg/app"
	"github.com/mailroom/mailroom/pkg/awstest"
	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/config"
	"github.com/mailroom/mailroom/pkg/lambdafn"
	"github.com/mailroom/mailroom/pkg/schedule/eventbridge"
	"github.com/mailroom/mailroom/pkg/sesevent"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/dynamo"
	"github.com/mailroom/mailroom/pkg/team"
)

func TestMain(m *testing.M) { awstest.Main(m) }

const apiKey = "us_costbench0_0123456789abcdef0123456789abcdef"

// scenario is one way emails are sent, with what its life costs beyond DynamoDB.
type scenario struct {
	name   string
	emails int
	// per email: API requests, Lambda invocations (function → count)
	api    float64
	lambda map[Function]float64
	send   func(b *testing.B, w *world) []string // returns the email ids
}

// world is one stack on moto: a table, its configuration sets and schedule group, the app.
type world struct {
	app    *app.App
	srv    *httptest.Server
	meter  *awstest.Meter
	db     *dynamodb.Client
	table  string
	teamID int64
}

// html10KB is a 10 KB newsletter of ordinary words (so it compresses as mail does).
func html10KB(seed uint64) string {
	words := strings.Fields("the our your new spring summer offer update team product launch read more today this week " +
		"customers feature release notes pricing event webinar join us thanks for reading learn how to get started " +
		"with a free trial account settings privacy policy unsubscribe at any time we hope you enjoy it")
	r := rand.New(rand.NewPCG(seed, 7))
	var b strings.Builder
	b.WriteString(`<html><body style="font-family:Arial,sans-serif"><h1>Our monthly news</h1>`)
	for b.Len() < 10<<10 {
		b.WriteString("<p>")
		for range 40 {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
		b.WriteString("</p>")
	}
	b.WriteString(`<a href="https://example.com/read-more">Read more</a></body></html>`)
	return b.String()
}

func (w *world) post(b *testing.B, path string, body any, headers ...string) []byte {
	b.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", w.srv.URL+path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		b.Fatalf("POST %s: %d %s", path, resp.StatusCode, out)
	}
	return out
}

// life takes the emails through the send worker (its stream handler, in batches as the event
// source mapping hands them over) and SES's Send, Delivery and Open events.
func (w *world) life(b *testing.B, ids []string) {
	ctx := context.Background()
	// Through the SendWorker's stream handler, StreamBatch records an invocation.
	handler := lambdafn.SendWorker(w.app.Worker, nil)
	for start := 0; start < len(ids); start += int(StreamBatch) {
		var ev events.DynamoDBEvent
		for i, id := range ids[start:min(len(ids), start+int(StreamBatch))] {
			ev.Records = append(ev.Records, events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{
				SequenceNumber: fmt.Sprint(start + i),
				Keys: map[string]events.DynamoDBAttributeValue{
					"PK": events.NewStringAttribute("EMAIL#" + id), "SK": events.NewStringAttribute("EMAIL")},
			}})
		}
		ictx, cancel := context.WithTimeout(ctx, time.Minute)
		resp, err := handler(ictx, ev)
		cancel()
		if err != nil || len(resp.BatchItemFailures) > 0 {
			b.Fatalf("stream batch: %v, %d failed", err, len(resp.BatchItemFailures))
		}
	}
	for _, id := range ids {
		// The bench reads the email to make SES's events for it (SES knows it already): not
		// part of the email's cost.
		var e store.Email
		var err error
		w.meter.Unmetered(func() { e, err = w.app.Store.GetEmail(ctx, id) })
		if err != nil || e.Status != store.StatusSent {
			b.Fatalf("%s: %s, %v; want SENT", id, e.Status, err)
		}
		at := time.Now().UTC()
		mail := sesevent.Mail{Timestamp: at, MessageID: e.MessageID, Destination: e.To,
			Tags: map[string][]string{sesevent.EmailIDTag: {id}}}
		for _, ev := range []sesevent.Event{
			{EventType: "Send", Mail: mail, Send: &sesevent.Send{}},
			{EventType: "Delivery", Mail: mail, Delivery: &sesevent.Delivery{Timestamp: at, ProcessingTimeMillis: 412,
				Recipients: e.To, SMTPResponse: "250 2.0.0 OK", ReportingMTA: "a8-1.smtp-out.amazonses.com"}},
			{EventType: "Open", Mail: mail, Open: &sesevent.Open{Timestamp: at.Add(time.Minute), IPAddress: "192.0.2.1",
				UserAgent: "Mozilla/5.0"}},
		} {
			if err := w.app.Ingester.Publish(ctx, ev); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The counts of all these writes, applied from the table's stream as the WebhookEvents
	// function does (in batches of its mapping's size: moto hands out up to 1,000 records a
	// read, so a batch here is larger, and its counter writes are shared by more emails).
	if err := w.app.Store.(*dynamo.Store).Settle(ctx); err != nil {
		b.Fatal(err)
	}
}

// storedBytes is what one email occupies in the table and its indexes: every item of its
// partition, and each index entry (the indexes project every attribute), with DynamoDB's 100
// bytes of overhead per item and per index entry.
func (w *world) storedBytes(b *testing.B, id string) int {
	out, err := w.db.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String(w.table),
		KeyConditionExpression:    aws.String("PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "EMAIL#" + id}}})
	if err != nil {
		b.Fatal(err)
	}
	total := 0
	for _, it := range out.Items {
		size := dynamo.ItemSize(it) + 100
		total += size
		for n := 1; n <= 4; n++ {
			if _, ok := it[fmt.Sprintf("GSI%dPK", n)]; ok {
				total += size
			}
		}
	}
	return total
}

func newWorld(b *testing.B) *world {
	ctx := context.Background()
	srv := awstest.Shared(b)
	awsCfg := srv.Config(b)
	m := &awstest.Meter{Size: dynamo.ItemSize, KeysOnly: dynamo.KeysOnly}
	m.Install(&awsCfg)
	db := dynamodb.NewFromConfig(awsCfg)
	table := fmt.Sprintf("cost-%d", time.Now().UnixNano())
	if err := dynamo.EnsureTable(ctx, db, table); err != nil {
		b.Fatal(err)
	}
	confSet := table + "-sends"
	ses := sesv2.NewFromConfig(awsCfg)
	for _, suffix := range []string{"", "-open", "-click", "-open-click"} {
		if _, err := ses.CreateConfigurationSet(ctx, &sesv2.CreateConfigurationSetInput{ConfigurationSetName: aws.String(confSet + suffix)}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := ses.CreateEmailIdentity(ctx, &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String("example.com")}); err != nil {
		b.Fatal(err)
	}
	group := table + "-schedules"
	if err := eventbridge.EnsureGroup(ctx, scheduler.NewFromConfig(awsCfg), group); err != nil {
		b.Fatal(err)
	}
	vars := map[string]string{
		"BACKEND": "aws", "TABLE_NAME": table, "SES_CONFIGURATION_SET": confSet, "LOG_LEVEL": "error",
		"SES_MAX_SEND_RATE": "1000", "SCHEDULE_GROUP": group,
		"SCHEDULE_TARGET_ARN":   "arn:aws:lambda:us-east-1:123456789012:function:cost-scheduled-send",
		"SCHEDULE_ROLE_ARN":     "arn:aws:iam::123456789012:role/cost-scheduler",
		"SCHEDULE_DLQ_ARN":      "arn:aws:sqs:us-east-1:123456789012:cost-schedule-dead-letters",
		"CAMPAIGN_TARGET_ARN":   "arn:aws:lambda:us-east-1:123456789012:function:cost-campaign-batch",
		"PUBLIC_URL":            "https://mail.example.com",
		"UNSUBSCRIBE_SECRET_ID": table + "/unsubscribe",
	}
	if _, err := secretsmanager.NewFromConfig(awsCfg).CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name:         aws.String(table + "/unsubscribe"),
		SecretString: aws.String("0f3c9a7e5b1d4c2a8e6f0b9d7c5a3e1f2b4d6f8a0c2e4a6b8d0f2a4c6e8b0d2f")}); err != nil {
		b.Fatal(err)
	}
	cfg, err := config.FromEnv(func(k string) string { return vars[k] })
	if err != nil {
		b.Fatal(err)
	}
	a, err := app.NewWithAWS(ctx, cfg, awsCfg, app.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close(context.Background()) })
	_, teamID, err := (&team.Admin{Store: a.Store, Now: time.Now}).Bootstrap(ctx, apiKey)
	if err != nil {
		b.Fatal(err)
	}
	if err := a.Store.CreateDomain(ctx, store.Domain{ID: 1, TeamID: teamID, Name: "example.com", Region: "us-east-1",
		Status: store.DomainSuccess, CreatedAt: time.Now().UTC()}); err != nil {
		b.Fatal(err)
	}
	w := &world{app: a, srv: httptest.NewServer(a.Services.Handler()), meter: m, db: db, table: table, teamID: teamID}
	b.Cleanup(w.srv.Close)
	return w
}

var scenarios = []scenario{
	{
		name: "single sends, with an Idempotency-Key", emails: 10, api: 1,
		lambda: map[Function]float64{APIFunction: 1, SendWorker: 1 / StreamBatch, SESEvents: EventsPerEmail, StreamEvents: StreamRecords / dynamo.StreamBatch},
		send: func(b *testing.B, w *world) []string {
			var ids []string
			for i := range 10 {
				out := w.post(b, "/api/v1/emails", map[string]any{"from": "news@example.com", "to": fmt.Sprintf("r%03d@example.org", i),
					"subject": "Our monthly news", "html": html10KB(uint64(i))}, "Idempotency-Key", fmt.Sprintf("cost-single-%d", i))
				var r struct{ EmailID string }
				_ = json.Unmarshal(out, &r)
				ids = append(ids, r.EmailID)
			}
			return ids
		},
	},
	{
		name: "one email of a batch of 100", emails: 100, api: 1.0 / 100,
		lambda: map[Function]float64{APIFunction: 1.0 / 100, SendWorker: 1 / StreamBatch, SESEvents: EventsPerEmail, StreamEvents: StreamRecords / dynamo.StreamBatch},
		send: func(b *testing.B, w *world) []string {
			var batch []map[string]any
			for i := range 100 {
				batch = append(batch, map[string]any{"from": "news@example.com", "to": fmt.Sprintf("b%03d@example.org", i),
					"subject": "Our monthly news", "html": html10KB(uint64(1000 + i))})
			}
			out := w.post(b, "/api/v1/emails/batch", batch)
			var r struct{ Data []struct{ EmailID string } }
			_ = json.Unmarshal(out, &r)
			var ids []string
			for _, d := range r.Data {
				ids = append(ids, d.EmailID)
			}
			return ids
		},
	},
	{
		name: "a campaign recipient (50 contacts)", emails: 50, api: 1.0 / 50,
		lambda: map[Function]float64{APIFunction: 1.0 / 50, CampaignBatch: 1 / CampaignStep, SendWorker: 1 / StreamBatch, SESEvents: EventsPerEmail, StreamEvents: StreamRecords / dynamo.StreamBatch},
		send: func(b *testing.B, w *world) []string {
			ctx := context.Background()
			bookID := "cbcost"
			if err := w.app.Store.CreateContactBook(ctx, store.ContactBook{ID: bookID, TeamID: w.teamID, Name: "news", CreatedAt: time.Now().UTC()}); err != nil {
				b.Fatal(err)
			}
			var contacts []store.Contact
			for i := range 50 {
				c, err := w.app.Store.PutContact(ctx, w.teamID, bookID, fmt.Sprintf("c%03d@example.org", i), fmt.Sprintf("ct%03d", i),
					func(c *store.Contact, _ bool) error {
						c.FirstName, c.Subscribed, c.CreatedAt, c.UpdatedAt = "Ada", true, time.Now().UTC(), time.Now().UTC()
						return nil
					})
				if err != nil {
					b.Fatal(err)
				}
				contacts = append(contacts, c)
			}
			w.meter.Reset() // the audience is not the send's cost
			out := w.post(b, "/api/v1/campaigns", map[string]any{"name": "News", "from": "news@example.com",
				"subject": "Our monthly news", "contactBookId": bookID, "batchSize": 500,
				"html": strings.Replace(html10KB(7), "</body>", `<a href="{{usesend_unsubscribe_url}}">Unsubscribe</a></body>`, 1)})
			var c struct{ ID string }
			_ = json.Unmarshal(out, &c)
			if err := w.app.Services.Campaigns.Schedule(ctx, w.teamID, c.ID, campaign.When{Now: true}, 0); err != nil {
				b.Fatal(err)
			}
			payload, _ := json.Marshal(campaign.Payload{CampaignID: c.ID, TeamID: w.teamID})
			if err := w.app.Services.Campaigns.Fire(ctx, payload); err != nil { // the invocation the start made
				b.Fatal(err)
			}
			var ids []string
			for _, ct := range contacts {
				ids = append(ids, campaign.EmailID(c.ID, ct.ID))
			}
			return ids
		},
	},
}

// BenchmarkEmailCost runs each scenario once (make bench-cost: -benchtime 1x) and prints the
// cost table and the summary line.
func BenchmarkEmailCost(b *testing.B) {
	p := Prices
	fmt.Printf("\ncost per 1,000 emails, us-east-1 list prices of %s (test/cost/prices.go), 10 KB html, accepted → SENT → DELIVERED → OPENED\n", PricesDate)
	fmt.Printf("%-40s %6s %6s %9s %9s %9s %9s %9s %9s %9s\n", "scenario", "WRU", "RRU", "DDB W $", "DDB R $", "Lambda $", "API GW $", "storage $", "total $", "+ SES $")
	worstCost, worstWRU := 0.0, 0.0
	for _, sc := range scenarios {
		w := newWorld(b) // a table each: moto slows as a table grows
		w.meter.Reset()
		ids := sc.send(b, w)
		w.life(b, ids)
		u := w.meter.Reset()
		n := float64(len(ids))
		wru, rru := float64(u.WRU())/n, u.RRU/n
		stored := float64(w.storedBytes(b, ids[0]))
		lambdaReq, gbs := 0.0, 0.0
		for f, k := range sc.lambda {
			lambdaReq += k
			gbs += k * f.MemoryMB / 1024 * f.Seconds
		}
		costs := []float64{
			wru * p.WRU * 1000,
			rru * p.RRU * 1000,
			(lambdaReq*p.LambdaRequest + gbs*p.LambdaGBSecond) * 1000,
			sc.api * p.APIRequest * 1000,
			stored * 1000 / (1 << 30) * p.StorageGBMonth,
		}
		total := 0.0
		for _, c := range costs {
			total += c
		}
		fmt.Printf("%-40s %6.1f %6.1f %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f\n", sc.name, wru, rru,
			costs[0], costs[1], costs[2], costs[3], costs[4], total, total+p.SESPerThousandEmail)
		worstCost, worstWRU = max(worstCost, total), max(worstWRU, wru)
		if testing.Verbose() {
			for _, k := range slices.Sorted(maps.Keys(u.ByKind)) {
				fmt.Printf("    %-28s %6.2f WRU per email\n", k, float64(u.ByKind[k])/n)
			}
			for _, k := range slices.Sorted(maps.Keys(u.ReadByKind)) {
				fmt.Printf("    %-28s %6.2f RRU per email\n", k, u.ReadByKind[k]/n)
			}
		}
	}
	fmt.Printf("Lambda per email: %s; API requests per email as listed; storage is one month of one email's items and index entries.\n", describe())
	fmt.Printf("targets: <= $0.01 per 1,000 emails beyond SES, <= 16 WRU per email\n")
	fmt.Printf("cost: $%.4f per 1,000 emails beyond SES; WRU per email max %.1f\n", worstCost, worstWRU)
}

func describe() string {
	var parts []string
	for _, f := range []Function{APIFunction, SendWorker, SESEvents, CampaignBatch, StreamEvents} {
		parts = append(parts, fmt.Sprintf("%s %g MB × %g s", f.Name, f.MemoryMB, f.Seconds))
	}
	return strings.Join(parts, ", ")
}
