package dynamo

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mailroom/mailroom/pkg/store"
)

// Content storage: store.Content is kept as gzip'd JSON in content items of the email's
// partition (one, or chunks of contentChunkSize: DynamoDB items are limited to 400 KB), written
// once, before the email's transaction, so that an email item never points at missing content.
// The email item itself stays small: every status change rewrites it and every index entry
// of it (the indexes project every attribute), and content there would be paid at each. An
// email written before this layout may still carry its content inline (contentGz).
const contentChunkSize = 350 << 10

// maxTransactActions is AWS's limit of actions in one TransactWriteItems.
const maxTransactActions = 100

// emailItem is the email record. Its Content attribute is replaced by contentGz (inline) or
// contentRef/contentChunks (chunked).
type emailItem struct {
	keys
	store.Email
	ContentGz  []byte `dynamodbav:"contentGz,omitempty"`
	ContentRef string `dynamodbav:"contentRef,omitempty"`
	// ContentChunks is not stored when it is 1 (the usual case: every write of the item is
	// billed by its size); decodeItem restores it.
	ContentChunks int `dynamodbav:"contentChunks,omitempty"`
	// Listed: the email's list index keys are on its list entry (listKey), not on this item.
	// Emails written before list entries carry the keys themselves: decodeItem sets Listed
	// from their absence (an item may still hold the "listed" attribute written before).
	Listed bool `dynamodbav:"-"`
	// Events is the email's history kept inside the item (nil for an email written before:
	// its events are items of its partition). A status change and its event are then one
	// single-item write. Once the inline history reaches inlineEventBytes, later events are
	// event items again, written with the email in one transaction (Overflow).
	Events   []inlineEvent `dynamodbav:"ev"`
	Overflow bool          `dynamodbav:"evx,omitempty"`
	// NewEvents are the ids of the history entries this write added (inline or event items):
	// what the table's stream hands the webhook function (NewEventsAttribute).
	NewEvents []string `dynamodbav:"nev,omitempty"`
}

// NewEventsAttribute is the email item's attribute listing the events its last write added.
const NewEventsAttribute = "nev"

// inlineEventBytes bounds the history kept inside the email item: every write of the item
// is billed by its size, so a long history (an email opened a hundred times) moves on to
// event items instead of making every later write dearer.
const inlineEventBytes = 1024

// inlineEvent is one store.Event inside the email item, with short attribute names (the
// names are billed too) and the time in integer nanoseconds. A SENT event whose data is the
// provider's message id keeps none (SentData): the item holds that id already.
type inlineEvent struct {
	ID       string `dynamodbav:"i"`
	Status   string `dynamodbav:"s"`
	At       int64  `dynamodbav:"t"`
	Data     []byte `dynamodbav:"d,omitempty"`
	SentData bool   `dynamodbav:"m,omitempty"`
}

// sentData is a SENT event's data as the sender records it: {"messageId": <id>}.
func sentData(messageID string) []byte {
	b, _ := json.Marshal(map[string]string{"messageId": messageID})
	return b
}

// toInline makes ev an inline event of an email whose provider message id is messageID.
func toInline(ev store.Event, messageID string) inlineEvent {
	ie := inlineEvent{ID: ev.ID, Status: ev.Status, At: ev.CreatedAt.UnixNano(), Data: ev.Data}
	if ev.Status == store.StatusSent && messageID != "" && bytes.Equal(ev.Data, sentData(messageID)) {
		ie.Data, ie.SentData = nil, true
	}
	return ie
}

// event is ie as a store.Event of the email e.
func (ie inlineEvent) event(e store.Email) store.Event {
	data := ie.Data
	if ie.SentData {
		data = sentData(e.MessageID)
	}
	return store.Event{ID: ie.ID, EmailID: e.ID, Status: ie.Status, CreatedAt: time.Unix(0, ie.At).UTC(), Data: data}
}

func inlineSize(evs []inlineEvent) int {
	n := 0
	for _, ev := range evs {
		n += len(ev.ID) + len(ev.Status) + len(ev.Data) + 30
	}
	return n
}

// listItem is an email's list entry: its id under the list index keys, and its expiry.
type listItem struct {
	keys
	ID  string `dynamodbav:"ID"`
	TTL int64  `dynamodbav:"ttl,omitempty"`
}

func (st *Store) listAttrs(e store.Email) (map[string]types.AttributeValue, error) {
	sortKey, d := emailSort(e.CreatedAt, e.ID), day(e.CreatedAt)
	it := listItem{keys: listKey(e.ID).keys(), ID: e.ID, TTL: st.expiry(e)}
	shard := workShard(e.ID)
	it.GSI1PK, it.GSI1SK = emailDayIndexKey(e.TeamID, d, shard), sortKey
	it.GSI2PK, it.GSI2SK = emailDomainDayIndexKey(e.TeamID, e.DomainID, d, shard), sortKey
	return marshal(it)
}

type eventItem struct {
	keys
	store.Event
}

type chunkItem struct {
	keys
	Data []byte `dynamodbav:"data"`
	TTL  int64  `dynamodbav:"ttl,omitempty"`
}

// content is an encoded store.Content: inline bytes, or a ref and the chunk items to write.
type content struct {
	inline []byte
	ref    string
	chunks []map[string]types.AttributeValue
}

func encodeContent(emailID string, c store.Content, ttl int64) (content, error) {
	// Stored for months and billed by the byte at every write: the best compression, and
	// HTML left unescaped (the escapes of < > & compress worse).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return content{}, fmt.Errorf("dynamo: encode content: %w", err)
	}
	gz, err := gzipBytes(buf.Bytes())
	if err != nil {
		return content{}, fmt.Errorf("dynamo: compress content: %w", err)
	}
	sum := sha256.Sum256(gz)
	out := content{ref: hex.EncodeToString(sum[:4])} // tells apart the versions of one email's content
	for i := 0; len(gz) > 0; i++ {
		part := gz[:min(contentChunkSize, len(gz))]
		gz = gz[len(part):]
		m, err := marshal(chunkItem{keys: contentKey(emailID, out.ref, i).keys(), Data: part, TTL: ttl})
		if err != nil {
			return content{}, err
		}
		out.chunks = append(out.chunks, m)
	}
	return out, nil
}

// gzipBytes compresses b at the best level: stored items are kept for months and billed by the
// byte at every write (the email content, a campaign's HTML and editor content).
func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func gunzipBytes(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

func decodeContent(gz []byte) (store.Content, error) {
	var c store.Content
	if len(gz) == 0 {
		return c, nil
	}
	raw, err := gunzipBytes(gz)
	if err != nil {
		return c, fmt.Errorf("dynamo: decompress content: %w", err)
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("dynamo: decode content: %w", err)
	}
	return c, nil
}

// writeChunks stores chunk items (idempotent: same content, same keys and bytes).
func (st *Store) writeChunks(ctx context.Context, chunks []map[string]types.AttributeValue) error {
	if len(chunks) == 0 {
		return nil
	}
	reqs := make([]types.WriteRequest, len(chunks))
	for i, m := range chunks {
		reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: m}}
	}
	return st.batchWrite(ctx, reqs)
}

func pending(status string) bool {
	return status == store.StatusQueued || status == store.StatusSending
}

// emailAttrs builds the email item: the index attributes follow from the email's state, so a
// Put of the new state also moves it in and out of the sparse indexes (GSI3, GSI5).
//
// Attributes with zero values are left out (every write is billed by the item's size). The
// message-id index (GSI3) is kept only for emails written before the inline history: every
// later email is sent with its id as an SES tag, so its events name it.
func (st *Store) emailAttrs(e store.Email, c content, old emailItem) (map[string]types.AttributeValue, error) {
	sortKey := emailSort(e.CreatedAt, e.ID)
	d := day(e.CreatedAt)
	it := emailItem{keys: emailKey(e.ID).keys(), Email: e, Listed: old.Listed, Events: old.Events, Overflow: old.Overflow,
		NewEvents: old.NewEvents}
	if !old.Listed {
		// The former layout: the list keys on the item, unsharded.
		it.GSI1PK, it.GSI1SK = emailDayIndexKey(e.TeamID, d, legacyShard), sortKey
		it.GSI2PK, it.GSI2SK = emailDomainDayIndexKey(e.TeamID, e.DomainID, d, legacyShard), sortKey
	}
	if e.MessageID != "" && old.Events == nil {
		it.GSI3PK, it.GSI3SK = messageIDIndexKey(e.MessageID), e.ID
	}
	// The work index (GSI5, keys only: a write that keeps the key writes nothing to it). An
	// email written before it, in GSI4, moves to it with its next write.
	switch {
	case e.Status == store.StatusQueued && e.Held && e.CampaignID != "":
		it.GSI5PK, it.GSI5SK = heldIndexKey(e.TeamID, e.CampaignID), sortKey
	case pending(e.Status):
		it.GSI5PK, it.GSI5SK = pendingIndexKey(workShard(e.ID)), sortKey
	case e.Status == store.StatusScheduled && e.ScheduledAt != nil:
		it.GSI5PK, it.GSI5SK = scheduledIndexKey(workShard(e.ID)), emailSort(*e.ScheduledAt, e.ID)
	}
	it.ContentGz, it.ContentRef, it.ContentChunks = c.inline, c.ref, len(c.chunks)
	if it.ContentRef != "" && it.ContentChunks == 1 {
		it.ContentChunks = 0 // the default (decodeItem)
	}
	m, err := marshal(it)
	if err != nil {
		return nil, err
	}
	delete(m, "Content")
	for k, v := range m {
		if k != "ev" && k != "Version" && zeroAV(v) {
			delete(m, k)
		}
	}
	if it.Events != nil && len(it.Events) == 0 {
		m["ev"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
	}
	if it.Events == nil {
		delete(m, "ev")
	}
	if ttl := st.expiry(e); ttl > 0 {
		m[TTLAttribute] = avN(ttl)
	}
	m[streamCountedAttribute] = &types.AttributeValueMemberBOOL{Value: true}
	return m, nil
}

// zeroAV reports an attribute value that decodes to its field's zero value.
func zeroAV(v types.AttributeValue) bool {
	switch v := v.(type) {
	case *types.AttributeValueMemberNULL:
		return true
	case *types.AttributeValueMemberS:
		return v.Value == ""
	case *types.AttributeValueMemberN:
		return v.Value == "0"
	case *types.AttributeValueMemberBOOL:
		return !v.Value
	case *types.AttributeValueMemberL:
		return len(v.Value) == 0
	}
	return false
}

// eventAttrs builds an event item of e (its TTL is the email's).
func (st *Store) eventAttrs(ev store.Event, e store.Email) (map[string]types.AttributeValue, error) {
	m, err := marshal(eventItem{keys: eventKey(ev.EmailID, ev.ID).keys(), Event: ev})
	if err == nil {
		if ttl := st.expiry(e); ttl > 0 {
			m[TTLAttribute] = avN(ttl)
		}
	}
	return m, err
}

// ItemSize estimates the size DynamoDB bills for an item (names plus values); the write and read
// meters of the tests and of the cost benchmark use it.
func ItemSize(m map[string]types.AttributeValue) int { return itemSize(m) }

func itemSize(m map[string]types.AttributeValue) int {
	total := 0
	for k, v := range m {
		total += len(k) + avSize(v)
	}
	return total
}

func avSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return len(v.Value)
	case *types.AttributeValueMemberL:
		t := 3
		for _, x := range v.Value {
			t += 1 + avSize(x)
		}
		return t
	case *types.AttributeValueMemberM:
		return 3 + itemSize(v.Value)
	case *types.AttributeValueMemberSS:
		t := 0
		for _, x := range v.Value {
			t += len(x)
		}
		return t
	default:
		return 1
	}
}

// CreateEmails writes each email's content and list entry (BatchWriteItem), then each email
// item, with its first events inside, by a PutItem conditioned on its not existing (several at
// a time). An email that exists already fails its condition and is left as it is: a retried
// request neither overwrites nor counts it twice. No counter is written here: the counts follow
// from the email items through the table's stream (ApplyCounts).
func (st *Store) CreateEmails(ctx context.Context, emails []store.Email, firstEvents []store.Event) error {
	events := map[string][]store.Event{}
	seen := map[string]bool{}
	for _, ev := range firstEvents {
		if seen[ev.EmailID+"\x00"+ev.ID] {
			continue
		}
		seen[ev.EmailID+"\x00"+ev.ID] = true
		events[ev.EmailID] = append(events[ev.EmailID], ev)
	}
	var (
		items []map[string]types.AttributeValue
		ids   []string // of items
		// The list entries and the content are written once, before the emails: an entry
		// whose email does not exist (yet) is not listed (emailsFromIndex), an email item
		// never points at content that is not there yet, and a retry rewrites the same items.
		before  []types.WriteRequest
		created = map[string]bool{}
	)
	for _, e := range emails {
		if created[e.ID] {
			continue
		}
		created[e.ID] = true
		e.ScheduleCounted = e.Status == store.StatusScheduled
		c, err := encodeContent(e.ID, e.Content, st.expiry(e))
		if err != nil {
			return err
		}
		first := []inlineEvent{}
		var added []string
		for _, ev := range events[e.ID] {
			first = append(first, toInline(ev, e.MessageID))
			added = append(added, ev.ID)
		}
		m, err := st.emailAttrs(e, c, emailItem{Listed: true, Events: first, NewEvents: added})
		if err != nil {
			return err
		}
		lm, err := st.listAttrs(e)
		if err != nil {
			return err
		}
		for _, chunk := range append(c.chunks, lm) {
			before = append(before, types.WriteRequest{PutRequest: &types.PutRequest{Item: chunk}})
		}
		items, ids = append(items, m), append(ids, e.ID)
	}
	if err := st.batchWrite(ctx, before); err != nil {
		return err
	}
	var (
		mu     sync.Mutex
		failed []string // emails whose put failed, or was cut off by another's failure
	)
	err := each(ctx, len(items), func(ctx context.Context, i int) error {
		_, err := st.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(st.table), Item: items[i], ConditionExpression: aws.String("attribute_not_exists(PK)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var ccf *types.ConditionalCheckFailedException
		if asCCF(err, &ccf) {
			return st.relist(ctx, ccf.Item)
		}
		if err != nil {
			mu.Lock()
			failed = append(failed, ids[i])
			mu.Unlock()
			return fmt.Errorf("dynamo: create email: %w", err)
		}
		return nil
	})
	if err != nil && len(failed) > 0 {
		st.unlist(ctx, failed)
	}
	return err
}

// unlist takes back the list entry of an email whose put failed, so that the list neither
// counts nor pages over an email that does not exist (the request failed; a retry writes it
// again). It deletes the entry only while the email does not exist, in one transaction, so an
// email put meanwhile (a retry's, or this put's after all) keeps its entry. Its content stays,
// to expire with its TTL: an email put by a concurrent retry between its own entry's write and
// its put could otherwise lose the content it is sent from. Best effort, several at a time
// within one short deadline for them all: an entry left stays listed by nothing
// (emailsFromIndex skips an entry without its email).
func (st *Store) unlist(ctx context.Context, ids []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = each(ctx, len(ids), func(ctx context.Context, i int) error {
		email, list := emailKey(ids[i]), listKey(ids[i])
		err := st.transactOnce(ctx, []types.TransactWriteItem{
			{ConditionCheck: &types.ConditionCheck{TableName: aws.String(st.table), Key: email.av(),
				ConditionExpression: aws.String("attribute_not_exists(PK)")}},
			{Delete: &types.Delete{TableName: aws.String(st.table), Key: list.av()}},
		}, nil)
		if err != nil {
			slog.Default().Warn("dynamo: the list entry of an email that failed to be written stays", "emailId", ids[i], "err", err)
		}
		return nil // the others go on
	})
}

// relist puts back the list entry of an email that existed before a CreateEmails wrote its
// list entry again (a retried request or campaign step builds its emails anew, with its own
// time): the entry follows the stored email, not the retry, so the email stays listed on the
// day it was created, once. The retry's entry was written before the email's put failed, so
// this write comes after it whichever of two concurrent calls made it. An email written before
// list entries carries its index keys itself: the retry's entry would list it twice, and goes.
func (st *Store) relist(ctx context.Context, stored map[string]types.AttributeValue) error {
	it, err := decodeItem(stored)
	if err != nil {
		return err
	}
	if !it.Listed {
		// A batch write: the functions that create emails may batch-write, not all delete.
		err = st.batchWrite(ctx, []types.WriteRequest{{DeleteRequest: &types.DeleteRequest{Key: listKey(it.ID).av()}}})
	} else {
		var lm map[string]types.AttributeValue
		if lm, err = st.listAttrs(it.Email); err == nil {
			_, err = st.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(st.table), Item: lm})
		}
	}
	if err != nil {
		return fmt.Errorf("dynamo: list entry of an existing email: %w", err)
	}
	return nil
}

// maxConflictAttempts bounds the retries of transactions cancelled by concurrent transactions
// on the same items.
const maxConflictAttempts = 50

// retryableCancel reports a transaction cancelled only by conflicts or throttling.
func retryableCancel(reasons []types.CancellationReason) bool {
	if len(reasons) == 0 {
		return true
	}
	for _, r := range reasons {
		switch aws.ToString(r.Code) {
		case "", "None", "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded":
		default:
			return false
		}
	}
	return true
}

// emailQuery reads the email item and its content chunks (SK CONTENT#... up to EMAIL) in one
// strongly consistent Query: a worker reading an email it was just told about must find it.
func (st *Store) emailQuery(ctx context.Context, id string, withEvents bool) ([]map[string]types.AttributeValue, error) {
	k := emailKey(id)
	in := &dynamodb.QueryInput{
		KeyConditionExpression: aws.String("PK = :pk AND SK BETWEEN :lo AND :hi"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": avS(k.PK), ":lo": avS(contentPrefix), ":hi": avS(k.SK),
		},
		ConsistentRead: aws.Bool(true),
	}
	if withEvents {
		in.KeyConditionExpression = aws.String("PK = :pk")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":pk": avS(k.PK)}
	}
	return st.query(ctx, in, 0)
}

// decodeEmail finds the email item among items of its partition and assembles its content
// from the inline attribute or from the chunks of its current ref.
func decodeEmail(items []map[string]types.AttributeValue) (emailItem, error) {
	var it emailItem
	chunks := map[string][]byte{}
	found := false
	for _, m := range items {
		sk := skOf(m)
		switch {
		case sk == "EMAIL":
			var err error
			if it, err = decodeItem(m); err != nil {
				return it, err
			}
			found = true
		case strings.HasPrefix(sk, contentPrefix):
			var c chunkItem
			if err := unmarshal(m, &c); err != nil {
				return it, err
			}
			chunks[sk] = c.Data
		}
	}
	if !found {
		return it, store.ErrNotFound
	}
	gz := it.ContentGz
	if it.ContentRef != "" {
		var buf []byte
		for i := range it.ContentChunks {
			part, ok := chunks[contentKey(it.ID, it.ContentRef, i).SK]
			if !ok {
				return it, fmt.Errorf("dynamo: email %s: content chunk %d missing", it.ID, i)
			}
			buf = append(buf, part...)
		}
		gz = buf
	}
	c, err := decodeContent(gz)
	if err != nil {
		return it, err
	}
	it.Content = c
	return it, nil
}

// decodeItem unmarshals an email item, with what its writes leave out restored.
func decodeItem(m map[string]types.AttributeValue) (emailItem, error) {
	var it emailItem
	if err := unmarshal(m, &it); err != nil {
		return it, err
	}
	if it.ContentRef != "" && it.ContentChunks == 0 {
		it.ContentChunks = 1
	}
	it.Listed = it.GSI1PK == ""
	return it, nil
}

func skOf(m map[string]types.AttributeValue) string {
	if v, ok := m[AttrSK].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// emailsFromIndex completes email items read from an index with their content: the content
// items of the whole page in BatchGetItem calls (an email with inline content needs none).
func (st *Store) emailsFromIndex(ctx context.Context, ms []map[string]types.AttributeValue) ([]store.Email, error) {
	// List entries point at their email items: one BatchGetItem for those of the page.
	var entries []key
	for _, m := range ms {
		if skOf(m) == listKey("").SK {
			if id, ok := m["ID"].(*types.AttributeValueMemberS); ok {
				entries = append(entries, emailKey(id.Value))
			}
		}
	}
	if len(entries) > 0 {
		got, err := st.batchGet(ctx, entries, false)
		if err != nil {
			return nil, err
		}
		resolved := ms[:0:0]
		for _, m := range ms {
			if skOf(m) != listKey("").SK {
				resolved = append(resolved, m)
			} else if id, ok := m["ID"].(*types.AttributeValueMemberS); ok {
				if em, ok := got[emailKey(id.Value)]; ok {
					resolved = append(resolved, em)
				}
			}
		}
		ms = resolved
	}
	heads := make([]emailItem, len(ms))
	var ks []key
	for i, m := range ms {
		var err error
		if heads[i], err = decodeItem(m); err != nil {
			return nil, err
		}
		if heads[i].ContentChunks > 1 {
			continue // a content of several chunks (over 350 KB compressed) is not loaded for a list
		}
		for c := range heads[i].ContentChunks {
			ks = append(ks, contentKey(heads[i].ID, heads[i].ContentRef, c))
		}
	}
	got, err := st.batchGet(ctx, ks, false)
	if err != nil {
		return nil, err
	}
	out := make([]store.Email, 0, len(ms))
	for i, m := range ms {
		if heads[i].ContentChunks > 1 {
			e := heads[i].Email
			if st.expired(e) {
				continue
			}
			e.Content, e.ContentOmitted = store.Content{}, true
			out = append(out, e)
			continue
		}
		items := []map[string]types.AttributeValue{m}
		for c := range heads[i].ContentChunks {
			if it, ok := got[contentKey(heads[i].ID, heads[i].ContentRef, c)]; ok {
				items = append(items, it)
			}
		}
		it, err := st.decodeEmail(items)
		if errors.Is(err, store.ErrNotFound) {
			continue // expired since the page was chosen (midnight)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, it.Email)
	}
	return out, nil
}

func (st *Store) GetEmail(ctx context.Context, id string) (store.Email, error) {
	items, err := st.emailQuery(ctx, id, false)
	if err != nil {
		return store.Email{}, err
	}
	it, err := st.decodeEmail(items)
	return it.Email, err
}

// decodeEmail decodes an email's items; one past the retention is not found.
func (st *Store) decodeEmail(items []map[string]types.AttributeValue) (emailItem, error) {
	it, err := decodeEmail(items)
	if err == nil && st.expired(it.Email) {
		return emailItem{}, store.ErrNotFound
	}
	return it, err
}

// ExpireEmails removes nothing: DynamoDB's TTL deletes an email's items once its retention has
// passed, and reads ignore them until then.
func (st *Store) ExpireEmails(context.Context, int) (int, error) { return 0, nil }

// GetEmailDetail is one Query of the email's partition: the email, its chunks and its events
// (inside the item and, for an email written before or with a long history, event items).
func (st *Store) GetEmailDetail(ctx context.Context, id string) (store.Email, []store.Event, error) {
	items, err := st.emailQuery(ctx, id, true)
	if err != nil {
		return store.Email{}, nil, err
	}
	it, err := st.decodeEmail(items)
	if err != nil {
		return store.Email{}, nil, err
	}
	var events []store.Event
	for _, ie := range it.Events {
		events = append(events, ie.event(it.Email))
	}
	for _, m := range items {
		if !strings.HasPrefix(skOf(m), eventPrefix) {
			continue
		}
		var ev eventItem
		if err := unmarshal(m, &ev); err != nil {
			return store.Email{}, nil, err
		}
		events = append(events, ev.Event)
	}
	slices.SortStableFunc(events, func(a, b store.Event) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return it.Email, events, nil
}

// UpdateEmail writes the new state with the condition Version = the version read: one
// conditional PutItem, the events inside the item; only events past the inline history are
// items of their own, written with it in one transaction (each conditioned on not existing).
// The counts the change makes (Counted, ScheduleCounted) follow from the item through the
// stream (ApplyCounts). A lost race re-reads and calls fn again; an existing event is
// store.ErrDuplicateEvent and nothing is written.
func (st *Store) UpdateEmail(ctx context.Context, id string, fn func(*store.Email) ([]store.Event, error)) (store.Email, error) {
	return optimistic(ctx, st, "email "+id, func() (store.Email, error) {
		items, err := st.emailQuery(ctx, id, false)
		if err != nil {
			return store.Email{}, err
		}
		old, err := st.decodeEmail(items)
		if err != nil {
			return store.Email{}, err
		}
		e := old.Email
		e.To, e.CC, e.BCC, e.ReplyTo = slices.Clone(e.To), slices.Clone(e.CC), slices.Clone(e.BCC), slices.Clone(e.ReplyTo)
		e.Counted = slices.Clone(e.Counted)
		events, err := fn(&e)
		if err != nil {
			return store.Email{}, err
		}
		e.ID, e.Version = id, old.Version+1
		scheduleCounted(old.Email, &e)
		c := content{inline: old.ContentGz, ref: old.ContentRef}
		c.chunks = make([]map[string]types.AttributeValue, old.ContentChunks) // only counted
		if !reflect.DeepEqual(e.Content, old.Content) {
			if c, err = encodeContent(id, e.Content, st.expiry(e)); err != nil {
				return store.Email{}, err
			}
			if err := st.writeChunks(ctx, c.chunks); err != nil {
				return store.Email{}, err
			}
		}
		// Events go inside the item while its history is small (see emailItem.Events); the
		// rest, and every event of an email written before, are items of its partition.
		cur := old
		cur.NewEvents = nil
		for _, ev := range events {
			cur.NewEvents = append(cur.NewEvents, ev.ID)
		}
		ids := map[string]bool{}
		for _, ie := range old.Events {
			ids[ie.ID] = true
		}
		var itemEvents []store.Event
		for _, ev := range events {
			if ids[ev.ID] {
				return store.Email{}, fmt.Errorf("dynamo: email %s event %s twice: %w", id, ev.ID, store.ErrDuplicateEvent)
			}
			ids[ev.ID] = true
			ev.EmailID = id
			ie := toInline(ev, e.MessageID)
			if old.Events != nil && !cur.Overflow && inlineSize(cur.Events)+inlineSize([]inlineEvent{ie}) <= inlineEventBytes {
				cur.Events = append(slices.Clip(cur.Events), ie)
				continue
			}
			if old.Events != nil {
				cur.Overflow = true
			}
			itemEvents = append(itemEvents, ev)
		}
		m, err := st.emailAttrs(e, c, cur)
		if err != nil {
			return store.Email{}, err
		}
		if ttl := st.expiry(e); ttl > st.expiry(old.Email) && st.expiry(old.Email) > 0 {
			// A later scheduled time keeps the email longer: its content and events first, so
			// that none of them can expire before it (a longer TTL is harmless if this write
			// then loses its race).
			if err := st.extendTTL(ctx, id, ttl); err != nil {
				return store.Email{}, err
			}
		}
		cond, vals := aws.String("Version = :v"), map[string]types.AttributeValue{":v": avN(old.Version)}
		if len(itemEvents) == 0 {
			err := st.putCond(ctx, &dynamodb.PutItemInput{
				TableName: aws.String(st.table), Item: m, ConditionExpression: cond, ExpressionAttributeValues: vals,
			})
			if conditionFailed(err) {
				return store.Email{}, errLost
			}
			if err != nil {
				return store.Email{}, fmt.Errorf("dynamo: update email %s: %w", id, err)
			}
			return e, nil
		}
		events = itemEvents
		actions := []types.TransactWriteItem{{Put: &types.Put{
			TableName: aws.String(st.table), Item: m, ConditionExpression: cond, ExpressionAttributeValues: vals,
		}}}
		for _, ev := range events {
			em, err := st.eventAttrs(ev, e)
			if err != nil {
				return store.Email{}, err
			}
			actions = append(actions, types.TransactWriteItem{Put: &types.Put{
				TableName: aws.String(st.table), Item: em, ConditionExpression: aws.String("attribute_not_exists(PK)"),
			}})
		}
		_, err = st.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: actions})
		if reasons, ok := cancelReasons(err); ok {
			for i, r := range reasons {
				if i > 0 && i <= len(events) && reasonIsCondition(r) {
					return store.Email{}, fmt.Errorf("dynamo: email %s: %w", id, store.ErrDuplicateEvent)
				}
			}
			if len(reasons) > 0 && !reasonIsCondition(reasons[0]) && !retryableCancel(reasons) {
				return store.Email{}, fmt.Errorf("dynamo: update email %s: %w", id, err)
			}
			return store.Email{}, errLost
		}
		if err != nil {
			return store.Email{}, fmt.Errorf("dynamo: update email %s: %w", id, err)
		}
		return e, nil
	})
}

// scheduleCounted sets e.ScheduleCounted, whether the email counts in its team's
// ScheduledCount (the stream applies the change): an email leaving SCHEDULED stops counting,
// one entering it starts.
func scheduleCounted(old store.Email, e *store.Email) {
	e.ScheduleCounted = old.ScheduleCounted
	switch {
	case old.ScheduleCounted && e.Status != store.StatusScheduled:
		e.ScheduleCounted = false
	case !old.ScheduleCounted && old.Status != store.StatusScheduled && e.Status == store.StatusScheduled:
		e.ScheduleCounted = true
	}
}

// ScheduledCount sums the team's scheduled counter shards (eventually consistent reads).
func (st *Store) ScheduledCount(ctx context.Context, teamID int64) (int64, error) {
	ks := make([]key, WorkShards)
	for s := range WorkShards {
		ks[s] = scheduledCounterKey(teamID, s)
	}
	items, err := st.batchGet(ctx, ks, false)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, m := range items {
		if v, ok := m["n"].(*types.AttributeValueMemberN); ok {
			x, err := strconv.ParseInt(v.Value, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("dynamo: scheduled count: %w", err)
			}
			n += x
		}
	}
	return max(n, 0), nil
}

// extendTTL sets the TTL of the email's content and event items to ttl.
func (st *Store) extendTTL(ctx context.Context, id string, ttl int64) error {
	items, err := st.query(ctx, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": avS(emailKey(id).PK)},
		ProjectionExpression:      aws.String("PK, SK"),
	}, 0)
	if err != nil {
		return err
	}
	for _, it := range items {
		if skOf(it) == emailKey(id).SK {
			continue
		}
		_, err := st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(st.table), Key: map[string]types.AttributeValue{AttrPK: it[AttrPK], AttrSK: it[AttrSK]},
			UpdateExpression:          aws.String("SET #ttl = :ttl"),
			ExpressionAttributeNames:  map[string]string{"#ttl": TTLAttribute},
			ExpressionAttributeValues: map[string]types.AttributeValue{":ttl": avN(ttl)},
		})
		if err != nil {
			return fmt.Errorf("dynamo: extend the expiry of email %s: %w", id, err)
		}
	}
	return nil
}

// FindEmailByMessageID is one Query of the sparse GSI3.
func (st *Store) FindEmailByMessageID(ctx context.Context, messageID string) (store.Email, error) {
	items, err := st.query(ctx, &dynamodb.QueryInput{
		IndexName:                 aws.String(IndexGSI3),
		KeyConditionExpression:    aws.String("GSI3PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": avS(messageIDIndexKey(messageID))},
		Limit:                     aws.Int32(1),
	}, 1)
	if err != nil {
		return store.Email{}, err
	}
	if len(items) == 0 {
		return store.Email{}, store.ErrNotFound
	}
	list, err := st.emailsFromIndex(ctx, items[:1])
	if err != nil {
		return store.Email{}, err
	}
	if len(list) == 0 {
		return store.Email{}, store.ErrNotFound // expired
	}
	return list[0], nil
}

// PendingEmails reads every pending shard of the work index, ids and sort keys only, and
// merges them oldest first.
func (st *Store) PendingEmails(ctx context.Context, limit int) ([]string, error) {
	return st.workIDsAcrossShards(ctx, limit, func(shard int) workQuery {
		return workQuery{pk: pendingIndexKey(shard)}
	})
}

// OverdueScheduled reads every scheduled shard of the work index up to before (each is
// sorted by scheduledAt) and merges them earliest first.
func (st *Store) OverdueScheduled(ctx context.Context, before time.Time, limit int) ([]string, error) {
	return st.workIDsAcrossShards(ctx, limit, func(shard int) workQuery {
		return workQuery{pk: scheduledIndexKey(shard), before: before.UTC().Format(sortTime)}
	})
}

// HeldEmails reads the campaign's held partition of the work index.
func (st *Store) HeldEmails(ctx context.Context, teamID int64, campaignID string, limit int) ([]string, error) {
	refs, err := st.workIDs(ctx, workQuery{pk: heldIndexKey(teamID, campaignID)}, limit)
	ids := make([]string, len(refs))
	for i, r := range refs {
		ids[i] = r.id
	}
	return ids, err
}

// workIDsAcrossShards queries each of the WorkShards partitions (at most limit ids each) and
// returns the limit first ids by sort key.
func (st *Store) workIDsAcrossShards(ctx context.Context, limit int, q func(shard int) workQuery) ([]string, error) {
	var all []workRef
	for shard := legacyShard; shard < WorkShards; shard++ {
		refs, err := st.workIDs(ctx, q(shard), limit)
		if err != nil {
			return nil, err
		}
		all = append(all, refs...)
	}
	slices.SortFunc(all, func(a, b workRef) int { return cmp.Compare(a.sort, b.sort) })
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	ids := make([]string, len(all))
	for i, r := range all {
		ids[i] = r.id
	}
	return ids, nil
}

// workQuery is a partition of the work index, and the sort key its entries must be below
// ("": any).
type workQuery struct{ pk, before string }

// workRef is one entry of the work index: the email id and its sort key.
type workRef struct{ id, sort string }

// workIndexes are the work index (GSI5, keys only) and the one emails written before it used
// (GSI4), read as long as such an email may still wait there.
var workIndexes = [][3]string{{IndexGSI5, AttrGSI5PK, AttrGSI5SK}, {IndexGSI4, AttrGSI4PK, AttrGSI4SK}}

// workIDs reads one partition of the work index (both of them) for email ids and sort keys,
// the limit first by sort key.
func (st *Store) workIDs(ctx context.Context, q workQuery, limit int) ([]workRef, error) {
	var refs []workRef
	for _, ix := range workIndexes {
		in := &dynamodb.QueryInput{
			IndexName:                 aws.String(ix[0]),
			KeyConditionExpression:    aws.String("#pk = :pk"),
			ExpressionAttributeNames:  map[string]string{"#pk": ix[1], "#sk": ix[2]},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": avS(q.pk)},
		}
		if q.before != "" {
			in.KeyConditionExpression = aws.String("#pk = :pk AND #sk < :before")
			in.ExpressionAttributeValues[":before"] = avS(q.before)
		}
		if ix[0] == IndexGSI5 {
			in.ProjectionExpression = aws.String("PK, #sk")
		} else {
			in.ProjectionExpression = aws.String("#id, #sk")
			in.ExpressionAttributeNames["#id"] = "ID"
		}
		if limit > 0 {
			in.Limit = aws.Int32(int32(min(limit, 1000)))
		}
		items, err := st.query(ctx, in, max(limit, 0))
		if err != nil {
			return nil, err
		}
		for _, m := range items {
			sk, _ := m[ix[2]].(*types.AttributeValueMemberS)
			id := ""
			if v, ok := m["ID"].(*types.AttributeValueMemberS); ok {
				id = v.Value
			} else if v, ok := m[AttrPK].(*types.AttributeValueMemberS); ok {
				id = strings.TrimPrefix(v.Value, emailKey("").PK)
			}
			if id != "" && sk != nil {
				refs = append(refs, workRef{id, sk.Value})
			}
		}
	}
	slices.SortFunc(refs, func(a, b workRef) int { return cmp.Compare(a.sort, b.sort) })
	if limit > 0 && len(refs) > limit {
		refs = refs[:limit]
	}
	return refs, nil
}

// DailyStats reads the range of stats items from every shard (one Query each, concurrently)
// and sums them by day.
func (st *Store) DailyStats(ctx context.Context, teamID, domainID int64, from, to string) ([]store.DayStats, error) {
	ins := make([]*dynamodb.QueryInput, WorkShards)
	for s := range WorkShards {
		k := statsKey(teamID, from, s)
		ins[s] = &dynamodb.QueryInput{
			TableName:              aws.String(st.table),
			KeyConditionExpression: aws.String("PK = :pk AND SK BETWEEN :from AND :to"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": avS(k.PK), ":from": avS(statsPrefix + from), ":to": avS(statsPrefix + to),
			},
		}
	}
	pages, err := st.queryEach(ctx, ins, 0)
	if err != nil {
		return nil, fmt.Errorf("dynamo: daily stats: %w", err)
	}
	byDay := map[string]map[string]int64{}
	for _, items := range pages {
		for _, it := range items {
			sk, _ := it["SK"].(*types.AttributeValueMemberS)
			if sk == nil {
				continue
			}
			d := strings.TrimPrefix(sk.Value, statsPrefix)
			for _, kind := range store.AnalyticsKinds {
				v, ok := it[statsAttr(kind, domainID)].(*types.AttributeValueMemberN)
				if !ok {
					continue
				}
				n, err := strconv.ParseInt(v.Value, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("dynamo: daily stats: %w", err)
				}
				if byDay[d] == nil {
					byDay[d] = map[string]int64{}
				}
				byDay[d][kind] += n
			}
		}
	}
	out := make([]store.DayStats, 0, len(byDay))
	for _, d := range slices.Sorted(maps.Keys(byDay)) {
		out = append(out, store.DayStats{Day: d, Counts: byDay[d]})
	}
	return out, nil
}
