// Command create-campaign is the CreateCampaign Lambda function. It serves
// POST /api/v1/campaigns behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("CreateCampaign") }
