// Package inspect implements `ellm inspect-weights`.
package inspect

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/pkg/cmdutil"
)

// Options are the inputs of `ellm inspect-weights`.
type Options struct {
	IO cmdutil.IOStreams
}

// NewCmdInspectWeights returns the cobra command; runF replaces the behaviour in tests.
func NewCmdInspectWeights(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	return &cobra.Command{
		Use:   "inspect-weights",
		Short: "List a checkpoint's tensors and check them against the architecture",
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return inspectRun(opts)
		},
	}
}

func inspectRun(opts *Options) error {
	return fmt.Errorf("ellm inspect-weights: %w", cmdutil.ErrNotBuilt)
}
