// Command get-contact is the GetContact Lambda function. It serves
// GET /api/v1/contactBooks/{contactBookId}/contacts/{contactId} behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("GetContact") }
