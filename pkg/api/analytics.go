package api

import (
	"net/http"
	"strconv"

	"github.com/mailroom/mailroom/pkg/analytics"
	"github.com/mailroom/mailroom/pkg/fault"
)

// analyticsDomain is the domain a request's figures are about: domainId, else the key's own
// domain (a domain-restricted key is held to it: another domain is not found), else 0 for the
// whole team.
func (s *Services) analyticsDomain(r *http.Request) (int64, error) {
	p := principal(r)
	v := r.URL.Query().Get("domainId")
	if v == "" {
		return p.DomainID, nil
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 1 {
		return 0, fault.Field("domainId", "must be a domain id (a positive integer)")
	}
	if err := visibleDomain(r, id); err != nil {
		return 0, err
	}
	if _, err := s.Domains.Get(r.Context(), p.TeamID, id); err != nil {
		return 0, err
	}
	return id, nil
}

func (s *Services) emailTimeSeries(w http.ResponseWriter, r *http.Request) error {
	days := analytics.DefaultDays
	if v := r.URL.Query().Get("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || (n != 7 && n != 30) {
			return fault.Field("days", "must be 7 or 30")
		}
		days = n
	}
	dom, err := s.analyticsDomain(r)
	if err != nil {
		return err
	}
	out, err := s.Analytics.TimeSeries(r.Context(), principal(r).TeamID, dom, days)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Services) reputationMetrics(w http.ResponseWriter, r *http.Request) error {
	dom, err := s.analyticsDomain(r)
	if err != nil {
		return err
	}
	out, err := s.Analytics.Reputation(r.Context(), principal(r).TeamID, dom)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
