package api_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/schedule"
	"github.com/mailroom/mailroom/pkg/store"
)

func scheduled(at time.Time) string {
	return `{"to":"success@simulator.amazonses.com","from":"hello@example.com","subject":"later","text":"t","scheduledAt":"` + at.UTC().Format(time.RFC3339) + `"}`
}

func (e *env) inOutbox(id string) bool {
	_, err := os.Stat(filepath.Join(e.app.OutboxDir, id+".eml"))
	return err == nil
}

func TestScheduledSendFiresOnTime(t *testing.T) {
	e := newEnv(t) // its clock is real time here: the in-process scheduler fires on real time
	at := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
	id := e.send(scheduled(at))
	if d := e.get(id); d.LatestStatus != "SCHEDULED" || e.inOutbox(id) {
		t.Fatalf("before its time: %s, in outbox %v", d.LatestStatus, e.inOutbox(id))
	}
	d := e.await(id, "DELIVERED")
	if !e.inOutbox(id) {
		t.Fatal("fired but not in the outbox")
	}
	statuses := []string{}
	for _, ev := range d.EmailEvents {
		statuses = append(statuses, ev.Status)
	}
	if got := strings.Join(statuses, ","); !strings.HasPrefix(got, "SCHEDULED,QUEUED,SENT,DELIVERED") {
		t.Errorf("history %s", got)
	}
}

func TestCancelAndReschedule(t *testing.T) {
	e := newEnv(t)
	at := e.clock.Now().Add(time.Hour)
	id := e.send(scheduled(at))
	var out struct{ EmailID string }
	e.mustDo("POST", "/api/v1/emails/"+id+"/cancel", "{}", &out)
	if out.EmailID != id {
		t.Errorf("cancel answered %+v", out)
	}
	d := e.get(id)
	if d.LatestStatus != "CANCELLED" || d.EmailEvents[len(d.EmailEvents)-1].Status != "CANCELLED" {
		t.Errorf("after cancel: %+v", d)
	}
	for _, r := range []response{
		e.do("POST", "/api/v1/emails/"+id+"/cancel", "{}"),
		e.do("PATCH", "/api/v1/emails/"+id, `{"scheduledAt":"`+at.Format(time.RFC3339)+`"}`),
	} {
		if _, msg := r.errorOf(t); r.status != 400 || msg != "Email already processed" {
			t.Errorf("change a cancelled email: %d %s", r.status, msg)
		}
	}
	// A schedule that fires late finds the email cancelled and does nothing.
	late, _ := jsonPayload(id, at)
	if err := e.app.Services.Emails.Fire(context.Background(), late); err != nil {
		t.Fatal(err)
	}
	if d := e.get(id); d.LatestStatus != "CANCELLED" || e.inOutbox(id) {
		t.Errorf("late fire sent a cancelled email: %s", d.LatestStatus)
	}

	// Reschedule: the old schedule's payload no longer promotes it, the new one does.
	id2 := e.send(scheduled(at))
	later := at.Add(time.Hour)
	e.mustDo("PATCH", "/api/v1/emails/"+id2, `{"scheduledAt":"`+later.Format(time.RFC3339)+`"}`, nil)
	d = e.get(id2)
	if d.ScheduledAt == nil || !strings.HasPrefix(*d.ScheduledAt, later.UTC().Format("2006-01-02T15:04:05")) {
		t.Errorf("scheduledAt after reschedule = %v", d.ScheduledAt)
	}
	old, _ := jsonPayload(id2, at)
	_ = e.app.Services.Emails.Fire(context.Background(), old)
	if d := e.get(id2); d.LatestStatus != "SCHEDULED" {
		t.Errorf("the replaced schedule promoted the email: %s", d.LatestStatus)
	}
	// Rescheduling a little into the past sends now; far into it is refused.
	if r := e.do("PATCH", "/api/v1/emails/"+id2, `{"scheduledAt":"2001-01-01T00:00:00Z"}`); r.status != 400 {
		t.Errorf("reschedule to 2001: %d, want 400", r.status)
	}
	e.mustDo("PATCH", "/api/v1/emails/"+id2, `{"scheduledAt":"`+e.clock.Now().Add(-time.Minute).Format(time.RFC3339)+`"}`, nil)
	e.await(id2, "DELIVERED")

	for body, want := range map[string]string{
		`{}`:                     "scheduledAt: is required",
		`{"scheduledAt":"soon"}`: "scheduledAt: must be an RFC 3339",
		`{"scheduledAt":"` + e.clock.Now().AddDate(2, 0, 0).Format(time.RFC3339) + `"}`: "scheduledAt: at most 365 days ahead",
	} {
		id3 := e.send(scheduled(at))
		r := e.do("PATCH", "/api/v1/emails/"+id3, body)
		if _, msg := r.errorOf(t); r.status != 400 || !strings.HasPrefix(msg, want) {
			t.Errorf("PATCH %s = %d %s", body, r.status, msg)
		}
	}
	r := e.do("POST", "/api/v1/emails", scheduled(e.clock.Now().AddDate(2, 0, 0)))
	if _, msg := r.errorOf(t); r.status != 400 || msg != "scheduledAt: at most 365 days ahead" {
		t.Errorf("send 2 years ahead = %d %s", r.status, msg)
	}
	other, _ := e.newTeam("other", store.PermissionFull, 0)
	if r := e.request(other, "POST", "/api/v1/emails/"+id2+"/cancel", nil); r.status != 404 {
		t.Errorf("cancel another team's email = %d", r.status)
	}
	if r := e.do("POST", "/api/v1/emails/emnotthere/cancel", "{}"); r.status != 404 {
		t.Errorf("cancel unknown = %d", r.status)
	}
}

func jsonPayload(id string, at time.Time) ([]byte, error) {
	return []byte(fmt.Sprintf(`{"emailId":%q,"scheduledAt":%q}`, id, at.UTC().Truncate(time.Second).Format(time.RFC3339))), nil
}

// TestCancelRacesTheSchedule: cancel and the firing schedule race many times; each email ends
// either CANCELLED and never sent, or sent and its cancel refused — never both.
func TestCancelRacesTheSchedule(t *testing.T) {
	e := newEnv(t)
	at := e.clock.Now().Add(time.Hour)
	const n = 40
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.send(scheduled(at))
	}
	cancelled := make([]bool, n)
	var wg sync.WaitGroup
	for i, id := range ids {
		payload, _ := jsonPayload(id, at)
		wg.Add(2)
		go func() {
			defer wg.Done()
			cancelled[i] = e.do("POST", "/api/v1/emails/"+id+"/cancel", "{}").status == 200
		}()
		go func() {
			defer wg.Done()
			if err := e.app.Services.Emails.Fire(context.Background(), payload); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i, id := range ids {
		if cancelled[i] {
			if d := e.get(id); d.LatestStatus != "CANCELLED" {
				t.Errorf("%s: cancel won but status %s", id, d.LatestStatus)
			}
			continue
		}
		e.await(id, "DELIVERED")
	}
	e.app.Pool.Close(context.Background()) // let in-flight sends finish
	for i, id := range ids {
		if cancelled[i] && e.inOutbox(id) {
			t.Errorf("%s was cancelled and sent", id)
		}
	}
}

func TestScheduledEmailSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	first := newEnvAt(t, dir, 1)
	at := time.Now().Add(2 * time.Second).Truncate(time.Second)
	id := first.send(scheduled(at))
	key := first.key
	first.srv.Close()
	if err := first.app.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(at) + 200*time.Millisecond) // it comes due while the server is down
	second := reopen(t, dir, key)
	second.await(id, "DELIVERED")
}

func TestSuppressionsAPI(t *testing.T) {
	e := newEnv(t)
	var sup struct{ Email, Reason string }
	e.mustDo("POST", "/api/v1/suppressions", `{"email":"Blocked <BLOCKED@Example.org>"}`, &sup)
	if sup.Email != "blocked@example.org" || sup.Reason != "MANUAL" {
		t.Errorf("created %+v", sup)
	}
	id := e.send(`{"to":"blocked@example.org","cc":"ok@example.org","from":"hello@example.com","subject":"s","text":"t"}`)
	d := e.await(id, "SUPPRESSED")
	if last := d.EmailEvents[len(d.EmailEvents)-1]; !strings.Contains(string(last.Data), "suppression list") {
		t.Errorf("suppressed event data %s", last.Data)
	}
	bounced := e.send(`{"to":"bounce@simulator.amazonses.com","from":"hello@example.com","subject":"s","text":"t"}`)
	e.await(bounced, "BOUNCED")
	var list struct {
		Data  []struct{ Email, Reason string } `json:"data"`
		Count int                              `json:"count"`
	}
	e.mustDo("GET", "/api/v1/suppressions?reason=HARD_BOUNCE", "", &list)
	if list.Count != 1 || list.Data[0].Email != "bounce@simulator.amazonses.com" {
		t.Errorf("hard bounces = %+v", list)
	}
	e.mustDo("GET", "/api/v1/suppressions?limit=1&page=2", "", &list)
	if list.Count != 2 || len(list.Data) != 1 {
		t.Errorf("page 2 = %+v", list)
	}
	for q, want := range map[string]string{"reason=LOUD": "reason:", "page=0": "page:"} {
		if r := e.do("GET", "/api/v1/suppressions?"+q, ""); r.status != 400 {
			t.Errorf("?%s = %d, want 400 %s", q, r.status, want)
		}
	}
	if r := e.do("POST", "/api/v1/suppressions", `{"email":"nope"}`); r.status != 400 {
		t.Errorf("invalid address = %d", r.status)
	}
	e.mustDo("DELETE", "/api/v1/suppressions/blocked@example.org", "", nil)
	if r := e.do("DELETE", "/api/v1/suppressions/blocked@example.org", ""); r.status != 404 {
		t.Errorf("delete again = %d", r.status)
	}
	again := e.send(`{"to":"blocked@example.org","from":"hello@example.com","subject":"s","text":"t"}`)
	e.await(again, "DELIVERED")
	sending := e.keyFor(store.PermissionSending, 0)
	if r := e.request(sending, "GET", "/api/v1/suppressions", nil); r.status != 403 {
		t.Errorf("SENDING key read suppressions: %d", r.status)
	}
}

func TestDomainTracking(t *testing.T) {
	e := newEnv(t)
	var d struct {
		ClickTracking, OpenTracking bool
	}
	e.mustDo("PATCH", fmt.Sprintf("/api/v1/domains/%d", e.domain), `{"openTracking":true}`, &d)
	if !d.OpenTracking || d.ClickTracking {
		t.Errorf("after open: %+v", d)
	}
	e.mustDo("PATCH", fmt.Sprintf("/api/v1/domains/%d", e.domain), `{"clickTracking":true,"openTracking":false}`, &d)
	if d.OpenTracking || !d.ClickTracking {
		t.Errorf("after click: %+v", d)
	}
	if r := e.do("PATCH", fmt.Sprintf("/api/v1/domains/%d", e.domain), `{"clickTracking":"yes"}`); r.status != 400 {
		t.Errorf("string flag = %d", r.status)
	}
	if r := e.do("PATCH", "/api/v1/domains/999", `{"clickTracking":true}`); r.status != 404 {
		t.Errorf("unknown domain = %d", r.status)
	}
}

// TestLostRescheduleHeals: the email says T2 but the only schedule left is for T1 (a
// reschedule whose Put was lost, or two reschedules whose Puts crossed). When T1 fires, the
// schedule for T2 is put back; at T2 the email is sent. Nothing stays SCHEDULED for ever.
func TestLostRescheduleHeals(t *testing.T) {
	e := newEnv(t)
	t1 := e.clock.Now().Add(time.Hour).Truncate(time.Second)
	id := e.send(scheduled(t1))
	t2 := t1.Add(time.Hour)
	if _, err := e.app.Store.UpdateEmail(context.Background(), id, func(x *store.Email) ([]store.Event, error) {
		x.ScheduledAt = &t2 // the reschedule's write landed, its Put did not
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Hour + time.Second) // T1 fires
	old, _ := jsonPayload(id, t1)
	if err := e.app.Services.Emails.Fire(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	if d := e.get(id); d.LatestStatus != "SCHEDULED" {
		t.Fatalf("fired before its time: %s", d.LatestStatus)
	}
	sc, ok := e.schedule(email.ScheduleName(id, t2, 0))
	if !ok || !sc.At.Equal(t2) {
		t.Fatalf("schedule after the early fire = %v %v, want one at %s", sc.At, ok, t2)
	}
	e.clock.Add(time.Hour) // T2 fires
	if err := e.app.Services.Emails.Fire(context.Background(), sc.Payload); err != nil {
		t.Fatal(err)
	}
	e.await(id, "DELIVERED")
}

// TestEarlyFireRearmsOnceUnderANewName: EventBridge Scheduler may fire within the minute of an
// at() time. A schedule that fires 50 s before its email's time leaves the email SCHEDULED and
// puts one schedule back for the same time under a new name (the one that fired is deleted by
// the service after it completes, so its name cannot be reused); that one sends it.
func TestEarlyFireRearmsOnceUnderANewName(t *testing.T) {
	e := newEnv(t)
	at := e.clock.Now().Add(time.Hour).Truncate(time.Second)
	id := e.send(scheduled(at))
	get := e.schedule
	first, ok := get(email.ScheduleName(id, at, 0))
	if !ok || !first.At.Equal(at) {
		t.Fatalf("schedule of the send = %+v %v, want one at %s", first, ok, at)
	}
	e.clock.Add(time.Hour - 50*time.Second)
	if err := e.app.Services.Emails.Fire(context.Background(), first.Payload); err != nil {
		t.Fatal(err)
	}
	if d := e.get(id); d.LatestStatus != "SCHEDULED" {
		t.Fatalf("an early fire sent it: %s", d.LatestStatus)
	}
	rearmed, ok := get(email.ScheduleName(id, at, 1))
	if !ok || !rearmed.At.Equal(at) || rearmed.Name == first.Name {
		t.Fatalf("re-armed schedule = %+v %v, want one at %s under a new name", rearmed, ok, at)
	}
	if _, ok := get(email.ScheduleName(id, at, 2)); ok {
		t.Fatal("re-armed twice")
	}
	e.clock.Add(50 * time.Second)
	if err := e.app.Services.Emails.Fire(context.Background(), rearmed.Payload); err != nil {
		t.Fatal(err)
	}
	e.await(id, "DELIVERED")
	if _, ok := get(email.ScheduleName(id, at, 2)); ok {
		t.Fatal("an on-time fire re-armed")
	}
}

// schedule reads a pending schedule of the local scheduler (emails' and campaigns' alike).
func (e *env) schedule(name string) (schedule.Schedule, bool) {
	e.t.Helper()
	sc, ok, err := e.app.EmailScheduler.(interface {
		Get(context.Context, string) (schedule.Schedule, bool, error)
	}).Get(context.Background(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	return sc, ok
}

// A scheduledAt with a fraction of a second (JavaScript's toISOString) rounds up to the next
// second, for the send and for a reschedule: an email never goes out before its time. A
// reschedule too far in the past says what to do instead, and "" is refused.
func TestScheduledAtRoundsUp(t *testing.T) {
	e := newEnv(t)
	at := e.clock.Now().Add(time.Hour).UTC().Truncate(time.Second).Add(950 * time.Millisecond)
	want := at.Truncate(time.Second).Add(time.Second)
	id := e.send(`{"to":"success@simulator.amazonses.com","from":"hello@example.com","subject":"later","text":"t","scheduledAt":"` + at.Format(time.RFC3339Nano) + `"}`)
	if d := e.get(id); d.ScheduledAt == nil || *d.ScheduledAt != want.Format("2006-01-02T15:04:05.000Z") {
		t.Errorf("scheduledAt %v, want %s (rounded up)", d.ScheduledAt, want)
	}
	if sc, ok := e.schedule(email.ScheduleName(id, want, 0)); !ok || !sc.At.Equal(want) {
		t.Errorf("schedule %+v %v, want one at %s", sc, ok, want)
	}
	later := at.Add(time.Hour)
	if r := e.do("PATCH", "/api/v1/emails/"+id, `{"scheduledAt":"`+later.Format(time.RFC3339Nano)+`"}`); r.status != 200 {
		t.Fatalf("reschedule = %d %s", r.status, r.body)
	}
	if d := e.get(id); *d.ScheduledAt != later.Truncate(time.Second).Add(time.Second).Format("2006-01-02T15:04:05.000Z") {
		t.Errorf("rescheduled to %s, want %s rounded up", *d.ScheduledAt, later)
	}
	r := e.do("PATCH", "/api/v1/emails/"+id, `{"scheduledAt":"`+e.clock.Now().Add(-time.Hour).UTC().Format(time.RFC3339)+`"}`)
	if _, msg := r.errorOf(t); r.status != 400 || strings.Contains(msg, "leave it out") || !strings.HasPrefix(msg, "scheduledAt:") {
		t.Errorf("a reschedule an hour back = %d %q, want a 400 naming scheduledAt that does not say to leave it out", r.status, msg)
	}
	r = e.do("POST", "/api/v1/emails", `{"to":"a@example.org","from":"hello@example.com","subject":"s","text":"t","scheduledAt":""}`)
	if _, msg := r.errorOf(t); r.status != 400 || !strings.HasPrefix(msg, "scheduledAt:") {
		t.Errorf(`scheduledAt "" = %d %q, want a 400 naming scheduledAt`, r.status, msg)
	}
}
