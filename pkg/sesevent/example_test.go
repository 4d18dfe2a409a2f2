package sesevent_test

import (
	"fmt"

	"github.com/mailroom/mailroom/pkg/sesevent"
)

func ExampleDecode() {
	e, err := sesevent.Decode([]byte(`{
	  "eventType": "Bounce",
	  "mail": {"timestamp": "2024-10-14T09:12:30.117Z", "messageId": "0100-abc",
	    "destination": ["jane@example.com"],
	    "headers": [{"name": "X-Usesend-Email-ID", "value": "cm2k8x1yz0001abcd"}]},
	  "bounce": {"bounceType": "Permanent", "bounceSubType": "General",
	    "bouncedRecipients": [{"emailAddress": "jane@example.com"}],
	    "timestamp": "2024-10-14T09:12:31.904Z"}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(e.EventType, e.EmailID(), e.Bounce.BounceType, e.Timestamp().Format("15:04:05.000"))
	// Output: Bounce cm2k8x1yz0001abcd Permanent 09:12:31.904
}
