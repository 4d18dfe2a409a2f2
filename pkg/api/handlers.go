package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/template"
)

// Body limits: a send may carry 40 MB of message (base64 and JSON escaping add a little); every
// other body is small.
const (
	maxSendBody  = 56 << 20
	maxOtherBody = 2 << 20
)

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, fault.New(fault.TooLarge, "Request body too large: at most %d MB", limit>>20)
	}
	if err != nil {
		return nil, fault.Field("", "Could not read the request body")
	}
	return b, nil
}

// idempotencyKey returns the header, checking its length when present (even when empty).
func idempotencyKey(r *http.Request) (string, error) {
	vals := r.Header.Values("Idempotency-Key")
	if len(vals) == 0 {
		return "", nil
	}
	if len(vals) > 1 || len(vals[0]) < 1 || len(vals[0]) > email.MaxIdempotencyKey {
		return "", fault.Field("", "Invalid Idempotency-Key length")
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
		reqs, err = email.DecodeBatch(body)
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
	writeJSON(w, http.StatusOK, map[string]any{"data": views(emails, newEmailItem), "count": count})
	return nil
}

// paging reads page (≥ 1, default 1) and limit (1..100, default 50).
func paging(r *http.Request) (page, limit int, err error) {
	v := r.URL.Query()
	intParam := func(name string, def, min, max int) (int, error) {
		s := v.Get(name)
		if s == "" {
			return def, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < min || (max > 0 && n > max) {
			if max > 0 {
				return 0, fault.Field(name, "must be an integer from %d to %d", min, max)
			}
			return 0, fault.Field(name, "must be an integer of at least %d", min)
		}
		return n, nil
	}
	// page is capped so that (page-1)*limit cannot overflow.
	if page, err = intParam("page", 1, 1, 1_000_000); err != nil {
		return 0, 0, err
	}
	limit, err = intParam("limit", 50, 1, 100)
	return page, limit, err
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
	if q.Start != nil && q.End != nil && q.End.Before(*q.Start) {
		return q, fault.Field("endDate", "must not be before startDate")
	}
	for _, raw := range v["domainId"] {
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
	writeJSON(w, http.StatusOK, newEmailDetail(e, events))
	return nil
}

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
	body, err := readBody(w, r, maxOtherBody)
	if err != nil {
		return err
	}
	var in struct {
		Name   *string `json:"name"`
		Region *string `json:"region"`
	}
	if err := decodeObject(body, &in); err != nil {
		return err
	}
	if in.Name == nil {
		return fault.Field("name", "is required")
	}
	region := ""
	if in.Region != nil {
		region = *in.Region
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

// decodeObject decodes a JSON object body into v, mapping type errors to the field.
func decodeObject(body []byte, v any) error {
	if !json.Valid(body) {
		return email.ErrMalformedJSON
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fault.Field(te.Field, "must be a %s", jsonType(te.Type.Kind().String()))
		}
		return fault.Field("body", "must be a JSON object")
	}
	return nil
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "ptr":
		return "string"
	}
	return "number"
}

func templateFields(w http.ResponseWriter, r *http.Request) (template.Fields, error) {
	body, err := readBody(w, r, maxOtherBody)
	if err != nil {
		return template.Fields{}, err
	}
	var in struct {
		Name    *string `json:"name"`
		Subject *string `json:"subject"`
		HTML    *string `json:"html"`
		Text    *string `json:"text"`
	}
	if err := decodeObject(body, &in); err != nil {
		return template.Fields{}, err
	}
	return template.Fields{Name: in.Name, Subject: in.Subject, HTML: in.HTML, Text: in.Text}, nil
}

func (s *Services) createTemplate(w http.ResponseWriter, r *http.Request) error {
	f, err := templateFields(w, r)
	if err != nil {
		return err
	}
	t, err := s.Templates.Create(r.Context(), principal(r).TeamID, f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newTemplateView(t))
	return nil
}

func (s *Services) listTemplates(w http.ResponseWriter, r *http.Request) error {
	list, err := s.Templates.List(r.Context(), principal(r).TeamID)
	if err != nil {
		return err
	}
	out := views(list, newTemplateView)
	writeJSON(w, http.StatusOK, map[string]any{"data": out, "count": len(out)})
	return nil
}

// templateID reads the path id; ids longer than any we issue are simply not found.
func templateID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if len(id) > email.MaxIDLength {
		return "", fault.NotFoundf("Template not found")
	}
	return id, nil
}

func (s *Services) getTemplate(w http.ResponseWriter, r *http.Request) error {
	id, err := templateID(r)
	if err != nil {
		return err
	}
	t, err := s.Templates.Get(r.Context(), principal(r).TeamID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newTemplateView(t))
	return nil
}

func (s *Services) updateTemplate(w http.ResponseWriter, r *http.Request) error {
	f, err := templateFields(w, r)
	if err != nil {
		return err
	}
	id, err := templateID(r)
	if err != nil {
		return err
	}
	t, err := s.Templates.Update(r.Context(), principal(r).TeamID, id, f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newTemplateView(t))
	return nil
}

func (s *Services) deleteTemplate(w http.ResponseWriter, r *http.Request) error {
	id, err := templateID(r)
	if err != nil {
		return err
	}
	if err := s.Templates.Delete(r.Context(), principal(r).TeamID, id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "success": true})
	return nil
}
