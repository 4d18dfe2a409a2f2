package dynamo

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mailroom/mailroom/pkg/store"
)

// emailStream is one day-sharded index of a team's emails with its day counters: the whole team
// (GSI1) or one domain (GSI2).
type emailStream struct {
	index      string
	pkAttr     string
	skAttr     string
	shard      func(day string) string
	counterKey func(day string) key
	days       map[string]int // emails per day within the filter
}

// listRange is the filter's time range as index sort key bounds.
type listRange struct {
	start, end *time.Time
}

func (r listRange) firstDay() string {
	if r.start == nil {
		return "0000-00-00"
	}
	return day(*r.start)
}

func (r listRange) lastDay() string {
	if r.end == nil {
		return "9999-99-99"
	}
	return day(*r.end)
}

// partial reports whether the filter covers only part of day d.
func (r listRange) partial(d string) bool {
	if r.start != nil && d == day(*r.start) {
		if t := r.start.UTC(); !t.Equal(t.Truncate(24 * time.Hour)) {
			return true
		}
	}
	if r.end != nil && d == day(*r.end) {
		if t := r.end.UTC(); !t.Add(time.Nanosecond).Equal(t.Add(time.Nanosecond).Truncate(24 * time.Hour)) {
			return true
		}
	}
	return false
}

// keyCondition selects day d of the stream within the range.
func (r listRange) keyCondition(s emailStream, d string) (string, map[string]types.AttributeValue) {
	cond := s.pkAttr + " = :pk"
	vals := map[string]types.AttributeValue{":pk": avS(s.shard(d))}
	var lo, hi string
	if r.start != nil && d == day(*r.start) {
		lo = r.start.UTC().Format(sortTime)
	}
	if r.end != nil && d == day(*r.end) {
		// Every sort key "<time>#<id>" with time == end sorts before "<time>$".
		hi = r.end.UTC().Format(sortTime) + "$"
	}
	switch {
	case lo != "" && hi != "":
		cond += " AND " + s.skAttr + " BETWEEN :lo AND :hi"
		vals[":lo"], vals[":hi"] = avS(lo), avS(hi)
	case lo != "":
		cond += " AND " + s.skAttr + " >= :lo"
		vals[":lo"] = avS(lo)
	case hi != "":
		cond += " AND " + s.skAttr + " <= :hi"
		vals[":hi"] = avS(hi)
	}
	return cond, vals
}

// ListEmails never reads an email it does not return and never Scans:
//
//   - count: per stream, one Query of the day counters within the range; the (at most two)
//     boundary days the range covers partially are counted exactly with Select=COUNT;
//   - page: days are walked newest first; a day whose emails all fall before Offset is skipped
//     by its count alone; the day(s) holding the page are read newest first, Limit-bounded, one
//     Query per stream, and the streams are merged by (createdAt, id) descending.
//
// Limit <= 0 returns every matching email after Offset.
func (st *Store) ListEmails(ctx context.Context, f store.EmailFilter) ([]store.Email, int, error) {
	r := listRange{start: f.Start, end: f.End}
	if st.retention > 0 {
		// Expired emails are neither listed nor counted, deleted by TTL or not yet.
		// Whole days (store.RetainedFrom), so the window needs no partial-day count.
		if from := store.RetainedFrom(st.now(), st.retention); r.start == nil || r.start.Before(from) {
			r.start = &from
		}
	}
	if r.start != nil && r.end != nil && r.start.After(*r.end) {
		return []store.Email{}, 0, nil
	}
	var streams []emailStream
	if len(f.DomainIDs) == 0 {
		streams = append(streams, emailStream{
			index: IndexGSI1, pkAttr: AttrGSI1PK, skAttr: AttrGSI1SK,
			shard:      func(d string) string { return emailDayIndexKey(f.TeamID, d) },
			counterKey: func(d string) key { return teamCounterKey(f.TeamID, d) },
		})
	}
	seen := map[int64]bool{}
	for _, dom := range f.DomainIDs {
		if seen[dom] {
			continue
		}
		seen[dom] = true
		streams = append(streams, emailStream{
			index: IndexGSI2, pkAttr: AttrGSI2PK, skAttr: AttrGSI2SK,
			shard:      func(d string) string { return emailDomainDayIndexKey(f.TeamID, dom, d) },
			counterKey: func(d string) key { return domainCounterKey(f.TeamID, dom, d) },
		})
	}

	total := 0
	dayTotals := map[string]int{}
	for i := range streams {
		days, err := st.dayCounts(ctx, streams[i], r)
		if err != nil {
			return nil, 0, err
		}
		streams[i].days = days
		for d, c := range days {
			total += c
			dayTotals[d] += c
		}
	}

	days := make([]string, 0, len(dayTotals))
	for d, c := range dayTotals {
		if c > 0 {
			days = append(days, d)
		}
	}
	slices.Sort(days)
	slices.Reverse(days)

	page := []store.Email{}
	skip := max(f.Offset, 0)
	for _, d := range days {
		if f.Limit > 0 && len(page) >= f.Limit {
			break
		}
		if skip >= dayTotals[d] {
			skip -= dayTotals[d]
			continue
		}
		want := 0 // 0: the whole day
		if f.Limit > 0 {
			want = skip + f.Limit - len(page)
		}
		var hits []map[string]types.AttributeValue
		for _, s := range streams {
			if s.days[d] == 0 {
				continue
			}
			cond, vals := r.keyCondition(s, d)
			in := &dynamodb.QueryInput{
				IndexName:                 aws.String(s.index),
				KeyConditionExpression:    aws.String(cond),
				ExpressionAttributeValues: vals,
				ScanIndexForward:          aws.Bool(false),
			}
			if want > 0 {
				in.Limit = aws.Int32(int32(min(want, 1000)))
			}
			items, err := st.query(ctx, in, want)
			if err != nil {
				return nil, 0, err
			}
			hits = append(hits, items...)
		}
		// Newest first across streams: the index sort keys are "<fixed-width time>#<id>".
		slices.SortStableFunc(hits, func(a, b map[string]types.AttributeValue) int {
			return strings.Compare(listSort(b), listSort(a))
		})
		hits = hits[min(skip, len(hits)):]
		skip = 0
		if f.Limit > 0 {
			hits = hits[:min(len(hits), f.Limit-len(page))]
		}
		emails, err := st.emailsFromIndex(ctx, hits)
		if err != nil {
			return nil, 0, err
		}
		page = append(page, emails...)
	}
	return page, total, nil
}

func listSort(m map[string]types.AttributeValue) string {
	if v, ok := m[AttrGSI1SK].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// dayCounts returns the stream's emails per day within the range: counter items for whole
// days, a Select=COUNT Query for the days the range covers partially.
func (st *Store) dayCounts(ctx context.Context, s emailStream, r listRange) (map[string]int, error) {
	lo, hi := s.counterKey(r.firstDay()), s.counterKey(r.lastDay())
	items, err := st.query(ctx, &dynamodb.QueryInput{
		KeyConditionExpression: aws.String("PK = :pk AND SK BETWEEN :lo AND :hi"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": avS(lo.PK), ":lo": avS(lo.SK), ":hi": avS(hi.SK),
		},
	}, 0)
	if err != nil {
		return nil, err
	}
	days := map[string]int{}
	for _, m := range items {
		d := strings.TrimPrefix(skOf(m), counterPrefix)
		v, ok := m["n"].(*types.AttributeValueMemberN)
		if !ok {
			continue
		}
		c, err := strconv.Atoi(v.Value)
		if err != nil {
			return nil, fmt.Errorf("dynamo: counter %s: %w", d, err)
		}
		if r.partial(d) {
			cond, vals := r.keyCondition(s, d)
			c, err = st.count(ctx, &dynamodb.QueryInput{
				IndexName:                 aws.String(s.index),
				KeyConditionExpression:    aws.String(cond),
				ExpressionAttributeValues: vals,
			})
			if err != nil {
				return nil, err
			}
		}
		days[d] = c
	}
	return days, nil
}
