package dynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mailroom/mailroom/pkg/store"
)

// Campaigns: the campaign item under the team (listed newest first through GSI1) and its
// counters item apart (see keys.go), which only the email transactions change, by ADD.

// campaignItem is the campaign record. Its HTML and Content (editor JSON) are kept gzip'd
// (HTMLGz, ContentGz) when they are longer than compressAbove: every step of a campaign
// rewrites the item and its list index entry, and each write is billed by the item's size.
// An item written before holds them as they are.
type campaignItem struct {
	keys
	store.Campaign
	Version   int64
	HTMLGz    []byte `dynamodbav:"htmlZ,omitempty"`
	ContentGz []byte `dynamodbav:"contentZ,omitempty"`
}

const attrCounters = "Counters"

// compressAbove is the length from which a campaign's HTML or Content, or a template's HTML or
// Text, is stored gzip'd.
const compressAbove = 256

// gzField is a text attribute and the attribute that holds it gzip'd when it is long.
type gzField struct {
	text *string
	gz   *[]byte
}

// gzipLong moves each text longer than compressAbove, gzip'd, into its gzip'd attribute.
func gzipLong(fields ...gzField) error {
	for _, f := range fields {
		if len(*f.text) <= compressAbove {
			continue
		}
		b, err := gzipBytes([]byte(*f.text))
		if err != nil {
			return err
		}
		*f.text, *f.gz = "", b
	}
	return nil
}

// gunzipLong moves back what gzipLong moved.
func gunzipLong(fields ...gzField) error {
	for _, f := range fields {
		if *f.gz == nil {
			continue
		}
		b, err := gunzipBytes(*f.gz)
		if err != nil {
			return err
		}
		*f.text, *f.gz = string(b), nil
	}
	return nil
}

func campaignAttrs(c store.Campaign, version int64) (map[string]types.AttributeValue, error) {
	it := campaignItem{keys: campaignKey(c.TeamID, c.ID).keys(), Campaign: c, Version: version}
	it.GSI1PK, it.GSI1SK = campaignIndexKey(c.TeamID), emailSort(c.CreatedAt, c.ID)
	if err := gzipLong(gzField{&it.HTML, &it.HTMLGz}, gzField{&it.Content, &it.ContentGz}); err != nil {
		return nil, err
	}
	m, err := marshal(it)
	if err != nil {
		return nil, err
	}
	delete(m, attrCounters)
	return m, nil
}

// decodeCampaign unmarshals a campaign item, its HTML and Content inflated.
func decodeCampaign(m map[string]types.AttributeValue) (campaignItem, error) {
	var it campaignItem
	if err := unmarshal(m, &it); err != nil {
		return it, err
	}
	if err := gunzipLong(gzField{&it.HTML, &it.HTMLGz}, gzField{&it.Content, &it.ContentGz}); err != nil {
		return it, fmt.Errorf("dynamo: campaign %s: %w", it.ID, err)
	}
	return it, nil
}

// decodeCounters sums a campaign's counters items (its shards): every number attribute is a
// counter kind. No item (no email counted yet) is nil, as in the embedded adapter.
func decodeCounters(items ...map[string]types.AttributeValue) (map[string]int64, error) {
	var out map[string]int64
	for _, m := range items {
		if m == nil {
			continue
		}
		if out == nil {
			out = map[string]int64{}
		}
		for name, v := range m {
			n, ok := v.(*types.AttributeValueMemberN)
			if !ok {
				continue
			}
			x, err := strconv.ParseInt(n.Value, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("dynamo: counter %s: %w", name, err)
			}
			out[name] += x
		}
	}
	return out, nil
}

// countersOf picks a campaign's counters items out of a BatchGetItem result.
func countersOf(got map[key]map[string]types.AttributeValue, teamID int64, id string) (map[string]int64, error) {
	var items []map[string]types.AttributeValue
	for _, k := range campaignCounterKeys(teamID, id) {
		items = append(items, got[k])
	}
	return decodeCounters(items...)
}

// CreateCampaign writes the campaign item (attribute_not_exists); Counters are the store's and
// start empty: the counters item appears with the first counted email.
func (st *Store) CreateCampaign(ctx context.Context, c store.Campaign) error {
	c.Counters = nil
	m, err := campaignAttrs(c, 0)
	if err != nil {
		return err
	}
	return st.putNew(ctx, m)
}

// getCampaign reads the campaign and its counters in one BatchGetItem.
func (st *Store) getCampaign(ctx context.Context, teamID int64, id string) (campaignItem, error) {
	ck := campaignKey(teamID, id)
	got, err := st.batchGet(ctx, append([]key{ck}, campaignCounterKeys(teamID, id)...), true)
	if err != nil {
		return campaignItem{}, err
	}
	if got[ck] == nil {
		return campaignItem{}, store.ErrNotFound
	}
	it, err := decodeCampaign(got[ck])
	if err != nil {
		return campaignItem{}, err
	}
	it.Counters, err = countersOf(got, teamID, id)
	return it, err
}

func (st *Store) GetCampaign(ctx context.Context, teamID int64, id string) (store.Campaign, error) {
	it, err := st.getCampaign(ctx, teamID, id)
	return it.Campaign, err
}

// GetCampaignState is one strongly consistent GetItem of the campaign item.
func (st *Store) GetCampaignState(ctx context.Context, teamID int64, id string) (store.Campaign, error) {
	out, err := st.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(st.table), Key: campaignKey(teamID, id).av(), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return store.Campaign{}, fmt.Errorf("dynamo: get campaign: %w", err)
	}
	if out.Item == nil {
		return store.Campaign{}, store.ErrNotFound
	}
	it, err := decodeCampaign(out.Item)
	if err != nil {
		return store.Campaign{}, err
	}
	it.Counters = nil
	return it.Campaign, nil
}

// campaignFilter applies Status and Search in code (neither is a key attribute).
type campaignFilter store.CampaignFilter

func (f campaignFilter) match(c store.Campaign) bool {
	if f.Status != "" && c.Status != f.Status {
		return false
	}
	if f.DomainID != 0 && c.DomainID != f.DomainID {
		return false
	}
	if f.Search == "" {
		return true
	}
	s := strings.ToLower(f.Search)
	return strings.Contains(strings.ToLower(c.Name), s) || strings.Contains(strings.ToLower(c.Subject), s)
}

// ListCampaigns reads the team's GSI1 campaign partition newest first. Without a filter it is
// a Select=COUNT Query for the total and one Offset+Limit-bounded Query for the page, like
// ListSuppressions. Status and Search are not key attributes, so with a filter the partition is
// read page by page to its end and filtered in code (a Query, never a Scan; a team has few
// campaigns). The page's counters then come in one BatchGetItem.
func (st *Store) ListCampaigns(ctx context.Context, teamID int64, f store.CampaignFilter) ([]store.Campaign, int, error) {
	in := func() *dynamodb.QueryInput {
		return &dynamodb.QueryInput{
			IndexName:                 aws.String(IndexGSI1),
			KeyConditionExpression:    aws.String("GSI1PK = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": avS(campaignIndexKey(teamID))},
			ScanIndexForward:          aws.Bool(false),
		}
	}
	offset := max(f.Offset, 0)
	var (
		page  []store.Campaign
		total int
	)
	if f.Status == "" && f.Search == "" && f.DomainID == 0 {
		var err error
		if total, err = st.count(ctx, in()); err != nil {
			return nil, 0, err
		}
		if offset >= total {
			return []store.Campaign{}, total, nil
		}
		want := 0
		q := in()
		if f.Limit > 0 {
			want = offset + f.Limit
			q.Limit = aws.Int32(int32(min(want, 1000)))
		}
		items, err := st.query(ctx, q, want)
		if err != nil {
			return nil, 0, err
		}
		for _, m := range items[min(offset, len(items)):] {
			it, err := decodeCampaign(m)
			if err != nil {
				return nil, 0, err
			}
			page = append(page, it.Campaign)
		}
	} else {
		items, err := st.query(ctx, in(), 0)
		if err != nil {
			return nil, 0, err
		}
		for _, m := range items {
			it, err := decodeCampaign(m)
			if err != nil {
				return nil, 0, err
			}
			if !campaignFilter(f).match(it.Campaign) {
				continue
			}
			total++
			if total > offset && (f.Limit <= 0 || len(page) < f.Limit) {
				page = append(page, it.Campaign)
			}
		}
	}
	if len(page) == 0 {
		return []store.Campaign{}, total, nil
	}
	var ks []key
	for _, c := range page {
		ks = append(ks, campaignCounterKeys(teamID, c.ID)...)
	}
	got, err := st.batchGet(ctx, ks, false)
	if err != nil {
		return nil, 0, err
	}
	for i := range page {
		if page[i].Counters, err = countersOf(got, teamID, page[i].ID); err != nil {
			return nil, 0, err
		}
	}
	return page, total, nil
}

// UpdateCampaign puts the campaign item back with the condition Version = the version read;
// the counters item is never written here, so concurrent email transactions keep their counts.
// The returned campaign carries the counters as read.
func (st *Store) UpdateCampaign(ctx context.Context, teamID int64, id string, fn func(*store.Campaign) error) (store.Campaign, error) {
	return optimistic(ctx, st, "campaign "+id, func() (store.Campaign, error) {
		old, err := st.getCampaign(ctx, teamID, id)
		if err != nil {
			return store.Campaign{}, err
		}
		c := old.Campaign
		c.ReplyTo, c.CC, c.BCC = slices.Clone(c.ReplyTo), slices.Clone(c.CC), slices.Clone(c.BCC)
		c.Counters = maps.Clone(old.Counters)
		if err := fn(&c); err != nil {
			return store.Campaign{}, err
		}
		c.ID, c.TeamID, c.Counters = id, teamID, old.Counters
		m, err := campaignAttrs(c, old.Version+1)
		if err != nil {
			return store.Campaign{}, err
		}
		return c, st.putIfVersion(ctx, m, old.Version, "campaign")
	})
}

// DeleteCampaign removes the campaign and its counters in one transaction. An event of one of
// its emails recorded afterwards re-creates a counters item nobody reads (a few bytes); the
// campaign itself stays gone.
func (st *Store) DeleteCampaign(ctx context.Context, teamID int64, id string) error {
	actions := []types.TransactWriteItem{{Delete: &types.Delete{
		TableName: aws.String(st.table), Key: campaignKey(teamID, id).av(),
		ConditionExpression: aws.String("attribute_exists(PK)"),
	}}}
	for _, k := range campaignCounterKeys(teamID, id) {
		actions = append(actions, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(st.table), Key: k.av()}})
	}
	err := st.transactOnce(ctx, actions, store.ErrNotFound)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("dynamo: delete campaign: %w", err)
	}
	return err
}
