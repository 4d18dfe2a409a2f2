// Command unsubscribe is the Unsubscribe Lambda function. It serves the public (no API key)
// GET /unsubscribe/{token} (a confirmation page) and POST /unsubscribe/{token} (the one-click
// unsubscribe of RFC 8058 and the page's form) behind the API Gateway HTTP API.
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("Unsubscribe") }
