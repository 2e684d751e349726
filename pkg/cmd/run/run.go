// Package run implements `ellm run`.
package run

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/pkg/cmdutil"
)

// Options are the inputs of `ellm run`.
type Options struct {
	IO cmdutil.IOStreams
}

// NewCmdRun returns the cobra command; runF replaces the behaviour in tests.
func NewCmdRun(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	return &cobra.Command{
		Use:   "run",
		Short: "Chat in the terminal or answer one prompt",
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runRun(opts)
		},
	}
}

func runRun(opts *Options) error {
	return fmt.Errorf("ellm run: %w", cmdutil.ErrNotBuilt)
}
