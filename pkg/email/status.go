// Package email is the transactional email use cases: validating send requests, writing emails
// with their first event (the API never calls the mail provider), idempotent retries, listing
// and reading emails, and the status rules every writer of an email's history follows.
package email

// Public statuses, in rank order: latestStatus only ever moves to a higher rank. SCHEDULED is
// lowest so that any later event overwrites it.
var rank = map[string]int{}

// Statuses lists every public status, lowest rank first.
var Statuses = []string{
	"SCHEDULED", "CANCELLED", "RENDERING_FAILURE", "QUEUED", "SENT", "REJECTED",
	"DELIVERY_DELAYED", "DELIVERED", "BOUNCED", "OPENED", "CLICKED", "COMPLAINED", "FAILED",
	"SUPPRESSED",
}

func init() {
	for i, s := range Statuses {
		rank[s] = i + 1
	}
}

// Advance returns the latestStatus after an event of status next: next if it ranks higher than
// current (or current is empty), else current.
func Advance(current, next string) string {
	if rank[next] > rank[current] {
		return next
	}
	return current
}

// ValidStatus reports whether s is a public status.
func ValidStatus(s string) bool { return rank[s] > 0 }
