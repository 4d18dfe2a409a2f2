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
	"bytes"
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
	case "-h", "-help", "--help", "help":
		fmt.Print(help)
		return
	}
	if os.Args[1] == "readme" || os.Args[1] == "mains" || os.Args[1] == "makefile" {
		// The others rewrite files of the repository: only in its root.
		if b, err := os.ReadFile("go.mod"); err != nil || !bytes.HasPrefix(b, []byte("module github.com/mailroom/mailroom\n")) {
			fail(fmt.Errorf("%s rewrites files of the Mailroom repository: run it in its root (where go.mod is)", os.Args[1]))
		}
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
	fmt.Fprintln(os.Stderr, "usage: mailroom-deploy template | readme | mains | makefile | sam-local (-h says what each does)")
	os.Exit(2)
}

const help = `usage: mailroom-deploy COMMAND

  template    prints template.yaml (make template)
  readme      rewrites the README's generated list of functions
  mains       rewrites functions/<dir>/main.go of every function
  makefile    rewrites pkg/deploy/functions.mk, the Makefile's list of functions
  sam-local   moto on the host, the table and a key in it, the --env-vars file, then
              sam local start-api on port 3000 (make sam-local)

readme, mains and makefile run in the repository's root.
`

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mailroom-deploy:", err)
	os.Exit(1)
}
