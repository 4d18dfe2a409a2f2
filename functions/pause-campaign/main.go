// Command pause-campaign is the PauseCampaign Lambda function. It serves
// POST /api/v1/campaigns/{campaignId}/pause behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("PauseCampaign") }
