// Command get-template is the GetTemplate Lambda function. It serves
// GET /api/v1/templates/{id} behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("GetTemplate") }
