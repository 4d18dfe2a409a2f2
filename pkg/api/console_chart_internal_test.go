package api

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mailroom/mailroom/pkg/analytics"
)

// TestReputationBarsScales: the bounce bar spans 0–10% and the complaint bar 0–1% of its 720
// units (SES's limits, 5% and 0.1%, sit in the bars' middle and first tenth), and a rate past
// the end fills its bar without overflowing it.
func TestReputationBarsScales(t *testing.T) {
	for _, c := range []struct {
		rep               analytics.Reputation
		bounces, complain string
	}{
		{analytics.Reputation{BounceRate: 2.5, ComplaintRate: 0.25}, `width="180"`, `width="180"`},
		{analytics.Reputation{BounceRate: 5, ComplaintRate: 0.1}, `width="360"`, `width="72"`},
		{analytics.Reputation{BounceRate: 40, ComplaintRate: 3}, `width="720"`, `width="720"`},
	} {
		var b bytes.Buffer
		if err := consolePages().ExecuteTemplate(&b, "analytics", analyticsView{Days: 7, Reputation: c.rep}); err != nil {
			t.Fatal(err)
		}
		page := b.String()
		for y, want := range map[string]string{"30": c.bounces, "100": c.complain} {
			if !strings.Contains(page, `<rect x="0" y="`+y+`" `+want+` height="18"`) {
				t.Errorf("%+v: the bar at y=%s is not %s", c.rep, y, want)
			}
		}
	}
}
