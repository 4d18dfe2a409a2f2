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
}

func TestFieldsValidate(t *testing.T) {
	s := func(v string) *string { return &v }
	if err := (Fields{Name: s("n"), HTML: s("<p>")}).validate(true); err != nil {
		t.Fatal(err)
	}
	cases := map[string]Fields{
		"name: is required":                     {HTML: s("x")},
		"html: html or text is required":        {Name: s("n")},
		"subject: must not contain line breaks": {Name: s("n"), Text: s("x"), Subject: s("a\nb")},
	}
	for want, f := range cases {
		if err := f.validate(true); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate(%+v) = %v, want %q", f, err, want)
		}
	}
}
