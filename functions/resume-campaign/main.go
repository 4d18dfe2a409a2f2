// Command resume-campaign is the ResumeCampaign Lambda function. It serves
// POST /api/v1/campaigns/{campaignId}/resume behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("ResumeCampaign") }
