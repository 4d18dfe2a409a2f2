package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
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
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/mailroom/mailroom/pkg/app"
	"github.com/mailroom/mailroom/pkg/campaign"
	"github.com/mailroom/mailroom/pkg/config"
	"github.com/mailroom/mailroom/pkg/lambdafn"
	"github.com/mailroom/mailroom/pkg/schedule/eventbridge"
	"github.com/mailroom/mailroom/pkg/store/dynamo"
	"github.com/mailroom/mailroom/pkg/team"
)

// `sam local start-api` runs each function in a container with the variables of its
// template.yaml declaration, overridden by an --env-vars file (only declared ones are), and
// with the AWS credentials and region of the sam process itself. Under it nothing may reach
// the caller's AWS account or send real mail: every function is pointed at a moto_server on
// the host (AWS_ENDPOINT_URL, declared empty in the template's globals so that SAM passes it),
// and sam runs with moto's fake credentials in place of the caller's; moto answers SES too,
// so no message leaves the machine.

// Local is the sam local set-up.
type Local struct {
	Dir      string // where the env file, the moto log and the unsubscribe secret go (.sam-local)
	MotoPort int    // the moto_server port on the host (5000)
	MotoHost string // the address moto listens on: loopback, or on Linux the Docker bridge's
	APIPort  int    // where sam local start-api listens (3000)
	GOOS     string // the host: on Linux the containers use the host's network
	Name     string // the table, configuration set and schedule group name (mailroom-local)
	Region   string // us-east-1
}

// SecretName is the moto secret holding the unsubscribe key (UNSUBSCRIBE_SECRET_ID).
func (l Local) SecretName() string { return l.Name + "/unsubscribe" }

// DefaultLocal is the set-up `make sam-local` uses.
func DefaultLocal(goos string) Local {
	return Local{Dir: ".sam-local", MotoPort: 5000, APIPort: 3000, GOOS: goos, Name: "mailroom-local", Region: "us-east-1"}
}

// EnvFile is the path of the --env-vars file.
func (l Local) EnvFile() string { return filepath.Join(l.Dir, "env.json") }

// Endpoint is moto's URL as the function containers see the host: host.docker.internal, which
// Docker Desktop defines (and forwards to the host's loopback) and which on Linux the command
// maps to the Docker bridge's gateway (--add-host host.docker.internal:host-gateway), where
// moto then listens.
func (l Local) Endpoint() string { return fmt.Sprintf("http://host.docker.internal:%d", l.MotoPort) }

// HostURL is moto's URL from the host.
func (l Local) HostURL() string { return fmt.Sprintf("http://%s:%d", l.motoHost(), l.MotoPort) }

func (l Local) motoHost() string {
	if l.MotoHost == "" {
		return "127.0.0.1"
	}
	return l.MotoHost
}

// Command is the sam command line `make sam-local` runs (the README shows it).
func (l Local) Command() []string {
	args := []string{"sam", "local", "start-api", "--port", strconv.Itoa(l.APIPort), "--env-vars", l.EnvFile(),
		"--warm-containers", "LAZY"}
	if l.GOOS == "linux" {
		args = append(args, "--add-host", "host.docker.internal:host-gateway")
	}
	return args
}

// SAMEnviron is the sam process's environment: the caller's, with moto's credentials and the
// set-up's region in place of any AWS identity (SAM hands its own to the functions).
func (l Local) SAMEnviron(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ACCESS_KEY_ID",
			"AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE":
			continue
		}
		out = append(out, kv)
	}
	return append(out, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION="+l.Region,
		"AWS_DEFAULT_REGION="+l.Region, "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
}

// dockerBridge returns the IPv4 address of the Docker bridge (docker0), where containers
// reach the host on Linux.
func dockerBridge() (string, error) {
	ifc, err := net.InterfaceByName("docker0")
	if err != nil {
		return "", fmt.Errorf("no docker0 bridge (is Docker running?): %w", err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String(), nil
		}
	}
	return "", errors.New("the docker0 bridge has no IPv4 address")
}

// localValue is what each variable is under sam local.
func (l Local) localValue(k string) string {
	arn := func(service, resource string) string {
		return fmt.Sprintf("arn:aws:%s:%s:123456789012:%s", service, l.Region, resource)
	}
	switch k {
	case "BACKEND":
		return config.BackendAWS
	case "TABLE_NAME", lambdafn.EnvConfigurationSet, lambdafn.EnvScheduleGroup:
		return l.Name
	case "AUTH_CACHE_TTL":
		return "60s"
	case "RETENTION_DAYS":
		return "90"
	case "API_RATE_LIMIT":
		return "10"
	case lambdafn.EnvMaxSendRate:
		return "14" // a new production account's rate; the emulator has no GetAccount
	case "LOG_LEVEL":
		return "INFO"
	case "STACK_NAME":
		return "" // no CloudWatch metric lines
	case "AWS_ENDPOINT_URL":
		return l.Endpoint()
	case lambdafn.EnvScheduleRole:
		return "arn:aws:iam::123456789012:role/" + l.Name + "-scheduler"
	case lambdafn.EnvScheduleDLQ:
		return arn("sqs", l.Name+"-schedule-dead-letters")
	case lambdafn.EnvScheduleTarget:
		return arn("lambda", "function:"+l.Name+"-scheduled-send")
	case lambdafn.EnvCampaignTarget:
		return arn("lambda", "function:"+l.Name+"-campaign-batch")
	case lambdafn.EnvUnsubscribeSecret:
		return l.SecretName()
	case lambdafn.EnvPublicURL:
		return fmt.Sprintf("http://127.0.0.1:%d", l.APIPort)
	}
	return ""
}

// Env is the --env-vars file's content: for each function (by logical id), every variable its
// wiring reads (lambdafn.GlobalEnv and its ports' Env), each declared for it in the template.
func (l Local) Env() map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, f := range Functions() {
		vars := map[string]string{}
		for _, k := range slices.Concat(lambdafn.GlobalEnv, f.Ports.Env()) {
			vars[k] = l.localValue(k)
		}
		out[f.LogicalID] = vars
	}
	return out
}

// UnsubscribeKey returns the unsubscribe keyring's text, kept in Dir (a random key made on
// first use): moto forgets its secrets when it stops, and links must stay valid across runs.
func (l Local) UnsubscribeKey() (string, error) {
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return "", err
	}
	return campaign.KeyringFile(filepath.Join(l.Dir, "unsubscribe.key"))
}

// WriteEnv writes the env file.
func (l *Local) WriteEnv() error {
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return err
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
	if l.GOOS == "linux" && l.MotoHost == "" {
		host, err := dockerBridge()
		if err != nil {
			return err
		}
		l.MotoHost = host
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
	fmt.Fprintf(out, "moto_server on %s (log: %s)\n", l.HostURL(), filepath.Join(l.Dir, "moto.log"))
	if key != "" {
		fmt.Fprintf(out, "API key (shown once): %s\n", key)
	}
	fmt.Fprintf(out, "env file: %s\n$ %s\n", l.EnvFile(), strings.Join(l.Command(), " "))
	cmd := exec.CommandContext(ctx, l.Command()[0], l.Command()[1:]...)
	cmd.Stdout, cmd.Stderr, cmd.Stdin = out, out, os.Stdin
	cmd.Env = l.SAMEnviron(os.Environ())
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
	cmd := exec.Command(argv[0], append(argv[1:], "-H", l.motoHost(), "-p", strconv.Itoa(l.MotoPort))...)
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
	url := l.HostURL() + "/moto-api/"
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
		awsconfig.WithBaseEndpoint(l.HostURL()),
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
	if err := l.putSecret(ctx, secretsmanager.NewFromConfig(cfg)); err != nil {
		return "", fmt.Errorf("unsubscribe secret: %w", err)
	}
	c, err := config.FromEnv(func(k string) string {
		return map[string]string{"BACKEND": config.BackendAWS, "TABLE_NAME": l.Name, "LOG_LEVEL": "warn"}[k]
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

// putSecret stores the kept unsubscribe keyring as the moto secret the functions read.
func (l Local) putSecret(ctx context.Context, sm *secretsmanager.Client) error {
	key, err := l.UnsubscribeKey()
	if err != nil {
		return err
	}
	_, err = sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(l.SecretName()), SecretString: aws.String(key)})
	var exists *smtypes.ResourceExistsException
	if errors.As(err, &exists) {
		_, err = sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(l.SecretName()), SecretString: aws.String(key)})
	}
	return err
}
