package cmdutil

import (
	"github.com/spf13/pflag"

	"github.com/ellm-dev/ellm/pkg/engine"
)

// EngineFlags are the flags that load a model and size the static KV cache,
// shared by every command that starts an engine.
type EngineFlags struct {
	ModelPath      string
	DType, KVDType string
	Threads        int
	SequenceLength int
	BatchSize      int
	ChunkSize      int
	// AllowLongContext accepts a sequence length beyond the model's context.
	AllowLongContext bool
	// NUMA is the placement over NUMA nodes: auto or off.
	NUMA string
}

// AddFlags defines the flags on fl; the KV shape's defaults and help are the command's.
func (e *EngineFlags) AddFlags(fl *pflag.FlagSet, seqLen int, seqHelp string, batch int, batchHelp string) {
	fl.StringVar(&e.ModelPath, "model-path", "", "Hugging Face model directory (default: the built-in synthetic model)")
	fl.StringVar(&e.DType, "dtype", "bf16", "weight dtype: bf16, int8 or f32")
	fl.StringVar(&e.KVDType, "kv-dtype", "bf16", "KV cache dtype: bf16 or f32")
	fl.IntVar(&e.Threads, "threads", 0, "compute threads (default: physical cores)")
	fl.IntVar(&e.SequenceLength, "sequence-length", seqLen, seqHelp)
	fl.IntVar(&e.BatchSize, "batch-size", batch, batchHelp)
	fl.IntVar(&e.ChunkSize, "chunk-size", 0, "prefill in chunks of this many tokens (0 = one pass)")
	AddAllowLongContextFlag(fl, &e.AllowLongContext)
	fl.StringVar(&e.NUMA, "numa", "auto", "on several NUMA nodes: auto spreads pinned workers over them and interleaves weights and KV cache; off leaves it to the OS")
}

// AddAllowLongContextFlag defines --allow-long-context, which every command
// that runs the fit check takes.
func AddAllowLongContextFlag(fl *pflag.FlagSet, v *bool) {
	fl.BoolVar(v, "allow-long-context", false,
		"accept a --sequence-length beyond the model's context (max_position_embeddings, or its YaRN window): quality degrades")
}

// Options are the engine options these flags set; the caller adds the rest.
func (e *EngineFlags) Options() engine.Options {
	return engine.Options{ModelPath: e.ModelPath, DType: e.DType, KVDType: e.KVDType, Threads: e.Threads,
		SequenceLength: e.SequenceLength, BatchSize: e.BatchSize, ChunkSize: e.ChunkSize, AllowLongContext: e.AllowLongContext, NUMA: e.NUMA}
}
