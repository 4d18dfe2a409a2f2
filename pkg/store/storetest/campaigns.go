package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/store"
)

func newCampaign(teamID int64, name, subject, status string, created time.Time) store.Campaign {
	return store.Campaign{
		ID:                 randID("camp-"),
		TeamID:             teamID,
		DomainID:           3,
		Name:               name,
		From:               "News <news@example.com>",
		Subject:            subject,
		PreviewText:        "preview",
		ContactBookID:      "book-1",
		HTML:               "<p>Hello {{firstName}}</p>",
		Content:            `{"type":"doc"}`,
		ReplyTo:            []string{"reply@example.com"},
		CC:                 []string{"cc@example.com"},
		Status:             status,
		ScheduledAt:        ptr(created.Add(time.Hour)),
		BatchSize:          500,
		BatchWindowMinutes: 5,
		CreatedAt:          created,
		UpdatedAt:          created,
	}
}

func createCampaign(t *testing.T, s store.Store, c store.Campaign) store.Campaign {
	t.Helper()
	noErr(t, "CreateCampaign", s.CreateCampaign(t.Context(), c))
	return c
}

func getCampaign(t *testing.T, s store.Store, teamID int64, id string) store.Campaign {
	t.Helper()
	settle(t, s)
	c, err := s.GetCampaign(t.Context(), teamID, id)
	noErr(t, "GetCampaign", err)
	return c
}

func campaignIDs(list []store.Campaign) []string {
	out := make([]string, len(list))
	for i, c := range list {
		out[i] = c.ID
	}
	return out
}

func testCampaigns(t *testing.T, s store.Store) {
	ctx := t.Context()
	team, other := newTeam(t, s), newTeam(t, s)
	base := now()
	c1 := createCampaign(t, s, newCampaign(team, "Spring sale", "Flowers for you", store.CampaignDraft, base))
	c2 := createCampaign(t, s, newCampaign(team, "Newsletter May", "What's new in SPRING", store.CampaignSent, base.Add(time.Second)))
	launch := newCampaign(team, "Launch", "Version 2 is here", store.CampaignRunning, base.Add(2*time.Second))
	launch.DomainID = 4
	c3 := createCampaign(t, s, launch)
	c4 := createCampaign(t, s, newCampaign(team, "Newsletter June", "Summer", store.CampaignSent, base.Add(3*time.Second)))
	oc := createCampaign(t, s, newCampaign(other, "Spring sale", "Flowers", store.CampaignDraft, base))

	checkCampaign(t, "GetCampaign", getCampaign(t, s, team, c1.ID), c1)
	_, err := s.GetCampaign(ctx, other, c1.ID)
	wantErr(t, "GetCampaign(other team's id)", err, store.ErrNotFound)
	_, err = s.GetCampaign(ctx, team, randID("camp-"))
	wantErr(t, "GetCampaign(unknown)", err, store.ErrNotFound)
	state, err := s.GetCampaignState(ctx, team, c1.ID)
	noErr(t, "GetCampaignState", err)
	checkCampaign(t, "GetCampaignState", state, c1)
	_, err = s.GetCampaignState(ctx, other, c1.ID)
	wantErr(t, "GetCampaignState(other team's id)", err, store.ErrNotFound)
	_, err = s.GetCampaignState(ctx, team, randID("camp-"))
	wantErr(t, "GetCampaignState(unknown)", err, store.ErrNotFound)

	cases := []struct {
		name  string
		f     store.CampaignFilter
		want  []string
		total int
	}{
		{"all", store.CampaignFilter{Limit: 10}, []string{c4.ID, c3.ID, c2.ID, c1.ID}, 4},
		{"page", store.CampaignFilter{Offset: 1, Limit: 2}, []string{c3.ID, c2.ID}, 4},
		{"past the end", store.CampaignFilter{Offset: 4, Limit: 2}, nil, 4},
		{"status", store.CampaignFilter{Status: store.CampaignSent, Limit: 10}, []string{c4.ID, c2.ID}, 2},
		{"status paged", store.CampaignFilter{Status: store.CampaignSent, Offset: 1, Limit: 1}, []string{c2.ID}, 2},
		{"search name or subject", store.CampaignFilter{Search: "sPrInG", Limit: 10}, []string{c2.ID, c1.ID}, 2},
		{"search name", store.CampaignFilter{Search: "newsletter", Limit: 10}, []string{c4.ID, c2.ID}, 2},
		{"search and status", store.CampaignFilter{Search: "spring", Status: store.CampaignDraft, Limit: 10}, []string{c1.ID}, 1},
		{"search nothing", store.CampaignFilter{Search: "winter", Limit: 10}, nil, 0},
		{"domain", store.CampaignFilter{DomainID: 4, Limit: 10}, []string{c3.ID}, 1},
		{"other domain paged", store.CampaignFilter{DomainID: 3, Offset: 1, Limit: 2}, []string{c2.ID, c1.ID}, 3},
		{"domain and status", store.CampaignFilter{DomainID: 3, Status: store.CampaignRunning, Limit: 10}, nil, 0},
	}
	for _, tc := range cases {
		list, total, err := s.ListCampaigns(ctx, team, tc.f)
		noErr(t, "ListCampaigns("+tc.name+")", err)
		if total != tc.total || !equalStrings(campaignIDs(list), tc.want) {
			t.Fatalf("ListCampaigns(%s) = %v (total %d), want %v (total %d)", tc.name, campaignIDs(list), total, tc.want, tc.total)
		}
	}
	list, _, err := s.ListCampaigns(ctx, team, store.CampaignFilter{Status: store.CampaignRunning, Limit: 10})
	noErr(t, "ListCampaigns", err)
	if len(list) != 1 {
		t.Fatalf("ListCampaigns(RUNNING) = %v", campaignIDs(list))
	}
	checkCampaign(t, "ListCampaigns(RUNNING)[0]", list[0], c3)
	list, total, err := s.ListCampaigns(ctx, other, store.CampaignFilter{Limit: 10})
	noErr(t, "ListCampaigns(other)", err)
	if total != 1 || !equalStrings(campaignIDs(list), []string{oc.ID}) {
		t.Fatalf("ListCampaigns(other) = %v (total %d), want [%s]", campaignIDs(list), total, oc.ID)
	}

	// UpdateCampaign: applied, returned, persisted, visible to the list filters.
	cursorAt := now()
	updated, err := s.UpdateCampaign(ctx, team, c1.ID, func(c *store.Campaign) error {
		c.Status = store.CampaignRunning
		c.Name = "Autumn sale"
		c.Cursor = "m@example.com"
		c.BatchesDone++
		c.Audience = 12345
		c.ReplyTo = append(c.ReplyTo, "second@example.com")
		c.UpdatedAt = cursorAt
		return nil
	})
	noErr(t, "UpdateCampaign", err)
	want := c1
	want.Status, want.Name, want.Cursor, want.BatchesDone, want.UpdatedAt = store.CampaignRunning, "Autumn sale", "m@example.com", 1, cursorAt
	want.Audience = 12345
	want.ReplyTo = []string{"reply@example.com", "second@example.com"}
	checkCampaign(t, "UpdateCampaign result", updated, want)
	checkCampaign(t, "GetCampaign after UpdateCampaign", getCampaign(t, s, team, c1.ID), want)
	list, total, err = s.ListCampaigns(ctx, team, store.CampaignFilter{Status: store.CampaignRunning, Search: "autumn", Limit: 10})
	noErr(t, "ListCampaigns", err)
	if total != 1 || !equalStrings(campaignIDs(list), []string{c1.ID}) {
		t.Fatalf("ListCampaigns after an update = %v (total %d), want [%s]", campaignIDs(list), total, c1.ID)
	}
	list, _, err = s.ListCampaigns(ctx, team, store.CampaignFilter{Search: "spring", Limit: 10})
	noErr(t, "ListCampaigns", err)
	if !equalStrings(campaignIDs(list), []string{c2.ID}) {
		t.Fatalf("ListCampaigns(spring) after a rename = %v, want [%s]", campaignIDs(list), c2.ID)
	}

	errBoom := errors.New("boom")
	_, err = s.UpdateCampaign(ctx, team, c1.ID, func(c *store.Campaign) error {
		c.Status = store.CampaignPaused
		return errBoom
	})
	wantErr(t, "UpdateCampaign(fn fails)", err, errBoom)
	_, err = s.UpdateCampaign(ctx, other, c1.ID, func(*store.Campaign) error { return nil })
	wantErr(t, "UpdateCampaign(other team's id)", err, store.ErrNotFound)
	checkCampaign(t, "GetCampaign after refused updates", getCampaign(t, s, team, c1.ID), want)

	// Delete: scoped, then gone from Get and List.
	_ = s.DeleteCampaign(ctx, other, c2.ID) // the error, if any, is the adapter's
	getCampaign(t, s, team, c2.ID)
	noErr(t, "DeleteCampaign", s.DeleteCampaign(ctx, team, c2.ID))
	_, err = s.GetCampaign(ctx, team, c2.ID)
	wantErr(t, "GetCampaign(deleted)", err, store.ErrNotFound)
	list, total, err = s.ListCampaigns(ctx, team, store.CampaignFilter{Limit: 10})
	noErr(t, "ListCampaigns", err)
	if total != 3 || !equalStrings(campaignIDs(list), []string{c4.ID, c3.ID, c1.ID}) {
		t.Fatalf("ListCampaigns after delete = %v (total %d)", campaignIDs(list), total)
	}
}

func testUpdateCampaignConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	c := createCampaign(t, s, newCampaign(team, "c", "s", store.CampaignRunning, now()))
	errs := concurrently(workers, func(i int) error {
		_, err := s.UpdateCampaign(ctx, team, c.ID, func(c *store.Campaign) error {
			c.BatchesDone++
			c.Cursor = fmt.Sprintf("u%02d@example.com", i)
			return nil
		})
		return err
	})
	for _, err := range errs {
		noErr(t, "concurrent UpdateCampaign", err)
	}
	if got := getCampaign(t, s, team, c.ID); got.BatchesDone != workers {
		t.Fatalf("BatchesDone after %d concurrent increments = %d", workers, got.BatchesDone)
	}
}

// campaignEmail is a campaign email whose creation counts it in the total.
func campaignEmail(teamID int64, campaignID string, created time.Time) store.Email {
	e := newEmail(teamID, 3, created, store.StatusQueued)
	e.CampaignID = campaignID
	e.ContactID = randID("ct-")
	e.Counted = []string{store.CountTotal}
	return e
}

// addCounted is an UpdateEmail fn adding kinds to Counted (duplicates included, as a careless
// caller would).
func addCounted(kinds ...string) func(*store.Email) ([]store.Event, error) {
	return func(e *store.Email) ([]store.Event, error) {
		e.Counted = append(e.Counted, kinds...)
		return nil, nil
	}
}

func wantCounters(t *testing.T, s store.Store, what string, teamID int64, id string, want map[string]int64) {
	t.Helper()
	got := normCounters(getCampaign(t, s, teamID, id).Counters)
	want = normCounters(want)
	if len(got) != len(want) {
		t.Fatalf("%s: counters = %v, want %v", what, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: counters = %v, want %v", what, got, want)
		}
	}
}

func testCampaignCounters(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	camp := createCampaign(t, s, newCampaign(team, "c", "s", store.CampaignRunning, now()))
	wantCounters(t, s, "new campaign", team, camp.ID, nil)

	base := now()
	emails := []store.Email{
		campaignEmail(team, camp.ID, base),
		campaignEmail(team, camp.ID, base.Add(time.Millisecond)),
		campaignEmail(team, camp.ID, base.Add(2*time.Millisecond)),
	}
	createEmails(t, s, emails...)
	wantCounters(t, s, "after 3 emails", team, camp.ID, map[string]int64{store.CountTotal: 3})
	checkEmail(t, "campaign email", getEmail(t, s, emails[0].ID), emails[0])
	createEmails(t, s, emails...)
	wantCounters(t, s, "after the same 3 emails again", team, camp.ID, map[string]int64{store.CountTotal: 3})

	e := emails[0]
	got, err := s.UpdateEmail(ctx, e.ID, addCounted(store.CountSent))
	noErr(t, "UpdateEmail(+sent)", err)
	if !equalStrings(got.Counted, []string{store.CountTotal, store.CountSent}) {
		t.Fatalf("Counted after +sent = %v", got.Counted)
	}
	wantCounters(t, s, "after +sent", team, camp.ID, map[string]int64{store.CountTotal: 3, store.CountSent: 1})

	_, err = s.UpdateEmail(ctx, e.ID, func(e *store.Email) ([]store.Event, error) {
		e.Status = store.StatusSent // Counted unchanged: sent is already there
		return nil, nil
	})
	noErr(t, "UpdateEmail(no new kind)", err)
	_, err = s.UpdateEmail(ctx, e.ID, addCounted(store.CountSent, store.CountTotal))
	noErr(t, "UpdateEmail(+sent again)", err)
	wantCounters(t, s, "after kinds already counted", team, camp.ID, map[string]int64{store.CountTotal: 3, store.CountSent: 1})

	_, err = s.UpdateEmail(ctx, e.ID, addCounted(store.CountDelivered, store.CountOpened, store.CountOpened))
	noErr(t, "UpdateEmail(+delivered +opened)", err)
	wantCounters(t, s, "after +delivered +opened", team, camp.ID,
		map[string]int64{store.CountTotal: 3, store.CountSent: 1, store.CountDelivered: 1, store.CountOpened: 1})
	_, err = s.UpdateEmail(ctx, emails[1].ID, addCounted(store.CountSent, store.CountBounced, store.CountHardBounced))
	noErr(t, "UpdateEmail(other email)", err)
	want := map[string]int64{store.CountTotal: 3, store.CountSent: 2, store.CountDelivered: 1, store.CountOpened: 1,
		store.CountBounced: 1, store.CountHardBounced: 1}
	wantCounters(t, s, "after a second email", team, camp.ID, want)
	if st, err := s.GetCampaignState(ctx, team, camp.ID); err != nil || st.Counters != nil || st.ID != camp.ID {
		t.Errorf("GetCampaignState = %s with counters %v, %v; want the campaign without counters", st.ID, st.Counters, err)
	}

	// An aborted update or a duplicate event counts nothing.
	errBoom := errors.New("boom")
	_, err = s.UpdateEmail(ctx, emails[2].ID, func(e *store.Email) ([]store.Event, error) {
		e.Counted = append(e.Counted, store.CountClicked)
		return nil, errBoom
	})
	wantErr(t, "UpdateEmail(fn fails)", err, errBoom)
	_, err = s.UpdateEmail(ctx, emails[2].ID, func(e *store.Email) ([]store.Event, error) {
		e.Counted = append(e.Counted, store.CountClicked)
		return []store.Event{{ID: "created", Status: "CLICKED", CreatedAt: now()}}, nil
	})
	wantErr(t, "UpdateEmail(duplicate event)", err, store.ErrDuplicateEvent)
	wantCounters(t, s, "after refused updates", team, camp.ID, want)

	// UpdateCampaign keeps the counters, whatever fn does to them.
	settle(t, s)
	updated, err := s.UpdateCampaign(ctx, team, camp.ID, func(c *store.Campaign) error {
		if c.Counters[store.CountSent] != 2 {
			return fmt.Errorf("fn sees counters %v", c.Counters)
		}
		c.Counters = map[string]int64{store.CountTotal: 1000}
		c.BatchesDone = 1
		return nil
	})
	noErr(t, "UpdateCampaign", err)
	if got := normCounters(updated.Counters); got[store.CountTotal] != 3 || got[store.CountSent] != 2 {
		t.Fatalf("UpdateCampaign result has counters %v, want the stored ones", updated.Counters)
	}
	wantCounters(t, s, "after an UpdateCampaign touching counters", team, camp.ID, want)

	// An email without a campaign touches no campaign.
	plain := newEmail(team, 3, now(), store.StatusQueued)
	plain.Counted = []string{store.CountTotal}
	createEmails(t, s, plain)
	_, err = s.UpdateEmail(ctx, plain.ID, addCounted(store.CountSent, store.CountDelivered))
	noErr(t, "UpdateEmail(no campaign)", err)
	wantCounters(t, s, "after an email without campaign", team, camp.ID, want)

	// Another campaign's emails count for it only.
	camp2 := createCampaign(t, s, newCampaign(team, "c2", "s2", store.CampaignRunning, now()))
	e2 := campaignEmail(team, camp2.ID, now())
	createEmails(t, s, e2)
	_, err = s.UpdateEmail(ctx, e2.ID, addCounted(store.CountSent))
	noErr(t, "UpdateEmail(second campaign)", err)
	wantCounters(t, s, "second campaign", team, camp2.ID, map[string]int64{store.CountTotal: 1, store.CountSent: 1})
	wantCounters(t, s, "first campaign after the second's emails", team, camp.ID, want)

	noErr(t, "DeleteCampaign", s.DeleteCampaign(ctx, team, camp.ID))
	_, err = s.GetCampaign(ctx, team, camp.ID)
	wantErr(t, "GetCampaign(deleted)", err, store.ErrNotFound)
}

// testCampaignCountersConcurrent: counter increments from concurrent email updates, interleaved
// with UpdateCampaign calls, are all kept.
func testCampaignCountersConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	team := newTeam(t, s)
	camp := createCampaign(t, s, newCampaign(team, "c", "s", store.CampaignRunning, now()))
	base := now()
	emails := make([]store.Email, workers)
	for i := range emails {
		emails[i] = campaignEmail(team, camp.ID, base.Add(time.Duration(i)*time.Millisecond))
	}
	createEmails(t, s, emails...)
	errs := concurrently(2*workers, func(i int) error {
		if i%2 == 1 {
			_, err := s.UpdateCampaign(ctx, team, camp.ID, func(c *store.Campaign) error {
				c.BatchesDone++
				return nil
			})
			return err
		}
		_, err := s.UpdateEmail(ctx, emails[i/2].ID, addCounted(store.CountDelivered))
		return err
	})
	for _, err := range errs {
		noErr(t, "concurrent UpdateEmail/UpdateCampaign", err)
	}
	wantCounters(t, s, fmt.Sprintf("after %d concurrent deliveries", workers), team, camp.ID,
		map[string]int64{store.CountTotal: workers, store.CountDelivered: workers})
	if got := getCampaign(t, s, team, camp.ID); got.BatchesDone != workers {
		t.Fatalf("BatchesDone = %d, want %d", got.BatchesDone, workers)
	}
}
