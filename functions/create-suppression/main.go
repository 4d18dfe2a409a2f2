// Command create-suppression is the CreateSuppression Lambda function. It serves
// POST /api/v1/suppressions behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("CreateSuppression") }
