// Package checkcpu implements `ellm check-cpu`: what this machine is, which
// kernel path each operation takes on it, and whether a model deployment
// (weights + KV cache + scratch) fits in its memory.
package checkcpu

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/tune"
	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/cpu"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/numa"
)

// Options are the inputs of `ellm check-cpu`.
type Options struct {
	IO cmdutil.IOStreams

	ModelPath      string
	Preset         string
	SequenceLength int
	BatchSize      int
	ChunkSize      int
	DType          string
	KVDType        string
	JSON           bool
	// AllowLongContext accepts a sequence length beyond the model's context.
	AllowLongContext bool
	// Calibrate measures the kernel paths again even when a calibration is cached.
	Calibrate bool
	cmdutil.KernelFlags

	// Machine describes the machine (cpu.System by default); tests describe others.
	Machine func() cpu.Source
	// ActivePath is the kernel path in use (kernels.Active by default).
	ActivePath func() kernels.Path
	// KernelsEnvError reports a bad ELLM_KERNELS (kernels.EnvError by default).
	KernelsEnvError func() error
	// Assembly reports whether this build has assembly kernels
	// (kernels.Assembly by default).
	Assembly func() bool
	// ChooseKernels picks each operation's path (tune.Apply by default);
	// recalibrate is --calibrate.
	ChooseKernels func(recalibrate bool) (*tune.Result, error)
}

// NewCmdCheckCPU returns the cobra command; runF replaces the behaviour in tests.
func NewCmdCheckCPU(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Machine: cpu.System, ActivePath: kernels.Active, KernelsEnvError: kernels.EnvError, Assembly: kernels.Assembly}
	opts.ChooseKernels = func(recalibrate bool) (*tune.Result, error) {
		return tune.Apply(tune.Options{Version: f.Version, Recalibrate: recalibrate, Attention: opts.Attention})
	}
	cmd := &cobra.Command{
		Use:   "check-cpu",
		Short: "Check this CPU and memory before deploying a model",
		Long: `Describe this machine (CPU, cores, caches, ISA features, memory,
transparent hugepages), the compute threads serve/run/bench start by default, and
the kernel path each operation takes on it. Where two paths could serve an
operation (bf16 products on a CPU with AVX512_BF16: VDPBF16PS or widening to
f32 FMA), the faster is measured on this CPU (about 100 ms, once per CPU,
microcode and ellm build; cached in the user cache directory; --calibrate
measures again) and the rates are shown.

With --model-path or --preset it also sizes a deployment: weights at --dtype,
the static KV cache for --batch-size slots of --sequence-length positions at
--kv-dtype, and the activation scratch, and says whether it fits in the
available memory. The exit status is 0 when the deployment is possible and 1
with the reasons when it is not.`,
		Example: `  ellm check-cpu
  ellm check-cpu --preset qwen3-30b-a3b --dtype int8 --sequence-length 32768 --batch-size 4
  ellm check-cpu --model-path ./Qwen3-8B --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return checkcpuRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.ModelPath, "model-path", "", "Hugging Face model directory to size a deployment of")
	fl.StringVar(&opts.Preset, "preset", "", "model shape preset to size instead ("+strings.Join(modelcfg.PresetNames(), ", ")+")")
	fl.IntVar(&opts.SequenceLength, "sequence-length", 4096, "KV positions per slot")
	fl.IntVar(&opts.BatchSize, "batch-size", 1, "slots (concurrent sequences)")
	fl.IntVar(&opts.ChunkSize, "chunk-size", 0, "prefill chunk size in tokens (0 = whole prompt in one pass)")
	fl.StringVar(&opts.DType, "dtype", "bf16", "weight dtype: bf16, int8 or f32")
	fl.StringVar(&opts.KVDType, "kv-dtype", "bf16", "KV cache dtype: bf16, int8 (half the bytes, per-head per-position scales) or f32")
	fl.BoolVar(&opts.JSON, "json", false, "print the report as JSON")
	cmdutil.AddAllowLongContextFlag(fl, &opts.AllowLongContext)
	fl.BoolVar(&opts.Calibrate, "calibrate", false, "measure the kernel paths again, ignoring the cached calibration")
	opts.KernelFlags.AddFlags(fl)
	return cmd
}

// Report is the JSON form of the output.
type Report struct {
	CPU *cpu.Info `json:"cpu"`
	// Threads is the default compute thread count serve, run and bench take.
	Threads    cpu.Threads        `json:"compute_threads"`
	KernelPath string             `json:"kernel_path"`
	Kernels    []cpu.KernelChoice `json:"kernels"`
	// KernelChoice is how the matrix products' paths were chosen, with the measured rates.
	KernelChoice *tune.Result `json:"kernel_choice,omitempty"`
	Deployment   *Deployment  `json:"deployment,omitempty"`
	// NUMA is the placement `serve` makes on several nodes (nil on one).
	NUMA       *numa.Plan `json:"numa,omitempty"`
	Deployable bool       `json:"deployable"`
	Verdict    string     `json:"verdict"`
	Reasons    []string   `json:"reasons,omitempty"`
	Warnings   []string   `json:"warnings,omitempty"`
}

// Deployment is the sizing of one model on this machine: the same fit
// check serve, run and bench run before they allocate.
type Deployment struct {
	Model        string `json:"model"`
	Source       string `json:"source"`
	Params       int64  `json:"params"`
	ActiveParams int64  `json:"active_params"`
	*engine.Fit
	AvailableBytes int64 `json:"available_bytes"` // usable: MemAvailable or the cgroup's room
}

func checkcpuRun(opts *Options) error {
	r, err := buildReport(opts)
	if err != nil {
		return err
	}
	return cmdutil.WriteReport(opts.IO.Out, r, opts.JSON, printReport, r.Deployable)
}

func buildReport(opts *Options) (*Report, error) {
	if opts.ModelPath != "" && opts.Preset != "" {
		return nil, errors.New("give --model-path or --preset, not both")
	}
	src := opts.Machine()
	info := cpu.Detect(src)
	f := info.KernelFeatures()
	active := opts.ActivePath()
	if !f.Supports(active) {
		active = f.Best()
	}
	r := &Report{CPU: info, Threads: cpu.DefaultThreads(src), KernelPath: active.String()}
	r.Warnings = append(r.Warnings, r.Threads.Notes...)
	r.Warnings = append(r.Warnings, cpu.Fallbacks(f)...)
	if !opts.Assembly() && f.Best() != kernels.Generic {
		r.Warnings = append(r.Warnings, fmt.Sprintf("this build has no assembly kernels (-tags purego, or an architecture without them): "+
			"every operation runs pure Go, where this CPU could take %s", f.Best()))
	}
	var chosen map[kernels.Op]kernels.Path
	if err := opts.KernelsEnvError(); err != nil {
		r.Reasons = append(r.Reasons, err.Error())
	} else {
		kc, err := opts.ChooseKernels(opts.Calibrate)
		if err != nil {
			return nil, err
		}
		r.KernelChoice, chosen = kc, map[kernels.Op]kernels.Path{}
		for _, c := range kc.Choices {
			chosen[c.Op] = c.Path
		}
		if kc.Note != "" {
			r.Warnings = append(r.Warnings, "kernel calibration: "+kc.Note)
		}
	}
	r.Kernels = cpu.KernelPaths(f, active, chosen, opts.CodedWeights)
	r.KernelPath = kernels.DescribePaths(active, func(op kernels.Op) kernels.Path {
		if p, ok := chosen[op]; ok && f.Supports(p) {
			return p
		}
		return active
	})
	if info.HugePages == "never" {
		r.Warnings = append(r.Warnings, "transparent hugepages are off: the KV cache and weights use 4 KiB pages (more TLB misses)")
	}
	if opts.ModelPath != "" || opts.Preset != "" {
		if err := r.size(opts); err != nil {
			return nil, err
		}
	}
	r.placeNUMA(opts)
	r.Deployable = len(r.Reasons) == 0
	switch {
	case !r.Deployable:
		r.Verdict = "NOT DEPLOYABLE: " + strings.Join(r.Reasons, "; ")
	case r.Deployment != nil:
		d := r.Deployment
		r.Verdict = fmt.Sprintf("OK: %s (%s) needs %s of %s available (%.0f%% headroom kept), kernels take %s",
			d.Model, d.DType, gib(d.Total), gib(d.AvailableBytes), 100*(1-engine.Headroom), r.KernelPath)
	default:
		r.Verdict = fmt.Sprintf("OK: kernels take %s; give --model-path or --preset to size a deployment", r.KernelPath)
	}
	return r, nil
}

// size fills r.Deployment and adds the reasons it cannot run.
func (r *Report) size(opts *Options) error {
	var cfg *modelcfg.Config
	var err error
	source := opts.ModelPath
	if opts.Preset != "" {
		cfg, err = modelcfg.Preset(opts.Preset)
		source = "preset " + strings.ToLower(opts.Preset)
	} else {
		cfg, err = modelcfg.Load(opts.ModelPath)
	}
	if err != nil {
		return err
	}
	mem, err := cpu.ReadMemory(opts.Machine().Root)
	if err != nil {
		r.Reasons = append(r.Reasons, "available memory is unknown: cannot check that the deployment fits ("+err.Error()+")")
	}
	fit, err := engine.CheckFit(cfg, engine.Options{Threads: r.Threads.N, DType: opts.DType, NoCodedWeights: !opts.CodedWeights, KVDType: opts.KVDType, SequenceLength: opts.SequenceLength,
		BatchSize: opts.BatchSize, ChunkSize: opts.ChunkSize, AllowLongContext: opts.AllowLongContext}, mem)
	if err != nil {
		return err
	}
	r.Deployment = &Deployment{Model: cfg.Name(), Source: source, Params: cfg.NumParams(), ActiveParams: cfg.ActiveParams(),
		Fit: fit, AvailableBytes: mem.Usable()}
	r.Reasons = append(r.Reasons, fit.Reasons...)
	r.Warnings = append(r.Warnings, fit.Warnings...)
	f := r.CPU.KernelFeatures()
	if opts.DType == "int8" && !f.AVX512VNNI {
		r.Warnings = append(r.Warnings, "--dtype int8 without AVX512_VNNI: int8 weights are widened to f32, saving memory but not time")
	}
	return nil
}

// placeNUMA plans the default threads over the nodes, as serve does with
// --numa auto.
func (r *Report) placeNUMA(opts *Options) {
	nodes, err := numa.ReadNodes(opts.Machine().Root)
	if err != nil {
		r.Warnings = append(r.Warnings, "NUMA topology: "+err.Error())
		return
	}
	if len(nodes) < 2 {
		return
	}
	var bytes int64
	if d := r.Deployment; d != nil {
		bytes = d.Weights + d.KVCache
	}
	p, err := numa.Place(nodes, r.Threads.Allowed, r.Threads.N, bytes)
	if err != nil {
		r.Warnings = append(r.Warnings, err.Error())
		return
	}
	r.NUMA = p
	r.Warnings = append(r.Warnings, p.Warnings...)
}

func gib(n int64) string { return engine.Size(n) }

// cellWidth keeps the report about 130 columns wide: the kernel
// descriptions run to 300 characters and wrap within their cell.
const cellWidth = 72

func newTable(w io.Writer, header ...any) *tablewriter.Table {
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleLight)})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAutoWrap(tw.WrapNormal),
		tablewriter.WithRowMaxWidth(cellWidth),
	)
	t.Header(header...)
	return t
}

func printReport(w io.Writer, r *Report) error {
	c := r.CPU
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("CPU          %s (%s, family %d, model %d, stepping %d)\n", c.Model, c.Vendor, c.Family, c.ModelID, c.Stepping)
	p("Topology     %d physical cores, %d threads, %d socket(s), %d NUMA node(s)\n", c.PhysicalCores, c.Threads, c.Sockets, c.NUMANodes)
	p("Threads      %s, pinned to CPUs %s (override: --threads, --pin-threads=false)\n", r.Threads.Why, cpu.FormatCPUList(r.Threads.CPUs))
	p("Caches       L1d %s, L1i %s, L2 %s, L3 %s\n", cache(c.Caches.L1D), cache(c.Caches.L1I), cache(c.Caches.L2), cache(c.Caches.L3))
	p("Memory       %s total, %s available; transparent hugepages: %s\n", gib(c.MemTotal), gib(c.MemAvailable), orUnknown(c.HugePages))
	var have, lack []string
	for _, f := range cpu.FeatureList(c.KernelFeatures()) {
		if f.Present {
			have = append(have, f.Name)
		} else {
			lack = append(lack, f.Name)
		}
	}
	p("ISA          %s\n", strings.Join(have, " "))
	if len(lack) > 0 {
		p("Missing      %s\n", strings.Join(lack, " "))
	}
	for _, n := range c.Notes {
		p("Note         %s\n", n)
	}
	p("\nKernel path: %s\n", r.KernelPath)
	t := newTable(w, "Operation", "Path", "How")
	for _, k := range r.Kernels {
		if err := t.Append(k.Op, k.Path, k.Detail); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	if kc := r.KernelChoice; kc != nil {
		switch kc.Source {
		case "cache":
			p("Chosen from the calibration measured %s (%s):\n", kc.Calibration.Measured.Format(time.RFC3339), kc.CacheFile)
		case "measured":
			p("Chosen from a calibration measured now (%s wall clock; saved to %s):\n", kc.Calibration.Took.Round(time.Millisecond), orUnknown(kc.CacheFile))
		case "one path":
			p("Nothing to choose between:\n")
		default:
			p("Chosen by %s:\n", kc.Source)
		}
		for _, c := range kc.Choices {
			p("  %-14s %-11s %s\n", c.Op, c.Path, c.Why)
		}
	}
	if d := r.Deployment; d != nil {
		p("\nDeployment: %s (%s), %s weights, %s KV cache, %d slot(s) × %d positions\n",
			d.Model, d.Source, d.DType, d.KVDType, d.BatchSize, d.SequenceLength)
		p("Parameters: %.3fB total, %.3fB active per token\n", float64(d.Params)/1e9, float64(d.ActiveParams)/1e9)
		t := newTable(w, "Memory", "Bytes", "Size")
		rows := [][]string{
			{"weights", fmt.Sprint(d.Weights), gib(d.Weights)},
			{"  of which coded for decode" + dropped(d.DroppedCoded), fmt.Sprint(d.CodedWeights), gib(d.CodedWeights)},
			{"  of which logits screen" + dropped(d.DroppedScreen), fmt.Sprint(d.Screen), gib(d.Screen)},
			{"KV cache", fmt.Sprint(d.KVCache), gib(d.KVCache)},
			{"scratch", fmt.Sprint(d.Scratch), gib(d.Scratch)},
			{"total", fmt.Sprint(d.Total), gib(d.Total)},
			{"usable (" + d.Memory.Bound() + ")", fmt.Sprint(d.AvailableBytes), gib(d.AvailableBytes)},
			{fmt.Sprintf("budget (%.0f%%)", 100*engine.Headroom), fmt.Sprint(d.Budget), gib(d.Budget)},
		}
		if err := t.Bulk(rows); err != nil {
			return err
		}
		if err := t.Render(); err != nil {
			return err
		}
		p("KV cache: %s per position per slot; the largest --sequence-length that fits with --batch-size %d is %d (model context %d)\n",
			gib(d.KVPerPosition), d.BatchSize, d.MaxSequenceLength, d.ContextLimit)
	}
	if np := r.NUMA; np != nil {
		p("\nNUMA plan (--numa auto): %d workers pinned node by node, one per physical core first\n", len(np.CPUs))
		for _, n := range np.Nodes {
			p("  node %d: workers %d-%d on CPUs %s; holds %s of weights and KV cache, %s free\n", n.Node, n.FirstWorker,
				n.FirstWorker+n.Workers-1, cpu.FormatCPUList(n.CPUs), gib(n.Share), gib(n.MemFree))
		}
		if len(np.Interleave) > 0 {
			p("  packed weights and KV cache interleaved page by page over nodes %v (mbind; in a container grant CAP_SYS_NICE)\n", np.Interleave)
		} else {
			p("  the allowed CPUs are on one node: pages stay local\n")
		}
	}
	p("\n")
	for _, wn := range r.Warnings {
		p("warning: %s\n", wn)
	}
	p("%s\n", r.Verdict)
	return nil
}

// dropped marks a copy the deployment fits only without.
func dropped(d bool) string {
	if d {
		return " (left out)"
	}
	return ""
}

func cache(n int64) string {
	if n <= 0 {
		return "unknown"
	}
	return gib(n)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
