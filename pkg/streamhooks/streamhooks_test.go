package streamhooks_test

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mailroom/mailroom/pkg/store/dynamo"
	"github.com/mailroom/mailroom/pkg/streamhooks"
)

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// emailWrite is the record of an email item's write that added the history entries added.
func emailWrite(id, team string, added ...string) dynamo.StreamRecord {
	keys := map[string]types.AttributeValue{"PK": s("EMAIL#" + id), "SK": s("EMAIL")}
	image := map[string]types.AttributeValue{"PK": keys["PK"], "SK": keys["SK"], "TeamID": &types.AttributeValueMemberN{Value: team}}
	if added != nil {
		l := &types.AttributeValueMemberL{}
		for _, a := range added {
			l.Value = append(l.Value, s(a))
		}
		image[dynamo.NewEventsAttribute] = l
	}
	return dynamo.StreamRecord{ID: "ev-" + id, Seq: "1", Keys: keys, New: image}
}

// TestWork: an email write names the history entries it added, for its team; a write that
// added none, a delete, and items that are neither emails nor changes make no work; a change
// whose image cannot be read is reported, not dropped silently.
func TestWork(t *testing.T) {
	removed := emailWrite("em3", "7", "3-DELIVERED")
	removed.Remove, removed.Old, removed.New = true, removed.New, nil
	other := dynamo.StreamRecord{ID: "ev-x", Keys: map[string]types.AttributeValue{"PK": s("COUNTS#shard"), "SK": s("COUNTS")}}
	broken := dynamo.StreamRecord{ID: "ev-bad", Keys: map[string]types.AttributeValue{"PK": s("TEAM#7"), "SK": s("DOMAIN#1")},
		New: map[string]types.AttributeValue{"ID": s("not a number")}}
	entries, changes, undecoded := streamhooks.Work([]dynamo.StreamRecord{
		emailWrite("em1", "7", "1-SENT", "2-DELIVERED"),
		emailWrite("em2", "8"),
		removed, other, broken,
	})
	if len(entries) != 1 || entries[0].EmailID != "em1" || entries[0].TeamID != 7 || !slices.Equal(entries[0].EventIDs, []string{"1-SENT", "2-DELIVERED"}) {
		t.Errorf("entries %+v; want em1 of team 7 with 1-SENT and 2-DELIVERED", entries)
	}
	if len(changes) != 0 {
		t.Errorf("changes %+v; want none", changes)
	}
	if len(undecoded) != 1 || undecoded[0].ID != "ev-bad" || undecoded[0].Err == nil {
		t.Errorf("undecoded %+v; want the broken domain record", undecoded)
	}
	if id, ok := streamhooks.EmailID(removed); ok {
		t.Errorf("a deleted email item names email %q", id)
	}
}
