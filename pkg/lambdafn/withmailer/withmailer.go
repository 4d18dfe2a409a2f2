// Package withmailer plugs the SES mailer into a Lambda function (lambdafn.Plug): the send
// worker and the reconciler's sweep of stuck emails. Only the functions that send link it (and
// with it the MIME builder).
package withmailer

import (
	"context"
	"time"

	"github.com/mailroom/mailroom/pkg/deliver"
	"github.com/mailroom/mailroom/pkg/lambdafn"
	"github.com/mailroom/mailroom/pkg/lambdafn/withses"
	mailses "github.com/mailroom/mailroom/pkg/mail/ses"
)

// Mailer builds the send worker on SES (SendEmail through the configuration sets), and the
// reconciler's sweep of stuck emails with it.
func Mailer(w *lambdafn.Wiring) error {
	worker := &deliver.Worker{
		Store: w.Store, Mailer: mailses.New(withses.Client(w, "SendEmail"), w.Config.ConfigurationSet), Log: w.Log,
		Now: w.Now, ConfigurationSet: w.Config.ConfigurationSet, Metrics: w.Metrics,
		ReplyReference: deliver.SESReplyReference(w.AWS.Region),
	}
	w.Deliverer = worker
	w.Reconcile = func(ctx context.Context) (int, error) { return worker.Reconcile(ctx, w.Store, 2*time.Minute) }
	return nil
}
