package dynamo

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mailroom/mailroom/pkg/store"
)

// ChangePrefixes are the sort-key prefixes of the items whose writes are webhook events
// (DecodeChange): the stream's filter for the webhook function names them.
var ChangePrefixes = []string{contactPrefix, domainPrefix, campaignPrefix}

const campaignPrefix = "CAMPAIGN#"

// DecodeChange reads a stream record's images of a contact, domain or campaign item; ok is
// false for any other item. before or after is nil when the write created or deleted the item
// (the stream carries both images: NEW_AND_OLD_IMAGES).
func DecodeChange(keys, before, after map[string]types.AttributeValue) (c store.Change, ok bool, err error) {
	sk, _ := keys["SK"].(*types.AttributeValueMemberS)
	pk, _ := keys["PK"].(*types.AttributeValueMemberS)
	if sk == nil || pk == nil || !strings.HasPrefix(pk.Value, "TEAM#") {
		return c, false, nil
	}
	var read func(map[string]types.AttributeValue, *store.Record) error
	switch {
	case strings.HasPrefix(sk.Value, contactPrefix) && strings.Contains(pk.Value, "#BOOK#"):
		read = func(m map[string]types.AttributeValue, r *store.Record) error {
			var it contactItem
			err := unmarshal(m, &it)
			r.Contact = &it.Contact
			return err
		}
	case strings.HasPrefix(sk.Value, domainPrefix) && !strings.Contains(pk.Value[len("TEAM#"):], "#"):
		read = func(m map[string]types.AttributeValue, r *store.Record) error {
			var it domainItem
			err := unmarshal(m, &it)
			r.Domain = &it.Domain
			return err
		}
	case strings.HasPrefix(sk.Value, campaignPrefix) && !strings.Contains(pk.Value[len("TEAM#"):], "#"):
		read = func(m map[string]types.AttributeValue, r *store.Record) error {
			it, err := decodeCampaign(m)
			it.Counters = nil
			r.Campaign = &it.Campaign
			return err
		}
	default:
		return c, false, nil
	}
	if len(before) > 0 {
		if err := read(before, &c.Before); err != nil {
			return c, false, fmt.Errorf("dynamo: decode %s: %w", sk.Value, err)
		}
	}
	if len(after) > 0 {
		if err := read(after, &c.After); err != nil {
			return c, false, fmt.Errorf("dynamo: decode %s: %w", sk.Value, err)
		}
	}
	return c, len(before) > 0 || len(after) > 0, nil
}
