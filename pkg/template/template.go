// Package template keeps a team's email templates and renders their {{name}} placeholders.
// useSend keeps templates in its dashboard; Mailroom exposes them through the API so that a
// templateId in a send has somewhere to come from.
package template

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"html"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
)

// Store is what templates need from persistence.
type Store interface {
	store.Templates
}

// Limits on stored fields: a template is rendered on every send that names it.
const (
	MaxName    = 200
	MaxSubject = 998 // RFC 5322 line limit
	MaxBody    = 512 << 10
)

// Fields is a create or patch request; nil means "not given".
type Fields struct {
	Name    *string
	Subject *string
	HTML    *string
	Text    *string
}

// Service is the template use cases.
type Service struct {
	Store Store
	Now   func() time.Time
}

// NewID returns a fresh template id.
func NewID() string { return "tpl_" + randomID(20) }

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))[:n]
}

func (f Fields) validate(create bool) error {
	check := func(field string, v *string, max int, required bool) error {
		if v == nil {
			if required {
				return fault.Field(field, "is required")
			}
			return nil
		}
		if (required || field == "name") && strings.TrimSpace(*v) == "" {
			return fault.Field(field, "must not be empty") // a name given, on update too
		}
		if len(*v) > max {
			return fault.Field(field, "at most %d bytes", max)
		}
		if !utf8.ValidString(*v) {
			return fault.Field(field, "must be valid UTF-8")
		}
		return nil
	}
	if err := check("name", f.Name, MaxName, create); err != nil {
		return err
	}
	if err := check("subject", f.Subject, MaxSubject, false); err != nil {
		return err
	}
	if f.Subject != nil && strings.ContainsAny(*f.Subject, "\r\n") {
		return fault.Field("subject", "must not contain line breaks")
	}
	if f.Subject != nil && HasControl(*f.Subject) {
		return fault.Field("subject", "must not contain control characters")
	}
	if err := check("html", f.HTML, MaxBody, false); err != nil {
		return err
	}
	if err := check("text", f.Text, MaxBody, false); err != nil {
		return err
	}
	if create && (f.HTML == nil || *f.HTML == "") && (f.Text == nil || *f.Text == "") {
		return fault.Field("html", "html or text is required")
	}
	return nil
}

func (f Fields) apply(t *store.Template) {
	if f.Name != nil {
		t.Name = *f.Name
	}
	if f.Subject != nil {
		t.Subject = *f.Subject
	}
	if f.HTML != nil {
		t.HTML = *f.HTML
	}
	if f.Text != nil {
		t.Text = *f.Text
	}
}

// Create stores a new template.
func (s *Service) Create(ctx context.Context, teamID int64, f Fields) (store.Template, error) {
	if err := f.validate(true); err != nil {
		return store.Template{}, err
	}
	now := s.Now().UTC()
	t := store.Template{ID: NewID(), TeamID: teamID, CreatedAt: now, UpdatedAt: now}
	f.apply(&t)
	if err := s.Store.CreateTemplate(ctx, t); err != nil {
		return store.Template{}, fmt.Errorf("create template: %w", err)
	}
	return t, nil
}

// Get reads one template of the team.
func (s *Service) Get(ctx context.Context, teamID int64, id string) (store.Template, error) {
	t, err := s.Store.GetTemplate(ctx, teamID, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Template{}, fault.NotFoundf("Template not found")
	}
	return t, err
}

// List returns the team's templates, newest first.
func (s *Service) List(ctx context.Context, teamID int64) ([]store.Template, error) {
	return s.Store.ListTemplates(ctx, teamID)
}

// Update changes the given fields.
func (s *Service) Update(ctx context.Context, teamID int64, id string, f Fields) (store.Template, error) {
	if err := f.validate(false); err != nil {
		return store.Template{}, err
	}
	t, err := s.Store.UpdateTemplate(ctx, teamID, id, func(t *store.Template) error {
		f.apply(t)
		if t.HTML == "" && t.Text == "" {
			return fault.Field("html", "html or text is required")
		}
		t.UpdatedAt = s.Now().UTC()
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return store.Template{}, fault.NotFoundf("Template not found")
	}
	return t, err
}

// Delete removes a template.
func (s *Service) Delete(ctx context.Context, teamID int64, id string) error {
	err := s.Store.DeleteTemplate(ctx, teamID, id)
	if errors.Is(err, store.ErrNotFound) {
		return fault.NotFoundf("Template not found")
	}
	return err
}

// Placeholder matches {{name}} and {{name,fallback=Text}}, with optional inner spaces, a name
// of letters (with their combining marks) and digits in any script, _, . and - (a contact's
// "städt", "Ключ" or "नाम" too): the
// placeholders of templates and of campaigns (pkg/campaign renders them per contact). It is
// compiled on first use: every Lambda function links this package, few render.
var Placeholder = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\{\{\s*(` + nameChar + `+)\s*(?:,\s*fallback\s*=\s*([^}]*?))?\s*\}\}`)
})

// nameChar is a character of a placeholder's name.
const nameChar = `[\p{L}\p{M}\p{N}_.\-]`

var nameOnly = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^` + nameChar + `+$`) })

// IsName reports whether s can be a placeholder's name ({{s}} is a placeholder).
func IsName(s string) bool { return nameOnly().MatchString(s) }

// value is what the placeholder m (submatch indexes into s) renders as: the variable's value;
// its fallback when the value is missing or empty and the placeholder has one (fallback set:
// written by the template's author, in the markup around it, so never escaped); "" for an
// empty value without one. ok is false for a missing value without a fallback.
func value(s string, m []int, vars map[string]string) (v string, ok, fallback bool) {
	v, given := vars[s[m[2]:m[3]]]
	if v == "" && m[4] >= 0 {
		return s[m[4]:m[5]], true, true
	}
	return v, given, false
}

// RenderedSize is the length Render(s, vars, escape) would return, computed without building
// it, so that a caller can refuse a render that would be too large before doing the work (a
// 1 KB request naming a long variable a thousand times renders megabytes). A missing variable
// counts as its placeholder.
func RenderedSize(s string, vars map[string]string, escape bool) int {
	n := len(s)
	escaped := map[string]int{}
	for _, m := range Placeholder().FindAllStringSubmatchIndex(s, -1) {
		v, ok, fallback := value(s, m, vars)
		if !ok {
			continue
		}
		size := len(v)
		if escape && !fallback {
			if e, ok := escaped[v]; ok {
				size = e
			} else {
				size = len(html.EscapeString(v))
				escaped[v] = size
			}
		}
		n += size - (m[1] - m[0])
	}
	return n
}

// Render replaces every {{name}} in s with vars[name] ({{name,fallback=Text}}: Text when the
// value is missing or empty), HTML-escaping values when escape is set (a fallback is part of
// the html it is written in, and goes in as written). Every missing name
// without a fallback is reported, sorted, in one error naming the variables field.
func Render(s string, vars map[string]string, escape bool) (string, error) {
	var missing []string
	var b strings.Builder
	last := 0
	for _, m := range Placeholder().FindAllStringSubmatchIndex(s, -1) {
		b.WriteString(s[last:m[0]])
		last = m[1]
		v, ok, fallback := value(s, m, vars)
		switch {
		case !ok:
			missing = append(missing, s[m[2]:m[3]])
		case escape && !fallback:
			b.WriteString(html.EscapeString(v))
		default:
			b.WriteString(v)
		}
	}
	b.WriteString(s[last:])
	out := b.String()
	if len(missing) > 0 {
		sort.Strings(missing)
		return "", fault.Field("variables", "missing value for %s", strings.Join(dedupe(missing), ", "))
	}
	return out, nil
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// HasControl reports whether s has a control character other than a tab: none belongs in a
// one-line header such as a subject (line breaks are reported apart, as their own error).
func HasControl(s string) bool {
	return strings.ContainsFunc(s, isControl)
}

func isControl(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }

// OneLine is s with each control character (line breaks included) a space: a subject made
// from a contact's or a caller's values stays one header line.
func OneLine(s string) string {
	if !HasControl(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return ' '
		}
		return r
	}, s)
}
