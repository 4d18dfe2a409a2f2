// Command list-contacts is the ListContacts Lambda function. It serves
// GET /api/v1/contactBooks/{contactBookId}/contacts behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("ListContacts") }
