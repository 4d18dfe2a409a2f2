package awstest

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/smithy-go/middleware"
)

// Calls counts AWS operations ("DynamoDB.PutItem") made through a config it is installed on,
// and lets one call at a time reach the emulator: moto applies a TransactWriteItems item by
// item and restores a table snapshot when one is cancelled, losing concurrent writes. DynamoDB
// itself is atomic; serialising calls gives moto that atomicity while goroutines still
// interleave between calls.
type Calls struct {
	mu     sync.Mutex
	n      map[string]int
	serial sync.Mutex
}

// Install adds the middleware to cfg (every client made from it afterwards).
func (c *Calls) Install(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("awstestCalls",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				c.mu.Lock()
				if c.n == nil {
					c.n = map[string]int{}
				}
				c.n[middleware.GetServiceID(ctx)+"."+middleware.GetOperationName(ctx)]++
				c.mu.Unlock()
				c.serial.Lock()
				defer c.serial.Unlock()
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
}

// Reset returns the counts so far and starts again from zero.
func (c *Calls) Reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// Invocations records the payloads of the Lambda Invoke calls made through a config it is
// installed on (the calls still reach the emulator, which accepts them and runs nothing).
type Invocations struct {
	mu       sync.Mutex
	payloads []Invocation
}

// Invocation is one Lambda Invoke call.
type Invocation struct {
	Function, Type string
	Payload        []byte
}

// Install adds the middleware to cfg (every client made from it afterwards).
func (v *Invocations) Install(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("awstestInvocations",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				if inv, ok := in.Parameters.(*lambda.InvokeInput); ok && err == nil {
					v.mu.Lock()
					v.payloads = append(v.payloads, Invocation{Function: aws.ToString(inv.FunctionName),
						Type: string(inv.InvocationType), Payload: inv.Payload})
					v.mu.Unlock()
				}
				return out, md, err
			}), middleware.After)
	})
}

// Take returns the invocations so far and forgets them.
func (v *Invocations) Take() []Invocation {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := v.payloads
	v.payloads = nil
	return out
}
