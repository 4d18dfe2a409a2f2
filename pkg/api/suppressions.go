package api

import (
	"net/http"

	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
)

// Handlers of the suppression list routes (a Mailroom extension).

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
	body, err := readBody(w, r, maxSmallBody)
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
	addr, err := s.Suppressions.Remove(r.Context(), principal(r).TeamID, r.PathValue("email"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"email": addr, "success": true})
	return nil
}
