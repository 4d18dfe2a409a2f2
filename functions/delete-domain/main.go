// Command delete-domain is the DeleteDomain Lambda function. It serves
// DELETE /api/v1/domains/{id} behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("DeleteDomain") }
