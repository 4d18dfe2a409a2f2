package storetest

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

// The comparisons below ignore what an adapter may legitimately change on a round trip: the
// location of a time (stored as an instant), nil versus empty slices, and Version (which the
// adapter manages).

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func normContent(c store.Content) store.Content {
	c.Headers = nilIfEmpty(c.Headers)
	c.Attachments = nilIfEmpty(c.Attachments)
	return c
}

func normEmail(e store.Email) store.Email {
	e.Version, e.ScheduleCounted = 0, false // the store's own (ScheduledCount checks it)
	e.To, e.CC, e.BCC, e.ReplyTo = nilIfEmpty(e.To), nilIfEmpty(e.CC), nilIfEmpty(e.BCC), nilIfEmpty(e.ReplyTo)
	e.Counted = nilIfEmpty(e.Counted)
	e.Content = normContent(e.Content)
	e.ScheduledAt, e.ClaimedAt = utcPtr(e.ScheduledAt), utcPtr(e.ClaimedAt)
	e.CreatedAt, e.UpdatedAt = e.CreatedAt.UTC(), e.UpdatedAt.UTC()
	return e
}

// checkEmail fails unless got equals want. Content is compared on its own so that a mismatch of
// a multi-megabyte body is reported by size, not printed.
func checkEmail(t *testing.T, what string, got, want store.Email) {
	t.Helper()
	g, w := normEmail(got), normEmail(want)
	checkContent(t, what, g.Content, w.Content)
	g.Content, w.Content = store.Content{}, store.Content{}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: email differs\n got: %+v\nwant: %+v", what, g, w)
	}
}

func checkContent(t *testing.T, what string, got, want store.Content) {
	t.Helper()
	got, want = normContent(got), normContent(want)
	if reflect.DeepEqual(got, want) {
		return
	}
	size := func(c store.Content) (html, text, attachments int) {
		if c.HTML != nil {
			html = len(*c.HTML)
		}
		if c.Text != nil {
			text = len(*c.Text)
		}
		for _, a := range c.Attachments {
			attachments += len(a.Content)
		}
		return html, text, attachments
	}
	gh, gt, ga := size(got)
	wh, wt, wa := size(want)
	t.Fatalf("%s: content differs: got html=%d text=%d attachments=%d (%d) headers=%d; want html=%d text=%d attachments=%d (%d) headers=%d",
		what, gh, gt, ga, len(got.Attachments), len(got.Headers), wh, wt, wa, len(want.Attachments), len(want.Headers))
}

func checkEvent(t *testing.T, what string, got, want store.Event) {
	t.Helper()
	if got.ID != want.ID || got.EmailID != want.EmailID || got.Status != want.Status ||
		!got.CreatedAt.Equal(want.CreatedAt) || !bytes.Equal(got.Data, want.Data) {
		t.Fatalf("%s: event differs\n got: %+v\nwant: %+v", what, got, want)
	}
}

func normDomain(d store.Domain) store.Domain {
	d.DNSRecords = nilIfEmpty(d.DNSRecords)
	d.LastCheckedTime = utcPtr(d.LastCheckedTime)
	d.CreatedAt, d.UpdatedAt = d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	return d
}

func checkDomain(t *testing.T, what string, got, want store.Domain) {
	t.Helper()
	if g, w := normDomain(got), normDomain(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: domain differs\n got: %+v\nwant: %+v", what, g, w)
	}
}

func checkTemplate(t *testing.T, what string, got, want store.Template) {
	t.Helper()
	got.CreatedAt, got.UpdatedAt = got.CreatedAt.UTC(), got.UpdatedAt.UTC()
	want.CreatedAt, want.UpdatedAt = want.CreatedAt.UTC(), want.UpdatedAt.UTC()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: template differs\n got: %+v\nwant: %+v", what, got, want)
	}
}

func checkAPIKey(t *testing.T, what string, got, want store.APIKey) {
	t.Helper()
	got.CreatedAt, want.CreatedAt = got.CreatedAt.UTC(), want.CreatedAt.UTC()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: API key differs\n got: %+v\nwant: %+v", what, got, want)
	}
}

func nilIfEmptyMap[K comparable, V any](m map[K]V) map[K]V {
	if len(m) == 0 {
		return nil
	}
	return m
}

func checkBook(t *testing.T, what string, got, want store.ContactBook) {
	t.Helper()
	norm := func(b store.ContactBook) store.ContactBook {
		b.Properties = nilIfEmptyMap(b.Properties)
		b.Variables = nilIfEmpty(b.Variables)
		b.CreatedAt, b.UpdatedAt = b.CreatedAt.UTC(), b.UpdatedAt.UTC()
		return b
	}
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: contact book differs\n got: %+v\nwant: %+v", what, g, w)
	}
}

func checkContact(t *testing.T, what string, got, want store.Contact) {
	t.Helper()
	norm := func(c store.Contact) store.Contact {
		c.Properties = nilIfEmptyMap(c.Properties)
		c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
		return c
	}
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: contact differs\n got: %+v\nwant: %+v", what, g, w)
	}
}

// normCounters drops zero counters: a counter never incremented may be absent or 0.
func normCounters(m map[string]int64) map[string]int64 {
	out := make(map[string]int64)
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return nilIfEmptyMap(out)
}

func checkCampaign(t *testing.T, what string, got, want store.Campaign) {
	t.Helper()
	norm := func(c store.Campaign) store.Campaign {
		c.ReplyTo, c.CC, c.BCC = nilIfEmpty(c.ReplyTo), nilIfEmpty(c.CC), nilIfEmpty(c.BCC)
		c.ScheduledAt = utcPtr(c.ScheduledAt)
		c.Counters = normCounters(c.Counters)
		c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
		return c
	}
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: campaign differs\n got: %+v\nwant: %+v", what, g, w)
	}
}
