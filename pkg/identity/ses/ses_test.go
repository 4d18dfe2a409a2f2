package ses

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/mailroom/mailroom/pkg/awstest"
	"github.com/mailroom/mailroom/pkg/identity"
	"github.com/mailroom/mailroom/pkg/identity/identitytest"
)

func TestMain(m *testing.M) { awstest.Main(m) }

func newIdentities(t *testing.T) (*Identities, *sesv2.Client) {
	t.Helper()
	client := sesv2.NewFromConfig(awstest.Shared(t).Config(t), func(o *sesv2.Options) {
		o.HTTPClient = &http.Client{Transport: EmulatorTransport(http.DefaultTransport)}
	})
	return New(client, slog.New(slog.NewTextHandler(io.Discard, nil)), "test-table"), client
}

// TestAnIdentityMadeOutsideMailroomIsNotTakenOver: an identity the account already has without
// Mailroom's owner tag (made in the console, perhaps verified and sending) is refused to a team
// that registers the name, and a team's delete does not remove it; nor is one of another
// deployment (another namespace) in the same account.
func TestAnIdentityMadeOutsideMailroomIsNotTakenOver(t *testing.T) {
	ids, client := newIdentities(t)
	ctx := context.Background()
	outside := identitytest.Registration(t, identitytest.Domain(t))
	if _, err := client.CreateEmailIdentity(ctx, &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(outside.Domain)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ids.Create(ctx, outside); !errors.Is(err, identity.ErrTaken) {
		t.Fatalf("Create over an identity made outside: %v, want ErrTaken", err)
	}
	if err := ids.Delete(ctx, outside.Domain, outside.Owner); err != nil {
		t.Fatal(err)
	}
	if _, err := client.GetEmailIdentity(ctx, &sesv2.GetEmailIdentityInput{EmailIdentity: aws.String(outside.Domain)}); err != nil {
		t.Fatalf("the identity made outside was deleted: %v", err)
	}
	staging := New(client, slog.New(slog.NewTextHandler(io.Discard, nil)), "staging-table")
	r := identitytest.Registration(t, identitytest.Domain(t))
	if _, err := staging.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := ids.Create(ctx, r); !errors.Is(err, identity.ErrTaken) {
		t.Fatalf("Create over another deployment's identity (same team id): %v, want ErrTaken", err)
	}
}

func TestContract(t *testing.T) {
	identitytest.Run(t, func(t *testing.T) identity.Identities {
		ids, _ := newIdentities(t)
		return ids
	})
}

func TestCreateUsesBYODKIM(t *testing.T) {
	ids, client := newIdentities(t)
	r := identitytest.Registration(t, identitytest.Domain(t))
	st, err := ids.Create(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if st.DKIMStatus != "SUCCESS" {
		// moto marks a BYODKIM identity's DKIM SUCCESS at once; an AWS-generated key would be
		// NOT_STARTED there, so this shows the key went through.
		t.Errorf("DKIMStatus = %s", st.DKIMStatus)
	}
	out, err := client.GetEmailIdentity(context.Background(), &sesv2.GetEmailIdentityInput{EmailIdentity: aws.String(r.Domain)})
	if err != nil {
		t.Fatal(err)
	}
	if out.DkimAttributes == nil || !out.DkimAttributes.SigningEnabled {
		t.Errorf("DKIM signing not enabled: %+v", out.DkimAttributes)
	}
}

func TestGetUnknownIsNotFound(t *testing.T) {
	ids, _ := newIdentities(t)
	_, err := ids.Get(context.Background(), identitytest.Domain(t))
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("Get unknown = %v, want ErrNotFound", err)
	}
	r := identitytest.Registration(t, identitytest.Domain(t))
	if _, err := ids.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if err := ids.Delete(context.Background(), r.Domain, r.Owner); err != nil {
		t.Fatal(err)
	}
	if _, err := ids.Get(context.Background(), r.Domain); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Delete = %v, want ErrNotFound", err)
	}
}

func TestStatusMapping(t *testing.T) {
	mailFrom := func(status types.MailFromDomainStatus) *types.MailFromAttributes {
		return &types.MailFromAttributes{MailFromDomain: aws.String("mail.x.test"), MailFromDomainStatus: status}
	}
	cases := []struct {
		name string
		out  sesv2.GetEmailIdentityOutput
		want identity.Status
	}{
		{"verified", sesv2.GetEmailIdentityOutput{VerifiedForSendingStatus: true,
			DkimAttributes:     &types.DkimAttributes{Status: types.DkimStatusSuccess},
			MailFromAttributes: mailFrom(types.MailFromDomainStatusSuccess)},
			identity.Status{Status: "SUCCESS", DKIMStatus: "SUCCESS", SPFStatus: "SUCCESS"}},
		{"pending", sesv2.GetEmailIdentityOutput{VerificationStatus: types.VerificationStatusPending,
			DkimAttributes:     &types.DkimAttributes{Status: types.DkimStatusPending},
			MailFromAttributes: mailFrom(types.MailFromDomainStatusPending)},
			identity.Status{Status: "PENDING", DKIMStatus: "PENDING", SPFStatus: "PENDING"}},
		{"failed with reason", sesv2.GetEmailIdentityOutput{VerificationStatus: types.VerificationStatusFailed,
			DkimAttributes:     &types.DkimAttributes{Status: types.DkimStatusFailed},
			MailFromAttributes: mailFrom(types.MailFromDomainStatusFailed),
			VerificationInfo:   &types.VerificationInfo{ErrorType: types.VerificationErrorHostNotFound}},
			identity.Status{Status: "FAILED", DKIMStatus: "FAILED", SPFStatus: "FAILED", VerificationError: "HOST_NOT_FOUND"}},
		{"temporary failure from DKIM", sesv2.GetEmailIdentityOutput{
			DkimAttributes: &types.DkimAttributes{Status: types.DkimStatusTemporaryFailure}},
			identity.Status{Status: "TEMPORARY_FAILURE", DKIMStatus: "TEMPORARY_FAILURE", SPFStatus: "NOT_STARTED"}},
		{"nothing yet", sesv2.GetEmailIdentityOutput{},
			identity.Status{Status: "PENDING", DKIMStatus: "NOT_STARTED", SPFStatus: "NOT_STARTED"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := statusOf(&tc.out); got != tc.want {
				t.Errorf("statusOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestNotImplemented(t *testing.T) {
	resp := func(status int, err error) error {
		return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: err}}
	}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"route missing (moto)", resp(404, &smithy.GenericAPIError{Code: "404"}), true},
		{"501", resp(501, errors.New("x")), true},
		{"NotImplemented code", &smithy.GenericAPIError{Code: "NotImplemented"}, true},
		{"SES NotFound", resp(404, &types.NotFoundException{}), false},
		{"bad request", resp(400, &types.BadRequestException{}), false},
	}
	for _, tc := range cases {
		if got := notImplemented(tc.err); got != tc.want {
			t.Errorf("%s: notImplemented = %v", tc.name, got)
		}
	}
}
