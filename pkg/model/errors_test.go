package model

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/safetensors"
)

func TestForwardRejects(t *testing.T) {
	m := loadTiny(t, "tiny-qwen3-a", LoadOptions{})
	r := newRunner(t, m, kvcache.BF16, 2, 16, RunnerOptions{MaxTokens: 8})
	tests := []struct {
		name string
		segs []Segment
		want string
	}{
		{"past the sequence length", []Segment{{Start: 10, Tokens: make([]int32, 7)}}, "exceed the sequence length 16"},
		{"negative start", []Segment{{Start: -1, Tokens: []int32{1}}}, "exceed the sequence length"},
		{"slot out of range", []Segment{{Slot: 2, Tokens: []int32{1}}}, "slot 2 outside [0, 2)"},
		{"empty segment", []Segment{{Tokens: nil}}, "no tokens"},
		{"token out of vocabulary", []Segment{{Tokens: []int32{151936}}}, "outside the vocabulary"},
		{"slot twice", []Segment{{Tokens: []int32{1}}, {Start: 1, Tokens: []int32{2}}}, "both use slot 0"},
		{"too many logits", []Segment{{Tokens: []int32{1, 2, 3}, Logits: LogitsAll}}, "3 logits rows asked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := r.Forward(tt.segs)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Forward = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestLoadNamesMissingTensors writes a checkpoint with one tensor missing and
// one of the wrong shape and checks that Load names both, per layer.
func TestLoadNamesMissingTensors(t *testing.T) {
	cfg, err := modelcfg.Parse([]byte(`{"architectures":["Qwen3ForCausalLM"],"vocab_size":32,"hidden_size":16,
		"intermediate_size":32,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":4,
		"tie_word_embeddings":true}`))
	if err != nil {
		t.Fatal(err)
	}
	var entries []safetensors.Entry
	for _, ts := range cfg.Tensors() {
		shape := ts.Shape
		switch ts.Name {
		case "model.layers.1.self_attn.q_norm.weight":
			continue
		case "model.layers.0.mlp.up_proj.weight":
			shape = []int{shape[0], shape[1] + 1}
		}
		e := safetensors.Entry{Name: ts.Name, DType: safetensors.BF16, Shape: shape}
		e.Data = make([]byte, e.NumBytes())
		entries = append(entries, e)
	}
	dir := t.TempDir()
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), entries, nil); err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	_, err = New(cfg, ck, LoadOptions{})
	if err == nil {
		t.Fatal("New accepted a checkpoint with a missing tensor")
	}
	for _, want := range []string{"layer 1: missing self_attn.q_norm.weight", "layer 0: mlp.up_proj.weight has shape [32 17], want [32 16]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if _, err := New(cfg, ck, LoadOptions{DType: "fp8"}); err == nil || !strings.Contains(err.Error(), "fp8") {
		t.Errorf("DType fp8: %v", err)
	}
}

// TestWeightDTypes loads the dense tiny model in each dtype: f32 weights
// reproduce the bf16 ones exactly (widening is exact), int8 stays close, and
// the sizes order as the dtypes do (less the bf16 weights' coded copies and
// logits screen).
func TestWeightDTypes(t *testing.T) {
	ref := refTensors(t, "tiny-qwen3-a", "one_token")
	ids, want := i32(t, ref, "token_ids"), f32(t, ref, "logits")
	bytes := map[string]int64{}
	for _, tt := range []struct {
		dtype  string
		maxAbs float64
	}{{"bf16", 2e-3}, {"f32", 2e-3}, {"int8", 0.5}} {
		t.Run(tt.dtype, func(t *testing.T) {
			m := loadTiny(t, "tiny-qwen3-a", LoadOptions{DType: tt.dtype})
			bytes[tt.dtype] = m.WeightBytes() - m.CodedBytes() - m.ScreenBytes() // the dtype's own bytes
			r := newRunner(t, m, kvcache.F32, 1, 8, RunnerOptions{MaxTokens: 8})
			if err := r.Forward([]Segment{{Tokens: ids, Logits: LogitsLast}}); err != nil {
				t.Fatal(err)
			}
			d := maxAbsDiff(r.Logits(0), want)
			if kernelsBF16() && tt.dtype != "int8" {
				return // bf16 activations: the reference tolerance does not apply
			}
			if d > tt.maxAbs {
				t.Errorf("logits max-abs %.3g > %g", d, tt.maxAbs)
			}
		})
	}
	if !(bytes["int8"] < bytes["bf16"] && bytes["bf16"] < bytes["f32"]) {
		t.Errorf("weight bytes int8 %d, bf16 %d, f32 %d: want increasing", bytes["int8"], bytes["bf16"], bytes["f32"])
	}
}

func TestF16ToF32(t *testing.T) {
	tests := []struct {
		h    uint16
		want float32
	}{
		{0x3c00, 1}, {0xc000, -2}, {0x3555, 0.333251953125}, {0x7bff, 65504},
		{0x0001, 5.960464477539063e-08}, {0x8000, float32(math.Copysign(0, -1))}, {0x7c00, float32(math.Inf(1))},
	}
	for _, tt := range tests {
		if got := f16ToF32(tt.h); math.Float32bits(got) != math.Float32bits(tt.want) {
			t.Errorf("f16ToF32(%#04x) = %v, want %v", tt.h, got, tt.want)
		}
	}
	if got := f16ToF32(0x7e00); got == got {
		t.Errorf("f16ToF32(NaN) = %v", got)
	}
}
