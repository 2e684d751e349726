// Package model is the Qwen3 / Qwen3-MoE forward pass: Hugging Face's
// Qwen3ForCausalLM and Qwen3MoeForCausalLM (modeling_qwen3.py,
// modeling_qwen3_moe.py) over ellm's kernels and static KV cache.
//
// Three types by lifetime, as in llama2.c: the config (modelcfg.Config,
// mirroring config.json), the weights (Model, bound once by Hugging Face
// tensor name), and the run state (Runner: every activation buffer sized
// once for at most MaxTokens rows per pass).
package model

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/kernels/ops"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/safetensors"
)

// LoadOptions choose how weights are held in memory.
type LoadOptions struct {
	// DType of the linear weights: "bf16" (default: as stored, 2 bytes per
	// weight), "f32" (widened at load) or "int8" (quantized at load per output
	// channel, for the VNNI kernels). Embeddings and norms stay as stored
	// (norm weights are widened to f32); the MoE router stays bf16 under
	// int8, because a quantized router flips expert choices.
	DType string
	// NoCodedWeights skips the coded copy of bf16 weights that decode steps
	// stream where the products run on AMX tiles or AVX-512
	// (gemm.Weight.Code, gemm.ReadsCoded): it saves 3/4 of the bf16 weights'
	// memory and reads 1/3 more bytes a step. Without it the load codes a
	// sample, and Model.ChooseCoded the rest if the copy stays.
	NoCodedWeights bool
	// NoLogitScreen skips the int8 copy of a bf16 lm_head that screens the
	// logits of greedy and top-k draws (gemm.Screen, Runner.Screened): it
	// saves a byte a lm_head weight, and decode steps read lm_head whole.
	NoLogitScreen bool
	// ImageDir keeps the packed weights between loads (a weights image,
	// image.go): the load maps the checkpoint's image there if one fits,
	// else packs, and SaveImage writes it. "" packs every time.
	ImageDir string
	// ImageKey is the machine and build the image is for (tune.MachineKey).
	ImageKey string
}

// ScreensLogits reports whether models loaded with o screen their logits:
// a bf16 lm_head, unless NoLogitScreen.
func (o LoadOptions) ScreensLogits() bool {
	return (o.DType == "" || o.DType == "bf16") && !o.NoLogitScreen
}

// codes reports whether weights loaded with o get coded copies: bf16
// weights whose products run on a path with kernels that read them.
func (o LoadOptions) codes() bool {
	return (o.DType == "" || o.DType == "bf16") && !o.NoCodedWeights && gemm.ReadsCoded(kernels.PathFor(kernels.MatMulBF16))
}

// Model holds a model's configuration and weights.
type Model struct {
	Config *modelcfg.Config
	// LoadTime is how long binding (and packing or quantizing) the weights took.
	LoadTime time.Duration
	// DType is the linear weights' dtype ("bf16", "f32" or "int8").
	DType string

	embed     table     // model.embed_tokens.weight [vocab, hidden]
	layers    []layer   // model.layers.*
	finalNorm []float32 // model.norm.weight [hidden]
	lmHead    *gemm.Weight
	lmScreen  *gemm.Screen // nil unless LoadOptions.ScreensLogits
	// dropped is the screen DropScreen gave up while SaveImage has yet to
	// write it into the image.
	dropped *gemm.Screen

	ck          *safetensors.Checkpoint // mapped files the bf16 views point into
	packed      []packedWeight          // the linear weights in the order they are bound
	image       *image                  // LoadOptions.ImageDir
	weightBytes int64
	codedBytes  int64
	screenBytes int64
}

// packedWeight is a linear weight of the model and the tensors it is
// packed from, as the weights image names it.
type packedWeight struct {
	name string
	w    **gemm.Weight
}

// layer is one decoder layer's weights. Shapes are [out, in] as in safetensors.
type layer struct {
	inputNorm []float32 // input_layernorm.weight [hidden]
	postNorm  []float32 // post_attention_layernorm.weight [hidden]

	// self_attn.{q,k,v}_proj fused: [Hq·D + 2·Hkv·D, H], q's output
	// channels, then k's, then v's; self_attn.o_proj [H, Hq·D].
	qkv, o       *gemm.Weight
	qNorm, kNorm []float32 // self_attn.{q,k}_norm.weight [head_dim]
	// self_attn.{q,k,v}_proj.bias concatenated as qkv is, and o_proj.bias,
	// when config.json's attention_bias is set, else nil.
	qkvBias, oBias []float32

	// Dense MLP (nil on sparse layers): mlp.{gate,up,down}_proj.
	gate, up, down *gemm.Weight

	// Sparse MoE block (nil router on dense layers): mlp.gate [E, H] and mlp.experts.*.
	router  *gemm.Weight
	experts []expert
}

// expert is one MoE expert's SwiGLU MLP: gate/up [I_moe, H], down [H, I_moe].
type expert struct{ gate, up, down *gemm.Weight }

// table is an embedding table, bf16 as stored or f32 (f16/f32 checkpoints).
type table struct {
	bf16 []uint16
	f32  []float32
	dim  int
	src  []byte // the tensor's bytes in the mapping
}

// gather writes the embedding rows of ids into out [len(ids), dim].
func (t *table) gather(k *ops.Kernels, out []float32, ids []int32) error {
	if t.bf16 != nil {
		return k.Embed(out, t.bf16, t.dim, ids)
	}
	vocab := len(t.f32) / t.dim
	for i, id := range ids {
		if id < 0 || int(id) >= vocab {
			return fmt.Errorf("embed: token id %d outside the vocabulary [0, %d)", id, vocab)
		}
		copy(out[i*t.dim:(i+1)*t.dim], t.f32[int(id)*t.dim:])
	}
	return nil
}

// Load reads config.json and the safetensors checkpoint in dir. The bf16
// weights stay memory-mapped where the kernels can read them as stored.
func Load(dir string, opts LoadOptions) (*Model, error) {
	cfg, err := modelcfg.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	return LoadWith(cfg, dir, opts)
}

// LoadWith is Load with config.json already read as cfg.
func LoadWith(cfg *modelcfg.Config, dir string, opts LoadOptions) (*Model, error) {
	ck, err := safetensors.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("load model %s: %w", dir, err)
	}
	m, err := New(cfg, ck, opts)
	if err != nil {
		ck.Close()
		return nil, fmt.Errorf("load model %s: %w", dir, err)
	}
	return m, nil
}

// New binds the weights of cfg's architecture from ck. The model owns ck
// from then on (Close closes it).
func New(cfg *modelcfg.Config, ck *safetensors.Checkpoint, opts LoadOptions) (*Model, error) {
	start := time.Now()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dtype := opts.DType
	if dtype == "" {
		dtype = "bf16"
	}
	if dtype != "bf16" && dtype != "f32" && dtype != "int8" {
		return nil, fmt.Errorf("weight dtype %q: want bf16, f32 or int8", opts.DType)
	}
	b := &binder{ck: ck, dtype: dtype, layer: -1}
	m := &Model{Config: cfg, DType: dtype, ck: ck}
	h := cfg.HiddenSize
	m.embed = b.table("model.embed_tokens.weight", cfg.VocabSize, h)
	m.finalNorm = b.norm("model.norm.weight", h)
	if cfg.TieWordEmbeddings {
		b.tied(&m.lmHead, &m.embed, cfg.VocabSize, h)
	} else {
		b.linear(&m.lmHead, "lm_head.weight", cfg.VocabSize, h)
	}
	m.layers = make([]layer, cfg.NumHiddenLayers)
	for i := range m.layers {
		b.layer = i
		bindLayer(b, cfg, i, &m.layers[i])
	}
	if err := b.err(); err != nil {
		return nil, err
	}
	for _, j := range b.jobs {
		m.packed = append(m.packed, packedWeight{j.name, j.dst})
	}
	if opts.ImageDir != "" && m.openImage(b, opts) {
		m.weightBytes = b.bytes
		for _, w := range m.linearWeights() {
			m.codedBytes += int64(w.CodedBytes())
		}
	} else {
		b.packAll()
		m.weightBytes = b.bytes
		// The screen before the coded copies: packed into an image, the
		// copies ChooseCoded may drop are then its last buffers, which
		// SaveImage cuts off.
		if opts.ScreensLogits() {
			m.lmScreen = m.lmHead.Screen()
		}
		if opts.codes() {
			m.code(m.codedSample(minTimedBytes))
		}
		// Logits are computed for the last row of each sequence only: a
		// decode step's product, whose weights stream faster off AMX tiles,
		// unless coded.
		if !m.lmHead.Coded() {
			m.lmHead.SetFewRows()
		}
	}
	if m.lmScreen != nil {
		m.screenBytes = int64(m.lmScreen.Bytes())
	}
	m.weightBytes += m.screenBytes
	m.LoadTime = time.Since(start)
	return m, nil
}

// bindLayer binds decoder layer i's weights into l.
func bindLayer(b *binder, cfg *modelcfg.Config, i int, l *layer) {
	p := modelcfg.LayerPrefix(i)
	h, qd, kvd, hd := cfg.HiddenSize, cfg.QDim(), cfg.KVDim(), cfg.HeadDim
	l.inputNorm = b.norm(p+"input_layernorm.weight", h)
	l.postNorm = b.norm(p+"post_attention_layernorm.weight", h)
	b.fused(&l.qkv, h, part{p + "self_attn.q_proj.weight", qd},
		part{p + "self_attn.k_proj.weight", kvd}, part{p + "self_attn.v_proj.weight", kvd})
	b.linear(&l.o, p+"self_attn.o_proj.weight", h, qd)
	l.qNorm = b.norm(p+"self_attn.q_norm.weight", hd)
	l.kNorm = b.norm(p+"self_attn.k_norm.weight", hd)
	if cfg.AttentionBias {
		l.qkvBias = slices.Concat(b.norm(p+"self_attn.q_proj.bias", qd),
			b.norm(p+"self_attn.k_proj.bias", kvd), b.norm(p+"self_attn.v_proj.bias", kvd))
		l.oBias = b.norm(p+"self_attn.o_proj.bias", h)
	}
	if !cfg.IsSparseLayer(i) {
		b.linear(&l.gate, p+"mlp.gate_proj.weight", cfg.IntermediateSize, h)
		b.linear(&l.up, p+"mlp.up_proj.weight", cfg.IntermediateSize, h)
		b.linear(&l.down, p+"mlp.down_proj.weight", h, cfg.IntermediateSize)
		return
	}
	b.router(&l.router, p+"mlp.gate.weight", cfg.NumExperts, h)
	l.experts = make([]expert, cfg.NumExperts)
	im := cfg.MoEIntermediateSize
	for e := range l.experts {
		ep := fmt.Sprintf("%smlp.experts.%d.", p, e)
		ex := &l.experts[e]
		b.linear(&ex.gate, ep+"gate_proj.weight", im, h)
		b.linear(&ex.up, ep+"up_proj.weight", im, h)
		b.linear(&ex.down, ep+"down_proj.weight", h, im)
	}
}

// WeightBytes is the memory the weights occupy as the kernels read them
// (mapped bf16 tables and coded copies included).
func (m *Model) WeightBytes() int64 { return m.weightBytes }

// CodedBytes is the part of WeightBytes that is coded copies of the bf16
// weights for decode steps (LoadOptions.NoCodedWeights).
func (m *Model) CodedBytes() int64 { return m.codedBytes }

// ScreenBytes is the part of WeightBytes that is the int8 copy of lm_head
// that screens the logits (LoadOptions.NoLogitScreen).
func (m *Model) ScreenBytes() int64 { return m.screenBytes }

// Close unmaps the checkpoint; the model and its runners must not be used afterwards.
func (m *Model) Close() error {
	if m.ck == nil {
		return nil
	}
	err := m.ck.Close()
	m.ck = nil
	if img := m.image; img != nil {
		if img.arena != nil {
			err = errors.Join(err, img.arena.close())
			img.arena = nil
		}
		if img.data != nil {
			err = errors.Join(err, unix.Munmap(img.data))
			img.data = nil
		}
	}
	return err
}
