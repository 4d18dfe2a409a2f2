// Command update-template is the UpdateTemplate Lambda function. It serves
// PATCH /api/v1/templates/{id} behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("UpdateTemplate") }
