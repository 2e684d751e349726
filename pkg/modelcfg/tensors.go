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
// element plus 8 bytes per output row (scale and zero-point correction), except the MoE router, which
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
				n += e + 8*int64(t.Shape[0]) // per output row: an f32 scale and an int32 correction
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
