package mail

import (
	"html"
	"strings"
)

// TextFromHTML is a plain-text rendering of an HTML body, for a message that has no text part
// of its own (a campaign's emails, as upstream gives them one): the words in reading order,
// paragraphs and headings apart, a line per line break, list item or table row, a link's
// address after its words ("Read more [https://…]"), an image's alt text. What a reader does not
// see stays out: the head, styles, scripts, comments and elements hidden by an inline
// display:none (the preheader).
func TextFromHTML(s string) string {
	t := textWriter{}
	skip := "" // the element whose content is skipped, until it closes
	depth := 0 // how deep inside skip
	var links []string
	for len(s) > 0 {
		lt := strings.IndexByte(s, '<')
		if lt < 0 {
			lt = len(s)
		}
		if skip == "" {
			t.text(s[:lt])
		}
		s = s[lt:]
		if s == "" {
			break
		}
		if strings.HasPrefix(s, "<!--") {
			end := strings.Index(s, "-->")
			if end < 0 {
				break
			}
			s = s[end+3:]
			continue
		}
		tag, rest, ok := nextTag(s)
		if !ok {
			if tag.name != "" {
				break // a tag without its ">" to the end: no markup, and nothing after it (HTML drops it)
			}
			if skip == "" {
				t.text("<")
			}
			s = s[1:]
			continue
		}
		s = rest
		if rawText[tag.name] && !tag.closing && !tag.selfClosing {
			// A script's or a style's text is not markup (a "<b>" in it is no tag), and none
			// of it is seen: on to its end tag. A text area's is seen, as written.
			rest := afterRawText(s, tag.name)
			if skip == "" && (tag.name == "textarea" || tag.name == "xmp") {
				t.newline()
				if tag.name == "textarea" {
					t.text(s[:len(s)-len(rest)])
				} else {
					t.plain(s[:len(s)-len(rest)])
				}
				t.newline()
			}
			s = rest
			continue
		}
		if skip != "" {
			switch {
			case skip == "head" && tag.name == "body" && !tag.closing:
				skip = "" // a head left open ends where the body starts
			case tag.name == skip && tag.closing:
				if depth--; depth == 0 {
					skip = ""
				}
			case tag.name == skip && !tag.selfClosing && !voidElements[tag.name]:
				depth++
			}
			continue // the tag that ends a skip is none the text shows (a body start neither)
		}
		if !tag.closing && !tag.selfClosing && (tag.name == "head" || tag.name == "template" || tag.name == "noscript" ||
			hideable[tag.name] && hidden(tag.attr("style"))) {
			skip, depth = tag.name, 1
			continue
		}
		switch tag.name {
		case "br":
			t.newline()
		case "p", "h1", "h2", "h3", "h4", "h5", "h6", "table", "ul", "ol", "blockquote", "pre":
			t.paragraph()
			t.pre = tag.name == "pre" && !tag.closing
		case "div", "tr", "section", "article", "header", "footer", "center", "dl", "dt", "dd":
			t.newline()
		case "li":
			t.newline()
			if !tag.closing {
				t.write("* ")
			}
		case "td", "th":
			if !tag.closing {
				t.space()
			}
		case "hr":
			t.paragraph()
			t.write("---")
			t.paragraph()
		case "img":
			if alt := strings.TrimSpace(tag.attr("alt")); alt != "" {
				t.plain(alt)
			}
		case "a":
			if !tag.closing {
				links = append(links, tag.attr("href"))
				t.linkStart = t.b.Len()
				break
			}
			if len(links) == 0 {
				break
			}
			href := strings.TrimSpace(links[len(links)-1])
			links = links[:len(links)-1]
			// The link's words, to compare with its address: only when they could be it (a
			// long run of words is not, and trimming it at every end tag of many nested links
			// would read it again each time).
			words := t.b.String()[min(t.linkStart, t.b.Len()):]
			if len(words) <= 2*len(href)+64 {
				words = strings.TrimSpace(words)
			}
			if linkShown(href) && words != href && words != strings.TrimPrefix(href, "mailto:") {
				if words != "" {
					t.write(" ")
				}
				t.write("[" + href + "]")
			}
		}
	}
	return t.result()
}

// rawText are the elements whose content is text, not markup, up to their end tag.
var rawText = map[string]bool{"script": true, "style": true, "title": true, "textarea": true, "xmp": true}

// afterRawText is s after the end tag of the raw text element name (s starts inside it), or
// "" when it has none.
func afterRawText(s, name string) string {
	for i := 0; ; {
		j := strings.Index(s[i:], "</")
		if j < 0 {
			return ""
		}
		i += j + 2
		if len(s)-i >= len(name) && strings.EqualFold(s[i:i+len(name)], name) {
			return s[i-2:]
		}
	}
}

// hideable are the elements an inline display:none leaves out with all they hold: those that
// end only at their end tag (a p or a td hidden and left open is read, rather than everything
// after it lost).
var hideable = map[string]bool{"div": true, "span": true, "table": true, "center": true, "section": true, "article": true,
	"header": true, "footer": true, "aside": true, "nav": true, "font": true, "blockquote": true, "ul": true, "ol": true}

// voidElements have no closing tag.
var voidElements = map[string]bool{"br": true, "hr": true, "img": true, "meta": true, "link": true, "input": true,
	"area": true, "base": true, "col": true, "embed": true, "source": true, "track": true, "wbr": true}

// hidden reports whether an inline style hides its element.
func hidden(style string) bool {
	s := strings.ReplaceAll(strings.ToLower(style), " ", "")
	return strings.Contains(s, "display:none") || strings.Contains(s, "visibility:hidden")
}

// linkShown is an address worth writing after a link's words: a web, mail or phone one, not
// an anchor in the page or a script.
func linkShown(href string) bool {
	h := strings.ToLower(href)
	return strings.HasPrefix(h, "http://") || strings.HasPrefix(h, "https://") || strings.HasPrefix(h, "mailto:") || strings.HasPrefix(h, "tel:")
}

// tag is one start or end tag.
type tag struct {
	name                 string
	closing, selfClosing bool
	attrs                string // the raw attributes
}

// attr is the value of the attribute name (entities decoded), or "".
func (t tag) attr(name string) string {
	s := t.attrs
	for s != "" {
		s = strings.TrimLeft(s, " \t\r\n\f/")
		end := strings.IndexAny(s, "= \t\r\n\f/>")
		if end < 0 {
			end = len(s)
		}
		key := strings.ToLower(s[:end])
		s = strings.TrimLeft(s[end:], " \t\r\n\f")
		if !strings.HasPrefix(s, "=") {
			if key == "" {
				return ""
			}
			continue
		}
		s = strings.TrimLeft(s[1:], " \t\r\n\f")
		var val string
		if s != "" && (s[0] == '"' || s[0] == '\'') {
			q := strings.IndexByte(s[1:], s[0])
			if q < 0 {
				q = len(s) - 1
			}
			val, s = s[1:1+q], s[min(len(s), q+2):]
		} else {
			end := strings.IndexAny(s, " \t\r\n\f>")
			if end < 0 {
				end = len(s)
			}
			val, s = s[:end], s[end:]
		}
		if key == name {
			return html.UnescapeString(val)
		}
	}
	return ""
}

// nextTag reads the tag at the start of s ("<..."), quoted attribute values may hold ">".
func nextTag(s string) (tag, string, bool) {
	var t tag
	i := 1
	if i < len(s) && s[i] == '/' {
		t.closing = true
		i++
	}
	start := i
	// A tag's name starts with a letter, as HTML reads it ("I <3 cats" is text).
	for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z' ||
		i > start && (s[i] >= '0' && s[i] <= '9' || s[i] == '-' || s[i] == ':')) {
		i++
	}
	if i == start {
		if !t.closing && i < len(s) && (s[i] == '!' || s[i] == '?') { // <!DOCTYPE …>, <?xml …?>
			if end := strings.IndexByte(s, '>'); end >= 0 {
				return tag{name: "!"}, s[end+1:], true
			}
			return tag{name: "!"}, s, false // not ended
		}
		return t, s, false
	}
	t.name = strings.ToLower(s[start:i])
	attrStart := i
	var quote byte
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '>':
			t.attrs = s[attrStart:i]
			t.selfClosing = strings.HasSuffix(strings.TrimSpace(t.attrs), "/")
			return t, s[i+1:], true
		}
	}
	return t, s, false // named, but not ended: the caller takes it as the end of the markup
}

// textWriter builds the text: whitespace collapsed (but in pre), at most one blank line.
type textWriter struct {
	b         strings.Builder
	pre       bool
	pending   string // a space or line breaks owed before the next words
	linkStart int
}

func (t *textWriter) text(s string) { t.plain(html.UnescapeString(s)) }

// plain writes s, text already (an attribute's value, its references decoded).
func (t *textWriter) plain(s string) {
	s = strings.ReplaceAll(s, "\u00a0", " ")
	if t.pre {
		t.write(s)
		return
	}
	if s == "" {
		return
	}
	if isSpace(s[0]) {
		t.space()
	}
	for i, word := range strings.Fields(s) {
		if i > 0 {
			t.space()
		}
		t.write(word)
	}
	if isSpace(s[len(s)-1]) {
		t.space()
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

func (t *textWriter) write(s string) {
	if s == "" {
		return
	}
	if t.b.Len() > 0 {
		t.b.WriteString(t.pending)
	}
	t.pending = ""
	t.b.WriteString(s)
}

func (t *textWriter) space() {
	if t.pending == "" {
		t.pending = " "
	}
}

func (t *textWriter) newline() {
	if t.pending != "\n\n" {
		t.pending = "\n"
	}
}

func (t *textWriter) paragraph() { t.pending = "\n\n" }

func (t *textWriter) result() string {
	lines := strings.Split(t.b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	out := strings.TrimSpace(strings.Join(lines, "\n"))
	if out == "" {
		return ""
	}
	return out + "\n"
}
