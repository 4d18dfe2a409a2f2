// Command hello is the baseline of the cold start benchmark: an aws-lambda-go hello-world,
// built with the same flags as Mailroom's functions.
package main

import "github.com/aws/aws-lambda-go/lambda"

func main() { lambda.Start(func() (string, error) { return "hello", nil }) }
