// Command create-contact-book is the CreateContactBook Lambda function. It serves
// POST /api/v1/contactBooks behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("CreateContactBook") }
