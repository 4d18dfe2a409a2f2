package mail

import (
	"strings"
	"testing"
)

// TestTextFromHTML: what a reader sees of an HTML body, in reading order, as text.
func TestTextFromHTML(t *testing.T) {
	for _, c := range []struct{ name, html, want string }{
		{"paragraphs and entities", `<p>Hello&nbsp;Ann,</p><p>Tom &amp; Jerry&#39;s   news
		is here.</p>`, "Hello Ann,\n\nTom & Jerry's news is here.\n"},
		{"head, style, script and comments out", `<html><head><title>T</title><style>p{color:red}</style></head>` +
			`<body><!-- note --><script>alert(1)</script><h1>News</h1>Body</body></html>`, "News\n\nBody\n"},
		{"the hidden preheader out", `<body><div style="display: none; max-height:0">Preview <b>text</b></div><p>Hi</p></body>`, "Hi\n"},
		{"links with their address", `<p>Read <a href="https://example.com/x?a=1&amp;b=2">the post</a>, or <a href="https://example.com">https://example.com</a>` +
			` or <a href="#top">top</a>.</p>`, "Read the post [https://example.com/x?a=1&b=2], or https://example.com or top.\n"},
		{"unsubscribe link", `<a href='https://u.example/unsubscribe/t'>Unsubscribe</a>`, "Unsubscribe [https://u.example/unsubscribe/t]\n"},
		{"lists, breaks, rules, images", `<ul><li>One</li><li>Two<br>lines</li></ul><hr><img src="x.png" alt="Logo"/><p>End</p>`,
			"* One\n* Two\nlines\n\n---\n\nLogo\n\nEnd\n"},
		{"table rows", `<table><tr><td>Item</td><td>Price</td></tr><tr><td>Tea</td><td>3</td></tr></table>`, "Item Price\nTea 3\n"},
		{"a > in a quoted attribute", `<p title="a > b">x</p>`, "x\n"},
		{"a stray <", `<p>1 < 2</p>`, "1 < 2\n"},
		{"nested hidden", `<div style="display:none"><div>a</div>b</div>c`, "c\n"},
		{"pre keeps its lines", "<pre>a  b\n c</pre>", "a  b\n c\n"},
		{"nothing", `<div style="display:none">x</div>`, ""},
	} {
		if got := TextFromHTML(c.html); got != c.want {
			t.Errorf("%s: TextFromHTML = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestTextFromHTMLEndsOnAnyInput: no input makes it loop or panic, and no tag leaks into the
// text of well-formed markup.
func TestTextFromHTMLEndsOnAnyInput(t *testing.T) {
	for _, s := range []string{"<", "<a", "<a href='x", "<!--", "<!DOCTYPE", "</", "<<>>", "<p", "<style>x", "<div style='display:none'>", "&", "<a href=x>y"} {
		_ = TextFromHTML(s)
	}
	if got := TextFromHTML(strings.Repeat(`<div class="x"><span>w</span></div>`, 1000)); strings.ContainsAny(got, "<>") {
		t.Errorf("a tag leaked: %.80q", got)
	}
}
