package bench

import (
	"strings"

	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// Cost model: what a forward pass must compute and read, the numerators of
// peak_fraction and bandwidth_fraction.

// linearParamsPerToken counts the matrix weights one token multiplies
// through in the decoder layers (k experts of each sparse layer); lastAfterKV
// those of them in the last layer past its q/k/v projections (o_proj and
// the MLP or the experts and router).
func linearParamsPerToken(c *modelcfg.Config) (all, lastAfterKV int64) {
	for _, t := range c.Tensors() {
		switch {
		case t.Kind == modelcfg.KindExperts && t.Expert >= c.NumExpertsPerTok:
		case t.Kind == modelcfg.KindAttention && len(t.Shape) == 2, t.Kind == modelcfg.KindDenseMLP,
			t.Kind == modelcfg.KindExperts, t.Kind == modelcfg.KindRouter:
			all += t.NumElements()
			if t.Layer == c.NumHiddenLayers-1 && (t.Kind != modelcfg.KindAttention || strings.HasSuffix(t.Name, "o_proj.weight")) {
				lastAfterKV += t.NumElements()
			}
		}
	}
	return all, lastAfterKV
}

// PrefillFLOPs is the arithmetic of a causal prefill of n tokens after
// `past` cached ones: the projections of every token, attention over the
// causal triangle, and the lm_head for the last token only; past the last
// layer's q/k/v, only the last token's (as the engine computes it:
// model.Runner.keepLogitRows).
func PrefillFLOPs(c *modelcfg.Config, n, past int) float64 {
	all, lastAfterKV := linearParamsPerToken(c)
	lin := 2*float64(n)*float64(all) - 2*float64(n-1)*float64(lastAfterKV)
	// q·k and p·v, 2 FLOPs per multiply-add, over positions 0..p for each
	// new row p: every row in all layers but the last, the last row there.
	pairs := float64(n)*float64(past) + float64(n)*float64(n+1)/2
	attn := 4 * float64(c.QDim()) * (pairs*float64(c.NumHiddenLayers-1) + float64(past+n))
	head := 2 * float64(c.VocabSize) * float64(c.HiddenSize)
	return lin + attn + head
}

// Reads is what a decode step reads a weight: of the linear weights, and of
// lm_head.
type Reads struct{ Linear, Head float64 }

// DecodeReads are a decode step's reads a weight in dtype, bf16 weights
// coded for decode (gemm.Weight.Code) and logits screened by lm_head's int8
// copy (gemm.Screen, one byte a weight; the few panels refined after it are
// not counted) included.
func DecodeReads(dtype string, coded, screened bool) Reads {
	var r Reads
	switch {
	case dtype == "int8":
		r.Linear = 1
	case dtype == "f32":
		r.Linear = 4
	case coded:
		r.Linear = gemm.CodedBytesPerWeight
	default:
		r.Linear = 2
	}
	r.Head = r.Linear
	if screened {
		r.Head = 1
	}
	return r
}

// DecodeBytes is the DRAM traffic of one decode step for batch sequences at
// context depth: every dense weight once and the experts the batch selects
// (expected number under uniform routing) at per.Linear bytes, the lm_head
// at per.Head, and each sequence's K and V at kvPerPosition bytes a
// position (modelcfg.KVBytesPerPosition).
func DecodeBytes(c *modelcfg.Config, per Reads, kvPerPosition int64, depth, batch int) float64 {
	var dense, expert, head float64
	for _, t := range c.Tensors() {
		switch t.Kind {
		case modelcfg.KindAttention, modelcfg.KindDenseMLP, modelcfg.KindRouter:
			if len(t.Shape) == 2 {
				dense += float64(t.NumElements())
			}
		case modelcfg.KindLMHead:
			head += float64(t.NumElements())
		case modelcfg.KindExperts:
			expert += float64(t.NumElements())
		}
	}
	if c.TieWordEmbeddings {
		head += float64(c.VocabSize) * float64(c.HiddenSize)
	}
	if c.NumExperts > 0 {
		// Probability that a given expert is picked by at least one of batch tokens.
		pMiss := 1.0
		for range batch {
			pMiss *= 1 - float64(c.NumExpertsPerTok)/float64(c.NumExperts)
		}
		expert *= 1 - pMiss
	}
	kv := float64(batch) * float64(depth) * float64(kvPerPosition)
	return (dense+expert)*per.Linear + head*per.Head + kv
}
