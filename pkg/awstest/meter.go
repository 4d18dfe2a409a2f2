package awstest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Meter adds up DynamoDB's request units for the calls made through a config it is installed
// on, the way on-demand capacity bills them:
//   - writes: 1 WRU per KB of the larger of the item before and after the write (2 inside
//     TransactWriteItems), plus 1 per KB for every index entry a write puts, changes or removes
//     (2 when the index key changes: a delete and a put). An index projects every attribute
//     unless KeysOnly names it: then its entry is billed by its keys, and a write that keeps
//     them writes nothing to it. An item's size and index entries are tracked from the Puts seen: an
//     UpdateItem or a delete of an item put before is billed at its size and rewrites (or
//     removes) each of its index entries; one never seen (counters, slots) counts as 1 KB.
//     A ConditionCheck in a transaction counts 2.
//   - reads: 1 RRU per 4 KB read by a strongly consistent GetItem or Query (the sizes of the
//     items returned, summed per call), half that eventually consistent; BatchGetItem per item.
//
// Calls are counted only when they succeed. Size is the item size estimate (dynamo.ItemSize).
type Meter struct {
	Size func(map[string]types.AttributeValue) int
	// KeysOnly names the indexes (GSI<n>) that project the keys only: an entry is billed by
	// the size of its keys, and a write that keeps its keys writes nothing to the index.
	KeysOnly []string

	mu      sync.Mutex
	off     bool // Unmetered
	n       Units
	indexed map[string][indexes]string // PK/SK -> GSI1..GSI5 keys as last put
	known   map[string]int             // PK/SK -> size in KB as last put
}

// Units are request units and item writes.
type Units struct {
	Items    int     // items written
	TableWRU int     // table writes
	IndexWRU int     // index writes
	RRU      float64 // reads
	Calls    int     // DynamoDB calls
	// ByKind is the write request units by operation and item kind (its sort key up to the
	// first '#'), e.g. "put EMAIL", "tx-update COUNTERS", "index EMAIL".
	ByKind map[string]int
	// ReadByKind is the read request units by operation and item kind (of the key read, or of
	// the first item a Query returned; a Query of an index is named by the index).
	ReadByKind map[string]float64
}

// kindOf names an item's kind: its sort key up to the first '#', else its partition key's.
func kindOf(item map[string]types.AttributeValue) string {
	prefix := func(v string) string {
		if i := strings.IndexByte(v, '#'); i >= 0 {
			return v[:i]
		}
		return v
	}
	if kind := prefix(str(item, "SK")); kind != "" {
		return kind
	}
	return prefix(str(item, "PK"))
}

func (m *Meter) read(op string, item map[string]types.AttributeValue, units float64) {
	m.n.RRU += units
	if m.n.ReadByKind == nil {
		m.n.ReadByKind = map[string]float64{}
	}
	m.n.ReadByKind[op+" "+kindOf(item)] += units
}

func (m *Meter) add(op string, item map[string]types.AttributeValue, table, index int) {
	m.n.TableWRU += table
	m.n.IndexWRU += index
	if m.n.ByKind == nil {
		m.n.ByKind = map[string]int{}
	}
	kind := kindOf(item)
	m.n.ByKind[op+" "+kind] += table
	if index > 0 {
		m.n.ByKind["index "+kind] += index
	}
}

// WRU is every write request unit, table and indexes.
func (u Units) WRU() int { return u.TableWRU + u.IndexWRU }

// Install adds the meter to cfg (every DynamoDB client made from it afterwards).
func (m *Meter) Install(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("awstestMeter",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				if err == nil && middleware.GetServiceID(ctx) == "DynamoDB" {
					m.Observe(in.Parameters, out.Result)
				}
				return out, md, err
			}), middleware.After)
	})
}

// Unmetered runs fn without metering its calls: what a benchmark reads to drive the system,
// which the system itself would not.
func (m *Meter) Unmetered(fn func()) {
	m.mu.Lock()
	m.off = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.off = false
		m.mu.Unlock()
	}()
	fn()
}

// Reset returns the units so far and starts again from zero (index tracking is kept).
func (m *Meter) Reset() Units {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.n
	m.n = Units{}
	return n
}

// indexes is how many indexes (GSI1..GSI<n>) the meter tracks.
const indexes = 5

func kb(size int) int { return max(1, (size+1023)/1024) }

func rru(size int, consistent bool) float64 {
	units := math.Ceil(float64(max(size, 1)) / 4096)
	if !consistent {
		units /= 2
	}
	return units
}

func str(m map[string]types.AttributeValue, name string) string {
	if v, ok := m[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// put meters one item put; factor is 2 inside a transaction.
func (m *Meter) put(op string, item map[string]types.AttributeValue, factor int) {
	size := kb(m.Size(item))
	m.n.Items++
	if m.indexed == nil {
		m.indexed, m.known = map[string][indexes]string{}, map[string]int{}
	}
	id := str(item, "PK") + "\x00" + str(item, "SK")
	var now [indexes]string
	for i := range now {
		n := fmt.Sprint(i + 1)
		if pk := str(item, "GSI"+n+"PK"); pk != "" {
			now[i] = pk + "\x00" + str(item, "GSI"+n+"SK")
		}
	}
	old := m.indexed[id]
	// A write is billed by the larger of the item before and after it.
	billed := max(size, m.known[id])
	index := 0
	for i := range now {
		entry := billed
		if slices.Contains(m.KeysOnly, fmt.Sprintf("GSI%d", i+1)) {
			// The entry is its keys (table's and index's); with the same keys, nothing of it
			// changes.
			entry = kb(len(id) + len(now[i]) + len(old[i]) + 24)
			if now[i] == old[i] {
				continue
			}
		}
		switch {
		case now[i] != "" && old[i] != "" && now[i] != old[i]:
			index += 2 * entry
		case now[i] != "" || old[i] != "":
			index += entry
		}
	}
	m.add(op, item, factor*billed, index)
	m.indexed[id], m.known[id] = now, size
}

// change meters an UpdateItem or DeleteItem of the item at key: billed by the item's size as
// last put (1 KB when unknown: counters, slots), and each of its index entries rewritten (an
// update) or removed (a delete).
func (m *Meter) change(op string, key map[string]types.AttributeValue, factor int, del bool) {
	m.n.Items++
	id := str(key, "PK") + "\x00" + str(key, "SK")
	size := max(1, m.known[id])
	index := 0
	for i, k := range m.indexed[id] {
		switch {
		case k == "":
		case slices.Contains(m.KeysOnly, fmt.Sprintf("GSI%d", i+1)):
			if del { // an update keeps the keys (a key change is a Put here)
				index++
			}
		default:
			index += size
		}
	}
	m.add(op, key, factor*size, index)
	if del && m.indexed != nil {
		delete(m.indexed, id)
		delete(m.known, id)
	}
}

func (m *Meter) sizes(items []map[string]types.AttributeValue) int {
	t := 0
	for _, it := range items {
		t += m.Size(it)
	}
	return t
}

// Observe meters one successful call: its input and its output.
func (m *Meter) Observe(params, result any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.off {
		return
	}
	m.n.Calls++
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		m.put("put", in.Item, 1)
	case *dynamodb.UpdateItemInput:
		m.change("update", in.Key, 1, false)
	case *dynamodb.DeleteItemInput:
		m.change("delete", in.Key, 1, true)
	case *dynamodb.TransactWriteItemsInput:
		for _, a := range in.TransactItems {
			switch {
			case a.Put != nil:
				m.put("tx-put", a.Put.Item, 2)
			case a.Update != nil:
				m.change("tx-update", a.Update.Key, 2, false)
			case a.Delete != nil:
				m.change("tx-delete", a.Delete.Key, 2, true)
			case a.ConditionCheck != nil:
				m.add("tx-check", a.ConditionCheck.Key, 2, 0)
			}
		}
	case *dynamodb.BatchWriteItemInput:
		for _, reqs := range in.RequestItems {
			for _, r := range reqs {
				if r.PutRequest != nil {
					m.put("batch-put", r.PutRequest.Item, 1)
				} else if r.DeleteRequest != nil {
					m.change("batch-delete", r.DeleteRequest.Key, 1, true)
				}
			}
		}
	case *dynamodb.GetItemInput:
		if out, ok := result.(*dynamodb.GetItemOutput); ok {
			m.read("get", in.Key, rru(m.Size(out.Item), aws.ToBool(in.ConsistentRead)))
		}
	case *dynamodb.QueryInput:
		if out, ok := result.(*dynamodb.QueryOutput); ok {
			var first map[string]types.AttributeValue
			if len(out.Items) > 0 {
				first = out.Items[0]
			}
			op := "query"
			if in.IndexName != nil {
				op = "query " + *in.IndexName
			}
			m.read(op, first, rru(m.sizes(out.Items), aws.ToBool(in.ConsistentRead)))
		}
	case *dynamodb.BatchGetItemInput:
		if out, ok := result.(*dynamodb.BatchGetItemOutput); ok {
			for table, items := range out.Responses {
				consistent := in.RequestItems[table].ConsistentRead
				for _, it := range items {
					m.read("batch-get", it, rru(m.Size(it), aws.ToBool(consistent)))
				}
			}
		}
	case *dynamodb.TransactGetItemsInput:
		if out, ok := result.(*dynamodb.TransactGetItemsOutput); ok {
			for _, r := range out.Responses {
				m.read("tx-get", r.Item, 2*rru(m.Size(r.Item), true))
			}
		}
	}
}
