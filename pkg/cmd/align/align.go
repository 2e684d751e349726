// Package align implements `ellm align`.
package align

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	ealign "github.com/ellm-dev/ellm/align"
	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/cpu"
)

// Options are the inputs of `ellm align`.
type Options struct {
	IO cmdutil.IOStreams

	Case      string
	Ref       string
	ModelPath string
	Kernels   string // "" = the active path
	DType     string
	KVDType   string // "" = f32 on f32 paths, bf16 otherwise; kv-cache: int8
	Positions []int
	JSON      bool
	Dump      string
	Threads   int
	cmdutil.KernelFlags
}

// DefaultRef is where the reference dumps live relative to the repository.
const DefaultRef = "../shared/align"

// NewCmdAlign returns the cobra command; runF replaces the behaviour in tests.
func NewCmdAlign(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "align CASE",
		Short: "Diff ellm's tensors against reference dumps",
		Long: `Run alignment cases against reference dumps (format: ../shared/align/FORMAT.md).

CASE is one of ` + strings.Join(ealign.Kinds, ", ") + ` or all ("-" and "_" are the same),
or kv-cache.
--ref is one case directory (with manifest.json), a directory of case
directories, or a directory of those (one per model). Kernel cases run the
kernels on the reference inputs; model cases run the forward pass on the
manifest's model and prompts; tolerances follow the kernel path (f32 paths:
fp32_engine, avx512bf16 or a bf16/int8 --kv-dtype: bf16_engine).

kv-cache needs no reference: it runs each model (--model-path, else the
models the cases under --ref name) on a random prompt of each --positions
length over a bf16 KV cache and over --kv-dtype (default int8), and compares
the logits of the last 64 positions (cosine ≥ 0.999 each, greedy token the
same at ≥ 95%) and 32 greedy decode steps. Exits with status 1 if any case
fails.`,
		Example: `  ellm align all --ref ../shared/align/tiny-qwen3-a
  ellm align multi-token --ref ../shared/align/tiny-qwen3moe-a --kernels generic
  ellm align tokenizer --ref ../shared/align/tokenizer
  ellm align all --ref ../shared/align/tiny-qwen3-a --kv-dtype int8
  ellm align kv-cache --ref ../shared/align --kv-dtype int8 --positions 4096,32768`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Case = args[0]
			if runF != nil {
				return runF(opts)
			}
			return alignRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Ref, "ref", DefaultRef, "reference case directory, or a directory of them")
	fl.StringVar(&opts.ModelPath, "model-path", "", "model directory (overrides the manifests' model_path)")
	fl.StringVar(&opts.Kernels, "kernels", "", "kernel path: generic, avx2, avx512, avx512bf16, amx or neon, as this CPU runs them (default: the best it runs, or $ELLM_KERNELS)")
	fl.StringVar(&opts.DType, "dtype", "bf16", "weight dtype of model cases: bf16, f32 or int8")
	fl.StringVar(&opts.KVDType, "kv-dtype", "", "KV cache dtype of model cases: bf16, f32 or int8 (default: f32 on f32 kernel paths, else bf16; kv-cache: int8)")
	fl.IntSliceVar(&opts.Positions, "positions", ealign.DefaultKVPositions, "prompt lengths of the kv-cache case")
	fl.BoolVar(&opts.JSON, "json", false, "write the results as JSON")
	fl.StringVar(&opts.Dump, "dump", "", "also write ellm's tensors in the reference format under this directory")
	fl.IntVar(&opts.Threads, "threads", 0, "kernel threads (default: one per physical core this process may use, within its cgroup CPU quota)")
	opts.KernelFlags.AddFlags(fl)
	return cmd
}

func alignRun(opts *Options) error {
	path := kernels.Active()
	if opts.Kernels != "" {
		p, err := kernels.ParsePath(opts.Kernels)
		if err != nil {
			return fmt.Errorf("--kernels: %w", err)
		}
		if !kernels.CPU().Supports(p) {
			return fmt.Errorf("--kernels %s: this CPU supports at most %s", p, kernels.CPU().Best())
		}
		path = p
	} else if err := kernels.EnvError(); err != nil {
		return err
	}
	switch opts.DType {
	case "bf16", "f32", "int8":
	default:
		return fmt.Errorf("--dtype %q: want bf16, f32 or int8", opts.DType)
	}
	if opts.Threads <= 0 {
		opts.Threads = cpu.DefaultThreads(cpu.System()).N
	}
	results, err := ealign.Run(ealign.Options{
		Kind: opts.Case, Ref: opts.Ref, ModelPath: opts.ModelPath, Path: path,
		DType: opts.DType, KVDType: opts.KVDType, Positions: opts.Positions, Dump: opts.Dump, Threads: opts.Threads,
		Attention: opts.Attention, NoCodedWeights: !opts.CodedWeights,
	})
	if err != nil {
		return err
	}
	if opts.JSON {
		err = ealign.WriteJSON(opts.IO.Out, results)
	} else {
		err = ealign.WriteTables(opts.IO.Out, results)
	}
	if err != nil {
		return err
	}
	if !ealign.Passed(results) {
		return &cmdutil.ExitError{Code: 1}
	}
	return nil
}
