// Command bulk-create-contacts is the BulkCreateContacts Lambda function. It serves
// POST /api/v1/contactBooks/{contactBookId}/contacts/bulk behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("BulkCreateContacts") }
