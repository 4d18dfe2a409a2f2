package dynamo_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/store/dynamo"
)

// TestStreamReadAfterAFailedTransaction: moto rolls a failed transaction back by restoring a
// copy of the table, whose stream shard is then another object: the iterator the reader
// follows sees nothing more, and the reader read nothing until the server restarted. It now
// looks again from its last record when a shard stays silent, so what is written after such
// a failure (a duplicate domain's 409) is read again. (moto also gives the next record the
// sequence number of the rolled-back one, already read: that one record, domain 3 here, is
// not read; DynamoDB does neither.)
func TestStreamReadAfterAFailedTransaction(t *testing.T) {
	st, _ := newStore(t)
	ctx := t.Context()
	var mu sync.Mutex
	seen := map[string]bool{}
	st.AfterCounts(func(_ context.Context, recs []dynamo.StreamRecord) error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			if sk, ok := r.Keys["SK"].(*types.AttributeValueMemberS); ok {
				seen[sk.Value] = true
			}
		}
		return nil
	})
	now := time.Now().UTC()
	d := func(id int64, name string) store.Domain {
		return store.Domain{ID: id, TeamID: 1, Name: name, Region: "us-east-1", Status: store.DomainSuccess, CreatedAt: now, UpdatedAt: now}
	}
	if err := st.CreateDomain(ctx, d(1, "one.example")); err != nil {
		t.Fatal(err)
	}
	if err := st.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateDomain(ctx, d(2, "one.example")); err == nil {
		t.Fatal("a duplicate domain name was taken")
	}
	if err := st.CreateDomain(ctx, d(3, "three.example")); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateDomain(ctx, d(4, "four.example")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := st.Settle(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		ok := seen["DOMAIN#00000000000000000004"]
		mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the domain written after a failed transaction never came off the stream (read: %v)", seen)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
