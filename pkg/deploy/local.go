package deploy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/mailroom/mailroom/pkg/app"
	"github.com/mailroom/mailroom/pkg/schedule/eventbridge"
	"github.com/mailroom/mailroom/pkg/store/dynamo"
	"github.com/mailroom/mailroom/pkg/team"
)

// `sam local start-api` runs each function in a container with the variables of its
// template.yaml declaration, overridden by an --env-vars file. Under it nothing may reach the
// caller's AWS account or send real mail: every function is pointed at a moto_server on the
// host (AWS_ENDPOINT_URL, declared empty in the template's globals so that SAM passes it),
// with moto's own fake credentials; moto answers SES too, so no message leaves the machine.

// Local is the sam local set-up.
type Local struct {
	Dir       string // where the env file, the moto log and the unsubscribe secret go (.sam-local)
	MotoPort  int    // the moto_server port on the host (5000)
	APIPort   int    // where sam local start-api listens (3000)
	GOOS      string // the host: on Linux the containers use the host's network
	Name      string // the table, configuration set and schedule group name (mailroom-local)
	Region    string // us-east-1
	SecretHex string // the unsubscribe secret (made once, kept in Dir)
}

// DefaultLocal is the set-up `make sam-local` uses.
func DefaultLocal(goos string) Local {
	return Local{Dir: ".sam-local", MotoPort: 5000, APIPort: 3000, GOOS: goos, Name: "mailroom-local", Region: "us-east-1"}
}

// EnvFile is the path of the --env-vars file.
func (l Local) EnvFile() string { return filepath.Join(l.Dir, "env.json") }

// Endpoint is moto's URL as the function containers see the host: on Linux they share the
// host's network (--docker-network host); Docker Desktop reaches the host's loopback as
// host.docker.internal.
func (l Local) Endpoint() string {
	host := "host.docker.internal"
	if l.GOOS == "linux" {
		host = "127.0.0.1"
	}
	return fmt.Sprintf("http://%s:%d", host, l.MotoPort)
}

// Command is the sam command line `make sam-local` runs (the README shows it).
func (l Local) Command() []string {
	args := []string{"sam", "local", "start-api", "--port", strconv.Itoa(l.APIPort), "--env-vars", l.EnvFile(),
		"--warm-containers", "LAZY"}
	if l.GOOS == "linux" {
		args = append(args, "--docker-network", "host")
	}
	return args
}

// localValue is what each variable is under sam local.
func (l Local) localValue(k string) string {
	arn := func(service, resource string) string {
		return fmt.Sprintf("arn:aws:%s:%s:123456789012:%s", service, l.Region, resource)
	}
	switch k {
	case "BACKEND":
		return app.BackendAWS
	case "TABLE_NAME", app.EnvConfigurationSet, app.EnvScheduleGroup:
		return l.Name
	case "AUTH_CACHE_TTL":
		return "60s"
	case "LOG_LEVEL":
		return "INFO"
	case "STACK_NAME":
		return "" // no CloudWatch metric lines
	case "AWS_ENDPOINT_URL":
		return l.Endpoint()
	case app.EnvScheduleRole:
		return "arn:aws:iam::123456789012:role/" + l.Name + "-scheduler"
	case app.EnvScheduleDLQ:
		return arn("sqs", l.Name+"-schedule-dead-letters")
	case app.EnvScheduleTarget:
		return arn("lambda", "function:"+l.Name+"-scheduled-send")
	case app.EnvCampaignTarget:
		return arn("lambda", "function:"+l.Name+"-campaign-batch")
	case app.EnvUnsubscribeSecret:
		return l.SecretHex
	case app.EnvPublicURL:
		return fmt.Sprintf("http://127.0.0.1:%d", l.APIPort)
	}
	return ""
}

// awsOverrides replace what SAM would pass from the caller's credentials and region.
var awsOverrides = []string{"AWS_ACCESS_KEY_ID", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}

// Env is the --env-vars file's content: for each function (by logical id), every variable its
// wiring reads (app.GlobalEnv and its ports' Env) and the AWS credentials and region moto
// accepts.
func (l Local) Env() map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, f := range Functions() {
		vars := map[string]string{}
		for _, k := range slices.Concat(app.GlobalEnv, f.Ports.Env()) {
			vars[k] = l.localValue(k)
		}
		vars["AWS_ACCESS_KEY_ID"], vars["AWS_SECRET_ACCESS_KEY"], vars["AWS_SESSION_TOKEN"] = "test", "test", ""
		vars["AWS_REGION"], vars["AWS_DEFAULT_REGION"] = l.Region, l.Region
		out[f.LogicalID] = vars
	}
	return out
}

// WriteEnv writes the env file (and makes the unsubscribe secret on first use).
func (l *Local) WriteEnv() error {
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return err
	}
	secretFile := filepath.Join(l.Dir, "unsubscribe.key")
	if b, err := os.ReadFile(secretFile); err == nil && len(b) >= 64 {
		l.SecretHex = strings.TrimSpace(string(b))
	} else {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		l.SecretHex = hex.EncodeToString(b[:])
		if err := os.WriteFile(secretFile, []byte(l.SecretHex), 0o600); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(l.Env(), "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(l.EnvFile(), append(b, '\n'), 0o600)
}

// Run starts moto on the host's loopback, creates the table, the configuration sets and the
// schedule group in it and a team with an API key (printed), writes the env file and runs sam
// local start-api until it exits; moto is stopped (by its process group) on the way out.
func (l *Local) Run(ctx context.Context, out io.Writer) error {
	if _, err := exec.LookPath("sam"); err != nil {
		return errors.New("sam (the AWS SAM CLI) is not installed; see the README's sam local section")
	}
	stop, err := l.startMoto(ctx, out)
	if err != nil {
		return err
	}
	defer stop()
	key, err := l.Prepare(ctx)
	if err != nil {
		return err
	}
	if err := l.WriteEnv(); err != nil {
		return err
	}
	fmt.Fprintf(out, "moto_server on http://127.0.0.1:%d (log: %s)\n", l.MotoPort, filepath.Join(l.Dir, "moto.log"))
	if key != "" {
		fmt.Fprintf(out, "API key (shown once): %s\n", key)
	}
	fmt.Fprintf(out, "env file: %s\n$ %s\n", l.EnvFile(), strings.Join(l.Command(), " "))
	cmd := exec.CommandContext(ctx, l.Command()[0], l.Command()[1:]...)
	cmd.Stdout, cmd.Stderr, cmd.Stdin = out, out, os.Stdin
	return cmd.Run()
}

func (l *Local) startMoto(ctx context.Context, out io.Writer) (func(), error) {
	argv := []string{"moto_server"}
	if _, err := exec.LookPath("moto_server"); err != nil {
		argv = []string{"python3", "-m", "moto.server"}
	}
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(l.Dir, "moto.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], append(argv[1:], "-H", "127.0.0.1", "-p", strconv.Itoa(l.MotoPort))...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start moto (%s): %w", strings.Join(argv, " "), err)
	}
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		_ = logf.Close()
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/moto-api/", l.MotoPort)
	for deadline := time.Now().Add(20 * time.Second); ; {
		if resp, err := http.Get(url); err == nil {
			_ = resp.Body.Close()
			return stop, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return nil, fmt.Errorf("moto did not answer on port %d (is the port in use? see %s)", l.MotoPort, logf.Name())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Prepare creates what the template would in moto and returns a new API key ("" when the
// table already had a team: the key was shown the first time).
func (l *Local) Prepare(ctx context.Context) (string, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(l.Region),
		awsconfig.WithBaseEndpoint(fmt.Sprintf("http://127.0.0.1:%d", l.MotoPort)),
		awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	if err != nil {
		return "", err
	}
	if err := dynamo.EnsureTable(ctx, dynamodb.NewFromConfig(cfg), l.Name); err != nil {
		return "", fmt.Errorf("table: %w", err)
	}
	ses := sesv2.NewFromConfig(cfg)
	for _, suffix := range []string{"", "-open", "-click", "-open-click"} {
		_, err := ses.CreateConfigurationSet(ctx, &sesv2.CreateConfigurationSetInput{ConfigurationSetName: aws.String(l.Name + suffix)})
		if err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
			return "", fmt.Errorf("configuration set: %w", err)
		}
	}
	if err := eventbridge.EnsureGroup(ctx, scheduler.NewFromConfig(cfg), l.Name); err != nil {
		return "", err
	}
	c, err := app.ConfigFromEnv(func(k string) string {
		return map[string]string{"BACKEND": app.BackendAWS, "TABLE_NAME": l.Name, "LOG_LEVEL": "warn"}[k]
	})
	if err != nil {
		return "", err
	}
	a, err := app.NewWithAWS(ctx, c, cfg, app.Options{})
	if err != nil {
		return "", err
	}
	defer a.Close(ctx)
	key, _, err := (&team.Admin{Store: a.Store, Now: time.Now}).Bootstrap(ctx, "")
	return key, err
}
