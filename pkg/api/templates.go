package api

import (
	"net/http"

	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/template"
)

// Handlers of the template routes (a Mailroom extension).

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
	if err := decodeKnown(body, &in); err != nil {
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
	out := boundedTemplates(list)
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
