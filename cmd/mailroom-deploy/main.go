// Command mailroom-deploy writes and runs the deployment's generated parts:
//
//	mailroom-deploy template    prints template.yaml (pkg/deploy.Render; `make template`)
//	mailroom-deploy readme      rewrites the README's generated list of functions
//	mailroom-deploy mains       rewrites functions/<dir>/main.go of every function
//	mailroom-deploy makefile    rewrites pkg/deploy/functions.mk, the Makefile's list of functions
//	mailroom-deploy sam-local   moto on the host, the table and a key in it, the --env-vars
//	                            file, then sam local start-api on port 3000 (`make sam-local`)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/mailroom/mailroom/pkg/deploy"
)

func main() {
	if len(os.Args) != 2 {
		usage()
	}
	switch os.Args[1] {
	case "template":
		b, err := deploy.Render()
		if err != nil {
			fail(err)
		}
		_, _ = os.Stdout.Write(b)
	case "readme":
		b, err := os.ReadFile("README.md")
		if err != nil {
			fail(err)
		}
		if b, err = deploy.UpdateREADME(b); err != nil {
			fail(err)
		}
		if err := os.WriteFile("README.md", b, 0o644); err != nil {
			fail(err)
		}
	case "makefile":
		if err := os.WriteFile(filepath.Join("pkg", "deploy", "functions.mk"), deploy.FunctionsMakefile(), 0o644); err != nil {
			fail(err)
		}
	case "mains":
		for _, f := range deploy.Functions() {
			dir := filepath.Join("functions", f.Dir)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				fail(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "main.go"), deploy.MainSource(f), 0o644); err != nil {
				fail(err)
			}
		}
	case "sam-local":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		l := deploy.DefaultLocal(runtime.GOOS)
		if err := l.Run(ctx, os.Stdout); err != nil && ctx.Err() == nil {
			fail(err)
		}
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: mailroom-deploy template | readme | mains | makefile | sam-local")
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mailroom-deploy:", err)
	os.Exit(1)
}
