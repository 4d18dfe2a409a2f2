// Command get-campaign is the GetCampaign Lambda function. It serves
// GET /api/v1/campaigns/{campaignId} behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("GetCampaign") }
