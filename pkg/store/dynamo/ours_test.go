package dynamo

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestSameValue: the stored form of an item DynamoDB hands back may differ in spelling from the
// one written (normalized numbers, sets in another order) and still be the same write.
func TestSameValue(t *testing.T) {
	n := func(s string) types.AttributeValue { return &types.AttributeValueMemberN{Value: s} }
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	for _, c := range []struct {
		a, b types.AttributeValue
		same bool
	}{
		{n("10"), n("10"), true},
		{n("1.50"), n("1.5"), true},
		{n("1e2"), n("100"), true},
		{n("1"), n("2"), false},
		{n("1"), s("1"), false},
		{s("a"), s("a"), true},
		{s("a"), s("b"), false},
		{&types.AttributeValueMemberSS{Value: []string{"a", "b"}}, &types.AttributeValueMemberSS{Value: []string{"b", "a"}}, true},
		{&types.AttributeValueMemberSS{Value: []string{"a", "b"}}, &types.AttributeValueMemberSS{Value: []string{"a", "c"}}, false},
		{&types.AttributeValueMemberNS{Value: []string{"1", "2.0"}}, &types.AttributeValueMemberNS{Value: []string{"2", "1"}}, true},
		{&types.AttributeValueMemberB{Value: []byte{1}}, &types.AttributeValueMemberB{Value: []byte{1}}, true},
		{&types.AttributeValueMemberB{Value: []byte{1}}, &types.AttributeValueMemberB{Value: []byte{2}}, false},
		{&types.AttributeValueMemberL{Value: []types.AttributeValue{s("a"), n("1")}}, &types.AttributeValueMemberL{Value: []types.AttributeValue{s("a"), n("1")}}, true},
		{&types.AttributeValueMemberL{Value: []types.AttributeValue{s("a"), n("1")}}, &types.AttributeValueMemberL{Value: []types.AttributeValue{n("1"), s("a")}}, false},
		{&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"x": s("a")}}, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"x": s("a")}}, true},
		{&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"x": s("a")}}, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"x": s("a"), "y": s("b")}}, false},
		{&types.AttributeValueMemberBOOL{Value: true}, &types.AttributeValueMemberBOOL{Value: false}, false},
		{&types.AttributeValueMemberNULL{Value: true}, &types.AttributeValueMemberNULL{Value: true}, true},
	} {
		if got := sameValue(c.a, c.b); got != c.same {
			t.Errorf("sameValue(%#v, %#v) = %v", c.a, c.b, got)
		}
	}
	stored := map[string]types.AttributeValue{"PK": s("p"), "Version": n("2"), "Count": n("7")}
	if !holds(stored, map[string]types.AttributeValue{"PK": s("p"), "Version": n("2")}) {
		t.Error("holds: a stored item with the written attributes and more")
	}
	if holds(stored, map[string]types.AttributeValue{"Version": n("3")}) || holds(stored, map[string]types.AttributeValue{"Name": s("x")}) {
		t.Error("holds: another value, or a missing attribute")
	}
}
