package dynamo_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mailroom/mailroom/pkg/awstest"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/dynamo"
)

// TestCampaignWritesPerRecipient meters the DynamoDB writes of one campaign email through its
// whole life: created with Counted [total] and its QUEUED event, claimed by the worker (SENDING),
// recorded SENT with its event and Counted += sent, and one delivery event with
// Counted += delivered, and its share of the counts applied from the stream.
func TestCampaignWritesPerRecipient(t *testing.T) {
	m := &awstest.Meter{Size: dynamo.ItemSize, KeysOnly: dynamo.KeysOnly}
	s, c := newStore(t, func(params any) { m.Observe(params, nil) })
	ctx := t.Context()
	const team, domain = 11, 2
	if err := s.CreateCampaign(ctx, store.Campaign{ID: "camp", TeamID: team, DomainID: domain, Name: "c",
		Status: store.CampaignRunning, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}

	life := func(t *testing.T, emails []store.Email, oneByOne bool) (items, wcu, gsiWCU, calls float64) {
		t.Helper()
		m.Reset()
		c.reset()
		n := float64(len(emails))
		var events []store.Event
		for _, e := range emails {
			events = append(events, store.Event{ID: "0-QUEUED", EmailID: e.ID, Status: store.StatusQueued, CreatedAt: e.CreatedAt})
		}
		if oneByOne {
			for i, e := range emails {
				if err := s.CreateEmails(ctx, []store.Email{e}, events[i:i+1]); err != nil {
					t.Fatal(err)
				}
			}
		} else if err := s.CreateEmails(ctx, emails, events); err != nil {
			t.Fatal(err)
		}
		for _, e := range emails {
			now := time.Now().UTC()
			if _, err := s.UpdateEmail(ctx, e.ID, func(e *store.Email) ([]store.Event, error) {
				e.Status, e.ClaimedAt, e.UpdatedAt = store.StatusSending, &now, now
				return nil, nil
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.UpdateEmail(ctx, e.ID, func(e *store.Email) ([]store.Event, error) {
				e.Status, e.MessageID, e.LatestStatus, e.ClaimedAt = store.StatusSent, "msg-"+e.ID, store.StatusSent, nil
				e.Counted = append(e.Counted, store.CountSent)
				return []store.Event{{ID: "1-SENT", Status: store.StatusSent, CreatedAt: now, Data: []byte(`{"messageId":"x"}`)}}, nil
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.UpdateEmail(ctx, e.ID, func(e *store.Email) ([]store.Event, error) {
				e.LatestStatus = "DELIVERED"
				e.Counted = append(e.Counted, store.CountDelivered)
				return []store.Event{{ID: "delivery-" + e.ID, Status: "DELIVERED", CreatedAt: now,
					Data: []byte(`{"timestamp":"2025-01-01T00:00:00Z","processingTimeMillis":512,"recipients":["someone@example.com"],"smtpResponse":"250 2.0.0 OK","reportingMTA":"a8-1.smtp-out.example.com"}`)}}, nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		// The counts, applied from the table's stream as the WebhookEvents function does.
		if err := s.Settle(ctx); err != nil {
			t.Fatal(err)
		}
		u := m.Reset()
		wi, ww, wg := u.Items, u.TableWRU, u.IndexWRU
		total := 0
		for _, k := range c.reset() {
			total += k
		}
		return float64(wi) / n, float64(ww) / n, float64(wg) / n, float64(total) / n
	}

	mk := func(prefix string, n int) []store.Email {
		base := time.Now().UTC()
		var out []store.Email
		for i := range n {
			e := email(team, domain, fmt.Sprintf("%s-%03d", prefix, i), base.Add(time.Duration(i)*time.Millisecond))
			e.To = []string{fmt.Sprintf("recipient%03d@example.com", i)}
			e.Subject = "Our spring newsletter"
			html := `<html><body><h1>Hello Alice</h1><p>` + fmt.Sprintf("%0600d", i) + `</p></body></html>`
			e.Content.HTML = &html
			e.CampaignID, e.ContactID, e.Counted = "camp", fmt.Sprintf("ct-%03d", i), []string{store.CountTotal}
			out = append(out, e)
		}
		return out
	}
	const n = 10
	for _, tc := range []struct {
		name     string
		oneByOne bool
	}{{"created one by one", true}, {"created in one batch", false}} {
		items, wcu, gsi, calls := life(t, mk(fmt.Sprint(tc.oneByOne), n), tc.oneByOne)
		t.Logf("per campaign recipient (%d recipients, %s): %.2f item writes, %.2f table WCU + %.2f index WCU = %.2f WCU, %.2f calls",
			n, tc.name, items, wcu, gsi, wcu+gsi, calls)
		// The email item (created, SENDING, SENT, DELIVERED), its content item and list entry
		// (each written once), and a share of a counter transaction; the WCU bound guards the
		// cost (make bench-cost prices it in full).
		if items > 7 || wcu+gsi > 13 {
			t.Errorf("%s: %.2f item writes and %.2f WCU per recipient, want <= 7 and <= 13", tc.name, items, wcu+gsi)
		}
	}
	got, err := s.GetCampaign(ctx, team, "camp")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{store.CountTotal, store.CountSent, store.CountDelivered} {
		if got.Counters[k] != 2*n {
			t.Errorf("counter %s = %d, want %d", k, got.Counters[k], 2*n)
		}
	}
}

// TestCampaignCountersConcurrent: the contract skips its concurrent counter test against an
// emulator; this client serialises calls, which makes moto's ADD atomic, so it runs here.
// Deliveries recorded concurrently with UpdateCampaign calls all count, and no UpdateCampaign
// clobbers them.
func TestCampaignCountersConcurrent(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	const team, workers = 12, 12
	if err := s.CreateCampaign(ctx, store.Campaign{ID: "camp", TeamID: team, Status: store.CampaignRunning, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	var emails []store.Email
	for i := range workers {
		e := email(team, 1, fmt.Sprintf("cc-%02d", i), time.Now().UTC())
		e.CampaignID, e.Counted = "camp", []string{store.CountTotal}
		emails = append(emails, e)
	}
	if err := s.CreateEmails(ctx, emails, nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers)
	for i := range workers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := s.UpdateEmail(ctx, emails[i].ID, func(e *store.Email) ([]store.Event, error) {
				e.Counted = append(e.Counted, store.CountDelivered)
				return []store.Event{{ID: "d", Status: "DELIVERED", CreatedAt: time.Now().UTC()}}, nil
			})
			errs <- err
		}()
		go func() {
			defer wg.Done()
			_, err := s.UpdateCampaign(ctx, team, "camp", func(c *store.Campaign) error {
				c.BatchesDone++
				c.Counters = nil
				return nil
			})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetCampaign(ctx, team, "camp")
	if err != nil {
		t.Fatal(err)
	}
	if got.BatchesDone != workers || got.Counters[store.CountTotal] != workers || got.Counters[store.CountDelivered] != workers {
		t.Fatalf("BatchesDone %d, counters %v; want %d each", got.BatchesDone, got.Counters, workers)
	}
}

// TestCampaignCountersOfBothLayouts: a campaign's counters are read as the sum of its
// CampaignCounterShards items and of the unsharded item the former layout wrote, and deleting
// the campaign removes them all.
func TestCampaignCountersOfBothLayouts(t *testing.T) {
	s, _ := newStore(t)
	client, _ := newClient(t)
	ctx := t.Context()
	const team = 13
	if err := s.CreateCampaign(ctx, store.Campaign{ID: "camp", TeamID: team, Status: store.CampaignRunning, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	var emails []store.Email
	for i := range 48 {
		e := email(team, 1, fmt.Sprintf("cs-%02d", i), time.Now().UTC())
		e.CampaignID, e.Counted = "camp", []string{store.CountTotal}
		emails = append(emails, e)
	}
	if err := s.CreateEmails(ctx, emails, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	// The former layout's counters item, as an older version left it.
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.Table()), Item: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "TEAM#13#CAMPAIGN#camp"}, "SK": &types.AttributeValueMemberS{Value: "COUNTERS"},
		store.CountTotal: &types.AttributeValueMemberN{Value: "2"}, store.CountSent: &types.AttributeValueMemberN{Value: "2"}}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetCampaign(ctx, team, "camp")
	if err != nil || got.Counters[store.CountTotal] != 50 || got.Counters[store.CountSent] != 2 {
		t.Fatalf("counters %v, %v; want total 50 and sent 2", got.Counters, err)
	}
	list, _, err := s.ListCampaigns(ctx, team, store.CampaignFilter{Limit: 10})
	if err != nil || len(list) != 1 || list[0].Counters[store.CountTotal] != 50 {
		t.Fatalf("listed counters %v, %v; want total 50", list, err)
	}
	if err := s.DeleteCampaign(ctx, team, "camp"); err != nil {
		t.Fatal(err)
	}
	pks := []string{"TEAM#13#CAMPAIGN#camp"}
	for sh := range dynamo.CampaignCounterShards {
		pks = append(pks, fmt.Sprintf("TEAM#13#CAMPAIGN#camp#%02d", sh))
	}
	for _, pk := range pks {
		got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: pk}, "SK": &types.AttributeValueMemberS{Value: "COUNTERS"}}})
		if err != nil || got.Item != nil {
			t.Errorf("after delete: counters item %s %v, %v", pk, got.Item, err)
		}
	}
}

// TestBookOfManyContacts pages a book through every read path and deletes it in background
// pages: BatchWriteItem calls of at most 25 items, the marker gone with the last contact, and
// the contacts unreachable from the moment the book is deleted.
func TestBookOfManyContacts(t *testing.T) {
	s, c := newStore(t)
	ctx := t.Context()
	const team, n = 13, 60
	if err := s.CreateContactBook(ctx, store.ContactBook{ID: "big", TeamID: team, Name: "big", CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range n {
		ct, err := s.PutContact(ctx, team, "big", fmt.Sprintf("u%03d@example.com", n-1-i), fmt.Sprintf("ct-%03d", i),
			func(c *store.Contact, existed bool) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ct.ID)
	}
	c.reset()
	page, total, err := s.ListContacts(ctx, team, "big", store.ContactFilter{Offset: 45, Limit: 10})
	if err != nil || total != n || len(page) != 10 || page[0].Email != "u045@example.com" {
		t.Fatalf("ListContacts = %d contacts from %v, total %d, %v", len(page), page, total, err)
	}
	walked := 0
	for cursor := ""; ; {
		page, err := s.ContactsAfter(ctx, team, "big", cursor, 25)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		walked += len(page)
		cursor = page[len(page)-1].Email
	}
	if walked != n {
		t.Fatalf("ContactsAfter walked %d, want %d", walked, n)
	}
	if got := c.reset(); got["Scan"] != 0 {
		t.Fatalf("calls %v", got)
	}

	if err := s.DeleteContactBook(ctx, team, "big"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetContact(ctx, team, "big", ids[0]); err != store.ErrNotFound {
		t.Fatalf("GetContact of a deleted book: %v", err)
	}
	if _, err := s.ContactsAfter(ctx, team, "big", "", 10); err != store.ErrNotFound {
		t.Fatalf("ContactsAfter of a deleted book: %v", err)
	}
	if _, err := s.UpdateContact(ctx, team, "big", ids[0], func(*store.Contact) error { return nil }); err != store.ErrNotFound {
		t.Fatalf("UpdateContact of a deleted book: %v", err)
	}
	c.reset()
	for _, want := range []int{50, 10, 0} {
		got, err := s.DeleteContactsOfBook(ctx, team, "big", 50)
		if err != nil || got != want {
			t.Fatalf("DeleteContactsOfBook = %d, %v; want %d", got, err, want)
		}
		if want == 50 {
			if calls := c.reset(); calls["BatchWriteItem"] != 4 { // 100 deletes, 25 a call
				t.Errorf("calls %v, want 4 BatchWriteItem", calls)
			}
			deleted, err := s.DeletedContactBooks(ctx, 10)
			if err != nil || len(deleted) != 1 || deleted[0] != (store.DeletedBook{TeamID: team, BookID: "big"}) {
				t.Fatalf("DeletedContactBooks = %v, %v", deleted, err)
			}
		}
	}
	if deleted, err := s.DeletedContactBooks(ctx, 10); err != nil || len(deleted) != 0 {
		t.Fatalf("DeletedContactBooks after the last page = %v, %v", deleted, err)
	}
}

// TestDeleteContactsOfLiveBook: a book that still exists keeps its contacts.
func TestDeleteContactsOfLiveBook(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	if err := s.CreateContactBook(ctx, store.ContactBook{ID: "live", TeamID: 14, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutContact(ctx, 14, "live", "a@example.com", "ct-a", func(*store.Contact, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteContactsOfBook(ctx, 14, "live", 10); !errors.Is(err, store.ErrConflict) || n != 0 {
		t.Fatalf("DeleteContactsOfBook(live book) = %d, %v; want ErrConflict", n, err)
	}
	if _, err := s.GetContact(ctx, 14, "live", "ct-a"); err != nil {
		t.Fatal(err)
	}
}

// TestCampaignContentCompressed: a campaign's long HTML and editor content are stored gzip'd
// (each step rewrites the item), every read gives them back as written, and an item written
// before, with them as they are, still reads.
func TestCampaignContentCompressed(t *testing.T) {
	s, _ := newStore(t)
	client, _ := newClient(t)
	ctx := t.Context()
	const team = 24
	html := "<html><body>" + strings.Repeat("<p>Our spring news, and what comes next.</p>", 200) + "{{usesend_unsubscribe_url}}</body></html>"
	content := `{"type":"doc","content":[` + strings.Repeat(`{"type":"paragraph","content":[{"type":"text","text":"Our spring news"}]},`, 100) + `{}]}`
	c := store.Campaign{ID: "cz", TeamID: team, Name: "news", HTML: html, Content: content, Status: store.CampaignDraft, CreatedAt: time.Now().UTC()}
	if err := s.CreateCampaign(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "TEAM#24"}, "SK": &types.AttributeValueMemberS{Value: "CAMPAIGN#cz"}}
	raw, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table()), Key: key})
	if err != nil || raw.Item == nil {
		t.Fatalf("campaign item: %v", err)
	}
	if size := dynamo.ItemSize(raw.Item); size > len(html)/4 {
		t.Errorf("campaign item of %d bytes for %d bytes of html and %d of content, want it compressed", size, len(html), len(content))
	}
	check := func(what string, got store.Campaign) {
		t.Helper()
		if got.HTML != html || got.Content != content {
			t.Errorf("%s: html %d bytes, content %d bytes; want them as written (%d, %d)", what, len(got.HTML), len(got.Content), len(html), len(content))
		}
	}
	check("GetCampaign", getCampaignOrFail(t, s, team, "cz"))
	state, err := s.GetCampaignState(ctx, team, "cz")
	if err != nil {
		t.Fatal(err)
	}
	check("GetCampaignState", state)
	list, _, err := s.ListCampaigns(ctx, team, store.CampaignFilter{Limit: 10})
	if err != nil || len(list) != 1 {
		t.Fatalf("ListCampaigns: %d, %v", len(list), err)
	}
	check("ListCampaigns", list[0])
	updated, err := s.UpdateCampaign(ctx, team, "cz", func(c *store.Campaign) error {
		if c.HTML != html {
			return fmt.Errorf("fn sees %d bytes of html", len(c.HTML))
		}
		c.Name = "renamed"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check("UpdateCampaign", updated)
	check("GetCampaign after UpdateCampaign", getCampaignOrFail(t, s, team, "cz"))
	// As an older version wrote it.
	item := raw.Item
	delete(item, "htmlZ")
	delete(item, "contentZ")
	item["HTML"] = &types.AttributeValueMemberS{Value: html}
	item["Content"] = &types.AttributeValueMemberS{Value: content}
	item["Version"] = &types.AttributeValueMemberN{Value: "9"}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.Table()), Item: item}); err != nil {
		t.Fatal(err)
	}
	check("GetCampaign of the former layout", getCampaignOrFail(t, s, team, "cz"))
}

func getCampaignOrFail(t *testing.T, s *dynamo.Store, team int64, id string) store.Campaign {
	t.Helper()
	c, err := s.GetCampaign(t.Context(), team, id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
