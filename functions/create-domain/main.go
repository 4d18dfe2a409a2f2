// Command create-domain is the CreateDomain Lambda function. It serves
// POST /api/v1/domains behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("CreateDomain") }
