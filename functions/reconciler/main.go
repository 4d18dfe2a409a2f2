// Command reconciler is the Reconciler Lambda function: every five minutes it puts emails left
// QUEUED or SENDING back through delivery (see lambdafn.Periodic, deliver.Worker.Reconcile).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("Reconciler") }
