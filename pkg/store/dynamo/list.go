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

// emailStream is one index of a team's emails, in partitions per day and shard (listShards),
// with its day counters: the whole team (GSI1) or one domain (GSI2).
type emailStream struct {
	index    string
	pkAttr   string
	skAttr   string
	part     func(day string, shard int) string
	counters []counterSource
	days     map[string]int // emails per day within the filter
}

// counterSource is a partition of day counter items (SK DAY#<day>) and the attribute that
// holds the stream's count in it.
type counterSource struct {
	pk, attr string
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

// keyCondition selects day d of the stream's shard within the range.
func (r listRange) keyCondition(s emailStream, d string, shard int) (string, map[string]types.AttributeValue) {
	cond := s.pkAttr + " = :pk"
	vals := map[string]types.AttributeValue{":pk": avS(s.part(d, shard))}
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
//   - count: per stream, one Query of the day counters within the range in each counter shard;
//     the (at most two) boundary days the range covers partially, and today (and yesterday
//     for the first minutes of a day) unless it holds exactCountBelow emails or more, are
//     counted exactly with Select=COUNT in each list shard;
//   - page: days are walked newest first; a day whose emails all fall before Offset is skipped
//     by its count alone; the day(s) holding the page are read newest first, Limit-bounded, one
//     Query per stream and shard (concurrently), and the results are merged by (createdAt, id)
//     descending.
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
		counters := []counterSource{{teamCounterKey(f.TeamID, "").PK, "n"}}
		for s := range WorkShards {
			counters = append(counters, counterSource{dayCounterKey(f.TeamID, "", s).PK, "n"})
		}
		streams = append(streams, emailStream{
			index: IndexGSI1, pkAttr: AttrGSI1PK, skAttr: AttrGSI1SK,
			part:     func(d string, shard int) string { return emailDayIndexKey(f.TeamID, d, shard) },
			counters: counters,
		})
	}
	seen := map[int64]bool{}
	for _, dom := range f.DomainIDs {
		if seen[dom] {
			continue
		}
		seen[dom] = true
		counters := []counterSource{{domainCounterKey(f.TeamID, dom, "").PK, "n"}}
		for s := range WorkShards {
			counters = append(counters, counterSource{dayCounterKey(f.TeamID, "", s).PK, domainCountAttr(dom)})
		}
		streams = append(streams, emailStream{
			index: IndexGSI2, pkAttr: AttrGSI2PK, skAttr: AttrGSI2SK,
			part:     func(d string, shard int) string { return emailDomainDayIndexKey(f.TeamID, dom, d, shard) },
			counters: counters,
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
		var ins []*dynamodb.QueryInput
		for _, s := range streams {
			if s.days[d] == 0 {
				continue
			}
			for _, shard := range listShards() {
				cond, vals := r.keyCondition(s, d, shard)
				in := &dynamodb.QueryInput{
					IndexName:                 aws.String(s.index),
					KeyConditionExpression:    aws.String(cond),
					ExpressionAttributeValues: vals,
					ScanIndexForward:          aws.Bool(false),
				}
				if want > 0 {
					in.Limit = aws.Int32(int32(min(want, 1000)))
				}
				ins = append(ins, in)
			}
		}
		found, err := st.queryEach(ctx, ins, want)
		if err != nil {
			return nil, 0, err
		}
		var hits []map[string]types.AttributeValue
		for _, items := range found {
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
// days (one Query per counter shard), Select=COUNT Queries (one per list shard) for the days
// the range covers partially.
func (st *Store) dayCounts(ctx context.Context, s emailStream, r listRange) (map[string]int, error) {
	var ins []*dynamodb.QueryInput
	for _, c := range s.counters {
		ins = append(ins, &dynamodb.QueryInput{
			KeyConditionExpression: aws.String("PK = :pk AND SK BETWEEN :lo AND :hi"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": avS(c.pk), ":lo": avS(counterPrefix + r.firstDay()), ":hi": avS(counterPrefix + r.lastDay()),
			},
		})
	}
	found, err := st.queryEach(ctx, ins, 0)
	if err != nil {
		return nil, err
	}
	days := map[string]int{}
	for i, items := range found {
		for _, m := range items {
			d := strings.TrimPrefix(skOf(m), counterPrefix)
			v, ok := m[s.counters[i].attr].(*types.AttributeValueMemberN)
			if !ok {
				continue
			}
			c, err := strconv.Atoi(v.Value)
			if err != nil {
				return nil, fmt.Errorf("dynamo: counter %s: %w", d, err)
			}
			days[d] += c
		}
	}
	// Exactly, with Select=COUNT: the days the range covers partially, and the recent days
	// whose latest emails the stream may not have counted yet (ApplyCounts trails the writes by
	// a second or so), unless they hold so many emails that counting them would cost more
	// than the lag is worth.
	exact := map[string]bool{}
	for d := range days {
		if r.partial(d) {
			exact[d] = true
		}
	}
	for _, d := range []string{day(st.now()), day(st.now().Add(-countLag))} {
		if d >= r.firstDay() && d <= r.lastDay() && days[d] < exactCountBelow {
			exact[d] = true
		}
	}
	for d := range exact {
		var counts []*dynamodb.QueryInput
		for _, shard := range listShards() {
			cond, vals := r.keyCondition(s, d, shard)
			counts = append(counts, &dynamodb.QueryInput{
				IndexName:                 aws.String(s.index),
				KeyConditionExpression:    aws.String(cond),
				ExpressionAttributeValues: vals,
			})
		}
		n, err := st.countEach(ctx, counts)
		if err != nil {
			return nil, err
		}
		if n > 0 || days[d] > 0 {
			days[d] = n
		}
	}
	return days, nil
}

// countLag bounds how far the stream's counts trail the writes (beyond it the function's
// iterator age alarm fires), and exactCountBelow is the size of a day up to which ListEmails
// counts a recent day's emails exactly rather than trust its counters.
const (
	countLag        = 5 * time.Minute
	exactCountBelow = 10000
)
