// Command delete-suppression is the DeleteSuppression Lambda function. It serves
// DELETE /api/v1/suppressions/{email} behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("DeleteSuppression") }
