// Package withconsole plugs the mail console into the Console function (lambdafn.Plug). Only
// that function links it: the console's pages are html/template, and a template package keeps
// every exported method of every type in a binary, which doubled every other function's size
// and slowed its cold start.
package withconsole

import (
	"net/http"
	"sync"

	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/lambdafn"
	"github.com/mailroom/mailroom/pkg/team"
)

// Pages is the console's handler on AWS: no outbox (no raw messages) and no SES event buttons
// (SES publishes the real ones), sessions sealed under the keyring, the live view answered once
// per request, the OpenAPI document its pages link to, and the health check.
func Pages(w *lambdafn.Wiring) error {
	w.Console = func(s *api.Services) http.Handler {
		c := api.NewConsole(s, "")
		c.Sealed = &campaign.Signer{Source: w.Unsubscribe}
		c.OneShot = true
		c.Keys = &team.Admin{Store: w.Store, Now: w.Now}
		pages := c.Handler()
		// Built at its first request, not at start: it was most of the function's cold start.
		openAPI := sync.OnceValues(func() ([]byte, error) { return api.OpenAPI(lambdafn.BuildVersion()) })
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/healthz" {
				rw.Header().Set("Content-Type", "application/json")
				_, _ = rw.Write([]byte(`{"status":"ok"}`))
				return
			}
			if r.URL.Path != "/api/v1/doc" {
				pages.ServeHTTP(rw, r)
				return
			}
			doc, err := openAPI()
			if err != nil {
				w.Log.Error("console: the OpenAPI document", "err", err.Error())
				http.Error(rw, "Internal error", http.StatusInternalServerError)
				return
			}
			rw.Header().Set("Content-Type", "application/json")
			_, _ = rw.Write(doc)
		})
	}
	return nil
}
