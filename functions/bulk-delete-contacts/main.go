// Command bulk-delete-contacts is the BulkDeleteContacts Lambda function. It serves
// DELETE /api/v1/contactBooks/{contactBookId}/contacts/bulk behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("BulkDeleteContacts") }
