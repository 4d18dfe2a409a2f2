package campaign

import (
	"strings"
	"testing"

	"github.com/mailroom/mailroom/pkg/editor"
	"github.com/mailroom/mailroom/pkg/store"
)

// TestRenderNamesInAnyScript: a contact's property named in another script (the API takes any
// name) is a placeholder like any other, case-insensitively, with or without "contact.".
func TestRenderNamesInAnyScript(t *testing.T) {
	c := store.Contact{Email: "a@example.org", FirstName: "Ann",
		Properties: map[string]string{"städt": "München", "Ключ": "K1", "नाम": "Asha"}}
	got := Render("{{firstName}} {{Städt}} {{contact.städt}} {{ключ}} {{नाम}} {{Ort,fallback=—}}", vars(c, "", nil), false)
	if want := "Ann München München K1 Asha —"; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
}

// TestRenderNamesInTwoCases: a contact holding a name in two cases (written before its book
// had the variable) renders the same value every time, not whichever a map gives first.
func TestRenderNamesInTwoCases(t *testing.T) {
	c := store.Contact{Email: "a@example.org", Properties: map[string]string{"Company": "Upper", "company": "lower", "COMPANY": "caps"}}
	first := Render("{{company}} {{contact.Company}}", vars(c, "", nil), false)
	for range 50 {
		if got := Render("{{company}} {{contact.Company}}", vars(c, "", nil), false); got != first {
			t.Fatalf("Render = %q, then %q", first, got)
		}
	}
	if first != "caps caps" {
		t.Errorf("Render = %q, want the first name in sorted order (COMPANY) for both", first)
	}
}

// TestRenderUnknownNamesAndContactPrefix: as upstream's replaceContactVariables, an optional
// "contact." goes before any name, the built-in ones too; a name the contact does not have and
// its book does not declare stays as written (unless it has a fallback), where a declared one
// the contact lacks renders empty; a fallback is the author's html, as written.
func TestRenderUnknownNamesAndContactPrefix(t *testing.T) {
	c := store.Contact{Email: "ann@example.org", FirstName: "Ann", LastName: "Lee", Properties: map[string]string{"plan": "pro"}}
	values := vars(c, "https://u.example/x", []string{"Company", "plan"})
	for in, want := range map[string]string{
		"{{contact.firstName}} {{CONTACT.lastname}} {{contact.email}}": "Ann Lee ann@example.org",
		"{{contact.firstName,fallback=there}}":                         "Ann",
		"[{{company}}] [{{contact.Company}}]":                          "[] []",
		"{{company,fallback=friend}}":                                  "friend",
		"{{plan}} {{contact.plan}}":                                    "pro pro",
		"{{unknownvar}} {{ contact.nope }}":                            "{{unknownvar}} {{ contact.nope }}",
		"{{unknownvar,fallback=x &amp; y}}":                            "x &amp; y", // html, as written
		"{{usesend_unsubscribe_url}}":                                  "https://u.example/x",
	} {
		if got := Render(in, values, true); got != want {
			t.Errorf("Render(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRenderEditorFallbacksOnce: a fallback written in an editor document's text, link or
// variable node reaches the email escaped once, as any text of the document: read as written.
func TestRenderEditorFallbacksOnce(t *testing.T) {
	doc := `{"type":"doc","content":[{"type":"paragraph","content":[` +
		`{"type":"text","text":"Hi {{lastName,fallback=Tom & Jerry's}} "},` +
		`{"type":"text","text":"shop","marks":[{"type":"link","attrs":{"href":"https://shop.example/?who={{lastName,fallback=a&b}}"}}]},` +
		`{"type":"variable","attrs":{"id":"company","fallback":"Q&A <3 }"}}]}]}`
	body, err := editor.Render(doc)
	if err != nil {
		t.Fatal(err)
	}
	got := Render(body, vars(store.Contact{Email: "a@example.org"}, "", []string{"company"}), true)
	for _, want := range []string{`Hi Tom &amp; Jerry&#39;s`, `href="https://shop.example/?who=a&amp;b"`, `Q&amp;A &lt;3 &#125;`} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in %s", want, got)
		}
	}
}

// TestRenderNoPlaceholderAcrossNodes: a placeholder begun in one node of an editor document
// and ended in another is no placeholder: personalised, it would join them, and what lay
// between (the end of an attribute) would let the next node's text into the tag.
func TestRenderNoPlaceholderAcrossNodes(t *testing.T) {
	doc := `{"type":"doc","content":[{"type":"paragraph","content":[` +
		`{"type":"text","text":"A","marks":[{"type":"link","attrs":{"href":"https://x.example/{{email,fallback="}}]},` +
		`{"type":"text","text":"}} B"},` +
		`{"type":"text","text":"C","marks":[{"type":"link","attrs":{"href":"https://y.example/x/onmouseover=alert(1)//"}}]},` +
		`{"type":"text","text":" and {{firstName}} {{ lastName , fallback=you }}"}]}]}`
	body, err := editor.Render(doc)
	if err != nil {
		t.Fatal(err)
	}
	got := Render(body, vars(store.Contact{Email: "bob@x.example", FirstName: "Bob"}, "", nil), true)
	for _, want := range []string{`href="https://x.example/&#123;&#123;email,fallback="`, `&#125;&#125; B`, `href="https://y.example/x/onmouseover=alert(1)//"`, " and Bob you"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in %s", want, got)
		}
	}
	if strings.Contains(got, "bob@x.example") {
		t.Errorf("a placeholder joined two nodes: %s", got)
	}
}
