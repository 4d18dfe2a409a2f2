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

// vars are a contact's values by lower-cased name: its first and last name and email, the
// book's variables (empty for a contact without them), every property it has (Mailroom fills
// those in even when the book does not declare them) and the unsubscribe URL. A name not here
// is unknown: Render leaves it as written, as upstream does, so a typo shows in a test send.
func vars(c store.Contact, unsubscribeURL string, variables []string) map[string]string {
	v := map[string]string{
		"firstname": c.FirstName,
		"lastname":  c.LastName,
		"email":     c.Email,
	}
	// Names that differ only by case (a contact written before its book had the variable)
	// are taken in sorted order, the first one winning, so the email does not depend on a
	// map's order.
	for _, k := range slices.Sorted(maps.Keys(c.Properties)) {
		if _, taken := v[strings.ToLower(k)]; !taken {
			v[strings.ToLower(k)] = c.Properties[k]
		}
	}
	for _, name := range variables {
		if _, taken := v[strings.ToLower(name)]; !taken {
			v[strings.ToLower(name)] = ""
		}
	}
	for n := range unsubscribeNames {
		v[n] = unsubscribeURL
	}
	return v
}

// Render personalises s for one contact: names are case-insensitive, with or without a
// "contact." before them ({{contact.firstName}} is {{firstName}}); an empty or missing value
// takes the placeholder's fallback; without one, an empty value renders as nothing and an
// unknown name (not in values) is left as written. Values are HTML-escaped when escape is set;
// a fallback, part of the author's markup, is not.
func Render(s string, values map[string]string, escape bool) string {
	placeholder := template.Placeholder() // {{name}}, {{contact.name}}, {{name,fallback=Text}}
	var b strings.Builder
	last := 0
	for _, m := range placeholder.FindAllStringSubmatchIndex(s, -1) {
		b.WriteString(s[last:m[0]])
		last = m[1]
		name := strings.ToLower(s[m[2]:m[3]])
		v, known := values[name]
		if rest, ok := strings.CutPrefix(name, "contact."); ok && !known {
			v, known = values[rest]
		}
		switch {
		case v == "" && m[4] >= 0:
			// The fallback is written in the markup around it (escaped already where it is
			// html: an editor document's text and links are), so it goes in as written.
			b.WriteString(strings.TrimSpace(s[m[4]:m[5]]))
			continue
		case !known:
			b.WriteString(s[m[0]:m[1]])
			continue
		}
		if escape {
			v = html.EscapeString(v)
		}
		b.WriteString(v)
	}
	b.WriteString(s[last:])
	return b.String()
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
