// Package eventbridge is the EventBridge Scheduler adapter of schedule.Scheduler: each schedule
// is a one-time schedule (at() expression in UTC, no flexible window) in one schedule group,
// deleted by the service after it runs, whose target receives the payload as its input. Work
// due now goes to the target through an invoker instead (pkg/schedule/lambdainvoke).
package eventbridge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/smithy-go"

	"github.com/mailroom/mailroom/pkg/schedule"
)

// ExpressionLayout formats an at() expression's time (UTC, no zone suffix).
const ExpressionLayout = "2006-01-02T15:04:05"

// Defaults for Config's retry policy.
const (
	DefaultMaxRetries  int32 = 10
	DefaultMaxEventAge int32 = 86400 // seconds, the service maximum
)

// Config says where schedules go and what they invoke.
type Config struct {
	Group         string // schedule group; empty: "default"
	TargetARN     string // what the schedule invokes (the scheduled-send function)
	RoleARN       string // role the service assumes to invoke the target
	DeadLetterARN string // SQS queue for events the target never accepted; empty: none
	MaxRetries    int32  // 0: DefaultMaxRetries; negative: no retries
	MaxEventAge   int32  // seconds; 0: DefaultMaxEventAge
}

// API is the part of the EventBridge Scheduler client the adapter uses (a *scheduler.Client
// satisfies it).
type API interface {
	CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
	UpdateSchedule(ctx context.Context, in *scheduler.UpdateScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error)
	DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error)
}

// Scheduler puts schedules into EventBridge Scheduler, and invokes the target directly for
// work due now.
type Scheduler struct {
	client API
	cfg    Config
	invoke func(ctx context.Context, payload []byte) error
}

var _ schedule.Scheduler = (*Scheduler)(nil)

// New returns a Scheduler for cfg.
func New(client *scheduler.Client, cfg Config) *Scheduler {
	return NewWithAPI(client, cfg)
}

// NewWithAPI is New for any implementation of the calls used (tests use a fake to produce
// errors moto cannot).
func NewWithAPI(client API, cfg Config) *Scheduler {
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = DefaultMaxRetries
	} else if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.MaxEventAge == 0 {
		cfg.MaxEventAge = DefaultMaxEventAge
	}
	return &Scheduler{client: client, cfg: cfg}
}

// WithInvoker sets what Invoke calls (lambdainvoke.New: an asynchronous invocation of the
// target function); without one, Invoke fails.
func (s *Scheduler) WithInvoker(invoke func(ctx context.Context, payload []byte) error) *Scheduler {
	s.invoke = invoke
	return s
}

// Invoke hands payload to the target at once through the invoker: no schedule, so no at() in
// the past.
func (s *Scheduler) Invoke(ctx context.Context, payload []byte) error {
	if s.invoke == nil {
		return errors.New("eventbridge: invoke: no invoker configured")
	}
	return s.invoke(ctx, payload)
}

// Expression returns the at() expression for t, in UTC, rounded up to the minute: EventBridge
// Scheduler fires anywhere within the minute of an at() time, so a time to the second could
// fire up to a minute early, and the target (which goes by the email's or campaign's own time)
// would only put the same time back. Rounded up, a schedule never fires before t.
func Expression(t time.Time) string {
	t = t.UTC()
	if m := t.Truncate(time.Minute); !m.Equal(t) {
		t = m.Add(time.Minute)
	}
	return "at(" + t.Format(ExpressionLayout) + ")"
}

// Put creates the schedule, or updates it when one of that name exists (a reschedule).
func (s *Scheduler) Put(ctx context.Context, sc schedule.Schedule) error {
	sc, err := schedule.Normalize(sc)
	if err != nil {
		return err
	}
	in := s.createInput(sc)
	_, err = s.client.CreateSchedule(ctx, in)
	var conflict *types.ConflictException
	if !errors.As(err, &conflict) {
		return classify("create schedule "+sc.Name, err)
	}
	// UpdateSchedule replaces every field, so it gets the same ones as CreateSchedule.
	_, err = s.client.UpdateSchedule(ctx, &scheduler.UpdateScheduleInput{
		Name:                       in.Name,
		GroupName:                  in.GroupName,
		ScheduleExpression:         in.ScheduleExpression,
		ScheduleExpressionTimezone: in.ScheduleExpressionTimezone,
		FlexibleTimeWindow:         in.FlexibleTimeWindow,
		ActionAfterCompletion:      in.ActionAfterCompletion,
		State:                      in.State,
		Target:                     in.Target,
	})
	var notFound *types.ResourceNotFoundException
	if errors.As(err, &notFound) {
		// It ran (and the service deleted it) or was deleted between our two calls. A fresh
		// client token: the SDK filled in the first one, and this is a new request.
		in.ClientToken = nil
		_, err = s.client.CreateSchedule(ctx, in)
		return classify("create schedule "+sc.Name, err)
	}
	return classify("update schedule "+sc.Name, err)
}

func (s *Scheduler) createInput(sc schedule.Schedule) *scheduler.CreateScheduleInput {
	return &scheduler.CreateScheduleInput{
		Name:                       aws.String(sc.Name),
		GroupName:                  s.group(),
		ScheduleExpression:         aws.String(Expression(sc.At)),
		ScheduleExpressionTimezone: aws.String("UTC"),
		FlexibleTimeWindow:         &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		ActionAfterCompletion:      types.ActionAfterCompletionDelete,
		State:                      types.ScheduleStateEnabled,
		Target:                     s.target(sc.Payload),
	}
}

// Delete removes the schedule; one that is missing (never created, already run) is fine.
func (s *Scheduler) Delete(ctx context.Context, name string) error {
	if err := schedule.CheckName(name); err != nil {
		return err
	}
	_, err := s.client.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{
		Name:      aws.String(name),
		GroupName: s.group(),
	})
	var notFound *types.ResourceNotFoundException
	if errors.As(err, &notFound) {
		return nil
	}
	return classify("delete schedule "+name, err)
}

func (s *Scheduler) group() *string {
	if s.cfg.Group == "" {
		return nil
	}
	return aws.String(s.cfg.Group)
}

func (s *Scheduler) target(payload []byte) *types.Target {
	t := &types.Target{
		Arn:     aws.String(s.cfg.TargetARN),
		RoleArn: aws.String(s.cfg.RoleARN),
		Input:   aws.String(string(payload)),
		RetryPolicy: &types.RetryPolicy{
			MaximumRetryAttempts:     aws.Int32(s.cfg.MaxRetries),
			MaximumEventAgeInSeconds: aws.Int32(s.cfg.MaxEventAge),
		},
	}
	if s.cfg.DeadLetterARN != "" {
		t.DeadLetterConfig = &types.DeadLetterConfig{Arn: aws.String(s.cfg.DeadLetterARN)}
	}
	return t
}

// EnsureGroup creates the schedule group name unless it exists. The deployed stack declares
// its group; the local server with BACKEND=aws and the tests call this instead.
func EnsureGroup(ctx context.Context, client *scheduler.Client, name string) error {
	_, err := client.GetScheduleGroup(ctx, &scheduler.GetScheduleGroupInput{Name: aws.String(name)})
	var notFound *types.ResourceNotFoundException
	if err == nil || !errors.As(err, &notFound) {
		return classify("get schedule group "+name, err)
	}
	_, err = client.CreateScheduleGroup(ctx, &scheduler.CreateScheduleGroupInput{Name: aws.String(name)})
	var conflict *types.ConflictException
	if errors.As(err, &conflict) {
		return nil // created meanwhile by someone else
	}
	return classify("create schedule group "+name, err)
}

// throttleCodes are the error codes for rate limits.
var throttleCodes = map[string]bool{
	"ThrottlingException":      true,
	"Throttling":               true,
	"TooManyRequestsException": true,
	"RequestLimitExceeded":     true,
}

// classify wraps err (nil stays nil), marking rate limits with schedule.ErrThrottled.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && throttleCodes[apiErr.ErrorCode()] {
		return fmt.Errorf("eventbridge: %s: %w: %w", op, schedule.ErrThrottled, err)
	}
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) && respErr.HTTPStatusCode() == http.StatusTooManyRequests {
		return fmt.Errorf("eventbridge: %s: %w: %w", op, schedule.ErrThrottled, err)
	}
	return fmt.Errorf("eventbridge: %s: %w", op, err)
}
