// Command get-email is the GetEmail Lambda function. It serves
// GET /api/v1/emails/{emailId} behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("GetEmail") }
