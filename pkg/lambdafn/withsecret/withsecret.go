// Package withsecret plugs the unsubscribe keyring into a Lambda function (lambdafn.Plug): it
// is read from Secrets Manager once per execution environment, at its first use (outside the
// init phase, which stays as short as a function without it), never from the function's
// environment, which anyone allowed lambda:GetFunctionConfiguration reads. Only the functions
// whose ports name Unsubscribe link it.
package withsecret

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/lambdafn"
)

// readTimeout bounds a read of the secret.
const readTimeout = 5 * time.Second

// Unsubscribe gives the function the keyring of UNSUBSCRIBE_SECRET_ID (its client allowed
// GetSecretValue only), read at first use and again for a key rotated in later.
func Unsubscribe(w *lambdafn.Wiring) error {
	c := secretsmanager.NewFromConfig(w.AWS, func(o *secretsmanager.Options) {
		o.APIOptions = append(o.APIOptions, lambdafn.Grant(lambdafn.OpsGrant("GetSecretValue")))
	})
	id := w.Config.UnsubscribeSecretID
	load := func(ctx context.Context) (campaign.Keyring, error) {
		ctx, cancel := context.WithTimeout(ctx, readTimeout)
		defer cancel()
		out, err := c.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
		if err != nil {
			return campaign.Keyring{}, fmt.Errorf("read the unsubscribe secret: %w", err)
		}
		return campaign.ParseKeyring(aws.ToString(out.SecretString))
	}
	w.Unsubscribe = &campaign.KeySource{Load: load, Now: w.Now}
	return nil
}
