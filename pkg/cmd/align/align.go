// Package align implements `ellm align`.
package align

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/pkg/cmdutil"
)

// Options are the inputs of `ellm align`.
type Options struct {
	IO cmdutil.IOStreams
}

// NewCmdAlign returns the cobra command; runF replaces the behaviour in tests.
func NewCmdAlign(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	return &cobra.Command{
		Use:   "align",
		Short: "Diff ellm's tensors against reference dumps",
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return alignRun(opts)
		},
	}
}

func alignRun(opts *Options) error {
	return fmt.Errorf("ellm align: %w", cmdutil.ErrNotBuilt)
}
