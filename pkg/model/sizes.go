package model

import (
	"cmp"
	"unsafe"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/attn"
	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/kernels/ops"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// ScratchBytes is the memory NewRunner allocates for cfg (loaded with load)
// over a cache of slots × seqLen positions with opts, on a pool of workers
// workers, with bf16 GEMMs on kernel path p: activation buffers, row
// indices, the RoPE table, and the GEMM and attention scratch. It lets a deployment be sized
// before anything is allocated; Runner.ScratchBytes reports the same figure
// from the buffers themselves, until ChooseScreen frees the screen's rows it
// does not keep.
func ScratchBytes(cfg *modelcfg.Config, slots, seqLen int, opts RunnerOptions, load LoadOptions, workers int, p kernels.Path) int64 {
	m, logits := runnerRows(opts, slots, seqLen)
	M := int64(m)
	H, qd, kvd := int64(cfg.HiddenSize), int64(cfg.QDim()), int64(cfg.KVDim())
	inter := int64(max(cfg.IntermediateSize, cfg.MoEIntermediateSize))
	// x, xn, y; q/k/v (then the attention output); the MLP hidden (first the queries)
	floats := M*(3*H+qd+2*kvd+max(inter, qd)) + int64(min(m, fusedRows))*qd + // the fused decode path's attention output
		int64(min(logits, m))*H + int64(logits)*int64(cfg.VocabSize)
	if load.ScreensLogits() {
		floats += 2 * int64(screenRows(m, logits, opts.ScreenRows)) * (H + int64(cfg.VocabSize)) // the screen's rows and intervals
	}
	if cfg.IsMoE() {
		E, k := int64(cfg.NumExperts), int64(cfg.NumExpertsPerTok)
		floats += M*E + E + 3*M*k + 2*M*H // router logits, probs, top-k weights, ids and order, expert rows in and out
	}
	n := 4*floats + M*(3*4+int64(unsafe.Sizeof(Row{}))) // pos, slot, ids, row
	n += gemm.ContextBytes(workers, m, int(max(H, qd, inter)), p)
	n += attn.ScratchBytes(workers, m, cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim)
	return n + ops.RopeBytes(cfg.HeadDim, seqLen)
}

// runnerRows is the rows of one pass and the logits rows of a Forward.
func runnerRows(opts RunnerOptions, slots, seqLen int) (rows, logits int) {
	logits = opts.MaxLogits
	if logits < 1 {
		logits = slots
	}
	return min(opts.MaxTokens, slots*seqLen), logits
}

// WeightBytes estimates what Load commits for cfg's weights with opts before
// anything is read: modelcfg's per-tensor count, except that the embedding
// table stays mapped as stored (bf16) whatever dtype, a tied embedding also
// gets a packed lm_head copy, coded copies (LoadOptions.NoCodedWeights),
// which coded also counts, take gemm.CodedBytesPerWeight a linear weight,
// and lm_head's screen gemm.ScreenBytes (LoadOptions.NoLogitScreen).
// Panel padding (up to 15 output rows per packed matrix) is not counted.
func WeightBytes(cfg *modelcfg.Config, opts LoadOptions) (n, coded int64, err error) {
	dtype := cmp.Or(opts.DType, "bf16")
	n, err = modelcfg.WeightBytes(cfg, dtype)
	if err != nil {
		return 0, 0, err
	}
	v, h := int64(cfg.VocabSize), int64(cfg.HiddenSize)
	if dtype == "f32" {
		n -= 2 * v * h
	}
	if cfg.TieWordEmbeddings {
		switch dtype {
		case "int8":
			n += v*h + 8*v
		case "f32":
			n += 4 * v * h
		default:
			n += 2 * v * h
		}
	}
	if opts.codes() {
		var linear int64
		for _, t := range cfg.Tensors() {
			if t.Kind.Linear() && len(t.Shape) == 2 {
				linear += t.NumElements()
			}
		}
		if cfg.TieWordEmbeddings {
			linear += v * h
		}
		coded = int64(float64(linear) * gemm.CodedBytesPerWeight)
	}
	if opts.ScreensLogits() {
		n += gemm.ScreenBytes(cfg.VocabSize, cfg.HiddenSize)
	}
	return n + coded, coded, nil
}
