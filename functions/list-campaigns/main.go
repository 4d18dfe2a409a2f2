// Command list-campaigns is the ListCampaigns Lambda function. It serves
// GET /api/v1/campaigns behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("ListCampaigns") }
