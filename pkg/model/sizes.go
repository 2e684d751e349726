package model

import (
	"unsafe"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/attn"
	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/kernels/ops"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// ScratchBytes is the memory NewRunner allocates for cfg over a cache of
// slots × seqLen positions with opts, on a pool of workers workers and kernel
// path p: activation buffers, the GEMM and attention scratch and the RoPE
// table. It lets a deployment be sized before anything is allocated;
// Runner.ScratchBytes reports the same figure from the buffers themselves.
func ScratchBytes(cfg *modelcfg.Config, slots, seqLen int, opts RunnerOptions, workers int, p kernels.Path) int64 {
	m, logits := runnerRows(opts, slots, seqLen)
	M := int64(m)
	H, qd, kvd, inter := int64(cfg.HiddenSize), int64(cfg.QDim()), int64(cfg.KVDim()), int64(max(cfg.IntermediateSize, cfg.MoEIntermediateSize))
	floats := M*(3*H+qd+2*kvd+2*qd+inter) + int64(min(logits, m))*H + int64(logits)*int64(cfg.VocabSize)
	n := 4*floats + M*(3*4+int64(unsafe.Sizeof(Row{}))) // pos, slot, ids, row
	n += int64(min(m, slots))*int64(unsafe.Sizeof(attn.Seq{})) + int64(slots)*8 + int64(workers)*16
	if cfg.IsMoE() {
		n += newMoEScratchBytes(M, H, int64(cfg.NumExperts), int64(cfg.NumExpertsPerTok))
	}
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

func newMoEScratchBytes(m, h, e, k int64) int64 {
	return 4*(m*e+e+m*k+m*h*2) + 4*2*m*k + 8*(e+1)
}

// WeightBytes estimates what Load commits for cfg's weights in dtype before
// anything is read: modelcfg's per-tensor count, except that the embedding
// table stays mapped as stored (bf16) whatever dtype, and a tied embedding
// also gets a packed lm_head copy. Panel padding (up to 15 output rows per
// packed matrix) is not counted.
func WeightBytes(cfg *modelcfg.Config, dtype string) (int64, error) {
	n, err := modelcfg.WeightBytes(cfg, dtype)
	if err != nil {
		return 0, err
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
	return n, nil
}
