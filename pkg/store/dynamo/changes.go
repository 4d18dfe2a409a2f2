package dynamo

import (
	"context"
	"errors"
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
	if a := c.After.Contact; len(before) == 0 && a != nil && a.CreatedAt.Before(a.UpdatedAt) {
		// A contact's item is keyed by its address: a change of address writes a new item
		// (and deletes the old one, which the reader of the stream passes over once it finds
		// the contact still there, Moved). A new item of a contact made earlier is that
		// change, an update, not a contact created: as before, it was the same contact at
		// another address.
		moved := *a
		moved.Email = ""
		c.Before.Contact = &moved
	}
	return c, len(before) > 0 || len(after) > 0, nil
}

// Moved reports whether a contact whose item a stream record deleted is still in its book
// (under another address: a change of address), so that the deletion is no contact.deleted.
func (st *Store) Moved(ctx context.Context, c store.Contact) (bool, error) {
	got, err := st.GetContact(ctx, c.TeamID, c.BookID, c.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return !strings.EqualFold(got.Email, c.Email), nil
}
