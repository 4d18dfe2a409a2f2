// Command send-email is the SendEmail Lambda function. It serves
// POST /api/v1/emails behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("SendEmail") }
