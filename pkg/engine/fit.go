package engine

import (
	"fmt"
	"strings"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/pkg/cpu"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/model"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/sample"
)

// Headroom is the share of usable memory a deployment may commit: the rest
// is left for the Go runtime, HTTP buffers, per-request state and page-cache
// churn.
const Headroom = 0.9

// Fit is what a deployment commits, computed from the model's shape and the
// engine options before anything is allocated, against the memory this
// process may use. serve, run, bench and check-cpu all decide with it.
type Fit struct {
	Model          string `json:"model"`
	DType          string `json:"dtype"`
	KVDType        string `json:"kv_dtype"`
	SequenceLength int    `json:"sequence_length"`
	BatchSize      int    `json:"batch_size"`
	ChunkSize      int    `json:"chunk_size"`
	Threads        int    `json:"threads"`

	Weights int64 `json:"weights_bytes"`
	// CodedWeights is the part of Weights that is the coded copy decode
	// steps stream (Options.NoCodedWeights), and Screen the part that is
	// lm_head's int8 logits screen (Options.NoLogitScreen).
	CodedWeights int64 `json:"coded_weights_bytes"`
	Screen       int64 `json:"logit_screen_bytes"`
	// DroppedCoded and DroppedScreen say that the deployment fits only
	// without the coded copy or the logits screen, which only make decode
	// faster: they are not counted above, and New loads without them.
	DroppedCoded  bool  `json:"coded_weights_dropped,omitempty"`
	DroppedScreen bool  `json:"logit_screen_dropped,omitempty"`
	KVCache       int64 `json:"kv_cache_bytes"`
	// KVPerPosition is the KV cache of one position of one slot.
	KVPerPosition int64 `json:"kv_bytes_per_position"`
	// Scratch is the runner's activation, GEMM and attention buffers, the
	// RoPE table, and each slot's sampler and token transcript: the
	// start-up's peak, with the logits screen sized for every row a pass
	// can have before model.Runner.ChooseScreen frees the rows it does
	// not keep (Info.ScratchBytes is after that).
	Scratch int64 `json:"scratch_bytes"`
	Total   int64 `json:"total_bytes"`

	Memory cpu.Memory `json:"memory"`
	// Budget is Headroom × Memory.Usable(): what may be committed.
	Budget int64 `json:"budget_bytes"`
	// ContextLimit is the longest sequence the model supports:
	// max_position_embeddings, or the YaRN window when rope_scaling is set.
	ContextLimit int `json:"context_limit"`
	// MaxSequenceLength is the largest --sequence-length whose deployment
	// fits in Budget at this batch size (0: not even one position).
	MaxSequenceLength int `json:"max_sequence_length"`

	Reasons  []string `json:"reasons,omitempty"`  // why it cannot run (empty: it can)
	Warnings []string `json:"warnings,omitempty"` // it runs, but read this
}

// OK reports whether the deployment may start.
func (f *Fit) OK() bool { return len(f.Reasons) == 0 }

// FitError is the refusal to start a deployment that does not fit.
type FitError struct{ Fit *Fit }

func (e *FitError) Error() string {
	return "deployment refused: " + strings.Join(e.Fit.Reasons, "; ")
}

// Err is a *FitError when the deployment may not start, else nil.
func (f *Fit) Err() error {
	if f.OK() {
		return nil
	}
	return &FitError{Fit: f}
}

// CheckFit sizes the deployment of cfg that opts describe (defaults applied
// as New applies them) against mem, and says whether it may start: the
// sequence length within the model's context (unless opts.AllowLongContext),
// and weights + KV cache + scratch within Headroom of the usable memory.
// The copies that only make decode faster, lm_head's logits screen and the
// coded copy, give way to what was asked for: where the deployment fits
// only without one or both, it is sized without them, DroppedScreen and
// DroppedCoded say so, and New loads without them.
func CheckFit(cfg *modelcfg.Config, opts Options, mem cpu.Memory) (*Fit, error) {
	opts = withDefaults(opts)
	if opts.Threads <= 0 {
		opts.Threads = cpu.DefaultThreads(cpu.System()).N // as NewPool resolves it
	}
	if opts.ChunkSize < 0 {
		return nil, fmt.Errorf("chunk size %d: must not be negative", opts.ChunkSize)
	}
	if opts.LogitScreenRows < 0 {
		return nil, fmt.Errorf("logit screen rows %d: must not be negative", opts.LogitScreenRows)
	}
	z := &sizer{cfg: cfg, mem: mem, sampler: sample.New(cfg.VocabSize).Bytes(), weights: map[model.LoadOptions][2]int64{}}
	f, err := z.size(opts)
	if err != nil {
		return nil, err
	}
	if f.SequenceLength > f.ContextLimit {
		msg := fmt.Sprintf("--sequence-length %d exceeds the model's context of %d positions", f.SequenceLength, f.ContextLimit)
		if opts.AllowLongContext {
			f.Warnings = append(f.Warnings, msg+" (allowed by --allow-long-context: quality degrades beyond it)")
		} else {
			f.Reasons = append(f.Reasons, msg+" (set rope_scaling to YaRN in config.json to extend it, or pass --allow-long-context)")
		}
	}
	if mem.Usable() <= 0 {
		f.Warnings = append(f.Warnings, "usable memory is unknown (no /proc/meminfo): the deployment is not checked against it")
		return f, nil
	}
	lean := opts
	lean.NoLogitScreen, lean.NoCodedWeights = true, true
	f.MaxSequenceLength = largest(func(seq int) bool {
		o := lean
		o.SequenceLength = seq
		g, err := z.size(o)
		return err == nil && g.Total <= g.Budget
	})
	if f.Total > f.Budget {
		f, err = z.leaveOut(opts, f)
		if err != nil {
			return nil, err
		}
	}
	if f.Total > f.Budget {
		f.Reasons = append(f.Reasons, z.refusal(opts, f))
	}
	return f, nil
}

// sizer sizes deployments of cfg against mem.
type sizer struct {
	cfg     *modelcfg.Config
	mem     cpu.Memory
	sampler int64 // one slot's sampler, whose size depends only on the vocabulary
	// weights holds model.WeightBytes by load options: the search for the
	// longest sequence sizes many deployments of the same weights, whose
	// count walks every tensor (36k of them in Qwen3-235B-A22B).
	weights map[model.LoadOptions][2]int64
}

// leaveOut sizes full, the deployment with opts, without as little of the
// screen and the coded copy as makes it fit, the smaller first (the
// screen's byte a vocabulary weight against the copy's 1.5 a linear
// weight), or without both where nothing fits.
func (z *sizer) leaveOut(opts Options, full *Fit) (*Fit, error) {
	var f *Fit
	for _, drop := range [][2]bool{{true, false}, {false, true}, {true, true}} {
		o := opts
		o.NoLogitScreen = o.NoLogitScreen || drop[0]
		o.NoCodedWeights = o.NoCodedWeights || drop[1]
		g, err := z.size(o)
		if err != nil {
			return nil, err
		}
		f = g
		if f.Total <= f.Budget {
			break
		}
	}
	f.DroppedScreen = f.Screen < full.Screen
	f.DroppedCoded = f.CodedWeights < full.CodedWeights
	f.Reasons, f.Warnings, f.MaxSequenceLength = full.Reasons, full.Warnings, full.MaxSequenceLength
	if f.Total > f.Budget {
		return f, nil
	}
	if f.DroppedScreen {
		f.Warnings = append(f.Warnings, fmt.Sprintf("lm_head's int8 logits screen (%s) is left out: the deployment does not fit with it; greedy and top-k draws compute every logit (--screen-logits=false leaves it out without this warning)",
			Size(full.Screen)))
	}
	if f.DroppedCoded {
		f.Warnings = append(f.Warnings, fmt.Sprintf("the coded copy of the bf16 weights (%s) is left out: the deployment does not fit with it; decode reads the weights as stored, 5-17 %% slower at depth 0 on Qwen3-0.6B (--coded-weights=false leaves it out without this warning)",
			Size(full.CodedWeights)))
	}
	return f, nil
}

// refusal says why f, the deployment with opts, does not fit, and what
// would.
func (z *sizer) refusal(opts Options, f *Fit) string {
	suggest := fmt.Sprintf("no sequence length fits with --batch-size %d", f.BatchSize)
	if n := f.MaxSequenceLength; n > 0 {
		suggest = fmt.Sprintf("the largest --sequence-length that fits with --batch-size %d is %d", f.BatchSize, n)
		if n > f.ContextLimit && !opts.AllowLongContext {
			suggest += fmt.Sprintf(" (the model's context is %d)", f.ContextLimit)
		}
	}
	// Single-pass prefill scratch grows with the sequence: chunking may
	// make the requested length fit.
	if opts.ChunkSize == 0 && opts.SequenceLength > suggestedChunk {
		o := opts
		o.ChunkSize = suggestedChunk
		if need, ok := z.fitsWith(o); ok {
			suggest += fmt.Sprintf(", or keep it and prefill in chunks: --chunk-size %d needs %s", suggestedChunk, Size(need))
		}
	}
	// int8 weights take half of bf16's bytes (a quarter of f32's).
	if opts.DType != "int8" {
		o := opts
		o.DType = "int8"
		if need, ok := z.fitsWith(o); ok {
			suggest += fmt.Sprintf(", or with its weights quantized at load: --dtype int8 needs %s", Size(need))
		}
	}
	var left []string
	if f.DroppedScreen {
		left = append(left, "the logits screen")
	}
	if f.DroppedCoded {
		left = append(left, "the coded copy")
	}
	without := ""
	if len(left) > 0 {
		without = " without " + strings.Join(left, " and ")
	}
	return fmt.Sprintf("needs %s%s (weights %s + KV cache %s + scratch %s) but only %s of the %s usable may be committed (%s, %.0f%% kept free); %s",
		Size(f.Total), without, Size(f.Weights), Size(f.KVCache), Size(f.Scratch), Size(f.Budget), Size(z.mem.Usable()), z.mem.Bound(), 100*(1-Headroom), suggest)
}

// fitsWith is what the deployment with opts needs, and whether that fits
// in memory (whatever else a refusal would say of it).
func (z *sizer) fitsWith(opts Options) (int64, bool) {
	g, err := CheckFit(z.cfg, opts, z.mem)
	if err != nil {
		return 0, false
	}
	return g.Total, g.Total <= g.Budget
}

// size is the deployment with opts (defaults applied): what it commits,
// nothing yet decided.
func (z *sizer) size(opts Options) (*Fit, error) {
	cfg := z.cfg
	kvd, err := kvcache.ParseDType(opts.KVDType)
	if err != nil {
		return nil, err
	}
	lo := opts.loadOptions()
	w, ok := z.weights[lo]
	if !ok {
		weights, coded, err := model.WeightBytes(cfg, lo)
		if err != nil {
			return nil, err
		}
		w = [2]int64{weights, coded}
		z.weights[lo] = w
	}
	weights, coded := w[0], w[1]
	// pkg/kvcache says what a position costs in each dtype it has.
	kvPer, err := kvcache.BytesPerPosition(cfg, kvd)
	if err != nil {
		return nil, err
	}
	f := &Fit{
		Model: cfg.Name(), DType: opts.DType, KVDType: string(kvd), SequenceLength: opts.SequenceLength,
		BatchSize: opts.BatchSize, ChunkSize: opts.ChunkSize, Threads: opts.Threads,
		Weights: weights, CodedWeights: coded, KVPerPosition: kvPer,
		Memory: z.mem, Budget: int64(Headroom * float64(z.mem.Usable())), ContextLimit: ContextLimit(cfg),
	}
	if lo.ScreensLogits() {
		f.Screen = gemm.ScreenBytes(cfg.VocabSize, cfg.HiddenSize)
	}
	f.KVCache = kvPer * int64(opts.BatchSize) * int64(opts.SequenceLength)
	f.Scratch = model.ScratchBytes(cfg, opts.BatchSize, opts.SequenceLength, runnerOptions(opts), lo, opts.Threads, kernels.PathFor(kernels.MatMulBF16))
	// Each slot has a sampler and a transcript of up to a sequence's tokens.
	f.Scratch += int64(opts.BatchSize) * (z.sampler + 4*int64(opts.SequenceLength))
	f.Total = f.Weights + f.KVCache + f.Scratch
	return f, nil
}

// suggestedChunk is the --chunk-size a refusal suggests when single-pass
// prefill scratch is what does not fit.
const suggestedChunk = 4096

// largest is the largest n ≥ 1 with fits(n), fits being monotone (true up
// to some n, false beyond); 0 when fits(1) is false.
func largest(fits func(int) bool) int {
	if !fits(1) {
		return 0
	}
	lo, hi := 1, 2 // fits(lo), hi unknown
	for fits(hi) {
		lo, hi = hi, 2*hi
		if hi > 1<<50 {
			return lo
		}
	}
	for hi-lo > 1 { // fits(lo), !fits(hi)
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// ContextLimit is the longest sequence cfg supports: with YaRN the original
// window times the factor, else max_position_embeddings.
func ContextLimit(c *modelcfg.Config) int {
	if r := c.RopeScaling; r != nil && r.Kind() == "yarn" {
		orig := r.OriginalMaxPositionEmbeddings
		if orig == 0 {
			orig = c.MaxPositionEmbeddings // as the runner's RoPE table assumes
		}
		return max(c.MaxPositionEmbeddings, int(r.Factor*float64(orig)))
	}
	return c.MaxPositionEmbeddings
}

// Size formats a byte count for people.
func Size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
