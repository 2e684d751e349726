package cmdutil

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/tune"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modeldir"
	"github.com/ellm-dev/ellm/pkg/synth"
)

// EngineFlags are the flags that load a model and size the static KV cache,
// shared by every command that starts an engine.
type EngineFlags struct {
	ModelPath      string
	DType, KVDType string
	ThreadFlags
	KernelFlags
	SequenceLength int
	BatchSize      int
	ChunkSize      int
	// AllowLongContext accepts a sequence length beyond the model's context.
	AllowLongContext bool
	// NUMA is the placement over NUMA nodes: auto or off.
	NUMA string
	// ScreenLogits is engine.Options.NoLogitScreen negated.
	ScreenLogits bool
	// PrefixCacheBytes sizes the prefix store's memory; PrefixCacheDir adds
	// its disk tier, bounded by PrefixCacheDiskBytes.
	PrefixCacheBytes     ByteLimit
	PrefixCacheDir       string
	PrefixCacheDiskBytes ByteLimit
	WeightsCache
}

// Byte-limit flags whose old numbers keep their meaning (see ByteLimit).
var (
	// PrefixCacheLegacy: --prefix-cache-bytes 0 was off, -1 the default.
	PrefixCacheLegacy = map[string]int64{"0": -1, "-1": 0}
	// StoreBoundLegacy: --session-store-max-bytes 0 was the default, -1 unbounded.
	StoreBoundLegacy = map[string]int64{"0": 0, "-1": -1}
)

// AddFlags defines the flags on fl; the KV shape's defaults and help are the command's.
func (e *EngineFlags) AddFlags(fl *pflag.FlagSet, seqLen int, seqHelp string, batch int, batchHelp string) {
	fl.StringVar(&e.ModelPath, "model-path", "", "Hugging Face model directory (default: the built-in synthetic model)")
	fl.StringVar(&e.DType, "dtype", "bf16", "weight dtype: bf16, int8 or f32")
	fl.StringVar(&e.KVDType, "kv-dtype", "bf16", "KV cache dtype: bf16, int8 (half the bytes, per-head per-position scales) or f32")
	e.ThreadFlags.AddFlags(fl)
	e.KernelFlags.AddFlags(fl)
	AddScreenLogitsFlag(fl, &e.ScreenLogits)
	e.WeightsCache.AddFlag(fl)
	fl.IntVar(&e.SequenceLength, "sequence-length", seqLen, seqHelp)
	fl.IntVar(&e.BatchSize, "batch-size", batch, batchHelp)
	fl.IntVar(&e.ChunkSize, "chunk-size", 0, "prefill in chunks of this many tokens (0 = one pass)")
	AddAllowLongContextFlag(fl, &e.AllowLongContext)
	fl.StringVar(&e.NUMA, "numa", "auto", "on several NUMA nodes: auto spreads pinned workers over them and interleaves weights and KV cache; off leaves it to the OS")
	ByteLimitVar(fl, &e.PrefixCacheBytes, "prefix-cache-bytes", "off", PrefixCacheLegacy,
		"host memory keeping the KV of prompt prefixes evicted from the slots: a size (e.g. 8GiB), auto (a quarter of the memory available at start-up) or off")
	fl.StringVar(&e.PrefixCacheDir, "prefix-cache-dir", "", "directory keeping the prefix blocks evicted from memory, across restarts (default: none)")
	ByteLimitVar(fl, &e.PrefixCacheDiskBytes, "prefix-cache-disk-bytes", "unbounded", StoreBoundLegacy,
		"bound of --prefix-cache-dir, least recently used blocks evicted beyond it: a size, auto (10% of its file system's free space at start-up) or unbounded")
}

// AddAllowLongContextFlag defines --allow-long-context, which every command
// that runs the fit check takes.
func AddAllowLongContextFlag(fl *pflag.FlagSet, v *bool) {
	fl.BoolVar(v, "allow-long-context", false,
		"accept a --sequence-length beyond the model's context (max_position_embeddings, or its YaRN window): quality degrades")
}

// OpenModel reads the model directory of --model-path, else the built-in
// synthetic model (generated once into the cache directory). A model
// without a usable chat template is logged: raw prompts still work.
func OpenModel(path string, log *slog.Logger) (*modeldir.Model, error) {
	synthetic := path == ""
	if synthetic {
		dir, err := synth.DefaultModel()
		if err != nil {
			return nil, fmt.Errorf("built-in model: %w", err)
		}
		path = dir
	}
	m, err := modeldir.Open(path)
	if err != nil {
		return nil, err
	}
	m.Synthetic = m.Synthetic || synthetic
	if m.NoTemplate != nil {
		log.Warn("no chat template", "model", path, "err", m.NoTemplate)
	}
	return m, nil
}

// Options are the engine options these flags set; the caller adds the rest.
func (e *EngineFlags) Options() engine.Options {
	return engine.Options{DType: e.DType, KVDType: e.KVDType, NoCodedWeights: !e.CodedWeights, NoLogitScreen: !e.ScreenLogits, Threads: e.Threads, NoPin: !e.PinThreads,
		SequenceLength: e.SequenceLength, BatchSize: e.BatchSize, ChunkSize: e.ChunkSize,
		PrefixCacheBytes: e.PrefixCacheBytes.Bytes(), PrefixCacheDir: e.PrefixCacheDir, PrefixCacheDiskBytes: e.PrefixCacheDiskBytes.Bytes(),
		AllowLongContext: e.AllowLongContext, NUMA: e.NUMA}
}

// WeightsCache is --weights-cache: where a start keeps the packed weights
// for the next (engine.Options.WeightsImageDir); serve, run and bench
// share it.
type WeightsCache string

// AddFlag defines --weights-cache on fl.
func (w *WeightsCache) AddFlag(fl *pflag.FlagSet) {
	fl.StringVar((*string)(w), "weights-cache", "auto", "directory keeping the weights as the kernels read them between starts, "+
		"so that a start maps them instead of packing again: auto (ellm/weights in the user cache directory), off, or a directory "+
		"(one file per checkpoint and dtype, about the size of the weights in memory; not written if it would leave less than a tenth of the file system free)")
}

// Apply sets eo's weights image directory and key for a build of version.
// auto without a user cache directory keeps no image.
func (w WeightsCache) Apply(eo *engine.Options, version string) {
	switch w {
	case "off":
		return
	case "", "auto":
		dir, err := os.UserCacheDir()
		if err != nil {
			return
		}
		eo.WeightsImageDir = filepath.Join(dir, "ellm", "weights")
	default:
		eo.WeightsImageDir = string(w)
	}
	eo.WeightsImageKey = fmt.Sprintf("%+v", tune.MachineKey(version))
}

// AddScreenLogitsFlag defines --screen-logits (engine.Options.NoLogitScreen
// negated) on fl; serve, run and bench share it.
func AddScreenLogitsFlag(fl *pflag.FlagSet, screen *bool) {
	fl.BoolVar(screen, "screen-logits", true, "for greedy and top-k draws without logprobs, bound every logit with an int8 copy of a bf16 lm_head "+
		"and compute exactly only those of the tokens that can be drawn (the same tokens; fewer bytes read per token; memory: 1 byte more per lm_head weight)")
}

// KernelFlags override the kernel choices the calibration makes; serve,
// run, bench and check-cpu share them.
type KernelFlags struct {
	// Attention is the attention over a bf16 KV cache: auto, f32 or bf16.
	Attention string
	// CodedWeights is engine.Options.NoCodedWeights negated.
	CodedWeights bool
}

// AddFlags defines --attention-kernel and --coded-weights on fl.
func (k *KernelFlags) AddFlags(fl *pflag.FlagSet) {
	fl.BoolVar(&k.CodedWeights, "coded-weights", true, "where bf16 products run on AVX-512 or AMX, decode from a lossless 12-bit copy of the weights "+
		"(a quarter fewer bytes read per token, the same results; memory: 1.5 bytes more per weight), kept if it streams at least 5 % faster than the weights as stored when the model loads")
	fl.StringVar(&k.Attention, "attention-kernel", "auto", "attention over a bf16 KV cache: auto (bf16 where the calibration measures VDPBF16PS faster than f32 FMA), "+
		"f32 (K/V widened, FMA) or bf16 (VDPBF16PS: q as two bf16 parts, probabilities rounded to bf16, f32 softmax; needs AVX512_BF16)")
}

// ThreadFlags size and place the compute threads; serve, run and bench share them.
type ThreadFlags struct {
	Threads    int
	PinThreads bool
}

// AddFlags defines --threads and --pin-threads on fl.
func (t *ThreadFlags) AddFlags(fl *pflag.FlagSet) {
	fl.IntVar(&t.Threads, "threads", 0, "compute threads (default: one per physical core this process may use, within its cgroup CPU quota)")
	fl.BoolVar(&t.PinThreads, "pin-threads", true, "bind each compute thread to its own CPU, one per physical core (false: leave placement to the OS)")
}

// ChooseKernels picks each operation's kernel path before an engine starts:
// this CPU and build's cached calibration, else about 100 ms of measurement
// (kernels/tune), unless ELLM_KERNELS forces one path; k overrides the
// attention's. It logs the choice.
func ChooseKernels(version string, k KernelFlags, log *slog.Logger) error {
	if err := kernels.EnvError(); err != nil {
		return err
	}
	r, err := tune.Apply(tune.Options{Version: version, Attention: k.Attention})
	if err != nil {
		return err
	}
	if r.Note != "" {
		log.Warn("kernel calibration", "note", r.Note)
	}
	args := []any{"source", r.Source}
	if r.Source == "cache" || r.Source == "measured" {
		args = append(args, "file", r.CacheFile)
	}
	for _, c := range r.Choices {
		args = append(args, c.Op.String(), c.Path.String()+": "+c.Why)
	}
	log.Info("kernel paths", args...)
	return nil
}
