package editor_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mailroom/mailroom/pkg/editor"
)

// text is a text node with marks.
func text(s string, marks ...map[string]any) map[string]any {
	n := map[string]any{"type": "text", "text": s}
	if len(marks) > 0 {
		n["marks"] = marks
	}
	return n
}

func node(typ string, attrs map[string]any, content ...map[string]any) map[string]any {
	n := map[string]any{"type": typ}
	if attrs != nil {
		n["attrs"] = attrs
	}
	if len(content) > 0 {
		n["content"] = content
	}
	return n
}

func doc(content ...map[string]any) string {
	raw, _ := json.Marshal(node("doc", nil, content...))
	return string(raw)
}

func mark(typ string, attrs map[string]any) map[string]any {
	return map[string]any{"type": typ, "attrs": attrs}
}

// TestRenderEveryNode: each node and mark the editor makes comes out as its markup, with the
// text escaped and the variables as the campaign's placeholders.
func TestRenderEveryNode(t *testing.T) {
	in := doc(
		node("heading", map[string]any{"level": 2, "textAlign": "center"}, text("Spring <news>")),
		node("paragraph", nil,
			text("Hello "), node("variable", map[string]any{"id": "firstName", "fallback": "there"}), text(", "),
			text("bold", mark("bold", nil)), text(" "), text("both", mark("italic", nil), mark("bold", nil)), text(" "),
			text("u", mark("underline", nil)), text("s", mark("strike", nil)), text("c", mark("code", nil)),
			text("red", mark("textStyle", map[string]any{"color": "#ff0000", "fontSize": "18px"})),
			node("hardBreak", nil),
			text("read", mark("link", map[string]any{"href": "https://example.com/a?b=1&c=2"}))),
		node("paragraph", nil),
		node("bulletList", nil, node("listItem", nil, node("paragraph", nil, text("one")))),
		node("orderedList", map[string]any{"start": 3}, node("listItem", nil, node("paragraph", nil, text("three")))),
		node("blockquote", nil, node("paragraph", nil, text("quoted"))),
		node("codeBlock", map[string]any{"language": "go"}, text("x := <-ch")),
		node("horizontalRule", nil),
		node("button", map[string]any{"text": "Shop now", "url": "https://example.com/shop", "buttonColor": "#123456",
			"textColor": "#ffffff", "borderRadius": 4, "alignment": "center"}),
		node("image", map[string]any{"src": "https://example.com/a.png", "alt": `a "cat"`, "width": "300",
			"alignment": "right", "externalLink": "https://example.com/cat"}),
		node("logo", map[string]any{"src": "https://example.com/logo.png", "size": "sm"}),
		node("spacer", map[string]any{"height": "lg"}),
		node("heading", map[string]any{"level": 5}, text("small")),
		node("unsubscribeFooter", nil, node("paragraph", nil,
			text("Unsubscribe", mark("link", map[string]any{"href": "{{usesend_unsubscribe_url}}"})))),
	)
	out, err := editor.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`<html lang="en"`, `max-width:600px`, `</body></html>`,
		`<h2 style="font-size:30px;`, `text-align:center">Spring &lt;news&gt;</h2>`,
		`Hello {{firstName,fallback=there}}, <strong>bold</strong> <strong><em>both</em></strong>`,
		`<u>u</u>`, `<s style="text-decoration:line-through">s</s>`, `<code style="`, `>c</code>`,
		`<span style="font-size:18px;color:#ff0000">red</span>`, `<br>`,
		`<a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer nofollow"`,
		`>&nbsp;</p>`,
		`<ul style="margin:0 0 20px;padding-left:26px;list-style-type:disc"><li `, `margin:0;color:#374151;text-align:left">one</p></li></ul>`,
		`<ol start="3" `, `three`,
		`<blockquote style="border-left:4px solid #d1d5db;`, `quoted`,
		`<pre style="`, `<code>x := &lt;-ch</code></pre>`,
		`<hr style="`,
		`<td align="center" style="padding:0 0 20px"><a href="https://example.com/shop" target="_blank" style="display:inline-block;`,
		`background-color:#123456;color:#ffffff;border:0px solid #123456;border-radius:4px;`, `>Shop now</a>`,
		`<td align="right" style="padding:0 0 32px"><a href="https://example.com/cat" target="_blank"><img src="https://example.com/a.png" alt="a &#34;cat&#34;" title="" width="300"`,
		`<img src="https://example.com/logo.png" alt="" title="" width="40" height="40"`,
		`<div style="height:32px;line-height:32px;font-size:1px">&nbsp;</div>`,
		`<h5 style="font-size:18px;`,
		`<a href="{{usesend_unsubscribe_url}}" target="_blank"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the rendering lacks %s", want)
		}
	}
	if strings.Contains(out, "<news>") || strings.Contains(out, `"cat"`) {
		t.Error("text or an attribute is not escaped")
	}
}

// TestRenderRefuses: what useSend's renderer throws on, and links that are not web, mail or
// phone links, are errors that name them; nothing unsafe reaches the markup.
func TestRenderRefuses(t *testing.T) {
	deep := node("paragraph", nil, text("x"))
	for range editor.MaxDepth + 1 {
		deep = node("blockquote", nil, deep)
	}
	for _, c := range []struct{ in, want string }{
		{`{"type":"doc","content":[{"type":"taskList"}]}`, `node type "taskList" is not supported`},
		{doc(node("paragraph", nil, text("x", mark("highlight", nil)))), `mark type "highlight" is not supported`},
		{doc(node("paragraph", nil, text("x", mark("link", map[string]any{"href": "javascript:alert(1)"})))), `the link "javascript:alert(1)" is not allowed`},
		{doc(node("button", map[string]any{"text": "x", "url": " JavaScript:alert(1)"})), `is not allowed`},
		{doc(node("image", map[string]any{"src": "file:///etc/passwd"})), `is not an http(s) address`},
		{doc(node("button", map[string]any{"text": "x", "url": "{{site,fallback=javascript:alert(1)}}"})), `the link "javascript:alert(1)" is not allowed`},
		// However the placeholder is spaced, and with the scheme's colon as a character reference.
		{doc(node("button", map[string]any{"text": "x", "url": "{{nope, fallback = javascript:alert(1)}}"})), `the link "javascript:alert(1)" is not allowed`},
		{doc(node("image", map[string]any{"src": "{{nope , fallback = javascript:alert(2)}}"})), `is not an http(s) address`},
		{doc(node("paragraph", nil, text("c", mark("link", map[string]any{"href": "{{ nope,fallback=javascript&#58;alert(3) }}"})))), `the link "javascript:alert(3)" is not allowed`},
		// A placeholder before the scheme could make it (a contact whose p is "java").
		{doc(node("paragraph", nil, text("c", mark("link", map[string]any{"href": "{{p,fallback=/}}script:alert(1)"})))), `has a placeholder before its scheme`},
		{doc(node("button", map[string]any{"text": "x", "url": "java{{p}}:alert(1)"})), `has a placeholder before its scheme`},
		{doc(deep), "nested more than"},
		{`{"type":"doc","content":[`, "invalid JSON"},
	} {
		if _, err := editor.Render(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Render(%.60s) = %v, want an error with %q", c.in, err, c.want)
		}
	}
	if _, err := editor.Render(`{"type":"paragraph"}`); !errors.Is(err, editor.ErrNotADocument) {
		t.Errorf("a node that is not a doc: %v", err)
	}
	// A style value that would leave its declaration is dropped; a fallback cannot end its
	// placeholder early, and is text (escaped, braces too, kept whole); a name no placeholder
	// can carry is its fallback as text.
	out, err := editor.Render(doc(node("paragraph", nil,
		text("x", mark("textStyle", map[string]any{"color": `red;background:url("https://t.example/x")`})),
		node("variable", map[string]any{"id": "firstName", "fallback": "a}}<b>"}),
		node("variable", map[string]any{"id": "first}}Name", "fallback": "<i>c</i>"}),
		node("variable", map[string]any{"id": "städt"}), node("variable", map[string]any{"id": "first name"}))))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"{{firstName,fallback=a&#125;&#125;&lt;b&gt;}}", "&lt;i&gt;c&lt;/i&gt;", "{{städt}}", "&#123;&#123;first name&#125;&#125;"} {
		if !strings.Contains(out, want) {
			t.Errorf("the variables are not rendered as %q: %s", want, out)
		}
	}
	if strings.Contains(out, "t.example") || strings.Contains(out, "<b>") || strings.Contains(out, "<i>") {
		t.Errorf("unsafe values reached the markup: %s", out)
	}
}

func TestIsDocument(t *testing.T) {
	for in, want := range map[string]bool{` {"type":"doc"}`: true, `<p>{{usesend_unsubscribe_url}}</p>`: false, "": false,
		`{{firstName}}, hello <a href="{{usesend_unsubscribe_url}}">u</a>`: false, ` {{ firstName }}`: false, `{"type":"doc"`: true} {
		if got := editor.IsDocument(in); got != want {
			t.Errorf("IsDocument(%q) = %v", in, got)
		}
	}
}

// FuzzRender: no document panics, and what renders carries no script and no javascript: link.
func FuzzRender(f *testing.F) {
	f.Add(doc(node("paragraph", nil, text("<script>x</script>", mark("link", map[string]any{"href": "https://a.example"})))))
	f.Add(`{"type":"doc","content":[{"type":"image","attrs":{"src":"data:image/png;base64,AAAA","width":1e400}}]}`)
	f.Add(`{"type":"doc","content":[{"type":"button","attrs":{"url":"{{x}}","borderWidth":"3px"}}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		out, err := editor.Render(s)
		if err != nil {
			return
		}
		lower := strings.ToLower(out)
		if strings.Contains(lower, "<script") || strings.Contains(lower, `="javascript:`) {
			t.Errorf("Render(%q) = %s", s, out)
		}
	})
}

// TestBareLinkTokens: a link or button whose address is the bare name of the unsubscribe or
// confirmation link (as upstream's renderer maps them) is that link's placeholder; another
// bare word stays a relative link.
func TestBareLinkTokens(t *testing.T) {
	out, err := editor.Render(doc(
		node("button", map[string]any{"text": "Confirm", "url": " doubleOptInUrl "}),
		node("paragraph", nil, text("Leave", mark("link", map[string]any{"href": "USESEND_UNSUBSCRIBE_URL"})), text("about", mark("link", map[string]any{"href": "about"})))))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`href="{{doubleOptInUrl}}"`, `href="{{USESEND_UNSUBSCRIBE_URL}}"`, `href="about"`} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in %s", want, out)
		}
	}
}

// TestRenderShapeErrors: valid JSON that is not of the editor's shape is named in the
// document's terms (where, and what the editor writes there), not the decoder's Go types.
func TestRenderShapeErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{"type":"doc","content":"x"}`:                               "content is a JSON string where the editor writes a list of nodes or marks",
		`{"type":"doc","content":[{"type":"paragraph","attrs":[]}]}`: "content.attrs is a JSON array where the editor writes an object",
		`{"type":"doc","content":[{"type":1}]}`:                      "content.type is a JSON number where the editor writes a string",
	} {
		_, err := editor.Render(in)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "editor.Node") {
			t.Errorf("Render(%s) = %v, want %q", in, err, want)
		}
	}
}
