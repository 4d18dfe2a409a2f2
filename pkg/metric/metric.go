// Package metric counts what Mailroom does (emails accepted, sent, delivered, bounced,
// complained) as CloudWatch metrics. On Lambda a count is one log line in CloudWatch's embedded
// metric format, which CloudWatch Logs turns into a metric in namespace Mailroom with the
// dimension Stack (the deployment's stack name): no API call, no extra latency. Elsewhere
// (the local server, tests) counts go nowhere unless a Counter is given.
package metric

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Namespace is the CloudWatch namespace of Mailroom's metrics.
const Namespace = "Mailroom"

// The metrics: emails per outcome. Counted where the outcome is recorded, once per email
// (a replayed event or a retried step is not counted again).
const (
	EmailsAccepted   = "EmailsAccepted"   // written QUEUED or SCHEDULED by a send or a campaign step
	EmailsSent       = "EmailsSent"       // handed to SES (or the outbox)
	EmailsDelivered  = "EmailsDelivered"  // SES Delivery
	EmailsBounced    = "EmailsBounced"    // SES Bounce
	EmailsComplained = "EmailsComplained" // SES Complaint
	EmailsFailed     = "EmailsFailed"     // given up on
	// SendingPaused counts the times a send worker found the account unable to send (SES
	// sending paused or suspended, the 24-hour quota used up); an alarm watches it.
	SendingPaused = "SendingPaused"
)

// Emails lists the email metrics in the order the dashboard shows them.
var Emails = []string{EmailsAccepted, EmailsSent, EmailsDelivered, EmailsBounced, EmailsComplained, EmailsFailed}

// Counter counts.
type Counter interface {
	Count(ctx context.Context, name string, n int)
}

// Add counts n on c; a nil c counts nothing.
func Add(ctx context.Context, c Counter, name string, n int) {
	if c != nil {
		c.Count(ctx, name, n)
	}
}

// Discard counts nothing.
type Discard struct{}

// Count does nothing.
func (Discard) Count(context.Context, string, int) {}

// EMF writes each count as one line of CloudWatch's embedded metric format to W (the Lambda
// function's standard output, which Lambda sends to its log group).
type EMF struct {
	W     io.Writer
	Stack string // the Stack dimension
	Now   func() time.Time

	mu sync.Mutex
}

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

type emfMeta struct {
	Timestamp         int64          `json:"Timestamp"`
	CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
}

// Count writes {"_aws":{...},"Stack":"<stack>","<name>":n,"level":"INFO"} (the level keeps it
// through Lambda's log-level filter).
func (e *EMF) Count(_ context.Context, name string, n int) {
	if n <= 0 {
		return
	}
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	line := map[string]any{
		"_aws": emfMeta{Timestamp: now().UnixMilli(), CloudWatchMetrics: []emfDirective{{
			Namespace: Namespace, Dimensions: [][]string{{"Stack"}},
			Metrics: []emfMetric{{Name: name, Unit: "Count"}},
		}}},
		"Stack": e.Stack,
		name:    n,
		"level": "INFO",
		"msg":   "metric",
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.W.Write(append(b, '\n'))
}
