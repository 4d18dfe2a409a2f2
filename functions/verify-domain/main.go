// Command verify-domain is the VerifyDomain Lambda function. It serves
// PUT /api/v1/domains/{id}/verify behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("VerifyDomain") }
