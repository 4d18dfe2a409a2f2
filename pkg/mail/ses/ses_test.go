package ses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/mailroom/mailroom/pkg/awstest"
	"github.com/mailroom/mailroom/pkg/mail"
	"github.com/mailroom/mailroom/pkg/mail/mailtest"
	"github.com/mailroom/mailroom/pkg/sesevent"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// newClient returns an SES v2 client on the shared moto server where the contract suite's
// sender domain is a verified identity (moto refuses unverified senders, as SES does in the
// sandbox).
func newClient(t *testing.T) (*sesv2.Client, *awstest.Server) {
	t.Helper()
	srv := awstest.Shared(t)
	client := sesv2.NewFromConfig(srv.Config(t))
	if _, err := client.CreateEmailIdentity(context.Background(), &sesv2.CreateEmailIdentityInput{
		EmailIdentity: aws.String("sender.example"),
	}); err != nil {
		var exists *types.AlreadyExistsException
		if !errors.As(err, &exists) {
			t.Fatalf("create identity: %v", err)
		}
	}
	return client, srv
}

// sentRaw reads the raw message moto recorded for a message id from its backend API.
func sentRaw(t *testing.T, srv *awstest.Server, messageID string) []byte {
	t.Helper()
	if messageID == "" {
		return nil
	}
	resp, err := http.Get(srv.URL + "/moto-api/data.json")
	if err != nil {
		t.Fatalf("moto data: %v", err)
	}
	defer resp.Body.Close()
	var data struct {
		SES struct {
			RawMessage []struct {
				ID           string   `json:"id"`
				RawData      string   `json:"raw_data"`
				Source       string   `json:"source"`
				Destinations []string `json:"destinations"`
			} `json:"RawMessage"`
		} `json:"ses"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&data); err != nil {
		t.Fatalf("decode moto data: %v", err)
	}
	for _, m := range data.SES.RawMessage {
		if m.ID == messageID {
			return []byte(m.RawData)
		}
	}
	return nil
}

func TestContract(t *testing.T) {
	mailtest.Run(t, func(t *testing.T) (mail.Mailer, mailtest.Inspect) {
		client, srv := newClient(t)
		return New(client, ""), func(t *testing.T, _, messageID string) []byte {
			return sentRaw(t, srv, messageID)
		}
	})
}

func TestConfigurationSetAndRecipients(t *testing.T) {
	client, _ := newClient(t)
	var got *sesv2.SendEmailInput
	spy := apiFunc(func(ctx context.Context, in *sesv2.SendEmailInput, opts ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error) {
		got = in
		return client.SendEmail(ctx, in, opts...)
	})
	out := mail.Outgoing{EmailID: "e1", From: "hello@sender.example",
		Recipients: []string{"to@x.test", "cc@x.test", "bcc@x.test"}, To: []string{"to@x.test"},
		Raw: []byte("From: hello@sender.example\r\nTo: to@x.test\r\nSubject: s\r\n\r\nbody\r\n")}
	id, err := NewWithAPI(spy, "mailroom").Send(context.Background(), out)
	if err != nil || id == "" {
		t.Fatalf("Send = %q, %v", id, err)
	}
	if aws.ToString(got.ConfigurationSetName) != "mailroom" {
		t.Errorf("configuration set = %v", got.ConfigurationSetName)
	}
	if fmt.Sprint(got.Destination.ToAddresses) != fmt.Sprint(out.Recipients) {
		t.Errorf("destination = %v", got.Destination.ToAddresses)
	}
	if _, err := NewWithAPI(spy, "").Send(context.Background(), out); err != nil || got.ConfigurationSetName != nil {
		t.Errorf("empty configuration set sent as %v (%v)", got.ConfigurationSetName, err)
	}
}

// SES takes 7-bit ASCII in the envelope: names in another script (which the API accepts and
// the message's headers encode) go out RFC 2047-encoded in the sender and not at all in the
// recipients, which are bare addresses.
func TestEnvelopeIsASCII(t *testing.T) {
	var got *sesv2.SendEmailInput
	spy := apiFunc(func(ctx context.Context, in *sesv2.SendEmailInput, opts ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error) {
		got = in
		return &sesv2.SendEmailOutput{MessageId: aws.String("m1")}, nil
	})
	out := mail.Outgoing{EmailID: "e1", From: "Zoë <hello@sender.example>",
		Recipients: []string{"Jürgen Müller <j@x.test>", "\"Ærøskøbing, Ltd\" <cc@x.test>", "plain@x.test", "Ann <ann@x.test>"}}
	if _, err := NewWithAPI(spy, "").Send(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	if from := aws.ToString(got.FromEmailAddress); from != "=?utf-8?q?Zo=C3=AB?= <hello@sender.example>" {
		t.Errorf("FromEmailAddress = %q", from)
	}
	if want := []string{"j@x.test", "cc@x.test", "plain@x.test", "ann@x.test"}; fmt.Sprint(got.Destination.ToAddresses) != fmt.Sprint(want) {
		t.Errorf("Destination = %q, want %q", got.Destination.ToAddresses, want)
	}
	for _, a := range append([]string{aws.ToString(got.FromEmailAddress)}, got.Destination.ToAddresses...) {
		for _, r := range a {
			if r > 127 {
				t.Errorf("%q is not ASCII", a)
				break
			}
		}
	}
}

func TestUnverifiedSenderIsRejected(t *testing.T) {
	client, _ := newClient(t)
	_, err := New(client, "").Send(context.Background(), mail.Outgoing{EmailID: "e2",
		From: "someone@unverified.example", Recipients: []string{"a@b.test"},
		Raw: []byte("From: someone@unverified.example\r\nSubject: s\r\n\r\nx\r\n")})
	if !errors.Is(err, mail.ErrRejected) {
		t.Fatalf("err = %v, want ErrRejected", err)
	}
}

type apiFunc func(context.Context, *sesv2.SendEmailInput, ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error)

func (f apiFunc) SendEmail(ctx context.Context, in *sesv2.SendEmailInput, opts ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error) {
	return f(ctx, in, opts...)
}

func TestErrorMapping(t *testing.T) {
	httpErr := func(status int, err error) error {
		return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: err}}
	}
	generic := func(code string) error { return &smithy.GenericAPIError{Code: code, Message: "x"} }
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"TooManyRequests", &types.TooManyRequestsException{}, mail.ErrThrottled},
		{"LimitExceeded", &types.LimitExceededException{}, mail.ErrThrottled},
		{"Throttling code", generic("Throttling"), mail.ErrThrottled},
		{"HTTP 429", httpErr(429, errors.New("slow down")), mail.ErrThrottled},
		{"MessageRejected", &types.MessageRejected{}, mail.ErrRejected},
		{"MailFromDomainNotVerified", &types.MailFromDomainNotVerifiedException{}, mail.ErrRejected},
		{"AccountSuspended", &types.AccountSuspendedException{}, mail.ErrPaused},
		{"SendingPaused", &types.SendingPausedException{}, mail.ErrPaused},
		// The deployment may not send (IAM not applied yet, a missing configuration set):
		// nothing about the message, so the emails wait instead of ending REJECTED.
		{"AccessDenied", generic("AccessDeniedException"), mail.ErrPaused},
		{"NotFound", &types.NotFoundException{}, mail.ErrPaused},
		{"HTTP 403", httpErr(403, errors.New("denied")), mail.ErrPaused},
		{"HTTP 404", httpErr(404, errors.New("no such configuration set")), mail.ErrPaused},
		{"wrapped", fmt.Errorf("operation error SESv2: SendEmail: %w", &types.MessageRejected{}), mail.ErrRejected},
		{"internal", &types.InternalServiceErrorException{}, mail.ErrAmbiguous},
		{"HTTP 500", httpErr(500, errors.New("boom")), mail.ErrAmbiguous},
		{"HTTP 400", httpErr(400, errors.New("bad")), mail.ErrRejected},
		{"timeout", context.DeadlineExceeded, mail.ErrAmbiguous},
		{"connection reset", errors.New("read tcp: connection reset by peer"), mail.ErrAmbiguous},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api := apiFunc(func(context.Context, *sesv2.SendEmailInput, ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error) {
				return nil, tc.err
			})
			_, err := NewWithAPI(api, "").Send(context.Background(), mail.Outgoing{From: "a@b.test"})
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("cause lost: %v", err)
			}
			for _, sentinel := range []error{mail.ErrThrottled, mail.ErrRejected, mail.ErrAmbiguous, mail.ErrPaused} {
				if errors.Is(err, sentinel) != (sentinel == tc.want) {
					t.Errorf("errors.Is(%v, %v) = %v", err, sentinel, !(sentinel == tc.want))
				}
			}
		})
	}
}

// TestEverySendIsTagged: each send carries the email and team ids as message tags, which SES
// copies into every event of the message, so the events find their email without headers.
func TestEverySendIsTagged(t *testing.T) {
	var got *sesv2.SendEmailInput
	api := apiFunc(func(_ context.Context, in *sesv2.SendEmailInput, _ ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error) {
		got = in
		id := "m-1"
		return &sesv2.SendEmailOutput{MessageId: &id}, nil
	})
	if _, err := NewWithAPI(api, "").Send(context.Background(), mail.Outgoing{EmailID: "emabc", TeamID: 42, From: "a@b.test"}); err != nil {
		t.Fatal(err)
	}
	tags := map[string]string{}
	for _, tg := range got.EmailTags {
		tags[*tg.Name] = *tg.Value
	}
	if tags[sesevent.EmailIDTag] != "emabc" || tags[sesevent.TeamIDTag] != "42" {
		t.Errorf("tags %v, want the email and team ids", tags)
	}
	// An event whose headers were cut finds the email by the tag.
	ev := sesevent.Event{Mail: sesevent.Mail{Tags: map[string][]string{sesevent.EmailIDTag: {"emabc"}}}}
	if ev.EmailID() != "emabc" {
		t.Errorf("EmailID from the tag = %q", ev.EmailID())
	}
}
