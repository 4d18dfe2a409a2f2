// Command list-suppressions is the ListSuppressions Lambda function. It serves
// GET /api/v1/suppressions behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("ListSuppressions") }
