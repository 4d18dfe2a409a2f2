// Command update-contact-book is the UpdateContactBook Lambda function. It serves
// PATCH /api/v1/contactBooks/{contactBookId} behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("UpdateContactBook") }
