package awstest

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Meter adds up DynamoDB's request units for the calls made through a config it is installed
// on, the way on-demand capacity bills them:
//   - writes: 1 WRU per KB of item written (2 inside TransactWriteItems), plus 1 per KB for
//     every index entry a write puts, changes or removes (2 when the index key changes: a delete
//     and a put; the table's indexes project every attribute). Items written by UpdateItem
//     (counters, slots) and deletes count as 1 KB. An item's index entries are tracked from the
//     Puts seen.
//   - reads: 1 RRU per 4 KB read by a strongly consistent GetItem or Query (the sizes of the
//     items returned, summed per call), half that eventually consistent; BatchGetItem per item.
//
// Calls are counted only when they succeed. Size is the item size estimate (dynamo.ItemSize).
type Meter struct {
	Size func(map[string]types.AttributeValue) int

	mu      sync.Mutex
	n       Units
	indexed map[string][4]string // PK/SK -> GSI1..GSI4 keys as last put
}

// Units are request units and item writes.
type Units struct {
	Items    int     // items written
	TableWRU int     // table writes
	IndexWRU int     // index writes
	RRU      float64 // reads
	Calls    int     // DynamoDB calls
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

// Reset returns the units so far and starts again from zero (index tracking is kept).
func (m *Meter) Reset() Units {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.n
	m.n = Units{}
	return n
}

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
func (m *Meter) put(item map[string]types.AttributeValue, factor int) {
	size := kb(m.Size(item))
	m.n.Items++
	m.n.TableWRU += factor * size
	if m.indexed == nil {
		m.indexed = map[string][4]string{}
	}
	id := str(item, "PK") + "\x00" + str(item, "SK")
	var now [4]string
	for i := range now {
		n := fmt.Sprint(i + 1)
		if pk := str(item, "GSI"+n+"PK"); pk != "" {
			now[i] = pk + "\x00" + str(item, "GSI"+n+"SK")
		}
	}
	old := m.indexed[id]
	for i := range now {
		switch {
		case now[i] != "" && old[i] != "" && now[i] != old[i]:
			m.n.IndexWRU += 2 * size
		case now[i] != "" || old[i] != "":
			m.n.IndexWRU += size
		}
	}
	m.indexed[id] = now
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
	m.n.Calls++
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		m.put(in.Item, 1)
	case *dynamodb.UpdateItemInput, *dynamodb.DeleteItemInput:
		m.n.Items++
		m.n.TableWRU++
	case *dynamodb.TransactWriteItemsInput:
		for _, a := range in.TransactItems {
			switch {
			case a.Put != nil:
				m.put(a.Put.Item, 2)
			case a.Update != nil, a.Delete != nil:
				m.n.Items++
				m.n.TableWRU += 2
			case a.ConditionCheck != nil:
				m.n.TableWRU += 2
			}
		}
	case *dynamodb.BatchWriteItemInput:
		for _, reqs := range in.RequestItems {
			for _, r := range reqs {
				if r.PutRequest != nil {
					m.put(r.PutRequest.Item, 1)
				} else {
					m.n.Items++
					m.n.TableWRU++
				}
			}
		}
	case *dynamodb.GetItemInput:
		if out, ok := result.(*dynamodb.GetItemOutput); ok {
			m.n.RRU += rru(m.Size(out.Item), aws.ToBool(in.ConsistentRead))
		}
	case *dynamodb.QueryInput:
		if out, ok := result.(*dynamodb.QueryOutput); ok {
			m.n.RRU += rru(m.sizes(out.Items), aws.ToBool(in.ConsistentRead))
		}
	case *dynamodb.BatchGetItemInput:
		if out, ok := result.(*dynamodb.BatchGetItemOutput); ok {
			for table, items := range out.Responses {
				consistent := in.RequestItems[table].ConsistentRead
				for _, it := range items {
					m.n.RRU += rru(m.Size(it), aws.ToBool(consistent))
				}
			}
		}
	case *dynamodb.TransactGetItemsInput:
		if out, ok := result.(*dynamodb.TransactGetItemsOutput); ok {
			for _, r := range out.Responses {
				m.n.RRU += 2 * rru(m.Size(r.Item), true)
			}
		}
	}
}
