package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/mailroom/mailroom/pkg/awstest"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/dynamo"
)

// cancelTransactions answers the next n TransactWriteItems calls as DynamoDB does a
// transaction cancelled by another one on its items (TransactionConflict), without sending them.
type cancelTransactions struct {
	mu sync.Mutex
	n  int
}

func (c *cancelTransactions) next() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		return false
	}
	c.n--
	return true
}

// TestDomainTransactionsCancelledByConflicts: a domain's creation or deletion cancelled by a
// concurrent transaction (not by its own condition) is tried again, not answered as a name
// taken (409) or a domain gone (404).
func TestDomainTransactionsCancelledByConflicts(t *testing.T) {
	cancel := &cancelTransactions{}
	client := dynamodb.NewFromConfig(awstest.Shared(t).Config(t), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("cancel",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if middleware.GetOperationName(ctx) == "TransactWriteItems" && cancel.next() {
						return middleware.InitializeOutput{}, middleware.Metadata{}, &types.TransactionCanceledException{
							Message:             aws.String("Transaction cancelled"),
							CancellationReasons: []types.CancellationReason{{Code: aws.String("TransactionConflict")}, {Code: aws.String("None")}}}
					}
					motoMu.Lock()
					defer motoMu.Unlock()
					return next.HandleInitialize(ctx, in)
				}), middleware.After)
		})
	})
	st := dynamo.New(client, newTable(t, client))
	ctx := t.Context()
	d := store.Domain{ID: 7, TeamID: 3, Name: "conflict.example", Region: "us-east-1", Status: store.DomainPending, CreatedAt: time.Now().UTC()}
	cancel.n = 2
	if err := st.CreateDomain(ctx, d); err != nil {
		t.Fatalf("CreateDomain cancelled twice by conflicts: %v, want it made", err)
	}
	if _, err := st.GetDomain(ctx, 3, 7); err != nil {
		t.Fatalf("the domain: %v", err)
	}
	cancel.n = 2
	if err := st.DeleteDomain(ctx, 3, 7); err != nil {
		t.Fatalf("DeleteDomain cancelled twice by conflicts: %v, want it deleted", err)
	}
	if _, err := st.GetDomain(ctx, 3, 7); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the domain after its deletion: %v", err)
	}
	// Its own condition still says what it says.
	if err := st.CreateDomain(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateDomain(ctx, store.Domain{ID: 8, TeamID: 4, Name: "conflict.example", CreatedAt: time.Now().UTC()}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second domain of the name: %v, want ErrConflict", err)
	}
}

// TestGetDomainReadsARefusalAgainConsistently: a domain that is not verified (or not there) in
// an eventually consistent read is read again, strongly consistent, before anyone acts on it
// (a worker would end an email FAILED); a verified one takes one read.
func TestGetDomainReadsARefusalAgainConsistently(t *testing.T) {
	var mu sync.Mutex
	var reads []bool // ConsistentRead of each GetItem
	st, _ := newStore(t, func(params any) {
		if in, ok := params.(*dynamodb.GetItemInput); ok {
			mu.Lock()
			reads = append(reads, aws.ToBool(in.ConsistentRead))
			mu.Unlock()
		}
	})
	ctx := t.Context()
	read := func(team, id int64) []bool {
		mu.Lock()
		reads = nil
		mu.Unlock()
		_, _ = st.GetDomain(ctx, team, id)
		mu.Lock()
		defer mu.Unlock()
		return reads
	}
	if err := st.CreateDomain(ctx, store.Domain{ID: 1, TeamID: 5, Name: "pending.example", Status: store.DomainPending, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateDomain(ctx, store.Domain{ID: 2, TeamID: 5, Name: "verified.example", Status: store.DomainSuccess, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id   int64
		want []bool
	}{{1, []bool{false, true}}, {3, []bool{false, true}}, {2, []bool{false}}} {
		if got := read(5, c.id); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("domain %d: reads consistent %v, want %v", c.id, got, c.want)
		}
	}
}
