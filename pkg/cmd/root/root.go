// Package root assembles the ellm command tree.
package root

import (
	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/pkg/cmd/align"
	"github.com/ellm-dev/ellm/pkg/cmd/bench"
	"github.com/ellm-dev/ellm/pkg/cmd/checkcpu"
	"github.com/ellm-dev/ellm/pkg/cmd/inspect"
	"github.com/ellm-dev/ellm/pkg/cmd/run"
	"github.com/ellm-dev/ellm/pkg/cmd/serve"
	"github.com/ellm-dev/ellm/pkg/cmdutil"
)

// NewCmdRoot returns the ellm command with every subcommand attached.
func NewCmdRoot(f *cmdutil.Factory) *cobra.Command {
	var configPath string
	cmd := &cobra.Command{
		Use:   "ellm",
		Short: "CPU inference for the Qwen3 family: full-prefill, static KV cache, session cache",
		Long: `ellm runs Qwen3 and Qwen3-MoE models on CPU servers.

Every flag can also be set with an ELLM_* environment variable
(--sequence-length is ELLM_SEQUENCE_LENGTH) or in the config file
(--config, default ./ellm.yaml, then the user config dir's ellm/ellm.yaml),
as a top-level key or under the subcommand's name. A flag given on the
command line wins over the environment, which wins over the file.`,
		Version:       f.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			v, err := cmdutil.LoadConfig(configPath)
			if err != nil {
				return err
			}
			return cmdutil.ApplyConfig(cmd, v, f.Getenv)
		},
	}
	cmd.SetIn(f.IO.In)
	cmd.SetOut(f.IO.Out)
	cmd.SetErr(f.IO.ErrOut)
	cmd.PersistentFlags().StringVar(&configPath, "config", "", "config file (default ./ellm.yaml, then <user config dir>/ellm/ellm.yaml)")
	cmd.AddCommand(
		serve.NewCmdServe(f, nil),
		run.NewCmdRun(f, nil),
		checkcpu.NewCmdCheckCPU(f, nil),
		align.NewCmdAlign(f, nil),
		bench.NewCmdBench(f, nil),
		inspect.NewCmdInspectWeights(f, nil),
	)
	return cmd
}
