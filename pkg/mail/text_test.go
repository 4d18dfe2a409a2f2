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

// TestTextFromHTMLAsBrowsersReadIt: an element left open where HTML allows it, a script's text
// holding markup, and an attribute's references decoded once.
func TestTextFromHTMLAsBrowsersReadIt(t *testing.T) {
	for in, want := range map[string][]string{
		`<head><title>x</title><body><p>Hello</p>`:                                                     {"Hello"},
		`<table><tr><td style="display:none">pre<td>Visible</table>`:                                   {"Visible"},
		`<ul><li style="display:none">x<li>Shown</ul>`:                                                 {"Shown"},
		`<p>Intro</p><p style="display:none">pre<p>Body <a href="https://u.example/x">Unsubscribe</a>`: {"Intro", "Body", "Unsubscribe [https://u.example/x]"},
		`<script>"<script>"</script>After <STYLE>p{}</style >end`:                                      {"After end"},
		`<img alt="&amp;lt;b&amp;gt;" src="x">`:                                                        {"&lt;b&gt;"},
		`<p>I <3 cats, 1 <2</p>`:                                                                       {"I <3 cats, 1 <2"},
		`<p>Write:</p><textarea>a &amp; <b>b</b></textarea><xmp><i>as is</i></xmp>`:                    {"a & <b>b</b>", "<i>as is</i>"},
	} {
		got := TextFromHTML(in)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("TextFromHTML(%q) = %q, want %q in it", in, got, w)
			}
		}
	}
	if got := TextFromHTML(`<script>"<script>"</script>After`); got != "After\n" {
		t.Errorf("a script's text: %q", got)
	}
}

// TestTextFromHTMLOnUnendedTags: tags without their ">" (the rest of the input is no markup)
// end the reading, with no markup in the text (their time: BenchmarkTextFromHTMLWorst).
func TestTextFromHTMLOnUnendedTags(t *testing.T) {
	for _, in := range []string{strings.Repeat("<a", 256<<10), "<a '" + strings.Repeat("<b", 256<<10), strings.Repeat("<!x", 170<<10),
		"<p>kept</p>" + strings.Repeat("<script>", 64<<10)} {
		got := TextFromHTML(in)
		if strings.Contains(got, "<") {
			t.Errorf("%.20q…: markup in the text %.40q", in, got)
		}
	}
}

// FuzzTextFromHTML: any input ends, without a panic.
func FuzzTextFromHTML(f *testing.F) {
	for _, s := range []string{"<p>a</p>", "<a href='x'>y</a>", "<head><body>", "<script>x", "<div style=display:none>", "<!--", "<<>>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { _ = TextFromHTML(s) })
}

// BenchmarkTextFromHTMLWorst times the inputs that read a string again at each tag (512 KB,
// the largest campaign html): each should take a few milliseconds, not seconds.
func BenchmarkTextFromHTMLWorst(b *testing.B) {
	for name, in := range map[string]string{
		"unended tags":      strings.Repeat("<a", 256<<10),
		"quoted, unended":   "<a '" + strings.Repeat("<b", 256<<10),
		"scripts":           "<p>kept</p>" + strings.Repeat("<script>", 64<<10),
		"nested links, pre": "<pre>" + strings.Repeat("<a>", 36000) + strings.Repeat(" ", 250000) + strings.Repeat("</a>", 36000),
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_ = TextFromHTML(in)
			}
		})
	}
}
