// Command list-contact-books is the ListContactBooks Lambda function. It serves
// GET /api/v1/contactBooks behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("ListContactBooks") }
