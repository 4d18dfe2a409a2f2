// Package editor renders the documents of useSend's email editor to HTML: a campaign's `content`
// and a contact book's double opt-in email are such a document (JSON, the ProseMirror shape:
// `{"type":"doc","content":[{"type":"paragraph","content":[{"type":"text","text":"Hi"}]}]}`).
//
// Every node and mark type the editor makes is rendered, in markup mail clients show alike
// (tables for images and buttons, inline styles, no remote font or script). A variable node
// becomes the placeholder {{name}} (or {{name,fallback=Text}}) that the campaign fills in per
// contact, like the placeholders of an html body. A node or mark of another type, or a document
// nested deeper than MaxDepth, is an error naming it (useSend's renderer throws on an unknown
// type at send time; here it is at once); so is a link that is not http(s), mailto or tel (or a
// placeholder whose fallback is one), a check of Mailroom's own.
package editor

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/mailroom/mailroom/pkg/template"
)

// Node is a node of the document; text nodes carry Text and Marks.
type Node struct {
	Type    string         `json:"type"`
	Attrs   map[string]any `json:"attrs,omitempty"`
	Content []Node         `json:"content,omitempty"`
	Marks   []Mark         `json:"marks,omitempty"`
	Text    string         `json:"text,omitempty"`
}

// Mark is a text node's formatting (bold, link, ...).
type Mark struct {
	Type  string         `json:"type"`
	Attrs map[string]any `json:"attrs,omitempty"`
}

// MaxDepth bounds the nesting of a document.
const MaxDepth = 64

// ErrNotADocument is the error of JSON that is not an editor document.
var ErrNotADocument = errors.New(`not an email editor document (a JSON object with "type": "doc")`)

// IsDocument reports whether s is meant as an editor document rather than HTML: it starts with
// "{" but not with a placeholder's "{{" (html may begin "{{firstName}}, hello"). Render says
// what is wrong with one that is not a document after all.
func IsDocument(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "{") && !strings.HasPrefix(s, "{{")
}

// Render parses the document s and renders it as a whole HTML page.
func Render(s string) (string, error) {
	var doc Node
	if err := json.Unmarshal([]byte(s), &doc); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			// Valid JSON, not of the editor's shape: say where, in the document's own words.
			return "", fmt.Errorf("not an editor document: %s is a JSON %s where the editor writes %s", typ.Field, typ.Value, shapeOf(typ.Type.String()))
		}
		return "", fmt.Errorf("invalid JSON: %w", err)
	}
	if doc.Type != "doc" {
		return "", ErrNotADocument
	}
	r := renderer{}
	r.b.WriteString(head)
	if err := r.children(doc, context{}, 0); err != nil {
		return "", err
	}
	r.b.WriteString(tail)
	return r.b.String(), nil
}

const fontFamily = `-apple-system,BlinkMacSystemFont,'Segoe UI',Roboto,Helvetica,Arial,sans-serif`

// head and tail wrap the document: a centred column of 600 px at most, 300 px at least.
const head = `<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">` +
	`<html lang="en" dir="ltr"><head><meta http-equiv="Content-Type" content="text/html; charset=UTF-8">` +
	`<meta name="viewport" content="width=device-width, initial-scale=1"><meta name="color-scheme" content="light">` +
	`<meta name="supported-color-schemes" content="light"></head>` +
	`<body style="margin:0;padding:0;background-color:#ffffff">` +
	`<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0"><tr><td align="center" style="padding:8px">` +
	`<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" style="max-width:600px;min-width:300px">` +
	`<tr><td style="font-family:` + fontFamily + `;color:#374151">`

const tail = `</td></tr></table></td></tr></table></body></html>`

// context is what a node's rendering depends on beyond its own attributes.
type context struct {
	inList bool // a paragraph in a list item has no bottom margin
}

type renderer struct {
	b strings.Builder
}

func (r *renderer) children(n Node, ctx context, depth int) error {
	for i := range n.Content {
		if err := r.node(n.Content[i], ctx, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (r *renderer) node(n Node, ctx context, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("nested more than %d levels deep", MaxDepth)
	}
	w := &r.b
	switch n.Type {
	case "text":
		return r.text(n)
	case "paragraph":
		margin := "0 0 20px"
		if ctx.inList {
			margin = "0"
		}
		fmt.Fprintf(w, `<p style="font-size:15px;line-height:24px;margin:%s;color:#374151;text-align:%s">`, margin, align(n.Attrs, "textAlign", "left"))
		if len(n.Content) == 0 {
			w.WriteString("&nbsp;")
		}
		if err := r.children(n, ctx, depth); err != nil {
			return err
		}
		w.WriteString("</p>")
	case "heading":
		level := int(number(n.Attrs, "level", 1))
		if level < 1 || level > 6 {
			level = 1
		}
		size := [...]string{"36px;line-height:40px;font-weight:800", "30px;line-height:36px;font-weight:700",
			"24px;line-height:38px;font-weight:600", "20px;line-height:28px;font-weight:600",
			"18px;line-height:26px;font-weight:600", "16px;line-height:24px;font-weight:600"}[level-1]
		fmt.Fprintf(w, `<h%d style="font-size:%s;margin:0 0 12px;color:#111827;text-align:%s">`, level, size, align(n.Attrs, "textAlign", "left"))
		if err := r.children(n, ctx, depth); err != nil {
			return err
		}
		fmt.Fprintf(w, "</h%d>", level)
	case "variable":
		w.WriteString(Placeholder(str(n.Attrs, "id"), str(n.Attrs, "fallback")))
	case "hardBreak":
		w.WriteString("<br>")
	case "horizontalRule":
		w.WriteString(`<hr style="border:none;border-top:2px solid #eaeaea;margin:32px 0;width:100%">`)
	case "bulletList", "orderedList":
		tag, style := "ul", "disc"
		start := ""
		if n.Type == "orderedList" {
			tag, style = "ol", "decimal"
			if s := int(number(n.Attrs, "start", 1)); s != 1 {
				start = ` start="` + strconv.Itoa(s) + `"`
			}
		}
		fmt.Fprintf(w, `<%s%s style="margin:0 0 20px;padding-left:26px;list-style-type:%s">`, tag, start, style)
		if err := r.children(n, context{inList: true}, depth); err != nil {
			return err
		}
		fmt.Fprintf(w, "</%s>", tag)
	case "listItem":
		w.WriteString(`<li style="margin-bottom:8px;padding-left:6px;font-size:15px;line-height:24px">`)
		if err := r.children(n, context{inList: true}, depth); err != nil {
			return err
		}
		w.WriteString("</li>")
	case "blockquote":
		w.WriteString(`<blockquote style="border-left:4px solid #d1d5db;padding-left:16px;margin:20px 0">`)
		if err := r.children(n, context{}, depth); err != nil {
			return err
		}
		w.WriteString("</blockquote>")
	case "codeBlock":
		var code strings.Builder
		for _, c := range n.Content {
			code.WriteString(c.Text)
		}
		w.WriteString(`<pre style="margin:0 0 20px;padding:16px;border-radius:6px;background-color:#2e3440;color:#d8dee9;` +
			`font-family:SFMono-Regular,Menlo,Monaco,Consolas,monospace;font-size:13px;line-height:20px;white-space:pre-wrap;word-break:break-word"><code>`)
		w.WriteString(esc(code.String()))
		w.WriteString("</code></pre>")
	case "button":
		return r.button(n)
	case "image", "logo":
		return r.image(n)
	case "spacer":
		h := map[string]float64{"sm": 8, "md": 16, "lg": 32, "xl": 64}[str(n.Attrs, "height")]
		if h == 0 {
			h = number(n.Attrs, "height", 16)
		}
		h = math.Max(0, math.Min(h, 400))
		fmt.Fprintf(w, `<div style="height:%[1]gpx;line-height:%[1]gpx;font-size:1px">&nbsp;</div>`, h)
	case "unsubscribeFooter":
		w.WriteString(`<div style="font-size:13px;line-height:20px;color:#64748b">`)
		if err := r.children(n, ctx, depth); err != nil {
			return err
		}
		w.WriteString("</div>")
	default:
		return fmt.Errorf("node type %q is not supported", n.Type)
	}
	return nil
}

// text renders a text node inside its marks: the first mark innermost.
func (r *renderer) text(n Node) error {
	out := esc(n.Text)
	for _, m := range n.Marks {
		switch m.Type {
		case "bold":
			out = "<strong>" + out + "</strong>"
		case "italic":
			out = "<em>" + out + "</em>"
		case "underline":
			out = "<u>" + out + "</u>"
		case "strike":
			out = `<s style="text-decoration:line-through">` + out + "</s>"
		case "code":
			out = `<code style="background-color:#efefef;color:#111827;padding:2px 4px;border-radius:6px;` +
				`font-family:SFMono-Regular,Menlo,Monaco,Consolas,monospace;font-weight:400">` + out + "</code>"
		case "textStyle":
			var style []string
			for _, p := range [][2]string{{"fontSize", "font-size"}, {"fontWeight", "font-weight"}, {"color", "color"}} {
				if v := cssValue(str(m.Attrs, p[0])); v != "" {
					style = append(style, p[1]+":"+v)
				}
			}
			if len(style) > 0 {
				out = `<span style="` + strings.Join(style, ";") + `">` + out + "</span>"
			}
		case "link":
			href, err := link(str(m.Attrs, "href"), false)
			if err != nil {
				return err
			}
			target := str(m.Attrs, "target")
			if target == "" {
				target = "_blank"
			}
			rel := str(m.Attrs, "rel")
			if rel == "" {
				rel = "noopener noreferrer nofollow"
			}
			out = `<a href="` + href + `" target="` + esc(target) + `" rel="` + esc(rel) +
				`" style="color:#3b82f6;text-decoration:underline;font-weight:500">` + out + "</a>"
		default:
			return fmt.Errorf("mark type %q is not supported", m.Type)
		}
	}
	r.b.WriteString(out)
	return nil
}

// button renders a button as a link in a table cell, which every mail client lays out.
func (r *renderer) button(n Node) error {
	href, err := link(str(n.Attrs, "url"), false)
	if err != nil {
		return err
	}
	bg := or(cssValue(str(n.Attrs, "buttonColor")), "#000000")
	fmt.Fprintf(&r.b, `<table role="presentation" width="100%%" cellpadding="0" cellspacing="0" border="0"><tr>`+
		`<td align="%s" style="padding:0 0 20px"><a href="%s" target="_blank" style="display:inline-block;padding:12px 34px;`+
		`background-color:%s;color:%s;border:%gpx solid %s;border-radius:%gpx;font-size:14px;line-height:20px;font-weight:500;text-decoration:none">%s</a></td></tr></table>`,
		align(n.Attrs, "alignment", "left"), href, bg, or(cssValue(str(n.Attrs, "textColor")), "#ffffff"),
		clamp(number(n.Attrs, "borderWidth", 0), 0, 20), or(cssValue(str(n.Attrs, "borderColor")), bg),
		clamp(number(n.Attrs, "borderRadius", 8), 0, 100), esc(str(n.Attrs, "text")))
	return nil
}

// image renders an image (or the editor's logo: a square of 40, 48 or 64 px), centred (a logo:
// to the left, as upstream's) unless aligned otherwise, linked when it has an external link.
func (r *renderer) image(n Node) error {
	src, err := link(str(n.Attrs, "src"), true)
	if err != nil {
		return err
	}
	size, alignDefault := "", "center"
	if n.Type == "logo" {
		alignDefault = "left"
		px := map[string]int{"sm": 40, "md": 48, "lg": 64}[str(n.Attrs, "size")]
		if px == 0 {
			px = 48
		}
		size = fmt.Sprintf(` width="%[1]d" height="%[1]d"`, px)
	} else if w := number(n.Attrs, "width", 0); w > 0 {
		size = fmt.Sprintf(` width="%g"`, clamp(w, 1, 2000))
	}
	img := fmt.Sprintf(`<img src="%s" alt="%s" title="%s"%s style="display:inline-block;max-width:100%%;height:auto;border:%gpx solid %s;border-radius:%gpx">`,
		src, esc(str(n.Attrs, "alt")), esc(str(n.Attrs, "title")), size,
		clamp(number(n.Attrs, "borderWidth", 0), 0, 20), or(cssValue(str(n.Attrs, "borderColor")), "transparent"),
		clamp(number(n.Attrs, "borderRadius", 0), 0, 1000))
	if to := str(n.Attrs, "externalLink"); to != "" {
		href, err := link(to, false)
		if err != nil {
			return err
		}
		img = `<a href="` + href + `" target="_blank">` + img + "</a>"
	}
	fmt.Fprintf(&r.b, `<table role="presentation" width="100%%" cellpadding="0" cellspacing="0" border="0"><tr><td align="%s" style="padding:0 0 32px">%s</td></tr></table>`,
		align(n.Attrs, "alignment", alignDefault), img)
	return nil
}

// Placeholder is the {{name}} (or {{name,fallback=Text}}) of a variable node, in the html that
// personalisation fills in per contact: the fallback is text, written here escaped for html
// (braces too, so that none ends the placeholder early), and personalisation puts it in as
// written. A name no placeholder can carry (one with a space) is its fallback, or else the
// name in braces, as text: what upstream's renderer shows for a variable without a value.
func Placeholder(name, fallback string) string {
	name = strings.TrimSpace(name)
	fallback = braces.Replace(html.EscapeString(strings.TrimSpace(fallback)))
	switch {
	case name == "":
		return fallback
	case !template.IsName(name):
		if fallback != "" {
			return fallback
		}
		return braces.Replace(html.EscapeString("{{" + name + "}}"))
	case fallback == "":
		return "{{" + name + "}}"
	}
	return "{{" + name + ",fallback=" + fallback + "}}"
}

// link checks a link (or, image, an image source) and returns it escaped for an attribute: a
// placeholder such as {{usesend_unsubscribe_url}}, a relative link, or http(s), mailto and tel
// (data:image/... for an image). An empty link is "#".
func link(u string, image bool) (string, error) {
	u = strings.TrimSpace(u)
	if u == "" {
		return "#", nil
	}
	if m := template.Placeholder().FindStringSubmatchIndex(u); m != nil && m[0] == 0 && m[1] == len(u) {
		// A placeholder: its fallback is a link too, and is checked as one, as a browser
		// reads it in the attribute (character references decoded).
		if m[4] >= 0 {
			if _, err := link(html.UnescapeString(strings.TrimSpace(u[m[4]:m[5]])), image); err != nil {
				return "", err
			}
		}
		return esc(u), nil
	}
	if m := template.Placeholder().FindStringIndex(u); m != nil {
		// A placeholder inside a link fills in after its scheme (https://…/{{id}},
		// mailto:{{email}}) or in a relative path: before it, a contact's value could make
		// the scheme itself (java{{x}}: → javascript:).
		if before := u[:m[0]]; !strings.Contains(before, ":") && !strings.HasPrefix(before, "/") &&
			!strings.HasPrefix(before, "#") && !strings.HasPrefix(before, "?") && !strings.HasPrefix(before, ".") {
			return "", fmt.Errorf("the link %q has a placeholder before its scheme: a placeholder may be the whole link, or come after its scheme", short(u))
		}
	}
	if !image && linkTokens[strings.ToLower(u)] {
		// The bare name of the unsubscribe or confirmation link, as upstream's renderer takes
		// it (its linkValues): that link.
		return "{{" + u + "}}", nil
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("the link %q is not a URL", short(u))
	}
	switch scheme := strings.ToLower(parsed.Scheme); {
	case scheme == "" && !strings.HasPrefix(u, "//") && !image,
		scheme == "http", scheme == "https",
		!image && (scheme == "mailto" || scheme == "tel"),
		image && scheme == "data" && strings.HasPrefix(strings.ToLower(u), "data:image/"):
		return esc(u), nil
	}
	if image {
		return "", fmt.Errorf("the image %q is not an http(s) address", short(u))
	}
	return "", fmt.Errorf("the link %q is not allowed: use http(s), mailto, tel or a placeholder", short(u))
}

// shapeOf names a Go type of Node as the document's JSON has it.
func shapeOf(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list of nodes or marks"
	case strings.HasPrefix(goType, "map["):
		return "an object"
	case goType == "string":
		return "a string"
	}
	return "a node or mark (an object)"
}

// esc is s escaped for html (text or an attribute's value), with its braces written as
// character references but those of whole placeholders: a placeholder begun in one node or
// attribute and ended in the next would otherwise join them when personalised, and what lay
// between (an attribute's end, a tag) would become part of a value.
func esc(s string) string {
	e := html.EscapeString(s)
	if !strings.ContainsAny(e, "{}") {
		return e
	}
	var b strings.Builder
	last := 0
	for _, m := range template.Placeholder().FindAllStringIndex(e, -1) {
		b.WriteString(braces.Replace(e[last:m[0]]))
		b.WriteString(e[m[0]:m[1]])
		last = m[1]
	}
	b.WriteString(braces.Replace(e[last:]))
	return b.String()
}

var braces = strings.NewReplacer("{", "&#123;", "}", "&#125;")

// linkTokens are the links a bare name stands for in upstream's documents.
var linkTokens = map[string]bool{"usesend_unsubscribe_url": true, "unsend_unsubscribe_url": true, "doubleoptinurl": true}

func short(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

func str(attrs map[string]any, name string) string {
	switch v := attrs[name].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return ""
}

// number reads a numeric attribute given as a number or a string ("300", "300px"), else def.
func number(attrs map[string]any, name string, def float64) float64 {
	switch v := attrs[name].(type) {
	case float64:
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			return v
		}
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), "px"), 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f
		}
	}
	return def
}

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(v, hi)) }

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// align reads an alignment attribute: left, center, right or justify, else def.
func align(attrs map[string]any, name, def string) string {
	switch v := str(attrs, name); v {
	case "left", "center", "right", "justify":
		return v
	}
	return def
}

// cssValue keeps a style value (a colour, a size, a weight) only if it cannot leave its
// declaration: letters, digits, spaces and #.,%()-.
func cssValue(v string) string {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 64 {
		return ""
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(" #.,%()-", r)) {
			return ""
		}
	}
	return v
}
