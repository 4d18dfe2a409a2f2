// Package cost prices an email's life on AWS: what Mailroom's own calls cost per 1,000 emails,
// beyond SES's $0.10 per 1,000, for single sends with an Idempotency-Key, batches of 100 and a
// campaign (`make bench-cost`).
//
// The DynamoDB request units are counted, call by call, against moto (awstest.Meter). Lambda
// invocations, API Gateway requests and schedule invocations follow from the architecture and
// are listed with each scenario; Lambda's billed durations are the assumptions below.
package cost

// Prices are us-east-1 list prices in dollars, checked in on PricesDate. On-demand DynamoDB
// is after the November 2024 reduction; Lambda is arm64 (the template's architecture).
var Prices = struct {
	WRU, RRU            float64 // per request unit (on-demand)
	StorageGBMonth      float64 // DynamoDB standard table class
	LambdaRequest       float64
	LambdaGBSecond      float64 // arm64
	APIRequest          float64 // HTTP API, first 300 million a month
	ScheduleInvocation  float64 // EventBridge Scheduler, beyond the free tier
	SESPerThousandEmail float64 // for reference: the floor the rest is compared to
}{
	WRU:                 0.625 / 1e6,
	RRU:                 0.125 / 1e6,
	StorageGBMonth:      0.25,
	LambdaRequest:       0.20 / 1e6,
	LambdaGBSecond:      0.0000133334,
	APIRequest:          1.00 / 1e6,
	ScheduleInvocation:  1.00 / 1e6,
	SESPerThousandEmail: 0.10,
}

// PricesDate is when Prices were checked in.
const PricesDate = "2026-11-24"

// Function is one Lambda function's billed shape: its memory (template.yaml) and the billed
// duration of one invocation assumed here (arm64, warm, Go; the SDK calls dominate).
type Function struct {
	Name     string
	MemoryMB float64
	Seconds  float64 // billed duration of one invocation
}

// The functions an email's life invokes.
var (
	APIFunction   = Function{"an API function", 256, 0.050}
	SendWorker    = Function{"SendWorker (a batch of 10 records)", 256, 0.400}
	SESEvents     = Function{"SESEvents (one event)", 256, 0.030}
	CampaignBatch = Function{"CampaignBatch (one step of 500)", 1024, 3.0}
	// The stream's second reader applies the counts (and makes webhook calls, none here).
	StreamEvents = Function{"WebhookEvents (a batch of 100 stream records)", 256, 0.200}
	// Stream records of an email (its item's writes: created, SENDING, SENT, DELIVERED,
	// OPENED), in WebhookEvents batches of dynamo.StreamBatch.
	StreamRecords  = 5.0
	StreamBatch    = 10.0 // the event source mapping's BatchSize: records per SendWorker invocation
	CampaignStep   = 500.0
	EventsPerEmail = 3.0 // Send, Delivery, Open: each one SESEvents invocation
)
