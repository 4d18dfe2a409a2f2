package deploy_test

import (
	"encoding/json"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/mailroom/mailroom/pkg/app"
	"github.com/mailroom/mailroom/pkg/auth"
	"github.com/mailroom/mailroom/pkg/awstest"
	"github.com/mailroom/mailroom/pkg/config"
	"github.com/mailroom/mailroom/pkg/deploy"
	"github.com/mailroom/mailroom/pkg/lambdafn"
)

// TestSAMLocalEnvFile: the --env-vars file `make sam-local` writes gives each function exactly
// the variables its wiring reads, pointing at moto on the host and at the names it creates
// there; SAM passes a file's variable only when the template declares it for the function, so
// each is declared, and each declared one is in the file (an unresolved !Ref would otherwise
// reach the function as a logical id). sam itself runs with moto's credentials and the
// set-up's region in place of the caller's (SAM passes its own to the functions).
func TestSAMLocalEnvFile(t *testing.T) {
	tpl := loadTemplate(t)
	global := path(t, tpl, "Globals", "Function", "Environment", "Variables").(map[string]any)
	fns := resources(t, tpl, "AWS::Serverless::Function")

	l := deploy.DefaultLocal("linux")
	l.Dir = t.TempDir()
	if err := l.WriteEnv(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(l.EnvFile())
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]map[string]string
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Sorted(maps.Keys(file)), functionIDs(); !slices.Equal(got, want) {
		t.Fatalf("env file functions %v, want %v", got, want)
	}
	for _, n := range lambdafn.Names() {
		id := n + "Function"
		vars := file[id]
		declared := map[string]bool{}
		for k := range global {
			declared[k] = true
		}
		for k := range envOf(fns[id]) {
			declared[k] = true
		}
		for k := range vars {
			if !declared[k] {
				t.Errorf("%s: %s is in the env file but not declared for the function: SAM drops it", id, k)
			}
		}
		for k := range declared {
			if _, ok := vars[k]; !ok {
				t.Errorf("%s: %s is declared in the template but not in the env file", id, k)
			}
		}
		// Exactly what the wiring reads: the globals and its ports' variables.
		want := slices.Concat(lambdafn.GlobalEnv, lambdafn.PortsOf(n).Env())
		slices.Sort(want)
		if got := slices.Sorted(maps.Keys(vars)); !slices.Equal(got, want) {
			t.Errorf("%s: variables %v, want %v", id, got, want)
		}
		// The function's cold start accepts them (every port's variable set).
		cfg, err := lambdafn.Config(n, func(k string) string { return vars[k] })
		if err != nil {
			t.Errorf("%s: cold start config: %v", id, err)
			continue
		}
		if cfg.TableName != l.Name || cfg.Backend != config.BackendAWS || cfg.StackName != "" {
			t.Errorf("%s: table %q backend %q stack %q", id, cfg.TableName, cfg.Backend, cfg.StackName)
		}
		if vars["AWS_ENDPOINT_URL"] != "http://host.docker.internal:5000" {
			t.Errorf("%s: endpoint %q, not moto's as the containers see the host", id, vars["AWS_ENDPOINT_URL"])
		}
		if v, ok := vars[lambdafn.EnvPublicURL]; ok && v != "http://127.0.0.1:3000" {
			t.Errorf("%s: PUBLIC_URL %q, want the local API", id, v)
		}
	}
	// The functions read the unsubscribe key from moto's secret, never from the env file.
	if id := file["UnsubscribeFunction"][lambdafn.EnvUnsubscribeSecret]; id != l.SecretName() {
		t.Errorf("unsubscribe secret id %q, want %s", id, l.SecretName())
	}
	// sam runs as moto's caller, in the set-up's region: no profile, token or key of the
	// caller's survives into the functions.
	env := l.SAMEnviron([]string{"PATH=/usr/bin", "AWS_PROFILE=prod", "AWS_SESSION_TOKEN=real", "AWS_ACCESS_KEY_ID=AKIAREAL",
		"AWS_SECRET_ACCESS_KEY=real", "AWS_REGION=eu-west-1", "AWS_DEFAULT_REGION=eu-west-1"})
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := got[k]; dup {
			t.Errorf("%s set twice in sam's environment", k)
		}
		got[k] = v
	}
	for k, want := range map[string]string{"PATH": "/usr/bin", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_REGION": l.Region, "AWS_DEFAULT_REGION": l.Region, "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"} {
		if got[k] != want {
			t.Errorf("sam's %s = %q, want %q", k, got[k], want)
		}
	}
	for _, k := range []string{"AWS_PROFILE", "AWS_SESSION_TOKEN"} {
		if _, ok := got[k]; ok {
			t.Errorf("sam's environment keeps the caller's %s", k)
		}
	}
}

// TestSAMLocalCommandInREADME: the README shows the command `make sam-local` runs, for Linux
// and for Docker Desktop.
func TestSAMLocalCommandInREADME(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, goos := range []string{"linux", "darwin"} {
		cmd := strings.Join(deploy.DefaultLocal(goos).Command(), " ")
		if !strings.Contains(string(b), cmd+"\n") {
			t.Errorf("README does not show %q", cmd)
		}
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "sam-local:\n\t$(GO) run ./cmd/mailroom-deploy sam-local\n") {
		t.Error("make sam-local does not run mailroom-deploy sam-local")
	}
}

// TestSAMLocalPrepare: against a moto server, the set-up creates the table, the configuration
// sets and the schedule group the env file names, and a team with a working key, once.
func TestSAMLocalPrepare(t *testing.T) {
	srv := awstest.Start(t)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	l := deploy.DefaultLocal("linux")
	l.Dir = t.TempDir()
	l.MotoHost = u.Hostname()
	l.MotoPort, _ = strconv.Atoi(u.Port())
	ctx := t.Context()
	key, err := l.Prepare(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := auth.Parse(key); err != nil {
		t.Fatalf("key %q: %v", key, err)
	}
	again, err := l.Prepare(ctx)
	if err != nil || again != "" {
		t.Fatalf("second run: key %q, %v; want none (the team exists)", again, err)
	}
	cfg := srv.Config(t)
	a, err := app.NewWithAWS(ctx, config.Config{Backend: config.BackendAWS, TableName: l.Name}, cfg, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	if p, err := auth.NewAuthenticator(a.Store, 0).Authenticate(ctx, "Bearer "+key); err != nil || p.TeamID == 0 {
		t.Fatalf("the printed key does not authenticate: %v", err)
	}
	// (moto's GetConfigurationSet answer does not decode; creating it again must conflict.)
	_, err = sesv2.NewFromConfig(cfg).CreateConfigurationSet(ctx, &sesv2.CreateConfigurationSetInput{
		ConfigurationSetName: aws.String(l.Name + "-open-click")})
	if err == nil || !strings.Contains(err.Error(), "AlreadyExists") {
		t.Errorf("configuration set %s-open-click was not created: %v", l.Name, err)
	}
	if _, err := scheduler.NewFromConfig(cfg).GetScheduleGroup(ctx, &scheduler.GetScheduleGroupInput{Name: aws.String(l.Name)}); err != nil {
		t.Errorf("schedule group: %v", err)
	}
	// The unsubscribe key is made once, kept in Dir (moto forgets it), and is the secret's.
	key, err = l.UnsubscribeKey()
	if err != nil || len(key) != 64 {
		t.Fatalf("unsubscribe key %d characters, %v", len(key), err)
	}
	if again, err := l.UnsubscribeKey(); again != key || err != nil {
		t.Errorf("second run: another unsubscribe key (%v)", err)
	}
	out, err := secretsmanager.NewFromConfig(cfg).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(l.SecretName())})
	if err != nil || aws.ToString(out.SecretString) != key {
		t.Errorf("secret %s does not hold the kept key: %v", l.SecretName(), err)
	}
}
