// Command list-templates is the ListTemplates Lambda function. It serves
// GET /api/v1/templates behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("ListTemplates") }
