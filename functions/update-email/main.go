// Command update-email is the UpdateEmail Lambda function. It serves
// PATCH /api/v1/emails/{emailId} (reschedule a SCHEDULED email) behind the API Gateway HTTP API
// (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("UpdateEmail") }
