package contact

import (
	"maps"
	"testing"
)

// TestPutPropertiesKeepsWhatACampaignRenders: a contact written before its book had the
// variable may hold it in two cases; written again, it keeps the value a campaign rendered
// (the first name in sorted order, campaign.vars' rule), not the other one.
func TestPutPropertiesKeepsWhatACampaignRenders(t *testing.T) {
	to := map[string]string{}
	putProperties(to, map[string]string{"company": "Acme", "Company": "Globex", "city": "Paris"}, []string{"company"})
	if want := map[string]string{"company": "Globex", "city": "Paris"}; !maps.Equal(to, want) {
		t.Errorf("putProperties = %v, want %v", to, want)
	}
	// A later write's value for the variable replaces the stored one, whatever its case.
	putProperties(to, map[string]string{"COMPANY": "Initech"}, []string{"company"})
	if to["company"] != "Initech" || len(to) != 2 {
		t.Errorf("after a later write: %v, want company Initech", to)
	}
}
