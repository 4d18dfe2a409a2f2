// Package streamhooks turns the table stream's records into webhook work: the history entries
// each email write added, and the writes to contacts, domains and campaigns. The WebhookEvents
// function runs it on the batches its event source mapping hands it; the local server on the
// AWS backend, where no function reads the stream, runs it on what it reads itself.
package streamhooks

import (
	"context"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mailroom/mailroom/pkg/hooks"
	"github.com/mailroom/mailroom/pkg/store/dynamo"
)

// Undecoded is a record whose change could not be read, for the caller to log.
type Undecoded struct {
	ID  string
	Err error
}

// Work lists the webhook work of records: for each email write, the history entries it added
// (dynamo.NewEventsAttribute); for each write to a contact, domain or campaign, its event
// (dynamo.DecodeChange, hooks.ChangeEvent, keyed by the stream record's id, so that a record
// delivered twice makes the same call).
func Work(recs []dynamo.StreamRecord) (entries []hooks.Entries, changes []hooks.Event, undecoded []Undecoded) {
	for _, rec := range recs {
		c, ok, err := dynamo.DecodeChange(rec.Keys, rec.Old, rec.New)
		if err != nil {
			undecoded = append(undecoded, Undecoded{ID: rec.ID, Err: err})
			continue
		}
		if ok {
			c.At = rec.At
			if e, ok := hooks.ChangeEvent(c, "stream/"+rec.ID); ok {
				changes = append(changes, e)
			}
			continue
		}
		id, ok := EmailID(rec)
		added := newEvents(rec.New)
		if !ok || len(added) == 0 {
			continue
		}
		n, ok := rec.New["TeamID"].(*types.AttributeValueMemberN)
		if !ok {
			continue
		}
		team, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			continue
		}
		entries = append(entries, hooks.Entries{TeamID: team, EmailID: id, EventIDs: added})
	}
	return entries, changes, undecoded
}

// Publish makes the calls of records' work and attempts them once (hooks.Service.PublishEntries
// and AttemptCalls); a call that fails is due again (hooks.Service.RunDue). It fails only when
// the calls could not be written, and then the same records may be handed again: their calls
// have the same ids.
func Publish(ctx context.Context, h *hooks.Service, st hooks.EmailReader, recs []dynamo.StreamRecord) (Result, error) {
	entries, changes, undecoded := Work(recs)
	r := Result{Entries: len(entries), Changes: len(changes), Undecoded: undecoded}
	calls, err := h.PublishEntries(ctx, st, entries, changes...)
	if err != nil {
		return r, err
	}
	r.Calls = len(calls)
	r.Attempted = h.AttemptCalls(ctx, calls)
	return r, nil
}

// Result is what Publish did, for the caller's log line.
type Result struct {
	Entries, Changes, Calls, Attempted int
	Undecoded                          []Undecoded
}

// EmailID returns the id of the email a record is about, when it is the insert or modification
// of an email item.
func EmailID(rec dynamo.StreamRecord) (string, bool) {
	if rec.Remove {
		return "", false
	}
	pk, ok := rec.Keys["PK"].(*types.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	if sk, ok := rec.Keys["SK"].(*types.AttributeValueMemberS); !ok || sk.Value != "EMAIL" {
		return "", false
	}
	id, ok := strings.CutPrefix(pk.Value, "EMAIL#")
	if !ok || id == "" {
		return "", false
	}
	return id, true
}

// newEvents lists the history entries an email write added.
func newEvents(image map[string]types.AttributeValue) []string {
	l, ok := image[dynamo.NewEventsAttribute].(*types.AttributeValueMemberL)
	if !ok {
		return nil
	}
	var out []string
	for _, v := range l.Value {
		if s, ok := v.(*types.AttributeValueMemberS); ok {
			out = append(out, s.Value)
		}
	}
	return out
}
