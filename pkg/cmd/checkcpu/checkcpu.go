// Package checkcpu implements `ellm check-cpu`.
package checkcpu

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/pkg/cmdutil"
)

// Options are the inputs of `ellm check-cpu`.
type Options struct {
	IO cmdutil.IOStreams
}

// NewCmdCheckCPU returns the cobra command; runF replaces the behaviour in tests.
func NewCmdCheckCPU(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	return &cobra.Command{
		Use:   "check-cpu",
		Short: "Check this CPU and memory before deploying a model",
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return checkcpuRun(opts)
		},
	}
}

func checkcpuRun(opts *Options) error {
	return fmt.Errorf("ellm check-cpu: %w", cmdutil.ErrNotBuilt)
}
