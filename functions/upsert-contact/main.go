// Command upsert-contact is the UpsertContact Lambda function. It serves
// PUT /api/v1/contactBooks/{contactBookId}/contacts/{contactId} behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("UpsertContact") }
