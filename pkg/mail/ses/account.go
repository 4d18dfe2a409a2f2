package ses

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/mailroom/mailroom/pkg/mail"
)

// AccountAPI is the part of the SES v2 client Account uses (a *sesv2.Client satisfies it).
type AccountAPI interface {
	GetAccount(ctx context.Context, in *sesv2.GetAccountInput, optFns ...func(*sesv2.Options)) (*sesv2.GetAccountOutput, error)
}

// Account reads the SES account's sending limits with GetAccount.
type Account struct{ Client AccountAPI }

var _ mail.Account = Account{}

// Quota implements mail.Account.
func (a Account) Quota(ctx context.Context) (mail.Quota, error) {
	out, err := a.Client.GetAccount(ctx, &sesv2.GetAccountInput{})
	if err != nil {
		return mail.Quota{}, fmt.Errorf("ses: get account: %w", err)
	}
	q := mail.Quota{SendingEnabled: out.SendingEnabled}
	if sq := out.SendQuota; sq != nil {
		q.MaxSendRate, q.Max24HourSend, q.SentLast24Hours = sq.MaxSendRate, sq.Max24HourSend, sq.SentLast24Hours
	}
	return q, nil
}
