// Command authorizer is the Authorizer Lambda function: the HTTP API's Lambda authorizer, which
// authenticates the API key of every request but the public ones (see lambdafn.Authorizer).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("Authorizer") }
