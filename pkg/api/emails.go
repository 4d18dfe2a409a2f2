package api

import (
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mailroom/mailroom/pkg/auth"
	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
)

// Handlers of the email routes: send, batch, list, read, reschedule, cancel.

// idempotencyKey returns the header, checking its length when present (even when empty).
func idempotencyKey(r *http.Request) (string, error) {
	vals := r.Header.Values("Idempotency-Key")
	if len(vals) == 0 {
		return "", nil
	}
	if len(vals) > 1 {
		return "", fault.Field("Idempotency-Key", "give one header, not %d", len(vals))
	}
	if !email.ValidIdempotencyKey(vals[0]) { // before the body is read
		return "", email.ErrIdempotencyKeyLength
	}
	return vals[0], nil
}

func (s *Services) sendEmail(w http.ResponseWriter, r *http.Request) error {
	return s.send(w, r, false)
}

func (s *Services) sendBatch(w http.ResponseWriter, r *http.Request) error {
	return s.send(w, r, true)
}

func (s *Services) send(w http.ResponseWriter, r *http.Request, batch bool) error {
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	body, err := readBody(w, r, maxSendBody)
	if err != nil {
		return err
	}
	var reqs []email.Request
	if batch {
		var badAt []error
		if reqs, badAt, err = email.DecodeBatchEach(body); err == nil && slices.ContainsFunc(badAt, func(e error) bool { return e != nil }) {
			// Some elements are malformed: the answer names them and what the store says of
			// the others, every bad element at once.
			return s.Emails.Refuse(r.Context(), principal(r), reqs, badAt)
		}
	} else {
		var one email.Request
		one, err = email.DecodeRequest(body)
		reqs = []email.Request{one}
	}
	if err != nil {
		return err
	}
	res, err := s.Emails.Send(r.Context(), principal(r), key, reqs, batch)
	if err != nil {
		return err
	}
	if res.Replayed {
		w.Header().Set("Idempotency-Replayed", "true")
	}
	writeRaw(w, http.StatusOK, res.Body)
	return nil
}

func (s *Services) listEmails(w http.ResponseWriter, r *http.Request) error {
	q, err := parseListQuery(r)
	if err != nil {
		return err
	}
	emails, count, err := s.Emails.List(r.Context(), principal(r), q)
	if err != nil {
		return err
	}
	redactFor(principal(r), emails)
	writeJSON(w, http.StatusOK, map[string]any{"data": boundedItems(emails), "count": count})
	return nil
}

func parseListQuery(r *http.Request) (email.ListQuery, error) {
	v := r.URL.Query()
	q := email.ListQuery{}
	var err error
	if q.Page, q.Limit, err = paging(r); err != nil {
		return q, err
	}
	timeParam := func(name string) (*time.Time, error) {
		s := v.Get(name)
		if s == "" {
			return nil, nil
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, fault.Field(name, "must be an RFC 3339 date-time, e.g. 2024-01-31T23:59:59Z")
		}
		t = t.UTC()
		return &t, nil
	}
	if q.Start, err = timeParam("startDate"); err != nil {
		return q, err
	}
	if q.End, err = timeParam("endDate"); err != nil {
		return q, err
	}
	if q.End != nil {
		// The end is inclusive to the precision it is written in: createdAt is shown to the
		// millisecond, so an email's own createdAt as endDate finds it.
		switch {
		case q.End.Nanosecond() == 0:
			*q.End = q.End.Add(time.Second - 1)
		case q.End.Nanosecond()%int(time.Millisecond) == 0:
			*q.End = q.End.Add(time.Millisecond - 1)
		}
	}
	if q.Start != nil && q.End != nil && q.End.Before(*q.Start) {
		return q, fault.Field("endDate", "must not be before startDate")
	}
	for _, raw := range v["domainId"] {
		if strings.TrimSpace(raw) == "" {
			continue // ?domainId= is no filter, as upstream's is
		}
		for _, part := range strings.Split(raw, ",") {
			id, err := strconv.ParseInt(strings.TrimSpace(part), 10, 64)
			if err != nil || id < 1 {
				return q, fault.Field("domainId", "must be a domain id (a positive integer)")
			}
			q.DomainIDs = append(q.DomainIDs, id)
		}
	}
	if len(q.DomainIDs) > 25 {
		return q, fault.Field("domainId", "at most 25 domains")
	}
	return q, nil
}

func (s *Services) getEmail(w http.ResponseWriter, r *http.Request) error {
	id, err := emailID(r)
	if err != nil {
		return err
	}
	e, events, err := s.Emails.Get(r.Context(), principal(r), id)
	if err != nil {
		return err
	}
	one := []store.Email{e}
	redactFor(principal(r), one)
	writeJSON(w, http.StatusOK, newEmailDetail(one[0], redactEvents(principal(r), e, events)))
	return nil
}

// unsubscribeLink matches the token of an unsubscribe or double opt-in link
// (PUBLIC_URL/unsubscribe/<token>, PUBLIC_URL/subscribe/<token>).
var unsubscribeLink = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(/(?:un)?subscribe/)[A-Za-z0-9_\-.~%]+`)
})

// hidesLinks reports whether p may not see the contact's links in e: an email to a contact (a
// campaign's, a double opt-in confirmation), to a key that may not manage the team (a SENDING
// key). With a link, it could unsubscribe the campaign's recipients, or subscribe a contact
// who never confirmed.
func hidesLinks(p auth.Principal, e store.Email) bool {
	return (e.CampaignID != "" || e.ContactID != "") && !p.CanManage()
}

// redactLinks replaces the token of every unsubscribe and confirmation link in s by "redacted".
func redactLinks(s string) string { return unsubscribeLink().ReplaceAllString(s, "${1}redacted") }

// redactFor hides the unsubscribe links of the emails p may not see them in (hidesLinks).
func redactFor(p auth.Principal, emails []store.Email) {
	redact := func(s *string) *string {
		if s == nil {
			return nil
		}
		out := redactLinks(*s)
		return &out
	}
	for i := range emails {
		if hidesLinks(p, emails[i]) {
			emails[i].Content.HTML, emails[i].Content.Text = redact(emails[i].Content.HTML), redact(emails[i].Content.Text)
		}
	}
}

// redactEvents hides the unsubscribe links in the data of e's events (a click on the link
// records it) from a key that may not see them (hidesLinks); the events are copied.
func redactEvents(p auth.Principal, e store.Email, events []store.Event) []store.Event {
	if !hidesLinks(p, e) {
		return events
	}
	out := slices.Clone(events)
	for i := range out {
		if len(out[i].Data) > 0 {
			out[i].Data = []byte(redactLinks(string(out[i].Data)))
		}
	}
	return out
}

func emailID(r *http.Request) (string, error) {
	id := r.PathValue("emailId")
	if len(id) < 3 {
		return "", fault.Field("emailId", "at least 3 characters")
	}
	if len(id) > email.MaxIDLength {
		return "", fault.NotFoundf("Email not found")
	}
	return id, nil
}

// rescheduleEmail is PATCH /emails/{emailId} {scheduledAt}.
func (s *Services) rescheduleEmail(w http.ResponseWriter, r *http.Request) error {
	id, err := emailID(r)
	if err != nil {
		return err
	}
	body, err := readBody(w, r, maxSmallBody)
	if err != nil {
		return err
	}
	var in struct {
		ScheduledAt *string `json:"scheduledAt"`
	}
	if err := decodeKnown(body, &in); err != nil {
		return err
	}
	if in.ScheduledAt == nil {
		return fault.Field("scheduledAt", "is required")
	}
	at, err := email.ParseTime(*in.ScheduledAt)
	if err != nil {
		return fault.Field("scheduledAt", "%s", err.Error())
	}
	if err := s.Emails.Reschedule(r.Context(), principal(r), id, at); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"emailId": id})
	return nil
}

// cancelEmail is POST /emails/{emailId}/cancel.
func (s *Services) cancelEmail(w http.ResponseWriter, r *http.Request) error {
	id, err := emailID(r)
	if err != nil {
		return err
	}
	if err := s.Emails.Cancel(r.Context(), principal(r), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"emailId": id})
	return nil
}
