// Command mailroom-deploy writes the deployment's generated files: `mailroom-deploy template`
// prints template.yaml (pkg/deploy.Render; `make template` writes it to the repository root).
package main

import (
	"fmt"
	"os"

	"github.com/mailroom/mailroom/pkg/deploy"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] != "template" {
		fmt.Fprintln(os.Stderr, "usage: mailroom-deploy template > template.yaml")
		os.Exit(2)
	}
	b, err := deploy.Render()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mailroom-deploy:", err)
		os.Exit(1)
	}
	_, _ = os.Stdout.Write(b)
}
