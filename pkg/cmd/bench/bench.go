// Package bench implements `ellm bench`.
package bench

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/pkg/cmdutil"
)

// Options are the inputs of `ellm bench`.
type Options struct {
	IO cmdutil.IOStreams
}

// NewCmdBench returns the cobra command; runF replaces the behaviour in tests.
func NewCmdBench(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	return &cobra.Command{
		Use:   "bench",
		Short: "Measure prefill TTFT, decode TPOT, sessions, serving and kernels",
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return benchRun(opts)
		},
	}
}

func benchRun(opts *Options) error {
	return fmt.Errorf("ellm bench: %w", cmdutil.ErrNotBuilt)
}
