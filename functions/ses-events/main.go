// Command ses-events is the SESEvents Lambda function: it records the SES events the
// configuration sets publish to EventBridge (see lambdafn.SESEvents).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("SESEvents") }
