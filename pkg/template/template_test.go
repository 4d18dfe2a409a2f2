package template

import (
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	got, err := Render("Hi {{name}}, {{ name }} <{{tag}}>", map[string]string{"name": "<Ann>", "tag": "b&c"}, true)
	if err != nil || got != "Hi &lt;Ann&gt;, &lt;Ann&gt; <b&amp;c>" {
		t.Fatalf("Render html = %q, %v", got, err)
	}
	got, err = Render("Hi {{name}}", map[string]string{"name": "<Ann>"}, false)
	if err != nil || got != "Hi <Ann>" {
		t.Fatalf("Render text = %q, %v", got, err)
	}
	_, err = Render("{{b}} {{a}} {{b}}", map[string]string{}, false)
	if err == nil || !strings.Contains(err.Error(), "variables: missing value for a, b") {
		t.Fatalf("missing = %v", err)
	}
	if got, _ := Render("no {placeholders} here {{ }}", nil, false); got != "no {placeholders} here {{ }}" {
		t.Errorf("untouched text changed: %q", got)
	}
	// A fallback stands in for a missing or empty value, as written (it is part of the html
	// around it; values are escaped); a given value wins over it.
	got, err = Render("Hi {{name}} from {{ company , fallback=Tom &amp; Jerry }}, {{team,fallback=}}{{x,fallback=X}}",
		map[string]string{"name": "Zoë", "company": "", "x": "<x>"}, true)
	if err != nil || got != "Hi Zoë from Tom &amp; Jerry, &lt;x&gt;" {
		t.Errorf("fallbacks = %q, %v", got, err)
	}
	// A name in another script is a name (a contact's property may be "städt" or "Ключ");
	// one with a space is not, and stays as written.
	got, err = Render("Hallo {{städt}}, {{Ключ,fallback=K}} {{with space}}", map[string]string{"städt": "München"}, false)
	if err != nil || got != "Hallo München, K {{with space}}" {
		t.Errorf("names in other scripts = %q, %v", got, err)
	}
	if _, err := Render("Hallo {{städt}}", nil, false); err == nil || !strings.Contains(err.Error(), "missing value for städt") {
		t.Errorf("a missing name in another script: %v", err)
	}
}

func TestFieldsValidate(t *testing.T) {
	s := func(v string) *string { return &v }
	if err := (Fields{Name: s("n"), HTML: s("<p>")}).validate(true); err != nil {
		t.Fatal(err)
	}
	cases := map[string]Fields{
		"name: is required":                            {HTML: s("x")},
		"html: html or text is required":               {Name: s("n")},
		"subject: must not contain line breaks":        {Name: s("n"), Text: s("x"), Subject: s("a\nb")},
		"subject: must not contain control characters": {Name: s("n"), Text: s("x"), Subject: s("a\x00b")},
	}
	for want, f := range cases {
		if err := f.validate(true); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate(%+v) = %v, want %q", f, err, want)
		}
	}
	// An update need not name the template, but a name it gives is not blank.
	if err := (Fields{Text: s("x")}).validate(false); err != nil {
		t.Errorf("an update without a name: %v", err)
	}
	for _, name := range []string{"", "   "} {
		if err := (Fields{Name: s(name)}).validate(false); err == nil || err.Error() != "name: must not be empty" {
			t.Errorf("an update to the name %q: %v, want name: must not be empty", name, err)
		}
	}
}

// TestOneLine: a subject made from values keeps its tabs and text, and each other control
// character, line breaks included, becomes a space.
func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"Hello Zoë":               "Hello Zoë",
		"a\tb":                    "a\tb",
		"a\r\nBcc: x@y.z":         "a  Bcc: x@y.z",
		"nul\x00 esc\x1b del\x7f": "nul  esc  del ",
	} {
		if got := OneLine(in); got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
		if HasControl(OneLine(in)) {
			t.Errorf("OneLine(%q) still has a control character", in)
		}
	}
	if !HasControl("a\x01") || HasControl("a\tb é") {
		t.Error("HasControl: a tab and letters are not control characters; \\x01 is")
	}
}

// TestRenderedSizeIsTheRenderedLength: RenderedSize, computed without rendering, is the length
// Render returns, escaped or not, with repeated and missing placeholders.
func TestRenderedSizeIsTheRenderedLength(t *testing.T) {
	vars := map[string]string{"a": "x", "long": strings.Repeat("<&>", 50), "empty": ""}
	for _, s := range []string{"", "plain", "{{a}}", "{{ a }}{{long}}{{long}}", "<p>{{empty}}</p>{{a}}{{ long }}",
		strings.Repeat("{{long}}", 100), "{{missing}} and {{a}}", "{{empty,fallback=<fb>}} {{none,fallback=x}} {{a,fallback=y}}"} {
		for _, escape := range []bool{false, true} {
			got := RenderedSize(s, vars, escape)
			// A missing variable counts as its placeholder: render it as itself.
			withMissing := map[string]string{"missing": "{{missing}}"}
			for k, v := range vars {
				withMissing[k] = v
			}
			out, err := Render(s, withMissing, escape)
			if err != nil {
				t.Fatal(err)
			}
			if got != len(out) {
				t.Errorf("RenderedSize(%.30q, escape %v) = %d, rendered %d", s, escape, got, len(out))
			}
		}
	}
}
