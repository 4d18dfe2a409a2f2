// Command delete-campaign is the DeleteCampaign Lambda function. It serves
// DELETE /api/v1/campaigns/{campaignId} behind the API Gateway HTTP API (see lambdafn.HTTP).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("DeleteCampaign") }
