// Package lambdainvoke hands a payload to a Lambda function now, with an asynchronous
// invocation: what the schedule port's Invoke means on AWS. Lambda queues the event, retries a
// failed run twice and then sends it to the function's on-failure destination (the template
// gives the campaign-batch function the schedules' dead-letter queue).
package lambdainvoke

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/mailroom/mailroom/pkg/schedule"
)

// API is the part of the Lambda client used (a *lambda.Client satisfies it).
type API interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// New returns a function that invokes function (a name or ARN) asynchronously with a payload;
// a throttled call is marked schedule.ErrThrottled.
func New(api API, function string) func(ctx context.Context, payload []byte) error {
	return func(ctx context.Context, payload []byte) error {
		out, err := api.Invoke(ctx, &lambda.InvokeInput{
			FunctionName:   aws.String(function),
			InvocationType: types.InvocationTypeEvent,
			Payload:        payload,
		})
		if err == nil && out.StatusCode != http.StatusAccepted {
			err = fmt.Errorf("status %d, want 202", out.StatusCode)
		}
		if err == nil {
			return nil
		}
		var throttled *types.TooManyRequestsException
		var respErr *awshttp.ResponseError
		if errors.As(err, &throttled) || (errors.As(err, &respErr) && respErr.HTTPStatusCode() == http.StatusTooManyRequests) {
			return fmt.Errorf("lambda: invoke %s: %w: %w", function, schedule.ErrThrottled, err)
		}
		return fmt.Errorf("lambda: invoke %s: %w", function, err)
	}
}
