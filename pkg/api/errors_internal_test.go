package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mailroom/mailroom/pkg/store"
)

// TestTooLargeToStore: a record the store cannot hold in one piece (DynamoDB's 400 KB item, a
// template's bodies that do not compress enough) is a 413 in the error envelope, saying why,
// not a 500.
func TestTooLargeToStore(t *testing.T) {
	status, code, msg := errorOf(fmt.Errorf("dynamo: update template: %w", store.ErrTooLarge))
	if status != http.StatusRequestEntityTooLarge || code != "PAYLOAD_TOO_LARGE" || !strings.Contains(msg, "400 KB") {
		t.Errorf("ErrTooLarge answers %d %s %q, want a 413 saying the limit", status, code, msg)
	}
}
