// Command ellm is CPU inference for the Qwen3 family. Everything it does
// lives in pkg/cmd; main only maps the outcome to an exit status.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ellm-dev/ellm/pkg/cmd/root"
	"github.com/ellm-dev/ellm/pkg/cmdutil"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run())
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	f := cmdutil.System(version)
	cmd := root.NewCmdRoot(f)
	err := cmd.ExecuteContext(ctx)
	var exit *cmdutil.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.Code
	default:
		fmt.Fprintln(f.IO.ErrOut, "ellm:", err)
		return 1
	}
}
