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
