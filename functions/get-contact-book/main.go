// Command get-contact-book is the GetContactBook Lambda function. It serves
// GET /api/v1/contactBooks/{contactBookId} behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("GetContactBook") }
