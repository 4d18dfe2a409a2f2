// Command update-domain is the UpdateDomain Lambda function. It serves
// PATCH /api/v1/domains/{id} (open and click tracking) behind the API Gateway HTTP API (see
// lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("UpdateDomain") }
