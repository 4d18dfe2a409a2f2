// Package withmailer plugs the SES mailer into a Lambda function (lambdafn.Plug): the send
// worker. Only the function that sends links it (and with it the MIME builder).
package withmailer

import (
	"github.com/mailroom/mailroom/pkg/deliver"
	"github.com/mailroom/mailroom/pkg/lambdafn"
	"github.com/mailroom/mailroom/pkg/lambdafn/withses"
	mailses "github.com/mailroom/mailroom/pkg/mail/ses"
)

// Mailer builds the send worker on SES (SendEmail through the configuration sets).
func Mailer(w *lambdafn.Wiring) error {
	worker := &deliver.Worker{
		Store: w.Store, Mailer: mailses.New(withses.ClientWith(w, mailses.NoRetries, "SendEmail"), w.Config.ConfigurationSet), Log: w.Log,
		Now: w.Now, ConfigurationSet: w.Config.ConfigurationSet, Metrics: w.Metrics,
		ReplyReference: deliver.SESReplyReference(w.AWS.Region),
		// Every instance paces against the table's per-second counter, at SES_MAX_SEND_RATE
		// or, when that is 0, the account's own rate and daily quota (GetAccount).
		Pacer: &deliver.Pacer{Slots: w.Store, Rate: w.Config.SESMaxSendRate, Now: w.Now, Log: w.Log, Metrics: w.Metrics,
			Account: mailses.Account{Client: withses.Client(w, "GetAccount")}},
	}
	w.Deliverer = worker
	return nil
}
