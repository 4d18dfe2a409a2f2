// Command schedule-campaign is the ScheduleCampaign Lambda function. It serves
// POST /api/v1/campaigns/{campaignId}/schedule behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("ScheduleCampaign") }
