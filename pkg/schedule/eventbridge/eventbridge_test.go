package eventbridge

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/smithy-go"

	"github.com/mailroom/mailroom/pkg/awstest"
	"github.com/mailroom/mailroom/pkg/schedule"
	"github.com/mailroom/mailroom/pkg/schedule/lambdainvoke"
	"github.com/mailroom/mailroom/pkg/schedule/scheduletest"
)

func TestMain(m *testing.M) { awstest.Main(m) }

const (
	targetARN = "arn:aws:lambda:us-east-1:123456789012:function:mailroom-scheduled-send"
	roleARN   = "arn:aws:iam::123456789012:role/mailroom-scheduler"
	dlqARN    = "arn:aws:sqs:us-east-1:123456789012:mailroom-scheduler-dlq"
)

var groupSeq atomic.Int64

// newGroup returns a client on the shared moto server and a schedule group of its own for
// the calling test.
func newGroup(t *testing.T) (*scheduler.Client, string) {
	t.Helper()
	client := scheduler.NewFromConfig(awstest.Shared(t).Config(t))
	group := fmt.Sprintf("mailroom-test-%d", groupSeq.Add(1))
	if err := EnsureGroup(context.Background(), client, group); err != nil {
		t.Fatalf("EnsureGroup: %v", err)
	}
	return client, group
}

var atExpr = regexp.MustCompile(`^at\((\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\)$`)

// inspect reads a schedule back with GetSchedule and checks every field Put sets.
func inspect(client *scheduler.Client, cfg Config) scheduletest.Inspect {
	return func(t *testing.T, name string) (schedule.Schedule, bool) {
		t.Helper()
		out, err := client.GetSchedule(context.Background(), &scheduler.GetScheduleInput{
			Name: aws.String(name), GroupName: aws.String(cfg.Group),
		})
		var notFound *types.ResourceNotFoundException
		if errors.As(err, &notFound) {
			return schedule.Schedule{}, false
		}
		if err != nil {
			t.Fatalf("GetSchedule %s: %v", name, err)
		}
		m := atExpr.FindStringSubmatch(aws.ToString(out.ScheduleExpression))
		if m == nil {
			t.Fatalf("%s: expression %q is not at(yyyy-mm-ddThh:mm:ss)", name, aws.ToString(out.ScheduleExpression))
		}
		at, err := time.ParseInLocation(ExpressionLayout, m[1], time.UTC)
		if err != nil {
			t.Fatalf("%s: parse %q: %v", name, m[1], err)
		}
		check := func(field, got, want string) {
			t.Helper()
			if got != want {
				t.Errorf("%s: %s = %q, want %q", name, field, got, want)
			}
		}
		check("timezone", aws.ToString(out.ScheduleExpressionTimezone), "UTC")
		check("group", aws.ToString(out.GroupName), cfg.Group)
		check("action after completion", string(out.ActionAfterCompletion), string(types.ActionAfterCompletionDelete))
		check("state", string(out.State), string(types.ScheduleStateEnabled))
		if out.FlexibleTimeWindow == nil {
			t.Errorf("%s: no flexible time window", name)
		} else {
			check("flexible time window", string(out.FlexibleTimeWindow.Mode), string(types.FlexibleTimeWindowModeOff))
		}
		tg := out.Target
		if tg == nil {
			t.Fatalf("%s: no target", name)
		}
		check("target arn", aws.ToString(tg.Arn), cfg.TargetARN)
		check("role arn", aws.ToString(tg.RoleArn), cfg.RoleARN)
		if tg.RetryPolicy == nil {
			t.Errorf("%s: no retry policy", name)
		} else {
			check("max retries", fmt.Sprint(aws.ToInt32(tg.RetryPolicy.MaximumRetryAttempts)), fmt.Sprint(cfg.MaxRetries))
			check("max event age", fmt.Sprint(aws.ToInt32(tg.RetryPolicy.MaximumEventAgeInSeconds)), fmt.Sprint(cfg.MaxEventAge))
		}
		var dlq string
		if tg.DeadLetterConfig != nil {
			dlq = aws.ToString(tg.DeadLetterConfig.Arn)
		}
		check("dead-letter arn", dlq, cfg.DeadLetterARN)
		return schedule.Schedule{Name: aws.ToString(out.Name), At: at, Payload: []byte(aws.ToString(tg.Input))}, true
	}
}

func TestContract(t *testing.T) {
	scheduletest.Run(t, func(t *testing.T) (schedule.Scheduler, scheduletest.Inspect) {
		client, group := newGroup(t)
		cfg := Config{Group: group, TargetARN: targetARN, RoleARN: roleARN, DeadLetterARN: dlqARN}
		s := New(client, cfg)
		return s, inspect(client, s.cfg)
	})
}

func TestContractWithoutDeadLetterAndCustomRetry(t *testing.T) {
	scheduletest.Run(t, func(t *testing.T) (schedule.Scheduler, scheduletest.Inspect) {
		client, group := newGroup(t)
		s := New(client, Config{Group: group, TargetARN: targetARN, RoleARN: roleARN, MaxRetries: 3, MaxEventAge: 600})
		return s, inspect(client, s.cfg)
	})
}

// TestInvokeContract invokes through moto's Lambda (which accepts an asynchronous invocation
// with 202 and runs nothing) and reads what was invoked from the calls the client made.
func TestInvokeContract(t *testing.T) {
	scheduletest.RunInvoke(t, func(t *testing.T) (schedule.Scheduler, scheduletest.Invoked) {
		client, group := newGroup(t)
		cfg := awstest.Shared(t).Config(t)
		var rec awstest.Invocations
		rec.Install(&cfg)
		s := New(client, Config{Group: group, TargetARN: targetARN, RoleARN: roleARN}).WithInvoker(lambdainvoke.New(lambda.NewFromConfig(cfg), targetARN))
		return s, func(t *testing.T, n int) [][]byte {
			var out [][]byte
			for _, inv := range rec.Take() {
				if inv.Function != targetARN || inv.Type != "Event" {
					t.Errorf("invoked %s as %q, want %s as Event", inv.Function, inv.Type, targetARN)
				}
				out = append(out, inv.Payload)
			}
			return out
		}
	})
}

func TestInvokeWithoutClientFails(t *testing.T) {
	client, group := newGroup(t)
	s := New(client, Config{Group: group, TargetARN: targetARN, RoleARN: roleARN})
	if err := s.Invoke(context.Background(), []byte(`{}`)); err == nil {
		t.Fatal("Invoke without a Lambda client succeeded")
	}
}

func TestConfigDefaults(t *testing.T) {
	for _, tc := range []struct {
		in                Config
		retries, eventAge int32
	}{
		{Config{}, DefaultMaxRetries, DefaultMaxEventAge},
		{Config{MaxRetries: -1, MaxEventAge: 60}, 0, 60},
		{Config{MaxRetries: 185, MaxEventAge: 3600}, 185, 3600},
	} {
		s := NewWithAPI(nil, tc.in)
		if s.cfg.MaxRetries != tc.retries || s.cfg.MaxEventAge != tc.eventAge {
			t.Errorf("%+v → retries %d, age %d; want %d, %d", tc.in, s.cfg.MaxRetries, s.cfg.MaxEventAge, tc.retries, tc.eventAge)
		}
	}
}

func TestExpression(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{time.Date(2030, 1, 2, 8, 4, 5, 999_000_000, cet), "at(2030-01-02T07:05:00)"}, // UTC, rounded up
		{time.Date(2030, 1, 2, 8, 4, 0, 0, cet), "at(2030-01-02T07:04:00)"},           // a whole minute stays
		{time.Date(2030, 1, 2, 23, 59, 0, 1, time.UTC), "at(2030-01-03T00:00:00)"},    // into the next day
	} {
		if got := Expression(c.at); got != c.want {
			t.Errorf("Expression(%v) = %q, want %q", c.at, got, c.want)
		}
	}
}

func TestEnsureGroupIsIdempotent(t *testing.T) {
	client, group := newGroup(t)
	ctx := context.Background()
	s := New(client, Config{Group: group, TargetARN: targetARN, RoleARN: roleARN})
	if err := s.Put(ctx, schedule.Schedule{Name: "email-kept", At: time.Now().Add(time.Hour), Payload: []byte(`{}`)}); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := EnsureGroup(ctx, client, group); err != nil {
		t.Fatalf("EnsureGroup again: %v", err)
	}
	// A second EnsureGroup must not recreate the group (moto would drop its schedules).
	if _, ok := inspect(client, s.cfg)(t, "email-kept"); !ok {
		t.Fatal("schedule lost after EnsureGroup on an existing group")
	}
}

func TestDeleteInMissingGroupIsFine(t *testing.T) {
	client := scheduler.NewFromConfig(awstest.Shared(t).Config(t))
	s := New(client, Config{Group: "mailroom-no-such-group", TargetARN: targetARN, RoleARN: roleARN})
	if err := s.Delete(context.Background(), "email-x"); err != nil {
		t.Errorf("Delete: %v", err)
	}
}

// fake produces the errors moto cannot: throttling, and a schedule that vanishes between
// CreateSchedule's conflict and UpdateSchedule.
type fake struct {
	createErrs []error
	updateErr  error
	deleteErr  error
	creates    []*scheduler.CreateScheduleInput
	updates    int
}

func (f *fake) CreateSchedule(_ context.Context, in *scheduler.CreateScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error) {
	if in.ClientToken == nil { // as the SDK's idempotency-token middleware does
		in.ClientToken = aws.String(fmt.Sprintf("token-%d", len(f.creates)))
	}
	cp := *in
	f.creates = append(f.creates, &cp)
	if len(f.createErrs) == 0 {
		return &scheduler.CreateScheduleOutput{}, nil
	}
	err := f.createErrs[0]
	f.createErrs = f.createErrs[1:]
	return nil, err
}

func (f *fake) UpdateSchedule(context.Context, *scheduler.UpdateScheduleInput, ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error) {
	f.updates++
	return &scheduler.UpdateScheduleOutput{}, f.updateErr
}

func (f *fake) DeleteSchedule(context.Context, *scheduler.DeleteScheduleInput, ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error) {
	return &scheduler.DeleteScheduleOutput{}, f.deleteErr
}

func TestThrottlingIsMarked(t *testing.T) {
	throttled := &types.ThrottlingException{Message: aws.String("slow down")}
	sc := schedule.Schedule{Name: "email-t", At: time.Now().Add(time.Hour), Payload: []byte(`{}`)}
	ctx := context.Background()

	err := NewWithAPI(&fake{createErrs: []error{throttled}}, Config{}).Put(ctx, sc)
	if !errors.Is(err, schedule.ErrThrottled) || !errors.As(err, new(*types.ThrottlingException)) {
		t.Errorf("Put throttled = %v, want ErrThrottled wrapping the API error", err)
	}
	err = NewWithAPI(&fake{deleteErr: &smithy.GenericAPIError{Code: "TooManyRequestsException"}}, Config{}).Delete(ctx, "email-t")
	if !errors.Is(err, schedule.ErrThrottled) {
		t.Errorf("Delete throttled = %v, want ErrThrottled", err)
	}
	err = NewWithAPI(&fake{createErrs: []error{&types.ValidationException{Message: aws.String("bad")}}}, Config{}).Put(ctx, sc)
	if err == nil || errors.Is(err, schedule.ErrThrottled) || !strings.Contains(err.Error(), "create schedule email-t") {
		t.Errorf("Put invalid = %v, want a plain wrapped error", err)
	}
}

func TestPutRecreatesWhenScheduleVanishesBeforeUpdate(t *testing.T) {
	f := &fake{
		createErrs: []error{&types.ConflictException{Message: aws.String("exists")}},
		updateErr:  &types.ResourceNotFoundException{Message: aws.String("gone")},
	}
	sc := schedule.Schedule{Name: "email-v", At: time.Now().Add(time.Hour), Payload: []byte(`{"v":1}`)}
	if err := NewWithAPI(f, Config{}).Put(context.Background(), sc); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if len(f.creates) != 2 || f.updates != 1 {
		t.Fatalf("creates %d, updates %d; want 2, 1", len(f.creates), f.updates)
	}
	if aws.ToString(f.creates[1].ClientToken) == aws.ToString(f.creates[0].ClientToken) {
		t.Error("the second CreateSchedule reused the first one's client token")
	}
}
