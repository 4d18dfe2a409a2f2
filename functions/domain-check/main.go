// Command domain-check is the DomainCheck Lambda function: every hour it refreshes every
// domain's verification status from SES (see lambdafn.Periodic, domain.Service.RefreshAll).
package main

import "github.com/mailroom/mailroom/pkg/lambdafn"

func main() { lambdafn.Main("DomainCheck") }
