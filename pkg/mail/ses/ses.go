// Package ses is the SES v2 Mailer: it sends the message we built, as raw content, so that the
// bytes SES delivers are exactly the ones we rendered (headers, Message-ID, attachments).
package ses

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	netmail "net/mail"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"

	"github.com/mailroom/mailroom/pkg/mail"
	"github.com/mailroom/mailroom/pkg/sesevent"
)

// API is the part of the SES v2 client the Mailer uses (a *sesv2.Client satisfies it).
type API interface {
	SendEmail(ctx context.Context, in *sesv2.SendEmailInput, optFns ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error)
}

// Mailer sends through SES v2 SendEmail with raw content.
type Mailer struct {
	client           API
	configurationSet string
}

var _ mail.Mailer = (*Mailer)(nil)

// New returns a Mailer. configurationSet names the SES configuration set whose event
// destination publishes delivery events; empty sends without one (no events come back).
func New(client *sesv2.Client, configurationSet string) *Mailer {
	return NewWithAPI(client, configurationSet)
}

// NewWithAPI is New for any implementation of the SendEmail call (tests use a fake to produce
// errors moto cannot).
func NewWithAPI(client API, configurationSet string) *Mailer {
	return &Mailer{client: client, configurationSet: configurationSet}
}

// NoRetries is the client option for the mailer's client: SendEmail is not idempotent, so the
// SDK must not send again after a timeout or a 5xx (it would retry those); the worker retries
// only what SES refused for its rate (mail.ErrThrottled), and waits for SES's events after an
// ambiguous answer (mail.ErrAmbiguous).
func NoRetries(o *sesv2.Options) { o.RetryMaxAttempts = 1 }

// Send hands m.Raw to SES. Every envelope recipient (to, cc and bcc) goes in Destination; the
// headers in Raw decide what recipients see. Errors wrap mail.ErrThrottled or mail.ErrRejected
// when the caller should retry later or never.
func (s *Mailer) Send(ctx context.Context, m mail.Outgoing) (string, error) {
	to := make([]string, len(m.Recipients))
	for i, r := range m.Recipients {
		to[i] = mail.AddressOnly(r) // the envelope needs no name (SES takes 7-bit ASCII there)
	}
	in := &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(sender(m.From)),
		Destination:      &types.Destination{ToAddresses: to},
		Content:          &types.EmailContent{Raw: &types.RawMessage{Data: m.Raw}},
		// SES copies message tags into every event of the message (mail.tags): the events
		// then find their email even when the headers SES passes on are truncated.
		EmailTags: []types.MessageTag{
			{Name: aws.String(sesevent.EmailIDTag), Value: aws.String(m.EmailID)},
			{Name: aws.String(sesevent.TeamIDTag), Value: aws.String(strconv.FormatInt(m.TeamID, 10))},
		},
	}
	set := s.configurationSet
	if m.ConfigurationSet != "" {
		set = m.ConfigurationSet
	}
	if set != "" {
		in.ConfigurationSetName = aws.String(set)
	}
	out, err := s.client.SendEmail(ctx, in)
	if err != nil {
		return "", classify(err)
	}
	if out.MessageId == nil || *out.MessageId == "" {
		return "", errors.New("ses: SendEmail returned no message id")
	}
	return *out.MessageId, nil
}

// sender is the From address with its name encoded as RFC 2047 asks where it is not ASCII:
// SES takes 7-bit ASCII in FromEmailAddress (the raw message's headers are encoded already).
func sender(addr string) string {
	if a, err := netmail.ParseAddress(addr); err == nil {
		return a.String()
	}
	return addr
}

// throttleCodes are the error codes SES (and the AWS SDK's retryer) use for rate limits.
var throttleCodes = map[string]bool{
	"TooManyRequestsException": true,
	"LimitExceededException":   true,
	"Throttling":               true,
	"ThrottlingException":      true,
	"ThrottledException":       true,
	"RequestThrottled":         true,
	"MaxSendRateExceeded":      true,
}

// rejectCodes are errors about this message or this account that a retry will not fix.
var rejectCodes = map[string]bool{
	"MessageRejected":                    true,
	"MailFromDomainNotVerifiedException": true,
	"BadRequestException":                true,
}

// pausedCodes say the account may not send now, whatever the message: its sending is paused
// or suspended, or the deployment may not send (a denial by IAM, which takes seconds to apply
// after a deploy, or by an organisation's policy; a configuration set that is missing). None
// says anything of the message: the emails wait, and the log says why.
var pausedCodes = map[string]bool{
	"AccountSuspendedException": true,
	"SendingPausedException":    true,
	"AccessDeniedException":     true,
	"AccessDenied":              true,
	"NotFoundException":         true,
}

// classify wraps err with the mail sentinel that tells the caller what to do.
func classify(err error) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch code := apiErr.ErrorCode(); {
		case pausedCodes[code]:
			return fmt.Errorf("ses: send: %w: %w", mail.ErrPaused, err)
		case throttleCodes[code]:
			return fmt.Errorf("ses: send: %w: %w", mail.ErrThrottled, err)
		case rejectCodes[code]:
			return fmt.Errorf("ses: send: %w: %w", mail.ErrRejected, err)
		}
	}
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) {
		switch code := respErr.HTTPStatusCode(); {
		case code == http.StatusTooManyRequests:
			return fmt.Errorf("ses: send: %w: %w", mail.ErrThrottled, err)
		case code == http.StatusForbidden || code == http.StatusNotFound:
			return fmt.Errorf("ses: send: %w: %w", mail.ErrPaused, err) // as pausedCodes
		case code >= 400 && code < 500:
			// SES answered and refused: it did not take the message, and will not.
			return fmt.Errorf("ses: send: %w: %w", mail.ErrRejected, err)
		}
	}
	// A 5xx, a timeout or a dropped connection: SES may have accepted the message.
	return fmt.Errorf("ses: send: %w: %w", mail.ErrAmbiguous, err)
}
