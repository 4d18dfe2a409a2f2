// Command send-worker is the SendWorker Lambda function: it delivers the QUEUED emails it is
// handed by the table's DynamoDB Stream (see lambdafn.SendWorker).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("SendWorker") }
