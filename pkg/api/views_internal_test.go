package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/jsonout"
	"github.com/mailroom/mailroom/pkg/store"
)

// TestEmailDetailBoundsItsEvents: an email's history of many large events (a click's link and
// user agent are the clicker's) leaves the data of the largest out, flagged, so that the
// detail stays within Lambda's answer (a bare 500 on AWS before); the small ones keep theirs.
func TestEmailDetailBoundsItsEvents(t *testing.T) {
	at := time.Now().UTC()
	e := store.Email{ID: "em1", TeamID: 1, CreatedAt: at, UpdatedAt: at}
	var events []store.Event
	for i := range 650 {
		data := fmt.Sprintf(`{"link":"https://example.com/%s","userAgent":"%s"}`, strings.Repeat("l", 2000), strings.Repeat("u", 8000))
		events = append(events, store.Event{ID: fmt.Sprint("c", i), EmailID: e.ID, Status: "CLICKED", CreatedAt: at, Data: []byte(data)})
	}
	events = append(events, store.Event{ID: "d", EmailID: e.ID, Status: "DELIVERED", CreatedAt: at, Data: []byte(`{"smtpResponse":"250 OK"}`)})
	d := newEmailDetail(e, events)
	out, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := jsonout.InvocationLen(string(out)); n > jsonout.MaxInvocationBody {
		t.Fatalf("the detail comes to %d bytes as an invocation carries it, over %d", n, jsonout.MaxInvocationBody)
	}
	omitted := 0
	for _, ev := range d.EmailEvents {
		if ev.DataOmitted {
			omitted++
			if string(ev.Data) != "null" {
				t.Errorf("an omitted event's data is %.40s, want null", ev.Data)
			}
		}
	}
	if last := d.EmailEvents[len(d.EmailEvents)-1]; omitted == 0 || omitted == len(events) || last.DataOmitted {
		t.Errorf("%d of %d events' data omitted (the small DELIVERED one: %v); want some of the large ones only", omitted, len(events), last.DataOmitted)
	}
}
