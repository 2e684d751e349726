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
	// PrefixCacheBytes: -1 = the engine's default, 0 = no prefix store.
	PrefixCacheBytes int64
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
	fl.Int64Var(&e.PrefixCacheBytes, "prefix-cache-bytes", -1,
		"host memory keeping the KV of prompt prefixes evicted from the slots (0 = none, -1 = a quarter of the memory available at start-up)")
}

// Options are the engine options these flags set; the caller adds the rest.
func (e *EngineFlags) Options() engine.Options {
	return engine.Options{ModelPath: e.ModelPath, DType: e.DType, KVDType: e.KVDType, Threads: e.Threads,
		SequenceLength: e.SequenceLength, BatchSize: e.BatchSize, ChunkSize: e.ChunkSize,
		PrefixCacheBytes: PrefixCacheOption(e.PrefixCacheBytes)}
}

// PrefixCacheOption maps --prefix-cache-bytes (0 = none, negative = the
// default) onto engine.Options.PrefixCacheBytes (0 = the default, negative = none).
func PrefixCacheOption(flag int64) int64 {
	switch {
	case flag == 0:
		return -1
	case flag < 0:
		return 0
	}
	return flag
}
