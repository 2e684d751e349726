// Package serve implements `ellm serve`.
package serve

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/pkg/cmdutil"
)

// Options are the inputs of `ellm serve`.
type Options struct {
	IO cmdutil.IOStreams
}

// NewCmdServe returns the cobra command; runF replaces the behaviour in tests.
func NewCmdServe(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	return &cobra.Command{
		Use:   "serve",
		Short: "Serve an OpenAI/vLLM-compatible HTTP API",
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return serveRun(opts)
		},
	}
}

func serveRun(opts *Options) error {
	return fmt.Errorf("ellm serve: %w", cmdutil.ErrNotBuilt)
}
