// Command send-batch is the SendBatch Lambda function. It serves
// POST /api/v1/emails/batch behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("SendBatch") }
