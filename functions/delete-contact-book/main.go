// Command delete-contact-book is the DeleteContactBook Lambda function. It serves
// DELETE /api/v1/contactBooks/{contactBookId} behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("DeleteContactBook") }
