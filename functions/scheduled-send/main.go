// Command scheduled-send is the ScheduledSend Lambda function: the target of the one-time
// EventBridge Scheduler schedules of scheduled emails; it queues the email the payload names
// (see lambdafn.ScheduledSend).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("ScheduledSend") }
