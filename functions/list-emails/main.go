// Command list-emails is the ListEmails Lambda function. It serves
// GET /api/v1/emails behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("ListEmails") }
