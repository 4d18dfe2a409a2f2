package dynamo_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/smithy-go/middleware"

	"github.com/mailroom/mailroom/pkg/awstest"
	"github.com/mailroom/mailroom/pkg/hooks"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/dynamo"
	"github.com/mailroom/mailroom/pkg/store/dynamo/streams"
	"github.com/mailroom/mailroom/pkg/store/storetest"
)

func TestMain(m *testing.M) { awstest.Main(m) }

var tableSeq atomic.Int64

// motoMu serializes the calls to moto_server. moto applies a TransactWriteItems item by item
// and, when the transaction is cancelled, restores a snapshot of the table taken at its start,
// wiping out whatever concurrent requests wrote in between (and letting them see its partial
// writes). DynamoDB transactions and conditional writes are atomic; serializing the calls gives
// moto that atomicity, while goroutines still interleave between calls (read, then conditional
// write), which is what the optimistic concurrency and uniqueness tests exercise.
var motoMu sync.Mutex

// calls counts DynamoDB operations by name.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) add(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[op]++
}

func (c *calls) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// newClient returns a client on the shared moto server whose operations are counted. observe,
// if given, sees the input of every call that succeeded.
func newClient(t *testing.T, observe ...func(params any)) (*dynamodb.Client, *calls) {
	t.Helper()
	srv := awstest.Shared(t)
	c := &calls{n: map[string]int{}}
	client := dynamodb.NewFromConfig(srv.Config(t), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("countCalls",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					c.add(middleware.GetOperationName(ctx))
					motoMu.Lock()
					defer motoMu.Unlock()
					out, md, err := next.HandleInitialize(ctx, in)
					if err == nil {
						for _, f := range observe {
							f(in.Parameters)
						}
					}
					return out, md, err
				}), middleware.After)
		})
	})
	return client, c
}

// newTable creates a fresh table with a unique name on the shared server and returns its name.
func newTable(t *testing.T, client *dynamodb.Client) string {
	t.Helper()
	name := fmt.Sprintf("mailroom-test-%d", tableSeq.Add(1))
	if err := dynamo.EnsureTable(t.Context(), client, name); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	return name
}

// newStore creates a fresh table with a unique name on the shared server.
func newStore(t *testing.T, observe ...func(params any)) (*dynamo.Store, *calls) {
	t.Helper()
	client, c := newClient(t, observe...)
	name := newTable(t, client)
	c.reset()
	st := dynamo.New(client, name)
	st.ReadStream(streams.New(newStreamsClient(t)))
	return st, c
}

// newStreamsClient returns a client of moto's DynamoDB streams, its calls serialized with the
// table's (motoMu).
func newStreamsClient(t *testing.T) *dynamodbstreams.Client {
	return dynamodbstreams.NewFromConfig(awstest.Shared(t).Config(t), func(o *dynamodbstreams.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("serialize",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					motoMu.Lock()
					defer motoMu.Unlock()
					return next.HandleInitialize(ctx, in)
				}), middleware.After)
		})
	})
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, c := newStore(t)
		t.Cleanup(func() {
			if n := c.reset()["Scan"]; n > 0 {
				t.Errorf("%d Scan calls", n)
			}
		})
		return s
	}, storetest.Options{Emulated: true,
		WithAttempts: func(s store.Store, n int) store.Store { return dynamo.WithAttempts(s.(*dynamo.Store), n) },
	})
}

func email(teamID, domainID int64, id string, created time.Time) store.Email {
	html := "<p>hi</p>"
	return store.Email{
		ID: id, TeamID: teamID, DomainID: domainID, From: "a@example.com", To: []string{"b@example.com"},
		Subject: "s", Content: store.Content{HTML: &html}, Status: store.StatusQueued,
		LatestStatus: store.StatusQueued, CreatedAt: created, UpdatedAt: created,
	}
}

// TestCallCounts pins the number of DynamoDB calls of the hot paths.
func TestCallCounts(t *testing.T) {
	s, c := newStore(t)
	ctx := t.Context()
	now := time.Now().UTC()
	check := func(what string, want int) {
		t.Helper()
		got := c.reset()
		total := 0
		for _, n := range got {
			total += n
		}
		if total != want {
			t.Errorf("%s: %d calls %v, want %d", what, total, got, want)
		}
	}

	e := email(1, 1, "em-1", now)
	if err := s.CreateEmails(ctx, []store.Email{e}, []store.Event{{ID: "ev-1", EmailID: e.ID, Status: store.StatusQueued, CreatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	// The list entry with the content (BatchWriteItem), then the email with its counters.
	check("CreateEmails of one small email", 2)

	claim := store.IdemClaim{TeamID: 1, Key: "k", Fingerprint: "f", Nonce: "n", Now: now, TTL: 24 * time.Hour, StaleAfter: time.Minute}
	if _, ok, err := s.ClaimIdempotency(ctx, claim); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	check("ClaimIdempotency of a new key", 1)
	claim.Nonce = "another request"
	if _, ok, err := s.ClaimIdempotency(ctx, claim); err != nil || ok {
		t.Fatalf("second claim: %v %v", ok, err)
	}
	check("ClaimIdempotency of a held key", 1)

	if err := s.CreateAPIKey(ctx, store.APIKey{ID: "key1", TeamID: 1, Permission: store.PermissionFull, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	c.reset()
	if _, err := s.GetAPIKey(ctx, "key1"); err != nil {
		t.Fatal(err)
	}
	check("GetAPIKey", 1)
	if _, err := s.GetEmail(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	check("GetEmail", 1)
	if _, _, err := s.GetEmailDetail(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	check("GetEmailDetail", 1)
	if _, err := s.UpdateEmail(ctx, e.ID, func(e *store.Email) ([]store.Event, error) {
		e.Status = store.StatusSending
		return []store.Event{{ID: "ev-2", Status: "SENDING", CreatedAt: now}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	check("UpdateEmail with an event", 2)
}

// TestListEmailsAcrossDays checks counts and pages over many day shards, with boundary days
// covered partially, several domains merged, and emails that existed before a batch create.
func TestListEmailsAcrossDays(t *testing.T) {
	s, c := newStore(t)
	ctx := t.Context()
	base := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	var all []store.Email
	for i := range 150 { // 15 days, 10 emails a day, 3 domains
		created := base.Add(time.Duration(i/10)*24*time.Hour + time.Duration(i%10)*time.Hour)
		all = append(all, email(7, int64(1+i%3), fmt.Sprintf("em-%03d", i), created))
	}
	// Some emails exist already: the batch create must skip them without counting them twice.
	if err := s.CreateEmails(ctx, []store.Email{all[3], all[77]}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateEmails(ctx, all, nil); err != nil {
		t.Fatal(err)
	}
	c.reset()

	// newest first reference, filtered in memory
	want := func(start, end *time.Time, domains ...int64) []string {
		var ids []string
		for i := len(all) - 1; i >= 0; i-- {
			e := all[i]
			if start != nil && e.CreatedAt.Before(*start) || end != nil && e.CreatedAt.After(*end) {
				continue
			}
			if len(domains) > 0 && !slices.Contains(domains, e.DomainID) {
				continue
			}
			ids = append(ids, e.ID)
		}
		return ids
	}
	at := func(d, h int) *time.Time {
		t := base.Add(time.Duration(d)*24*time.Hour + time.Duration(h)*time.Hour)
		return &t
	}
	cases := []struct {
		name          string
		start, end    *time.Time
		domains       []int64
		offset, limit int
	}{
		{name: "all first page", limit: 7},
		{name: "all deep page", offset: 93, limit: 20},
		{name: "past the end", offset: 149, limit: 20},
		{name: "partial boundary days", start: at(2, 4), end: at(9, 5), offset: 5, limit: 30},
		{name: "one partial day", start: at(4, 2), end: at(4, 6), limit: 3},
		{name: "two domains merged", domains: []int64{1, 3, 3}, offset: 11, limit: 25},
		{name: "domain with range", start: at(1, 0), end: at(3, 9), domains: []int64{2}, offset: 2, limit: 100},
		{name: "no limit", start: at(12, 5), offset: 1},
	}
	if err := s.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ref := want(tc.start, tc.end, tc.domains...)
			page, count, err := s.ListEmails(ctx, store.EmailFilter{TeamID: 7, Start: tc.start, End: tc.end, DomainIDs: tc.domains, Offset: tc.offset, Limit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			if count != len(ref) {
				t.Errorf("count = %d, want %d", count, len(ref))
			}
			end := len(ref)
			if tc.limit > 0 {
				end = min(tc.offset+tc.limit, len(ref))
			}
			wantIDs := ref[min(tc.offset, len(ref)):end]
			var got []string
			for _, e := range page {
				got = append(got, e.ID)
			}
			if !slices.Equal(got, wantIDs) {
				t.Errorf("page = %v\nwant %v", got, wantIDs)
			}
		})
	}
	if n := c.reset()["Scan"]; n != 0 {
		t.Errorf("ListEmails used Scan %d times", n)
	}
}

// TestLargeTemplates: a template may take 512 KB of html and of text, more than an item holds:
// they are kept gzip'd and read back whole (Get, List, Update; 500 KB of each here). Bodies
// that do not compress under the item's 400 KB are ErrTooLarge (a 413), not DynamoDB's
// ValidationException (a 500), for a template and a campaign alike; one just under it is
// stored. A template item written before, with its bodies as they are, is read, listed and
// updated (and then stored gzip'd).
func TestLargeTemplates(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	now := time.Now().UTC()
	html := strings.Repeat("<p>Our monthly news, with the team's updates and a link to read more.</p>\n", 7000)[:500<<10]
	text := strings.Repeat("Our monthly news, in plain text for the readers who want it so.\n", 8000)[:500<<10]
	tpl := store.Template{ID: "tpl-big", TeamID: 4, Name: "big", Subject: "s", HTML: html, Text: text, CreatedAt: now, UpdatedAt: now}
	if err := s.CreateTemplate(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTemplate(ctx, 4, "tpl-big")
	if err != nil || got.HTML != html || got.Text != text {
		t.Fatalf("read back: %v, html %d bytes, text %d bytes; want %d and %d", err, len(got.HTML), len(got.Text), len(html), len(text))
	}
	if _, err := s.UpdateTemplate(ctx, 4, "tpl-big", func(t *store.Template) error { t.Name = "bigger"; return nil }); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListTemplates(ctx, 4)
	if err != nil || len(list) != 1 || list[0].Name != "bigger" || list[0].HTML != html || list[0].Text != text {
		t.Fatalf("listed: %v, %d templates", err, len(list))
	}

	random := func() string { // 500 KB of base64 that gzip takes back to about 375 KB
		noise := make([]byte, 375<<10)
		_, _ = rand.Read(noise)
		return base64.StdEncoding.EncodeToString(noise)
	}
	r1, r2 := random(), random()
	if err := s.CreateTemplate(ctx, store.Template{ID: "tpl-noise", TeamID: 4, Name: "noise", HTML: r1, Text: r2, CreatedAt: now}); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("a template of two incompressible 500 KB bodies: %v, want ErrTooLarge", err)
	}
	if _, err := s.UpdateTemplate(ctx, 4, "tpl-big", func(t *store.Template) error { t.HTML, t.Text = r1, r2; return nil }); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("updated to two incompressible 500 KB bodies: %v, want ErrTooLarge", err)
	}
	if err := s.CreateCampaign(ctx, store.Campaign{ID: "camp-noise", TeamID: 4, Name: "noise", HTML: r1, Content: r2,
		Status: store.CampaignDraft, CreatedAt: now}); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("a campaign of two incompressible 500 KB bodies: %v, want ErrTooLarge", err)
	}
	if got, err := s.GetTemplate(ctx, 4, "tpl-big"); err != nil || got.HTML != html {
		t.Errorf("after the refused update: %v, html %d bytes; want it unchanged", err, len(got.HTML))
	}
	// Just under the item's limit: one incompressible body of about 375 KB and a small one.
	if err := s.CreateTemplate(ctx, store.Template{ID: "tpl-near", TeamID: 4, Name: "near", HTML: r1, Text: "t",
		CreatedAt: now}); err != nil {
		t.Errorf("a template of 375 KB once compressed: %v, want it stored", err)
	} else if got, err := s.GetTemplate(ctx, 4, "tpl-near"); err != nil || got.HTML != r1 {
		t.Errorf("read back: %v, html %d bytes", err, len(got.HTML))
	}

	// An item of the layout before: html and text as attributes as they are.
	client, _ := newClient(t)
	old := strings.Repeat("<p>from before</p>", 1500)
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.Table()), Item: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "TEAM#5"}, "SK": &types.AttributeValueMemberS{Value: "TEMPLATE#tpl-old"},
		"ID": &types.AttributeValueMemberS{Value: "tpl-old"}, "TeamID": &types.AttributeValueMemberN{Value: "5"},
		"Name": &types.AttributeValueMemberS{Value: "old"}, "Subject": &types.AttributeValueMemberS{Value: "s"},
		"HTML": &types.AttributeValueMemberS{Value: old}, "Text": &types.AttributeValueMemberS{Value: "plain"},
		"CreatedAt": &types.AttributeValueMemberS{Value: now.Format(time.RFC3339Nano)},
		"Version":   &types.AttributeValueMemberN{Value: "0"},
	}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetTemplate(ctx, 5, "tpl-old"); err != nil || got.HTML != old || got.Text != "plain" || got.Name != "old" {
		t.Fatalf("the item of before: %+v, %v", got.Name, err)
	}
	if list, err := s.ListTemplates(ctx, 5); err != nil || len(list) != 1 || list[0].HTML != old {
		t.Fatalf("listed: %v, %d", err, len(list))
	}
	if _, err := s.UpdateTemplate(ctx, 5, "tpl-old", func(t *store.Template) error { t.Subject = "new"; return nil }); err != nil {
		t.Fatal(err)
	}
	raw, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "TEAM#5"}, "SK": &types.AttributeValueMemberS{Value: "TEMPLATE#tpl-old"}}})
	if err != nil || raw.Item["htmlZ"] == nil || raw.Item["HTML"] != nil && raw.Item["HTML"].(*types.AttributeValueMemberS).Value != "" {
		t.Errorf("updated item: %v, htmlZ %v; want the html stored gzip'd", err, raw.Item["htmlZ"] != nil)
	}
	if got, err := s.GetTemplate(ctx, 5, "tpl-old"); err != nil || got.HTML != old || got.Subject != "new" {
		t.Errorf("after the update: %v, subject %q", err, got.Subject)
	}
}

// TestLargeContentChunks round-trips a content bigger than an item through every read path but
// the list, which leaves it out.
func TestLargeContentChunks(t *testing.T) {
	s, c := newStore(t)
	ctx := t.Context()
	now := time.Now().UTC()
	e := email(3, 1, "em-big", now)
	noise := make([]byte, 1200<<10) // incompressible, so several chunks
	_, _ = rand.Read(noise)
	e.Content.Attachments = []store.Attachment{{Filename: "a.bin", Content: base64.StdEncoding.EncodeToString(noise)}}
	if err := s.CreateEmails(ctx, []store.Email{e}, nil); err != nil {
		t.Fatal(err)
	}
	if got := c.reset(); got["BatchWriteItem"] == 0 || got["PutItem"] != 1 || got["TransactWriteItems"] != 0 {
		t.Errorf("calls = %v, want chunk batch writes then one conditional put", got)
	}
	if err := s.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	same := func(what string, got store.Email) {
		t.Helper()
		if len(got.Content.Attachments) != 1 || got.Content.Attachments[0].Content != e.Content.Attachments[0].Content {
			t.Errorf("%s: content not returned whole", what)
		}
	}
	got, err := s.GetEmail(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	same("GetEmail", got)
	got, _, err = s.GetEmailDetail(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	same("GetEmailDetail", got)
	list, _, err := s.ListEmails(ctx, store.EmailFilter{TeamID: 3, Limit: 10})
	if err != nil || len(list) != 1 {
		t.Fatalf("ListEmails = %d, %v", len(list), err)
	}
	// A list leaves a content of several chunks out rather than load it (GetEmail has it).
	if l := list[0]; !l.ContentOmitted || len(l.Content.Attachments) != 0 || l.Subject != e.Subject || l.ID != e.ID {
		t.Errorf("ListEmails: %s omitted %v with %d attachments; want it listed without its content", l.ID, l.ContentOmitted, len(l.Content.Attachments))
	}
	got, err = s.UpdateEmail(ctx, e.ID, func(x *store.Email) ([]store.Event, error) {
		x.MessageID = "msg-big"
		x.Status = store.StatusSent
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err = s.GetEmail(ctx, e.ID)
	if err != nil || got.MessageID != "msg-big" {
		t.Fatalf("after the update: %s, %v", got.MessageID, err)
	}
	same("GetEmail after an update", got)
	// A retried create with other content leaves the existing email untouched.
	other := e
	other.Content = store.Content{Attachments: []store.Attachment{{Filename: "b.bin", Content: base64.StdEncoding.EncodeToString(noise[:700<<10])}}}
	if err := s.CreateEmails(ctx, []store.Email{other}, nil); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetEmail(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	same("GetEmail after a retried create", got)
}

// TestTableInput pins the table shape that template.yaml must declare.
func TestTableInput(t *testing.T) {
	in := dynamo.TableInput("t")
	if len(in.GlobalSecondaryIndexes) != 5 || in.StreamSpecification == nil || !*in.StreamSpecification.StreamEnabled {
		t.Fatalf("unexpected table input: %+v", in)
	}
	for i, g := range in.GlobalSecondaryIndexes {
		name := fmt.Sprintf("GSI%d", i+1)
		if *g.IndexName != name || *g.KeySchema[0].AttributeName != name+"PK" || *g.KeySchema[1].AttributeName != name+"SK" {
			t.Errorf("index %d = %s %s %s", i, *g.IndexName, *g.KeySchema[0].AttributeName, *g.KeySchema[1].AttributeName)
		}
		want := types.ProjectionTypeAll
		if name == dynamo.IndexGSI5 { // the work index: keys only
			want = types.ProjectionTypeKeysOnly
		}
		if g.Projection.ProjectionType != want {
			t.Errorf("index %s projects %s, want %s", name, g.Projection.ProjectionType, want)
		}
	}
}

// TestEnsureTableAddsTheWorkIndex: a table made before the keys-only work index gains it, and
// an email waiting in the former work index (GSI4) is still found until its next write moves
// it over.
func TestEnsureTableAddsTheWorkIndex(t *testing.T) {
	client, _ := newClient(t)
	ctx := t.Context()
	name := fmt.Sprintf("mailroom-test-%d", tableSeq.Add(1))
	in := dynamo.TableInput(name)
	in.GlobalSecondaryIndexes = in.GlobalSecondaryIndexes[:4]
	in.AttributeDefinitions = in.AttributeDefinitions[:len(in.AttributeDefinitions)-2]
	if _, err := client.CreateTable(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := dynamo.EnsureTable(ctx, client, name); err != nil {
		t.Fatal(err)
	}
	desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range desc.Table.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) == dynamo.IndexGSI5 && g.Projection.ProjectionType == types.ProjectionTypeKeysOnly {
			found = true
		}
	}
	if !found {
		t.Fatalf("indexes after EnsureTable: %+v, want GSI5 keys only", desc.Table.GlobalSecondaryIndexes)
	}
	s := dynamo.New(client, name)
	old, queued := email(25, 1, "wi-old", time.Now().UTC().Add(-time.Hour)), email(25, 1, "wi-new", time.Now().UTC())
	if err := s.CreateEmails(ctx, []store.Email{old, queued}, nil); err != nil {
		t.Fatal(err)
	}
	// wi-old as the former version wrote it: in GSI4.
	key := map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "EMAIL#wi-old"}, "SK": &types.AttributeValueMemberS{Value: "EMAIL"}}
	if _, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(name), Key: key,
		UpdateExpression:    aws.String("SET GSI4PK = GSI5PK, GSI4SK = GSI5SK REMOVE GSI5PK, GSI5SK"),
		ConditionExpression: aws.String("attribute_exists(GSI5PK)"),
	}); err != nil {
		t.Fatal(err)
	}
	ids, err := s.PendingEmails(ctx, 10)
	if err != nil || !slices.Equal(ids, []string{"wi-old", "wi-new"}) {
		t.Fatalf("PendingEmails = %v, %v; want both, oldest first", ids, err)
	}
	if _, err := s.UpdateEmail(ctx, "wi-old", func(e *store.Email) ([]store.Event, error) {
		e.Status = store.StatusSent
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if ids, err := s.PendingEmails(ctx, 10); err != nil || !slices.Equal(ids, []string{"wi-new"}) {
		t.Fatalf("PendingEmails after the old one is sent = %v, %v; want wi-new alone", ids, err)
	}
}

// TestEveryItemOfAnEmailExpires: with a retention, the email item, its events and its content
// chunks carry the TTL attribute DynamoDB deletes by, at the end of the day retention after
// its creation, or after its scheduled time when that is later (a reschedule extends every
// item); the table's TTL is on that attribute.
func TestEveryItemOfAnEmailExpires(t *testing.T) {
	s, _ := newStore(t)
	client, _ := newClient(t)
	ctx := t.Context()
	s.SetRetention(90 * 24 * time.Hour)
	created := time.Now().UTC().Truncate(time.Second)
	noise := make([]byte, 450<<10) // incompressible, so the content is chunked
	rand.Read(noise)
	html := base64.StdEncoding.EncodeToString(noise)
	e := store.Email{ID: "em-ttl", TeamID: 1, DomainID: 1, From: "a@example.com", To: []string{"b@example.org"},
		Subject: "s", Content: store.Content{HTML: &html}, Status: store.StatusQueued, LatestStatus: store.StatusQueued,
		CreatedAt: created, UpdatedAt: created}
	if err := s.CreateEmails(ctx, []store.Email{e}, []store.Event{{ID: "0-QUEUED", EmailID: e.ID, Status: store.StatusQueued, CreatedAt: created}}); err != nil {
		t.Fatal(err)
	}
	check := func(when string, expires time.Time) {
		t.Helper()
		out, err := client.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(s.Table()),
			KeyConditionExpression:    aws.String("PK = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "EMAIL#em-ttl"}}})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprint(expires.Unix())
		kinds := map[string]int{}
		for _, it := range out.Items {
			sk := it["SK"].(*types.AttributeValueMemberS).Value
			kinds[strings.SplitN(sk, "#", 2)[0]]++
			if ttl, ok := it[dynamo.TTLAttribute].(*types.AttributeValueMemberN); !ok || ttl.Value != want {
				t.Errorf("%s: item %s: ttl %v, want %s", when, sk, it[dynamo.TTLAttribute], want)
			}
		}
		if kinds["EMAIL"] != 1 || kinds["LIST"] != 1 || kinds["CONTENT"] < 2 {
			t.Errorf("%s: items of the email %v, want the email (its history inside), its list entry and content chunks", when, kinds)
		}
	}
	// The end of the UTC day 90 days after the email's creation.
	day := created.Truncate(24 * time.Hour)
	check("created", day.Add(91*24*time.Hour))
	// Scheduled 200 days later: every item lives 90 days past that day.
	later := created.Add(200 * 24 * time.Hour)
	if _, err := s.UpdateEmail(ctx, e.ID, func(x *store.Email) ([]store.Event, error) {
		x.ScheduledAt = &later
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	check("rescheduled", later.Truncate(24*time.Hour).Add(91*24*time.Hour))
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(s.Table())})
	if err != nil || ttl.TimeToLiveDescription == nil || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != dynamo.TTLAttribute {
		t.Errorf("table TTL %+v, %v; want on %s", ttl, err, dynamo.TTLAttribute)
	}
}

// TestListsEmailsOfBothLayouts: an email written before list entries (its list index keys on
// the email item itself) and one written after (a list entry carries them) are listed
// together, newest first, each once, with their content.
func TestListsEmailsOfBothLayouts(t *testing.T) {
	s, _ := newStore(t)
	client, _ := newClient(t)
	ctx := t.Context()
	base := time.Now().UTC().Add(-time.Minute)
	older, newer := email(3, 1, "em-old-layout", base), email(3, 1, "em-new-layout", base.Add(time.Second))
	if err := s.CreateEmails(ctx, []store.Email{older, newer}, nil); err != nil {
		t.Fatal(err)
	}
	// Rewrite the older one as the former layout wrote it.
	got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "EMAIL#em-old-layout"}, "SK": &types.AttributeValueMemberS{Value: "EMAIL"}}})
	if err != nil {
		t.Fatal(err)
	}
	entry, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "EMAIL#em-old-layout"}, "SK": &types.AttributeValueMemberS{Value: "LIST"}}})
	if err != nil || entry.Item == nil {
		t.Fatalf("list entry: %v %v", entry, err)
	}
	item := got.Item
	for _, k := range []string{"GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK"} {
		item[k] = entry.Item[k]
	}
	delete(item, "listed")
	if err := s.Settle(ctx); err != nil { // the create counted, as the former layout did in its write
		t.Fatal(err)
	}
	delete(item, "sc")
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.Table()), Item: item}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "EMAIL#em-old-layout"}, "SK": &types.AttributeValueMemberS{Value: "LIST"}}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []store.EmailFilter{{TeamID: 3, Limit: 10}, {TeamID: 3, DomainIDs: []int64{1}, Limit: 10}} {
		list, n, err := s.ListEmails(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if n != 2 || len(list) != 2 || list[0].ID != newer.ID || list[1].ID != older.ID {
			t.Fatalf("ListEmails(%+v) = %d emails %v, count %d; want the new then the old", f, len(list), ids(list), n)
		}
		for _, e := range list {
			if e.Content.HTML == nil || e.Subject == "" {
				t.Errorf("%s listed without its content", e.ID)
			}
		}
	}
	// An update keeps each layout: the old email stays listed.
	if _, err := s.UpdateEmail(ctx, older.ID, func(e *store.Email) ([]store.Event, error) {
		e.LatestStatus = store.StatusSent
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if list, _, err := s.ListEmails(ctx, store.EmailFilter{TeamID: 3, Limit: 10}); err != nil || len(list) != 2 {
		t.Fatalf("after an update of the old email: %v, %v", ids(list), err)
	}
}

func ids(list []store.Email) []string {
	var out []string
	for _, e := range list {
		out = append(out, e.ID)
	}
	return out
}

// TestFindsEmailsOfTheFormerLayoutByMessageID: an email written before the history moved into
// the email item (no "ev" attribute) may have been sent without its id as a tag, so its
// message id is indexed (GSI3) when it is sent; an email of the current layout is not.
func TestFindsEmailsOfTheFormerLayoutByMessageID(t *testing.T) {
	s, _ := newStore(t)
	client, _ := newClient(t)
	ctx := t.Context()
	base := time.Now().UTC().Add(-time.Minute)
	older, newer := email(3, 1, "em-former", base), email(3, 1, "em-current", base)
	if err := s.CreateEmails(ctx, []store.Email{older, newer}, nil); err != nil {
		t.Fatal(err)
	}
	key := map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "EMAIL#em-former"}, "SK": &types.AttributeValueMemberS{Value: "EMAIL"}}
	if _, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.Table()), Key: key,
		UpdateExpression: aws.String("REMOVE ev")}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{older.ID, newer.ID} {
		if _, err := s.UpdateEmail(ctx, id, func(e *store.Email) ([]store.Event, error) {
			e.Status, e.MessageID = store.StatusSent, "ses-"+id
			return []store.Event{{ID: "1-SENT", Status: store.StatusSent, CreatedAt: time.Now().UTC()}}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.FindEmailByMessageID(ctx, "ses-em-former")
	if err != nil || got.ID != older.ID || got.Status != store.StatusSent {
		t.Fatalf("FindEmailByMessageID(former) = %s %s, %v; want %s SENT", got.ID, got.Status, err, older.ID)
	}
	if _, err := s.FindEmailByMessageID(ctx, "ses-em-current"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FindEmailByMessageID(current) = %v, want not found: its events carry its id", err)
	}
	// The former email's event went to an item of its partition, the current one's inside.
	_, evs, err := s.GetEmailDetail(ctx, older.ID)
	if err != nil || len(evs) != 1 || evs[0].Status != store.StatusSent {
		t.Fatalf("former history = %+v, %v", evs, err)
	}
}

// TestLongHistoryLeavesTheEmailItem: the history stays inside the email item until it reaches
// about 1 KB; later events are items of the email's partition, so a much-opened email does not
// make each of its writes dearer. Every event is returned, in order, once; a repeated one is
// refused wherever it is kept.
func TestLongHistoryLeavesTheEmailItem(t *testing.T) {
	s, _ := newStore(t)
	client, _ := newClient(t)
	ctx := t.Context()
	base := time.Now().UTC().Add(-time.Hour)
	e := email(4, 1, "em-opened", base)
	if err := s.CreateEmails(ctx, []store.Email{e}, []store.Event{{ID: "0-QUEUED", EmailID: e.ID, Status: store.StatusQueued, CreatedAt: base}}); err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"ipAddress":"192.0.2.1","userAgent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)"}`)
	for i := 1; i <= 20; i++ {
		if _, err := s.UpdateEmail(ctx, e.ID, func(x *store.Email) ([]store.Event, error) {
			return []store.Event{{ID: fmt.Sprintf("open-%02d", i), Status: "OPENED", CreatedAt: base.Add(time.Duration(i) * time.Minute), Data: data}}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, again := range []string{"0-QUEUED", "open-20"} {
		_, err := s.UpdateEmail(ctx, e.ID, func(x *store.Email) ([]store.Event, error) {
			return []store.Event{{ID: again, Status: "OPENED", CreatedAt: time.Now().UTC()}}, nil
		})
		if !errors.Is(err, store.ErrDuplicateEvent) {
			t.Errorf("event %s again: %v, want ErrDuplicateEvent", again, err)
		}
	}
	_, evs, err := s.GetEmailDetail(ctx, e.ID)
	if err != nil || len(evs) != 21 {
		t.Fatalf("history: %d events, %v; want 21", len(evs), err)
	}
	for i, ev := range evs {
		want := "0-QUEUED"
		if i > 0 {
			want = fmt.Sprintf("open-%02d", i)
		}
		if ev.ID != want || ev.EmailID != e.ID || (i > 0 && string(ev.Data) != string(data)) {
			t.Errorf("event %d = %s of %s %s, want %s", i, ev.ID, ev.EmailID, ev.Data, want)
		}
	}
	item, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "EMAIL#em-opened"}, "SK": &types.AttributeValueMemberS{Value: "EMAIL"}}})
	if err != nil {
		t.Fatal(err)
	}
	if size := dynamo.ItemSize(item.Item); size > 2048 {
		t.Errorf("email item is %d bytes after 21 events, want at most 2 KB", size)
	}
}

// TestTeamDayKeysAreSharded: one team's emails of one day spread over WorkShards list
// partitions (GSI1 and GSI2) and day counter items, so no single key takes every send of a
// busy team; lists and counts merge the shards, and read what the former layout wrote
// unsharded (a list entry under the day's single partition, the team and domain counters).
func TestTeamDayKeysAreSharded(t *testing.T) {
	s, _ := newStore(t)
	client, _ := newClient(t)
	ctx := t.Context()
	base := time.Now().UTC().Truncate(time.Hour).Add(-30 * time.Minute)
	var all []store.Email
	for i := range 64 {
		all = append(all, email(9, 1, fmt.Sprintf("em-shard-%02d", i), base.Add(time.Duration(i)*time.Second)))
	}
	if err := s.CreateEmails(ctx, all, nil); err != nil {
		t.Fatal(err)
	}
	parts := map[string]bool{}
	for _, e := range all {
		got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: "EMAIL#" + e.ID}, "SK": &types.AttributeValueMemberS{Value: "LIST"}}})
		if err != nil || got.Item == nil {
			t.Fatalf("list entry of %s: %v", e.ID, err)
		}
		parts[got.Item["GSI1PK"].(*types.AttributeValueMemberS).Value] = true
		parts[got.Item["GSI2PK"].(*types.AttributeValueMemberS).Value] = true
	}
	if len(parts) < 2*8 {
		t.Errorf("64 emails of a day in %d list partitions, want them spread over at least 8", len(parts)/2)
	}

	// One more email as the former layout wrote it: its list entry in the day's single
	// partitions, its counts in the unsharded counters.
	old := email(9, 1, "em-shard-former", base.Add(-time.Minute))
	if err := s.CreateEmails(ctx, []store.Email{old}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	d := base.Format("2006-01-02")
	// The shard the stream counted the day in (each reader of a stream shard counts in one).
	counted := -1
	for sh := range dynamo.WorkShards {
		got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: fmt.Sprintf("TEAM#9#COUNT#%02d", sh)}, "SK": &types.AttributeValueMemberS{Value: "DAY#" + d}}})
		if err != nil {
			t.Fatal(err)
		}
		if got.Item != nil {
			counted = sh
		}
	}
	entry := map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "EMAIL#" + old.ID}, "SK": &types.AttributeValueMemberS{Value: "LIST"}}
	if _, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.Table()), Key: entry,
		UpdateExpression: aws.String("SET GSI1PK = :g1, GSI2PK = :g2"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":g1": &types.AttributeValueMemberS{Value: "TEAM#9#DAY#" + d}, ":g2": &types.AttributeValueMemberS{Value: "TEAM#9#DOM#1#DAY#" + d}}}); err != nil {
		t.Fatal(err)
	}
	one := map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: "1"}}
	minus := map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: "-1"}}
	moves := []struct {
		pk, expr string
		vals     map[string]types.AttributeValue
	}{
		{fmt.Sprintf("TEAM#9#COUNT#%02d", counted), "ADD n :n, d1 :n", minus},
		{"TEAM#9#COUNT", "ADD n :n", one},
		{"TEAM#9#DOM#1#COUNT", "ADD n :n", one},
	}
	for _, m := range moves {
		if _, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.Table()),
			Key:              map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: m.pk}, "SK": &types.AttributeValueMemberS{Value: "DAY#" + d}},
			UpdateExpression: aws.String(m.expr), ExpressionAttributeValues: m.vals}); err != nil {
			t.Fatal(err)
		}
	}
	start := base.Add(-2 * time.Minute) // a partial day: counted in the list partitions
	for _, f := range []store.EmailFilter{
		{TeamID: 9, Limit: 100}, {TeamID: 9, DomainIDs: []int64{1}, Limit: 100}, {TeamID: 9, Start: &start, Limit: 100},
		{TeamID: 9, Offset: 60, Limit: 10},
	} {
		list, n, err := s.ListEmails(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		want := 65 - f.Offset
		if n != 65 || len(list) != min(want, f.Limit) {
			t.Errorf("ListEmails(%+v) = %d emails, count %d; want %d of 65", f, len(list), n, min(want, f.Limit))
			continue
		}
		if list[len(list)-1].ID != old.ID {
			t.Errorf("ListEmails(%+v) ends with %s, want the former layout's %s (the oldest)", f, list[len(list)-1].ID, old.ID)
		}
		if f.Offset == 0 && list[0].ID != all[63].ID {
			t.Errorf("ListEmails(%+v) starts with %s, want the newest %s", f, list[0].ID, all[63].ID)
		}
	}
}

// streamRecords reads every record of the store's table stream so far, in order (moto has one
// shard).
func streamRecords(t *testing.T, s *dynamo.Store) (string, []dynamo.StreamRecord) {
	t.Helper()
	ctx := t.Context()
	client, _ := newClient(t)
	desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.Table())})
	if err != nil {
		t.Fatal(err)
	}
	sc := newStreamsClient(t)
	arn := desc.Table.LatestStreamArn
	ds, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
	if err != nil || len(ds.StreamDescription.Shards) != 1 {
		t.Fatalf("DescribeStream: %v, %v", ds, err)
	}
	shard := ds.StreamDescription.Shards[0].ShardId
	it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: shard, ShardIteratorType: "TRIM_HORIZON"})
	if err != nil {
		t.Fatal(err)
	}
	var out []dynamo.StreamRecord
	for iter := it.ShardIterator; iter != nil; {
		page, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Records) == 0 {
			break
		}
		for _, r := range page.Records {
			out = append(out, dynamo.StreamRecord{Seq: aws.ToString(r.Dynamodb.SequenceNumber), Keys: streams.FromStream(r.Dynamodb.Keys),
				Old: streams.FromStream(r.Dynamodb.OldImage), New: streams.FromStream(r.Dynamodb.NewImage)})
		}
		iter = page.NextShardIterator
	}
	return aws.ToString(shard), out
}

// TestApplyCountsExactlyOnce hands the counts of a stream's records to ApplyCounts the ways
// Lambda and several readers can: a batch retried whole, batches that overlap, a later batch
// first, and readers of the same shard at the same time. Each email and kind counts once.
func TestApplyCountsExactlyOnce(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	const team, n = 21, 12
	if err := s.CreateCampaign(ctx, store.Campaign{ID: "camp", TeamID: team, Status: store.CampaignRunning, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	var emails []store.Email
	for i := range n {
		e := email(team, 1+int64(i%2), fmt.Sprintf("ac-%02d", i), time.Now().UTC())
		e.CampaignID, e.Counted = "camp", []string{store.CountTotal}
		if i < 3 {
			at := time.Now().Add(time.Hour).UTC()
			e.Status, e.ScheduledAt = store.StatusScheduled, &at
		}
		emails = append(emails, e)
	}
	if err := s.CreateEmails(ctx, emails, nil); err != nil {
		t.Fatal(err)
	}
	for _, e := range emails[3:] {
		for _, kind := range []string{store.CountSent, store.CountDelivered} {
			if _, err := s.UpdateEmail(ctx, e.ID, func(e *store.Email) ([]store.Event, error) {
				e.Counted = append(e.Counted, kind)
				return []store.Event{{ID: kind, Status: strings.ToUpper(kind), CreatedAt: time.Now().UTC()}}, nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One scheduled email leaves SCHEDULED: the cap's count goes down.
	if _, err := s.UpdateEmail(ctx, emails[0].ID, func(e *store.Email) ([]store.Event, error) {
		e.Status = store.StatusQueued
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	shard, recs := streamRecords(t, s)
	if len(recs) < n+2*(n-3)+1 {
		t.Fatalf("%d stream records, want at least %d", len(recs), n+2*(n-3)+1)
	}
	half := len(recs) / 2
	apply := func(rs []dynamo.StreamRecord) {
		t.Helper()
		if skipped, err := s.ApplyCounts(ctx, shard, rs); err != nil || len(skipped) > 0 {
			t.Fatal(skipped, err)
		}
	}
	apply(recs[:half])
	apply(recs[:half])           // retried whole
	apply(recs[half/2 : half+3]) // overlapping, going further
	backwards := slices.Clone(recs[half : half+6])
	slices.Reverse(backwards)
	apply(backwards) // a redelivery out of order
	var wg sync.WaitGroup
	for range 4 { // several readers of the shard at once
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.ApplyCounts(ctx, shard, recs); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	apply(recs) // and everything again
	// A record that cannot be decoded is passed over, named, and holds nothing up.
	poison := dynamo.StreamRecord{Seq: recs[len(recs)-1].Seq + "0", New: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "EMAIL#ac-bad"}, "SK": &types.AttributeValueMemberS{Value: "EMAIL"},
		"sc": &types.AttributeValueMemberBOOL{Value: true}, "TeamID": &types.AttributeValueMemberS{Value: "not a number"}}}
	if skipped, err := s.ApplyCounts(ctx, shard, append(slices.Clone(recs), poison)); err != nil || !slices.Equal(skipped, []string{poison.Seq}) {
		t.Errorf("ApplyCounts with an undecodable record: skipped %v, %v; want it alone skipped", skipped, err)
	}
	got, err := s.GetCampaign(ctx, team, "camp")
	if err != nil {
		t.Fatal(err)
	}
	if got.Counters[store.CountTotal] != n || got.Counters[store.CountSent] != n-3 || got.Counters[store.CountDelivered] != n-3 {
		t.Errorf("campaign counters %v; want total %d, sent and delivered %d", got.Counters, n, n-3)
	}
	if _, count, err := s.ListEmails(ctx, store.EmailFilter{TeamID: team, Limit: 1}); err != nil || count != n {
		t.Errorf("list count %d, %v; want %d", count, err, n)
	}
	if _, count, err := s.ListEmails(ctx, store.EmailFilter{TeamID: team, DomainIDs: []int64{2}, Limit: 1}); err != nil || count != n/2 {
		t.Errorf("domain 2 list count %d, %v; want %d", count, err, n/2)
	}
	if sc, err := s.ScheduledCount(ctx, team); err != nil || sc != 2 {
		t.Errorf("ScheduledCount %d, %v; want 2", sc, err)
	}
	d := time.Now().UTC().Format("2006-01-02")
	days, err := s.DailyStats(ctx, team, 0, d, d)
	if err != nil || len(days) != 1 || days[0].Counts[store.CountSent] != n-3 || days[0].Counts[store.CountDelivered] != n-3 {
		t.Errorf("DailyStats %v, %v; want sent and delivered %d", days, err, n-3)
	}
}

// TestApplyCountsSkipsFormerLayout: an email item written without the stream-counted mark
// (by a version that counted in its writes) counts nothing from the stream, and a later write by
// this version counts only the kinds it adds.
func TestApplyCountsSkipsFormerLayout(t *testing.T) {
	s, _ := newStore(t)
	client, _ := newClient(t)
	ctx := t.Context()
	const team = 22
	e := email(team, 1, "fl-1", time.Now().UTC())
	if err := s.CreateEmails(ctx, []store.Email{e}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	key := map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "EMAIL#fl-1"}, "SK": &types.AttributeValueMemberS{Value: "EMAIL"}}
	// As the former version would: Counted += sent in the write (its counters in the same
	// transaction, not modelled here), and no mark.
	if _, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.Table()), Key: key,
		UpdateExpression:          aws.String("SET Counted = :c REMOVE sc"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: store.CountSent}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateEmail(ctx, e.ID, func(e *store.Email) ([]store.Event, error) {
		e.Counted = append(e.Counted, store.CountDelivered)
		return []store.Event{{ID: "d", Status: "DELIVERED", CreatedAt: time.Now().UTC()}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	d := time.Now().UTC().Format("2006-01-02")
	days, err := s.DailyStats(ctx, team, 0, d, d)
	if err != nil || len(days) != 1 || days[0].Counts[store.CountSent] != 0 || days[0].Counts[store.CountDelivered] != 1 {
		t.Errorf("DailyStats %v, %v; want delivered 1 and sent not counted again", days, err)
	}
	if _, count, err := s.ListEmails(ctx, store.EmailFilter{TeamID: team, Limit: 1}); err != nil || count != 1 {
		t.Errorf("list count %d, %v; want 1", count, err)
	}
}

// TestSentEventDataNotStoredTwice: a SENT event's data, the provider's message id, is not kept
// in the item a second time (MessageID holds it), and reads give it back whole.
func TestSentEventDataNotStoredTwice(t *testing.T) {
	s, _ := newStore(t)
	client, _ := newClient(t)
	ctx := t.Context()
	e := email(23, 1, "sd-1", time.Now().UTC())
	if err := s.CreateEmails(ctx, []store.Email{e}, []store.Event{{ID: "0-QUEUED", EmailID: e.ID, Status: store.StatusQueued, CreatedAt: e.CreatedAt}}); err != nil {
		t.Fatal(err)
	}
	const msg = "0100019a-5d2c-7e8f-9a0b-c1d2e3f4a5b6-000000"
	data := []byte(`{"messageId":"` + msg + `"}`)
	other := []byte(`{"messageId":"someone-else"}`)
	if _, err := s.UpdateEmail(ctx, e.ID, func(e *store.Email) ([]store.Event, error) {
		e.Status, e.MessageID = store.StatusSent, msg
		return []store.Event{{ID: "1-SENT", Status: store.StatusSent, CreatedAt: time.Now().UTC(), Data: data},
			{ID: "2-SENT", Status: store.StatusSent, CreatedAt: time.Now().UTC(), Data: other}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "EMAIL#" + e.ID}, "SK": &types.AttributeValueMemberS{Value: "EMAIL"}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ev, _ := got.Item["ev"].(*types.AttributeValueMemberL)
	if ev == nil || len(ev.Value) != 3 {
		t.Fatalf("inline history %v, want 3 entries", got.Item["ev"])
	}
	for _, entry := range ev.Value {
		if d, ok := entry.(*types.AttributeValueMemberM).Value["d"].(*types.AttributeValueMemberB); ok {
			n += strings.Count(string(d.Value), msg)
		}
	}
	if n != 0 {
		t.Errorf("the message id is in the inline history %d times, want 0 (the item's MessageID has it)", n)
	}
	_, events, err := s.GetEmailDetail(ctx, e.ID)
	if err != nil || len(events) != 3 {
		t.Fatalf("GetEmailDetail: %d events, %v", len(events), err)
	}
	if string(events[1].Data) != string(data) || string(events[2].Data) != string(other) {
		t.Errorf("SENT data read back %s and %s, want %s and %s", events[1].Data, events[2].Data, data, other)
	}
}

// TestWebhookCallsExpire: a webhook call's item (its payload names an email's recipients and
// subject) expires the retention after it was made, written new or updated.
func TestWebhookCallsExpire(t *testing.T) {
	s, _ := newStore(t)
	client, _ := newClient(t)
	ctx := t.Context()
	s.SetRetention(30 * 24 * time.Hour)
	made := time.Now().UTC().Truncate(time.Second)
	c := store.WebhookCall{ID: "whc_ttl", WebhookID: "wh_ttl", TeamID: 1, Type: "email.sent", Status: store.CallPending,
		NextAttemptAt: &made, CreatedAt: made, UpdatedAt: made}
	if _, err := s.CreateWebhookCalls(ctx, []store.WebhookCall{c}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(made.Add(30 * 24 * time.Hour).Unix())
	check := func(when string) {
		t.Helper()
		items, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(s.Table())})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, it := range items.Items {
			if id, ok := it["ID"].(*types.AttributeValueMemberS); !ok || id.Value != c.ID {
				continue
			}
			found = true
			if ttl, ok := it[dynamo.TTLAttribute].(*types.AttributeValueMemberN); !ok || ttl.Value != want {
				t.Errorf("%s: the call's ttl %v, want %s", when, it[dynamo.TTLAttribute], want)
			}
		}
		if !found {
			t.Fatalf("%s: no item of the call", when)
		}
	}
	check("created")
	if _, err := s.UpdateWebhookCall(ctx, c.WebhookID, c.ID, func(x *store.WebhookCall) error {
		x.Status, x.Attempts, x.NextAttemptAt = store.CallDelivered, 1, nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	check("delivered")
}

// TestAContactsNewAddressIsAnUpdate: a change of a contact's address deletes its item and
// writes one under the new address; read from the stream, the new item is the contact's
// contact.updated, and the deleted one is a move (Moved), not a contact.deleted. A contact
// really deleted is not moved.
func TestAContactsNewAddressIsAnUpdate(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	at := time.Now().UTC().Add(-time.Minute)
	if err := s.CreateContactBook(ctx, store.ContactBook{ID: "cb-move", TeamID: 31, Name: "b", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ email, id string }{{"old@example.org", "ct-move"}, {"gone@example.org", "ct-gone"}} {
		if _, err := s.PutContact(ctx, 31, "cb-move", c.email, c.id, func(x *store.Contact, _ bool) error {
			x.Subscribed, x.CreatedAt, x.UpdatedAt = true, at, at
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.UpdateContact(ctx, 31, "cb-move", "ct-move", func(x *store.Contact) error {
		x.Email, x.UpdatedAt = "new@example.org", time.Now().UTC()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteContacts(ctx, 31, "cb-move", []string{"ct-gone"}); err != nil {
		t.Fatal(err)
	}
	_, recs := streamRecords(t, s)
	seen := map[string]string{} // by the address each event names
	for _, rec := range recs {
		c, ok, err := dynamo.DecodeChange(rec.Keys, rec.Old, rec.New)
		if err != nil || !ok || (c.Before.Contact == nil && c.After.Contact == nil) {
			continue
		}
		ev, ok := hooks.ChangeEvent(c, rec.Seq)
		if !ok {
			continue
		}
		d := ev.Data.(hooks.ContactData)
		if ev.Type == "contact.deleted" {
			moved, err := s.Moved(ctx, store.Contact{ID: d.ID, TeamID: ev.TeamID, BookID: d.ContactBookID, Email: d.Email})
			if err != nil {
				t.Fatal(err)
			}
			if moved {
				ev.Type = "moved"
			}
		}
		seen[d.Email] += ev.Type + " "
	}
	want := map[string]string{"old@example.org": "contact.created moved ", "new@example.org": "contact.updated ",
		"gone@example.org": "contact.created contact.deleted "}
	if !maps.Equal(seen, want) {
		t.Errorf("events by address %v, want %v", seen, want)
	}
}
