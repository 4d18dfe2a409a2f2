// Package withses plugs SES v2 into a Lambda function (lambdafn.Plug): the mailer with the send
// worker, or the identities of sending domains. Only the functions that call SES link it.
package withses

import (
	"context"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/mailroom/mailroom/pkg/deliver"
	idses "github.com/mailroom/mailroom/pkg/identity/ses"
	"github.com/mailroom/mailroom/pkg/lambdafn"
	mailses "github.com/mailroom/mailroom/pkg/mail/ses"
)

// client is an SES v2 client allowed only ops (every other call fails as ErrNotGranted).
func client(w *lambdafn.Wiring, ops ...string) *sesv2.Client {
	return sesv2.NewFromConfig(w.AWS, func(o *sesv2.Options) {
		if o.BaseEndpoint != nil { // an emulator, not AWS: see idses.EmulatorTransport
			o.HTTPClient = &http.Client{Transport: idses.EmulatorTransport(http.DefaultTransport)}
		}
		o.APIOptions = append(o.APIOptions, w.Grant(lambdafn.OpsGrant(ops...)))
	})
}

// Mailer builds the send worker on SES (SendEmail through the configuration sets), and the
// reconciler's sweep of stuck emails with it.
func Mailer(w *lambdafn.Wiring) error {
	worker := &deliver.Worker{
		Store: w.Store, Mailer: mailses.New(client(w, "SendEmail"), w.Config.ConfigurationSet), Log: w.Log,
		Now: w.Now, ConfigurationSet: w.Config.ConfigurationSet, Metrics: w.Metrics,
		ReplyReference: deliver.SESReplyReference(w.AWS.Region),
	}
	w.Deliverer = worker
	w.Reconcile = func(ctx context.Context) (int, error) { return worker.Reconcile(ctx, w.Store, 2*time.Minute) }
	return nil
}

// Identities builds the SES identities of sending domains, with the operations the function's
// ports name.
func Identities(w *lambdafn.Wiring) error {
	w.Identities = idses.New(client(w, w.Ports.Identities...), w.Log)
	return nil
}
