// Command get-domain is the GetDomain Lambda function. It serves
// GET /api/v1/domains/{id} behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("GetDomain") }
