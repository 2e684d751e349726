// Package bench implements `ellm bench` and its subcommands.
package bench

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/bench"
	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/modeldir"
)

// Common are the flags every model benchmark shares.
type Common struct {
	IO        cmdutil.IOStreams
	Version   string
	ModelPath string
	Preset    string
	Layers    int
	cmdutil.ThreadFlags
	cmdutil.KernelFlags
	cmdutil.WeightsCache
	DType   string
	KVDType string
	Repeat  int
	Seed    uint64
	JSON    bool
	CSV     bool
	Plot    string
	// AllowLongContext accepts a sequence length beyond the model's context.
	AllowLongContext bool
	// NUMA is the engine's placement over NUMA nodes: auto or off.
	NUMA string
	// ScreenLogits is engine.Options.NoLogitScreen negated.
	ScreenLogits bool
	// NoCeilings skips measuring the machine's peaks (fractions are then 0).
	NoCeilings bool
	// PrefixCacheBytes is engine.Options.PrefixCacheBytes: auto unless the
	// command defines --prefix-cache-bytes (addPrefixCacheFlag).
	PrefixCacheBytes cmdutil.ByteLimit
}

// NewCmdBench returns `ellm bench` with its subcommands.
func NewCmdBench(f *cmdutil.Factory, _ func(*Common) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure prefill TTFT, decode TPOT, sessions, agent traffic, serving and kernels",
		Long: `Benchmarks that run at real model shapes with no download: --preset NAME
instantiates a shape from configs/presets with synthetic weights (cached), --layers N
keeps only the first N layers of a deep model (times are scaled to the full depth and
labelled so). Every result is also given as a fraction of this machine's own ceilings
(FMA / VDPBF16PS / int8 dot-product peak, DRAM read bandwidth) measured in the same run.`,
	}
	cmd.AddCommand(newCmdPrefill(f, nil), newCmdDecode(f, nil), newCmdSession(f, nil), newCmdAgent(f, nil), newCmdServe(f, nil),
		newCmdKernels(f, nil), newCmdLlamaCpp(f, nil))
	return cmd
}

func addCommonFlags(cmd *cobra.Command, c *Common) {
	fl := cmd.Flags()
	fl.StringVar(&c.ModelPath, "model-path", "", "Hugging Face model directory (default: --preset, else the built-in synthetic model)")
	fl.StringVar(&c.Preset, "preset", "", "model shape preset with synthetic weights: "+strings.Join(modelcfg.PresetNames(), ", "))
	fl.IntVar(&c.Layers, "layers", 0, "with --preset: keep only the first N layers (results scaled to full depth)")
	c.ThreadFlags.AddFlags(fl)
	c.KernelFlags.AddFlags(fl)
	cmdutil.AddScreenLogitsFlag(fl, &c.ScreenLogits)
	c.WeightsCache.AddFlag(fl)
	fl.StringVar(&c.DType, "dtype", "bf16", "weight dtype: bf16, int8 or f32")
	fl.StringVar(&c.KVDType, "kv-dtype", "bf16", "KV cache dtype: bf16, int8 (half the bytes, per-head per-position scales) or f32")
	cmdutil.AddAllowLongContextFlag(fl, &c.AllowLongContext)
	fl.StringVar(&c.NUMA, "numa", "auto", "placement over NUMA nodes: auto or off (see docs/deploy.md)")
	fl.IntVar(&c.Repeat, "repeat", 3, "measured repetitions per point (after one warm-up)")
	fl.Uint64Var(&c.Seed, "seed", 1, "seed for synthetic weights and prompts")
	addOutputFlags(cmd, c)
	fl.BoolVar(&c.NoCeilings, "no-ceilings", false, "skip measuring the machine's peaks")
}

// addPrefixCacheFlag defines --prefix-cache-bytes, defaulting to def
// ("auto" or "off"); why is the help's reason for that default.
func addPrefixCacheFlag(cmd *cobra.Command, c *Common, def, why string) {
	cmdutil.ByteLimitVar(cmd.Flags(), &c.PrefixCacheBytes, "prefix-cache-bytes", "off", cmdutil.PrefixCacheLegacy,
		"prefix store size: a size (e.g. 8GiB), auto (the engine's default) or off; "+def+" here: "+why)
	if err := c.PrefixCacheBytes.Set(def); err != nil {
		panic(err) // def is one of this package's constants
	}
	cmd.Flags().Lookup("prefix-cache-bytes").DefValue = def
}

// noPrefixStore is why prefill and decode measurements run without the
// prefix store by default.
const noPrefixStore = "every measured prompt is new, so the store would only add saving the previous one " +
	"to the time measured (see docs/benchmarks.md); llama-bench has no such store"

func addOutputFlags(cmd *cobra.Command, c *Common) {
	fl := cmd.Flags()
	fl.BoolVar(&c.JSON, "json", false, "print JSON: {machine, model, results}")
	fl.BoolVar(&c.CSV, "csv", false, "print CSV")
	fl.StringVar(&c.Plot, "plot", "", "also draw the results to this file (.png, .svg or .pdf)")
	cmd.MarkFlagsMutuallyExclusive("json", "csv")
}

func (c *Common) format() bench.Format {
	switch {
	case c.JSON:
		return bench.FormatJSON
	case c.CSV:
		return bench.FormatCSV
	}
	return bench.FormatTable
}

// progress draws on stderr, only when it is a terminal.
func (c *Common) progress(total int, what string) *bench.Progress {
	return bench.NewProgress(c.IO.ErrOut, total, what)
}

// setup resolves the model, measures the ceilings and starts an engine.
type setup struct {
	engine  *engine.Engine
	cfg     *modelcfg.Config
	model   *bench.Model
	machine bench.Machine
	scale   float64
	// crowded says the engine fits in memory, but not beside what start
	// was told stays resident with it.
	crowded bool
	// reopen starts another engine as the first was started.
	reopen func() (*engine.Engine, error)
}

// start starts an engine of seqLen positions in each of slots slots,
// prefilling in chunks of chunk tokens (0: whole prompts), and says whether
// it fits beside a further beside bytes that stay resident with it.
func (c *Common) start(ctx context.Context, seqLen, slots, chunk int, beside int64) (*setup, error) {
	if c.Layers < 0 {
		return nil, fmt.Errorf("--layers %d: must not be negative", c.Layers)
	}
	if c.Layers > 0 && c.Preset == "" {
		return nil, fmt.Errorf("--layers needs --preset (a checkpoint is measured whole)")
	}
	if err := cmdutil.ChooseKernels(c.Version, c.KernelFlags, slog.New(slog.NewTextHandler(c.IO.ErrOut, nil))); err != nil {
		return nil, err
	}
	src := bench.ModelSource{Path: c.ModelPath, Preset: c.Preset, Layers: c.Layers, Seed: c.Seed}
	eo := engine.Options{DType: c.DType, KVDType: c.KVDType, NoCodedWeights: !c.CodedWeights, NoLogitScreen: !c.ScreenLogits, Threads: c.Threads, NoPin: !c.PinThreads,
		SequenceLength: seqLen, BatchSize: slots, ChunkSize: chunk, AllowLongContext: c.AllowLongContext, NUMA: c.NUMA}
	c.WeightsCache.Apply(&eo, c.Version)
	// Refuse what cannot fit before generating a synthetic checkpoint.
	cfg, _, err := src.Config()
	if err != nil {
		return nil, err
	}
	fit, err := engine.Fits(cfg, eo)
	if err != nil {
		return nil, err
	}
	crowded := beside > 0 && fit.Memory.Usable() > 0 && fit.Total+beside > fit.Budget
	fmt.Fprintln(c.IO.ErrOut, "preparing model…")
	dir, model, err := src.Resolve()
	if err != nil {
		return nil, err
	}
	model.DType, model.KVDType = c.DType, c.KVDType
	model.Scaled = model.FullLayers > 0
	eo.PrefixCacheBytes = c.PrefixCacheBytes.Bytes()
	open := func() (*engine.Engine, error) {
		md, err := modeldir.Open(dir)
		if err != nil {
			return nil, err
		}
		return engine.New(md, eo)
	}
	e, err := open()
	if err != nil {
		return nil, err
	}
	// A first start writes its weights image in the background: not while
	// anything is measured.
	e.WeightsImage()
	info := e.Info()
	model.CodedWeights, model.DecodeWeights, model.ScreenRows = info.CodedWeightBytes > 0, info.DecodeWeights, info.ScreenRows
	model.LoadSeconds, model.WeightsMapped = info.LoadTime.Seconds(), info.WeightsMapped
	m := bench.DescribeMachine(info.Threads)
	m.ThreadsWhy, m.PinnedCPUs = info.ThreadsWhy, info.PinnedCPUs
	if !c.NoCeilings {
		fmt.Fprintln(c.IO.ErrOut, "measuring this machine's ceilings…")
		pool, _ := engine.NewPool(c.Threads, !c.PinThreads)
		m.Ceilings, err = bench.MeasureCeilings(pool)
		pool.Close()
		if err != nil {
			e.Close()
			return nil, err
		}
	}
	return &setup{engine: e, cfg: model.Config, model: model, machine: m, scale: model.Scale(), crowded: crowded, reopen: open}, nil
}

func (c *Common) write(r bench.Report) error {
	return bench.Write(c.IO.Out, r, c.format())
}

func parseInts(flag, s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		var n int
		if _, err := fmt.Sscan(part, &n); err != nil || n < 0 {
			return nil, fmt.Errorf("--%s %q: want non-negative integers separated by commas", flag, s)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--%s: empty list", flag)
	}
	return out, nil
}
