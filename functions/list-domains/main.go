// Command list-domains is the ListDomains Lambda function. It serves
// GET /api/v1/domains behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("ListDomains") }
