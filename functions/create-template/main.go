// Command create-template is the CreateTemplate Lambda function. It serves
// POST /api/v1/templates behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("CreateTemplate") }
