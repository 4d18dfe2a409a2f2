// Command campaign-batch is the CampaignBatch Lambda function: the target of campaigns'
// EventBridge Scheduler schedules; it runs the batch step the payload names and the ones after
// it, or schedules the next (see lambdafn.CampaignBatch, campaign.Service.Fire).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("CampaignBatch") }
