// Package withses plugs SES v2's identities into a Lambda function (lambdafn.Plug): the sending
// domains' registration and status. Only the domain functions link it; the mailer is
// withmailer's, so that they do not link the MIME builder and the send worker.
package withses

import (
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	idses "github.com/mailroom/mailroom/pkg/identity/ses"
	"github.com/mailroom/mailroom/pkg/lambdafn"
)

// Client is an SES v2 client allowed only ops (every other call fails as ErrNotGranted).
func Client(w *lambdafn.Wiring, ops ...string) *sesv2.Client {
	return ClientWith(w, nil, ops...)
}

// ClientWith is Client with an option of its own applied last.
func ClientWith(w *lambdafn.Wiring, opt func(*sesv2.Options), ops ...string) *sesv2.Client {
	return sesv2.NewFromConfig(w.AWS, func(o *sesv2.Options) {
		if opt != nil {
			defer opt(o)
		}
		if o.BaseEndpoint != nil { // an emulator, not AWS: see idses.EmulatorTransport
			o.HTTPClient = &http.Client{Transport: idses.EmulatorTransport(http.DefaultTransport)}
		}
		o.APIOptions = append(o.APIOptions, lambdafn.Grant(lambdafn.OpsGrant(ops...)))
	})
}

// Identities builds the SES identities of sending domains, with the operations the function's
// ports name.
func Identities(w *lambdafn.Wiring) error {
	w.Identities = idses.New(Client(w, w.Ports.Identities...), w.Log, w.Config.TableName)
	return nil
}
