// Command delete-template is the DeleteTemplate Lambda function. It serves
// DELETE /api/v1/templates/{id} behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("DeleteTemplate") }
