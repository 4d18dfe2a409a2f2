// Package ses is the Identities adapter for SES v2: one email identity per domain, signed with
// our own DKIM key (BYODKIM), with an optional custom MAIL FROM domain.
package ses

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"

	"github.com/mailroom/mailroom/pkg/identity"
)

// ErrNotFound is returned by Get for a domain SES does not know.
var ErrNotFound = errors.New("ses identity: not found")

// API statuses (identity.Status values).
const (
	statusNotStarted = "NOT_STARTED"
	statusPending    = "PENDING"
	statusSuccess    = "SUCCESS"
)

// Identities manages SES v2 domain identities. The client's region is the one used: a domain's
// region is chosen by giving the adapter a client for that region.
type Identities struct {
	client    *sesv2.Client
	log       *slog.Logger
	namespace string
}

// OwnerTag is the identity tag that records who registered it: "<namespace>/<owner>".
const OwnerTag = "mailroom-owner"

var _ identity.Identities = (*Identities)(nil)

// New returns the adapter. log receives the warning about an unsupported MAIL FROM call (nil:
// slog.Default()). namespace tells this deployment's identities from another's in the same
// account (the table name): owners are recorded as "<namespace>/<owner>".
func New(client *sesv2.Client, log *slog.Logger, namespace string) *Identities {
	if log == nil {
		log = slog.Default()
	}
	return &Identities{client: client, log: log, namespace: namespace}
}

func (s *Identities) ownerTag(owner string) string { return s.namespace + "/" + owner }

// ownedBy reports whether the identity's owner tag is owner's; ErrNotFound (wrapped) when SES
// has no such identity.
func (s *Identities) ownedBy(ctx context.Context, domain, owner string) (bool, error) {
	out, err := s.client.GetEmailIdentity(ctx, &sesv2.GetEmailIdentityInput{EmailIdentity: aws.String(domain)})
	if err != nil {
		var nf *types.NotFoundException
		if errors.As(err, &nf) {
			return false, fmt.Errorf("ses identity: get %s: %w: %w", domain, ErrNotFound, err)
		}
		return false, fmt.Errorf("ses identity: get %s: %w", domain, err)
	}
	for _, t := range out.Tags {
		if aws.ToString(t.Key) == OwnerTag {
			return aws.ToString(t.Value) == s.ownerTag(owner), nil
		}
	}
	return false, nil
}

// Create registers the domain with our DKIM key, tagged with its owner, and sets its MAIL FROM
// domain. An identity that already exists is the owner's retry only if its tag says so; any
// other (another team's, another deployment's, one made outside Mailroom and perhaps verified
// already) is identity.ErrTaken and left as it is.
func (s *Identities) Create(ctx context.Context, r identity.Registration) (identity.Status, error) {
	// Whose is it, if it exists: the account's identity is never taken over.
	ours, err := s.ownedBy(ctx, r.Domain, r.Owner)
	switch {
	case errors.Is(err, ErrNotFound):
		if err := s.create(ctx, r); err != nil {
			return identity.Status{}, err
		}
	case err != nil:
		return identity.Status{}, err
	case !ours:
		return identity.Status{}, fmt.Errorf("ses identity: create %s: %w", r.Domain, identity.ErrTaken)
	}
	if r.MailFrom != "" {
		_, err := s.client.PutEmailIdentityMailFromAttributes(ctx, &sesv2.PutEmailIdentityMailFromAttributesInput{
			EmailIdentity:       aws.String(r.Domain),
			MailFromDomain:      aws.String(r.MailFrom),
			BehaviorOnMxFailure: types.BehaviorOnMxFailureUseDefaultValue,
		})
		switch {
		case err == nil:
		case notImplemented(err):
			// Emulators (moto 5.2) have no route for this call. Real SES always has it, so this
			// only ever tolerates a test endpoint; the domain then reports SPF NOT_STARTED.
			s.log.WarnContext(ctx, "ses identity: MAIL FROM not supported by the endpoint", "domain", r.Domain)
		default:
			return identity.Status{}, fmt.Errorf("ses identity: mail from %s: %w", r.Domain, err)
		}
	}
	return s.Get(ctx, r.Domain)
}

// create makes the identity; one that appeared in between (AlreadyExists) is the owner's retry
// only if its tag says so.
func (s *Identities) create(ctx context.Context, r identity.Registration) error {
	_, err := s.client.CreateEmailIdentity(ctx, &sesv2.CreateEmailIdentityInput{
		EmailIdentity: aws.String(r.Domain),
		DkimSigningAttributes: &types.DkimSigningAttributes{
			DomainSigningSelector:   aws.String(r.Selector),
			DomainSigningPrivateKey: aws.String(r.PrivateKey),
		},
		Tags: []types.Tag{{Key: aws.String(OwnerTag), Value: aws.String(s.ownerTag(r.Owner))}},
	})
	var exists *types.AlreadyExistsException
	if err == nil {
		return nil
	}
	if !errors.As(err, &exists) {
		return fmt.Errorf("ses identity: create %s: %w", r.Domain, err)
	}
	ours, err := s.ownedBy(ctx, r.Domain, r.Owner)
	if err != nil {
		return err
	}
	if !ours {
		return fmt.Errorf("ses identity: create %s: %w", r.Domain, identity.ErrTaken)
	}
	return nil
}

// Get returns SES's view of the domain; ErrNotFound (wrapped) when SES has no such identity.
func (s *Identities) Get(ctx context.Context, domain string) (identity.Status, error) {
	out, err := s.client.GetEmailIdentity(ctx, &sesv2.GetEmailIdentityInput{EmailIdentity: aws.String(domain)})
	if err != nil {
		var nf *types.NotFoundException
		if errors.As(err, &nf) {
			return identity.Status{}, fmt.Errorf("ses identity: get %s: %w: %w", domain, ErrNotFound, err)
		}
		return identity.Status{}, fmt.Errorf("ses identity: get %s: %w", domain, err)
	}
	return statusOf(out), nil
}

// Delete removes the owner's identity; one that does not exist is already deleted, and one
// whose tag names another owner is left alone (deleting it would take an account-wide identity
// from whoever owns it).
func (s *Identities) Delete(ctx context.Context, domain, owner string) error {
	ours, err := s.ownedBy(ctx, domain, owner)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !ours {
		s.log.WarnContext(ctx, "ses identity: not deleted, another owner's", "domain", domain)
		return nil
	}
	_, err = s.client.DeleteEmailIdentity(ctx, &sesv2.DeleteEmailIdentityInput{EmailIdentity: aws.String(domain)})
	var nf *types.NotFoundException
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("ses identity: delete %s: %w", domain, err)
	}
	return nil
}

// statusOf maps GetEmailIdentity to the API statuses. A domain identity is verified through its
// DKIM records, so without an explicit verification status the DKIM status is the domain's.
func statusOf(out *sesv2.GetEmailIdentityOutput) identity.Status {
	st := identity.Status{DKIMStatus: statusNotStarted, SPFStatus: statusNotStarted}
	if out.DkimAttributes != nil && out.DkimAttributes.Status != "" {
		st.DKIMStatus = string(out.DkimAttributes.Status)
	}
	if m := out.MailFromAttributes; m != nil && aws.ToString(m.MailFromDomain) != "" && m.MailFromDomainStatus != "" {
		st.SPFStatus = string(m.MailFromDomainStatus)
	}
	switch {
	case out.VerifiedForSendingStatus:
		st.Status = statusSuccess
	case out.VerificationStatus != "":
		st.Status = string(out.VerificationStatus)
	case st.DKIMStatus != statusNotStarted:
		st.Status = st.DKIMStatus
	default:
		st.Status = statusPending
	}
	if out.VerificationInfo != nil && out.VerificationInfo.ErrorType != "" {
		st.VerificationError = string(out.VerificationInfo.ErrorType)
	}
	return st
}

// notImplemented reports an endpoint that has no such operation: a 404 or 501 that is not
// SES's own NotFoundException, or an explicit not-implemented code.
func notImplemented(err error) bool {
	var nf *types.NotFoundException
	if errors.As(err, &nf) {
		return false
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "NotImplemented", "NotImplementedException", "UnknownOperationException", "InvalidAction":
			return true
		}
	}
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) {
		code := respErr.HTTPStatusCode()
		return code == http.StatusNotFound || code == http.StatusNotImplemented
	}
	return false
}
