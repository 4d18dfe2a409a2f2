package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/mailroom/mailroom/pkg/domain"
	"github.com/mailroom/mailroom/pkg/fault"
)

// Handlers of the domain routes.

func domainID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, fault.Field("id", "must be a domain id (a positive integer)")
	}
	return id, nil
}

// visibleDomain enforces a key's domain restriction: another domain is not found.
func visibleDomain(r *http.Request, id int64) error {
	if p := principal(r); p.DomainID != 0 && p.DomainID != id {
		return fault.NotFoundf("Domain not found")
	}
	return nil
}

func (s *Services) listDomains(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	list, err := s.Domains.List(r.Context(), p.TeamID, p.DomainID)
	if err != nil {
		return err
	}
	out := views(list, newDomainView)
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Services) createDomain(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r, maxSmallBody)
	if err != nil {
		return err
	}
	var in struct {
		Name   *string         `json:"name"`
		Region json.RawMessage `json:"region"`
	}
	if err := decodeObject(body, &in); err != nil {
		return err
	}
	if in.Name == nil {
		return fault.Field("name", "is required")
	}
	// Left out, the region is the default (README); given, it is a region's name: null or ""
	// is a mistake, not a request for the default.
	region := ""
	if in.Region != nil {
		if err := json.Unmarshal(in.Region, &region); err != nil || region == "" {
			return fault.Field("region", "must be an SES region such as us-east-1, or left out for the default")
		}
	}
	d, err := s.Domains.Create(r.Context(), principal(r).TeamID, *in.Name, region)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newDomainView(d))
	return nil
}

func (s *Services) getDomain(w http.ResponseWriter, r *http.Request) error {
	id, err := domainID(r)
	if err != nil {
		return err
	}
	if err := visibleDomain(r, id); err != nil {
		return err
	}
	d, err := s.Domains.Get(r.Context(), principal(r).TeamID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newDomainView(d))
	return nil
}

func (s *Services) verifyDomain(w http.ResponseWriter, r *http.Request) error {
	id, err := domainID(r)
	if err != nil {
		return err
	}
	if err := visibleDomain(r, id); err != nil {
		return err
	}
	d, err := s.Domains.Verify(r.Context(), principal(r).TeamID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"message": "Domain verification status refreshed: " + d.Status,
		"status":  d.Status,
	})
	return nil
}

func (s *Services) deleteDomain(w http.ResponseWriter, r *http.Request) error {
	id, err := domainID(r)
	if err != nil {
		return err
	}
	if err := visibleDomain(r, id); err != nil {
		return err
	}
	if _, err := s.Domains.Delete(r.Context(), principal(r).TeamID, id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "success": true, "message": "Domain deleted successfully"})
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
	body, err := readBody(w, r, maxSmallBody)
	if err != nil {
		return err
	}
	var in struct {
		ClickTracking *bool `json:"clickTracking"`
		OpenTracking  *bool `json:"openTracking"`
	}
	if err := decodeKnown(body, &in); err != nil { // a misspelt field would change nothing
		return err
	}
	d, err := s.Domains.SetTracking(r.Context(), principal(r).TeamID, id, domain.Tracking{Click: in.ClickTracking, Open: in.OpenTracking})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newDomainView(d))
	return nil
}
