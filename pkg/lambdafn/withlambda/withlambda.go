// Package withlambda plugs the direct invocation of the campaign-batch function into a Lambda
// function (lambdafn.Plug): a campaign step that is due now is invoked, not scheduled at a
// past time. Only the functions whose ports say CampaignInvoke link it.
package withlambda

import (
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/mailroom/mailroom/pkg/lambdafn"
	"github.com/mailroom/mailroom/pkg/schedule/lambdainvoke"
)

// CampaignInvoke builds the invoker of campaign steps (target: CampaignBatch), allowed Invoke
// only. Plug it before withscheduler.Campaigns, which hands it to the campaign scheduler.
func CampaignInvoke(w *lambdafn.Wiring) error {
	c := lambda.NewFromConfig(w.AWS, func(o *lambda.Options) {
		o.APIOptions = append(o.APIOptions, lambdafn.Grant(lambdafn.OpsGrant("Invoke")))
	})
	w.CampaignInvoke = lambdainvoke.New(c, w.Config.CampaignTargetARN)
	return nil
}
