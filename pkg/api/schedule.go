package api

import (
	"net/http"
	"time"

	"github.com/mailroom/mailroom/pkg/domain"
	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
)

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
	body, err := readBody(w, r, maxOtherBody)
	if err != nil {
		return err
	}
	var in struct {
		ScheduledAt *string `json:"scheduledAt"`
	}
	if err := decodeObject(body, &in); err != nil {
		return err
	}
	if in.ScheduledAt == nil {
		return fault.Field("scheduledAt", "is required")
	}
	at, err := time.Parse(time.RFC3339, *in.ScheduledAt)
	if err != nil {
		return fault.Field("scheduledAt", "must be an RFC 3339 date-time with seconds and a time zone, e.g. 2026-01-02T15:04:05Z")
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

// updateDomain is PATCH /domains/{id} {clickTracking, openTracking}.
func (s *Services) updateDomain(w http.ResponseWriter, r *http.Request) error {
	id, err := domainID(r)
	if err != nil {
		return err
	}
	if err := visibleDomain(r, id); err != nil {
		return err
	}
	body, err := readBody(w, r, maxOtherBody)
	if err != nil {
		return err
	}
	var in struct {
		ClickTracking *bool `json:"clickTracking"`
		OpenTracking  *bool `json:"openTracking"`
	}
	if err := decodeObject(body, &in); err != nil {
		return err
	}
	d, err := s.Domains.SetTracking(r.Context(), principal(r).TeamID, id, domain.Tracking{Click: in.ClickTracking, Open: in.OpenTracking})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newDomainView(d))
	return nil
}

type suppressionView struct {
	Email     string  `json:"email"`
	Reason    string  `json:"reason"`
	EmailID   *string `json:"emailId"`
	CreatedAt string  `json:"createdAt"`
}

func newSuppressionView(s store.Suppression) suppressionView {
	return suppressionView{Email: s.Email, Reason: s.Reason, EmailID: nullable(s.EmailID), CreatedAt: ts(s.CreatedAt)}
}

// listSuppressions is GET /suppressions?page&limit&reason.
func (s *Services) listSuppressions(w http.ResponseWriter, r *http.Request) error {
	page, limit, err := paging(r)
	if err != nil {
		return err
	}
	list, count, err := s.Suppressions.List(r.Context(), principal(r).TeamID, r.URL.Query().Get("reason"), page, limit)
	if err != nil {
		return err
	}
	out := views(list, newSuppressionView)
	writeJSON(w, http.StatusOK, map[string]any{"data": out, "count": count})
	return nil
}

// createSuppression is POST /suppressions {email, reason}.
func (s *Services) createSuppression(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r, maxOtherBody)
	if err != nil {
		return err
	}
	var in struct {
		Email  *string `json:"email"`
		Reason string  `json:"reason"`
	}
	if err := decodeObject(body, &in); err != nil {
		return err
	}
	if in.Email == nil {
		return fault.Field("email", "is required")
	}
	sup, err := s.Suppressions.Add(r.Context(), principal(r).TeamID, *in.Email, in.Reason)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newSuppressionView(sup))
	return nil
}

// deleteSuppression is DELETE /suppressions/{email}.
func (s *Services) deleteSuppression(w http.ResponseWriter, r *http.Request) error {
	addr := r.PathValue("email")
	if err := s.Suppressions.Remove(r.Context(), principal(r).TeamID, addr); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"email": addr, "success": true})
	return nil
}
