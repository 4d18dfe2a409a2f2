// Command delete-contact is the DeleteContact Lambda function. It serves
// DELETE /api/v1/contactBooks/{contactBookId}/contacts/{contactId} behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("DeleteContact") }
