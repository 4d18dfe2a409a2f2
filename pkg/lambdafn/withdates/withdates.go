// Package withdates plugs natural-language dates into a Lambda function (lambdafn.Plug): only
// the functions that read a campaign's scheduledAt link their rules.
package withdates

import (
	"github.com/mailroom/mailroom/pkg/lambdafn"
	"github.com/mailroom/mailroom/pkg/naturaldate"
)

// English reads campaigns' scheduledAt with naturaldate's English rules.
func English(w *lambdafn.Wiring) error {
	w.Dates = naturaldate.Parse
	return nil
}
