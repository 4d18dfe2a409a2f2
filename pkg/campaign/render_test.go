package campaign

import (
	"testing"

	"github.com/mailroom/mailroom/pkg/store"
)

// TestRenderNamesInAnyScript: a contact's property named in another script (the API takes any
// name) is a placeholder like any other, case-insensitively, with or without "contact.".
func TestRenderNamesInAnyScript(t *testing.T) {
	c := store.Contact{Email: "a@example.org", FirstName: "Ann",
		Properties: map[string]string{"städt": "München", "Ключ": "K1"}}
	got := Render("{{firstName}} {{Städt}} {{contact.städt}} {{ключ}} {{Ort,fallback=—}}", vars(c, ""), false)
	if want := "Ann München München K1 —"; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
}

// TestRenderNamesInTwoCases: a contact holding a name in two cases (written before its book
// had the variable) renders the same value every time, not whichever a map gives first.
func TestRenderNamesInTwoCases(t *testing.T) {
	c := store.Contact{Email: "a@example.org", Properties: map[string]string{"Company": "Upper", "company": "lower", "COMPANY": "caps"}}
	first := Render("{{company}} {{contact.Company}}", vars(c, ""), false)
	for range 50 {
		if got := Render("{{company}} {{contact.Company}}", vars(c, ""), false); got != first {
			t.Fatalf("Render = %q, then %q", first, got)
		}
	}
	if first != "caps caps" {
		t.Errorf("Render = %q, want the first name in sorted order (COMPANY) for both", first)
	}
}
