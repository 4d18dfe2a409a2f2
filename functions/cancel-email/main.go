// Command cancel-email is the CancelEmail Lambda function. It serves
// POST /api/v1/emails/{emailId}/cancel behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("CancelEmail") }
