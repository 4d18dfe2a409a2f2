package metric_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/metric"
)

// TestEMF: each count is one line in CloudWatch's embedded metric format: the _aws metadata
// names the namespace, the Stack dimension and the metric with its unit, and the root holds the
// dimension's value and the metric's; concurrent counts never interleave lines.
func TestEMF(t *testing.T) {
	var buf bytes.Buffer
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	e := &metric.EMF{W: &buf, Stack: "mailroom-a", Now: func() time.Time { return at }}
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() { defer wg.Done(); e.Count(context.Background(), metric.EmailsSent, 2) }()
	}
	wg.Wait()
	e.Count(context.Background(), metric.EmailsSent, 0) // nothing to count: no line
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 50 {
		t.Fatalf("%d lines, want 50", len(lines))
	}
	for _, l := range lines {
		var got struct {
			AWS struct {
				Timestamp         int64
				CloudWatchMetrics []struct {
					Namespace  string
					Dimensions [][]string
					Metrics    []struct{ Name, Unit string }
				}
			} `json:"_aws"`
			Stack      string
			EmailsSent float64
			Level      string `json:"level"`
		}
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		d := got.AWS.CloudWatchMetrics
		if got.AWS.Timestamp != at.UnixMilli() || len(d) != 1 || d[0].Namespace != "Mailroom" ||
			len(d[0].Dimensions) != 1 || len(d[0].Dimensions[0]) != 1 || d[0].Dimensions[0][0] != "Stack" ||
			len(d[0].Metrics) != 1 || d[0].Metrics[0].Name != "EmailsSent" || d[0].Metrics[0].Unit != "Count" ||
			got.Stack != "mailroom-a" || got.EmailsSent != 2 || got.Level != "INFO" {
			t.Fatalf("line %s is not the EMF record of EmailsSent=2 for stack mailroom-a", l)
		}
	}
	// A nil counter counts nothing and does not fail.
	metric.Add(context.Background(), nil, metric.EmailsSent, 1)
}
