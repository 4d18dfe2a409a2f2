package campaign

import (
	"html"
	"maps"
	"slices"
	"strings"

	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/template"
)

// unsubscribeNames are the placeholders of the one-click unsubscribe URL (the legacy name too).
var unsubscribeNames = map[string]bool{"usesend_unsubscribe_url": true, "unsend_unsubscribe_url": true}

// HasUnsubscribe reports whether s contains an unsubscribe placeholder.
func HasUnsubscribe(s string) bool {
	for _, m := range template.Placeholder().FindAllStringSubmatch(s, -1) {
		if unsubscribeNames[strings.ToLower(m[1])] {
			return true
		}
	}
	return false
}

// vars are a contact's values by lower-cased name.
func vars(c store.Contact, unsubscribeURL string) map[string]string {
	v := map[string]string{
		"firstname": c.FirstName,
		"lastname":  c.LastName,
		"email":     c.Email,
	}
	// Names that differ only by case (a contact written before its book had the variable)
	// are taken in sorted order, the first one winning, so the email does not depend on a
	// map's order.
	for _, k := range slices.Sorted(maps.Keys(c.Properties)) {
		val, low := c.Properties[k], strings.ToLower(k)
		if _, taken := v["contact."+low]; !taken {
			v["contact."+low] = val
		}
		if _, taken := v[low]; !taken {
			v[low] = val
		}
	}
	for n := range unsubscribeNames {
		v[n] = unsubscribeURL
	}
	return v
}

// Render personalises s for one contact: names are case-insensitive; an empty or missing value
// takes the fallback, else renders as nothing. Values are HTML-escaped when escape is set.
func Render(s string, values map[string]string, escape bool) string {
	placeholder := template.Placeholder() // {{name}}, {{contact.name}}, {{name,fallback=Text}}
	return placeholder.ReplaceAllStringFunc(s, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		name := strings.ToLower(sub[1])
		v := values[name]
		if v == "" {
			v = strings.TrimSpace(sub[2])
		}
		if escape {
			return html.EscapeString(v)
		}
		return v
	})
}

// withPreview puts the preview text first in the body, hidden, where mail clients show it:
// right after <body ...> in a whole document, else before the html.
func withPreview(body, preview string) string {
	if preview == "" {
		return body
	}
	div := `<div style="display:none;max-height:0;overflow:hidden;mso-hide:all">` + html.EscapeString(preview) + "</div>"
	if i := strings.Index(strings.ToLower(body), "<body"); i >= 0 {
		if end := strings.IndexByte(body[i:], '>'); end >= 0 {
			at := i + end + 1
			return body[:at] + div + body[at:]
		}
	}
	return div + body
}
