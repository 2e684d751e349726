package model

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/safetensors"
	"github.com/ellm-dev/ellm/pkg/synth"
)

type routerLayers struct{ layers []int }

func (r *routerLayers) Hidden(int, []Row, []float32) {}
func (r *routerLayers) Router(l int, _ []Row, _ []float32, _ []int32, _ []float32) {
	if !slices.Contains(r.layers, l) {
		r.layers = append(r.layers, l)
	}
}

// TestMixedMoEConfig runs a synthetic MoE model with decoder_sparse_step,
// mlp_only_layers, YaRN rope scaling and a sharded checkpoint: the sparse
// block runs exactly on the layers transformers makes sparse.
func TestMixedMoEConfig(t *testing.T) {
	cfg, err := modelcfg.Parse([]byte(`{"architectures":["Qwen3MoeForCausalLM"],"vocab_size":300,"hidden_size":32,
		"intermediate_size":48,"moe_intermediate_size":16,"num_experts":6,"num_experts_per_tok":3,"norm_topk_prob":false,
		"decoder_sparse_step":2,"mlp_only_layers":[3],"num_hidden_layers":6,"num_attention_heads":4,"num_key_value_heads":2,
		"head_dim":8,"rope_theta":10000,"max_position_embeddings":256,
		"rope_scaling":{"rope_type":"yarn","factor":4,"original_max_position_embeddings":64}}`))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := synth.Generate(cfg, dir, synth.Options{Seed: 7, ShardBytes: 20000}); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r := newRunner(t, m, kvcache.BF16, 2, 200, RunnerOptions{MaxTokens: 64})
	rec := &routerLayers{}
	r.Trace = rec
	ids := make([]int32, 150)
	for i := range ids {
		ids[i] = int32(i*37) % 300
	}
	if err := r.Forward([]Segment{{Slot: 1, Tokens: ids, Logits: LogitsLast}}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(rec.layers)
	if want := []int{1, 5}; !slices.Equal(rec.layers, want) {
		t.Errorf("sparse layers %v, want %v (decoder_sparse_step 2, mlp_only_layers [3])", rec.layers, want)
	}
	last := slices.Clone(r.Logits(0))
	// The same prompt in another slot: bit-identical.
	r.Trace = nil
	if err := r.Forward([]Segment{{Slot: 0, Tokens: ids, Logits: LogitsLast}}); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "slot 0 vs slot 1", r.Logits(0), last)

	// The MoE gather/scatter split over the pool gives the same bits.
	defer func(v int) { parallelCopyFloats = v }(parallelCopyFloats)
	parallelCopyFloats = 0
	if err := r.Forward([]Segment{{Slot: 0, Tokens: ids, Logits: LogitsLast}}); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "parallel MoE copies", r.Logits(0), last)

	// The per-row steps (q/k norms, RoPE, cache stores, residual norms) on
	// one thread, with the products preparing their own activations, give
	// the same bits as split over the pool with the norms staging them.
	defer func(v int) { parallelRows = v }(parallelRows)
	parallelRows = len(ids) + 1
	if err := r.Forward([]Segment{{Slot: 0, Tokens: ids, Logits: LogitsLast}}); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "per-row steps on one thread", r.Logits(0), last)

	// LogitsAll across passes: rows 0..149 from three passes of 64 rows
	// equal those of one pass of 150, together with a second segment.
	one := newRunner(t, m, kvcache.BF16, 2, 200, RunnerOptions{MaxTokens: 256, MaxLogits: 151})
	three := newRunner(t, m, kvcache.BF16, 2, 200, RunnerOptions{MaxTokens: 64, MaxLogits: 151})
	segs := []Segment{{Slot: 0, Tokens: ids, Logits: LogitsAll}, {Slot: 1, Tokens: ids[:9], Logits: LogitsLast}}
	for _, x := range []*Runner{one, three} {
		if err := x.Forward(segs); err != nil {
			t.Fatal(err)
		}
		if x.NumLogits() != 151 {
			t.Fatalf("NumLogits = %d, want 151", x.NumLogits())
		}
	}
	for i := range 151 {
		sameBits(t, fmt.Sprintf("logits row %d", i), three.Logits(i), one.Logits(i))
	}
}

// TestAttentionBias loads a checkpoint with attention_bias and checks that
// the biases reach the output: zeroing them changes the logits.
func TestAttentionBias(t *testing.T) {
	cfg, err := modelcfg.Parse([]byte(`{"architectures":["Qwen3ForCausalLM"],"vocab_size":64,"hidden_size":16,
		"intermediate_size":32,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":4,
		"attention_bias":true,"tie_word_embeddings":true}`))
	if err != nil {
		t.Fatal(err)
	}
	logits := func(zeroBias bool) []float32 {
		entries := synth.Entries(cfg, 3, synth.DefaultInit)
		for i := range entries {
			if zeroBias && strings.HasSuffix(entries[i].Name, ".bias") {
				fill := entries[i].Fill
				entries[i].Fill = func(dst []byte) error { err := fill(dst); clear(dst); return err }
			}
		}
		dir := t.TempDir()
		if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), entries, nil); err != nil {
			t.Fatal(err)
		}
		ck, err := safetensors.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		m, err := New(cfg, ck, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		r := newRunner(t, m, kvcache.F32, 1, 8, RunnerOptions{MaxTokens: 8})
		if err := r.Forward([]Segment{{Tokens: []int32{1, 2, 3}, Logits: LogitsLast}}); err != nil {
			t.Fatal(err)
		}
		return slices.Clone(r.Logits(0))
	}
	if d := maxAbsDiff(logits(false), logits(true)); d == 0 {
		t.Error("zeroing the attention biases did not change the logits")
	}
}
