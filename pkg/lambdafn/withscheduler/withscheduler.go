// Package withscheduler plugs EventBridge Scheduler into a Lambda function (lambdafn.Plug):
// scheduled emails' schedules and campaigns'. Only the functions that schedule link it.
package withscheduler

import (
	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/lambdafn"
	"github.com/mailroom/mailroom/pkg/schedule/eventbridge"
)

// build is a Scheduler of the schedules named prefix*, allowed the ops the function's ports
// name for them, targeting target.
func build(w *lambdafn.Wiring, prefix string, ops []string, target string) *eventbridge.Scheduler {
	c := scheduler.NewFromConfig(w.AWS, func(o *scheduler.Options) {
		o.APIOptions = append(o.APIOptions, lambdafn.Grant(lambdafn.ScheduleGrant(prefix, ops)))
	})
	return eventbridge.New(c, eventbridge.Config{Group: w.Config.ScheduleGroup, TargetARN: target,
		RoleARN: w.Config.ScheduleRoleARN, DeadLetterARN: w.Config.ScheduleDLQARN})
}

// Emails builds the scheduler of scheduled emails (email-*, target: ScheduledSend).
func Emails(w *lambdafn.Wiring) error {
	w.EmailScheduler = build(w, email.SchedulePrefix, w.Ports.EmailSchedules, w.Config.ScheduleTargetARN)
	return nil
}

// Campaigns builds the scheduler of campaigns' steps (campaign-*, target: CampaignBatch), with
// the invoker of a step due now when withlambda.CampaignInvoke was plugged before it.
func Campaigns(w *lambdafn.Wiring) error {
	s := build(w, campaign.SchedulePrefix, w.Ports.CampaignSchedules, w.Config.CampaignTargetARN)
	if w.CampaignInvoke != nil {
		s.WithInvoker(w.CampaignInvoke)
	}
	w.CampaignScheduler = s
	return nil
}
