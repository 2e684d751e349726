package modelcfg

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind groups tensors by role, for binding, sizing and reports.
type Kind int

// Tensor kinds. KindOther is a tensor the architecture does not use.
const (
	KindEmbedding Kind = iota
	KindAttention
	KindDenseMLP
	KindExperts
	KindRouter
	KindNorm
	KindLMHead
	KindOther
)

var kindNames = [...]string{"embedding", "attention", "dense MLP", "experts", "router", "norms", "lm_head", "other"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "Kind(" + strconv.Itoa(int(k)) + ")"
	}
	return kindNames[k]
}

// Kinds lists every kind in report order.
func Kinds() []Kind {
	ks := make([]Kind, len(kindNames))
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}

// Linear reports whether tensors of kind k are matrix-multiplied (and so are
// what int8 quantization applies to); embeddings and norms stay as stored.
func (k Kind) Linear() bool {
	switch k {
	case KindAttention, KindDenseMLP, KindExperts, KindRouter, KindLMHead:
		return true
	}
	return false
}

// TensorSpec is one tensor an architecture needs.
type TensorSpec struct {
	Name  string // Hugging Face name
	Shape []int  // [out_features, in_features] for linear weights
	Kind  Kind
	Layer int // decoder layer, -1 outside the layers
	// Expert is the expert index for KindExperts, else -1.
	Expert int
}

// NumElements is the product of the shape.
func (s *TensorSpec) NumElements() int64 {
	n := int64(1)
	for _, d := range s.Shape {
		n *= int64(d)
	}
	return n
}

// LayerPrefix is the name prefix of layer i's tensors.
func LayerPrefix(i int) string { return "model.layers." + strconv.Itoa(i) + "." }

// Tensors is the exact list of tensors the architecture needs, in model order.
// lm_head.weight is absent when the embeddings are tied.
func (c *Config) Tensors() []TensorSpec {
	h, q, kv, hd := c.HiddenSize, c.QDim(), c.KVDim(), c.HeadDim
	var ts []TensorSpec
	add := func(name string, kind Kind, layer, expert int, shape ...int) {
		ts = append(ts, TensorSpec{Name: name, Shape: shape, Kind: kind, Layer: layer, Expert: expert})
	}
	add("model.embed_tokens.weight", KindEmbedding, -1, -1, c.VocabSize, h)
	for i := 0; i < c.NumHiddenLayers; i++ {
		p := LayerPrefix(i)
		add(p+"input_layernorm.weight", KindNorm, i, -1, h)
		add(p+"self_attn.q_proj.weight", KindAttention, i, -1, q, h)
		add(p+"self_attn.k_proj.weight", KindAttention, i, -1, kv, h)
		add(p+"self_attn.v_proj.weight", KindAttention, i, -1, kv, h)
		if c.AttentionBias {
			add(p+"self_attn.q_proj.bias", KindAttention, i, -1, q)
			add(p+"self_attn.k_proj.bias", KindAttention, i, -1, kv)
			add(p+"self_attn.v_proj.bias", KindAttention, i, -1, kv)
		}
		add(p+"self_attn.o_proj.weight", KindAttention, i, -1, h, q)
		if c.AttentionBias {
			add(p+"self_attn.o_proj.bias", KindAttention, i, -1, h)
		}
		add(p+"self_attn.q_norm.weight", KindNorm, i, -1, hd)
		add(p+"self_attn.k_norm.weight", KindNorm, i, -1, hd)
		add(p+"post_attention_layernorm.weight", KindNorm, i, -1, h)
		if c.IsSparseLayer(i) {
			m := c.MoEIntermediateSize
			add(p+"mlp.gate.weight", KindRouter, i, -1, c.NumExperts, h)
			for e := 0; e < c.NumExperts; e++ {
				ep := p + "mlp.experts." + strconv.Itoa(e) + "."
				add(ep+"gate_proj.weight", KindExperts, i, e, m, h)
				add(ep+"up_proj.weight", KindExperts, i, e, m, h)
				add(ep+"down_proj.weight", KindExperts, i, e, h, m)
			}
		} else {
			m := c.IntermediateSize
			add(p+"mlp.gate_proj.weight", KindDenseMLP, i, -1, m, h)
			add(p+"mlp.up_proj.weight", KindDenseMLP, i, -1, m, h)
			add(p+"mlp.down_proj.weight", KindDenseMLP, i, -1, h, m)
		}
	}
	add("model.norm.weight", KindNorm, -1, -1, h)
	if !c.TieWordEmbeddings {
		add("lm_head.weight", KindLMHead, -1, -1, c.VocabSize, h)
	}
	return ts
}

// KindOf classifies a tensor name by the Qwen3 naming scheme (KindOther if it
// is not one), so that tensors a checkpoint has beyond the architecture can be reported by role.
func KindOf(name string) Kind {
	switch {
	case name == "model.embed_tokens.weight":
		return KindEmbedding
	case name == "lm_head.weight":
		return KindLMHead
	case strings.HasSuffix(name, "norm.weight"):
		return KindNorm
	case strings.Contains(name, ".self_attn."):
		return KindAttention
	case strings.Contains(name, ".mlp.experts."):
		return KindExperts
	case strings.Contains(name, ".mlp.gate.") || strings.Contains(name, ".mlp.shared_expert_gate."):
		return KindRouter
	case strings.Contains(name, ".mlp."):
		return KindDenseMLP
	}
	return KindOther
}

// NumParams is the total parameter count (a tied lm_head is counted once).
func (c *Config) NumParams() int64 {
	var n int64
	for _, t := range c.Tensors() {
		n += t.NumElements()
	}
	return n
}

// ActiveParams is the parameter count one token touches: the embedding row
// is not counted separately from the table, and of each sparse layer's experts
// only num_experts_per_tok are.
func (c *Config) ActiveParams() int64 {
	var n int64
	for _, t := range c.Tensors() {
		if t.Kind == KindExperts && t.Expert >= c.NumExpertsPerTok {
			continue
		}
		n += t.NumElements()
	}
	return n
}

// WeightBytes is the memory the weights take when loaded with weight dtype
// dtype ("bf16", "f32" or "int8"). int8 quantizes linear weights to 1 byte per
// element plus one f32 scale per output row, except the MoE router, which
// pkg/model keeps in bf16 because a quantized router flips expert choices;
// embeddings and norms stay bf16 as stored (f32 when dtype is f32). A tied
// embedding is stored once.
func WeightBytes(c *Config, dtype string) (int64, error) {
	var n int64
	for _, t := range c.Tensors() {
		e := t.NumElements()
		switch dtype {
		case "bf16", "":
			n += 2 * e
		case "f32":
			n += 4 * e
		case "int8":
			if t.Kind.Linear() && t.Kind != KindRouter && len(t.Shape) == 2 {
				n += e + 4*int64(t.Shape[0])
			} else {
				n += 2 * e
			}
		default:
			return 0, fmt.Errorf("weight dtype %q: want bf16, int8 or f32", dtype)
		}
	}
	return n, nil
}

// KVBytesPerPosition is the KV cache one position of one slot takes: K and
// V of every layer and kv head, at kv dtype "bf16", "f32" or "int8" (one
// byte per value plus an f32 scale per head and position, as pkg/kvcache
// lays it out).
func KVBytesPerPosition(c *Config, kvDType string) (int64, error) {
	rows := 2 * int64(c.NumHiddenLayers) * int64(c.NumKeyValueHeads)
	hd := int64(c.HeadDim)
	switch kvDType {
	case "bf16", "":
		return rows * hd * 2, nil
	case "f32":
		return rows * hd * 4, nil
	case "int8":
		return rows * (hd + 4), nil
	}
	return 0, fmt.Errorf("kv dtype %q: want bf16, int8 or f32", kvDType)
}

// KVCacheBytes is the static KV cache: seq positions of batch slots.
func KVCacheBytes(c *Config, seq, batch int, kvDType string) (int64, error) {
	per, err := KVBytesPerPosition(c, kvDType)
	return per * int64(seq) * int64(batch), err
}

// ScratchBytes is the activation memory of a pkg/model runner for passes of
// rows token rows (batch × chunk for prefill) and seqs logits rows, as
// NewRunner allocates it: per row the residual stream, its normed copy and
// the sublayer output (3·hidden), the fused q/k/v projection (whose memory
// then holds the attention output), the MLP hidden (which first holds the
// normed queries), the MoE routing and expert rows, and the activations the
// matrix kernels prepare (max(K), one form at a time); once,
// the logits. Attention needs no per-row scratch: its workers hold one K/V
// tile and one block of rows each. Per-worker kernel buffers (a few hundred
// KiB per thread) are not counted.
func ScratchBytes(c *Config, rows, seqs int) int64 {
	H, qd, kvd := int64(c.HiddenSize), int64(c.QDim()), int64(c.KVDim())
	inter := int64(max(c.IntermediateSize, c.MoEIntermediateSize))
	perRow := 3*H + qd + 2*kvd + max(inter, qd)
	var once int64
	if c.IsMoE() {
		E, k := int64(c.NumExperts), int64(c.NumExpertsPerTok)
		perRow += E + 3*k + 2*H // router logits, top-k weights, ids and order, expert rows in and out
		once += E
	}
	kpad := (max(H, qd, inter) + 3) / 4 * 4
	perRow += kpad + 1 // gemm: activations in the kernels' form, int8 row scales
	r, s := int64(rows), int64(min(seqs, rows))
	return 4 * (r*perRow + int64(seqs)*int64(c.VocabSize) + s*H + once)
}

// MemoryPlan is what a deployment commits: weights, the static KV cache and
// the activation scratch.
type MemoryPlan struct {
	Weights int64 `json:"weights_bytes"`
	KVCache int64 `json:"kv_cache_bytes"`
	Scratch int64 `json:"scratch_bytes"`
}

// Total is the sum of the parts.
func (p MemoryPlan) Total() int64 { return p.Weights + p.KVCache + p.Scratch }

// PlanMemory sizes a deployment of c with weight dtype dtype, KV dtype
// kvDType, seq positions per slot and batch slots. The scratch assumes one
// prefill pass of chunk tokens (the whole sequence when chunk is 0) next to a
// decode row for every other slot.
func PlanMemory(c *Config, dtype, kvDType string, seq, batch, chunk int) (MemoryPlan, error) {
	if seq <= 0 || batch <= 0 || chunk < 0 {
		return MemoryPlan{}, fmt.Errorf("sequence length %d, batch size %d, chunk size %d: want positive sizes", seq, batch, chunk)
	}
	w, err := WeightBytes(c, dtype)
	if err != nil {
		return MemoryPlan{}, err
	}
	kv, err := KVCacheBytes(c, seq, batch, kvDType)
	if err != nil {
		return MemoryPlan{}, err
	}
	prefill := seq
	if chunk > 0 && chunk < seq {
		prefill = chunk
	}
	return MemoryPlan{
		Weights: w,
		KVCache: kv,
		Scratch: ScratchBytes(c, prefill+batch-1, batch),
	}, nil
}
