package modelcfg

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/safetensors"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

func TestPresets(t *testing.T) {
	// Published totals (billions): model cards and the sums of the released checkpoints.
	tests := []struct {
		name          string
		total, active float64 // billions
		tol           float64
		moe           bool
	}{
		{"qwen3-0.6b", 0.596, 0.596, 0.01, false},
		{"qwen3-1.7b", 1.72, 1.72, 0.02, false},
		{"qwen3-4b", 4.02, 4.02, 0.03, false},
		{"qwen3-8b", 8.19, 8.19, 0.05, false},
		{"qwen3-14b", 14.77, 14.77, 0.1, false},
		{"qwen3-32b", 32.76, 32.76, 0.15, false},
		{"qwen3-30b-a3b", 30.53, 3.35, 0.1, true},
		{"qwen3-coder-30b-a3b", 30.53, 3.35, 0.1, true},
		{"qwen3-235b-a22b", 235.1, 22.2, 0.5, true},
	}
	names := PresetNames()
	if len(names) != len(tests) {
		t.Errorf("PresetNames() = %v, want %d presets", names, len(tests))
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Preset(strings.ToUpper(tc.name))
			if err != nil {
				t.Fatal(err)
			}
			if c.HeadDim != 128 || c.VocabSize != 151936 {
				t.Errorf("head_dim %d vocab %d, want 128 and 151936", c.HeadDim, c.VocabSize)
			}
			if c.IsMoE() != tc.moe {
				t.Errorf("IsMoE = %v, want %v", c.IsMoE(), tc.moe)
			}
			total, active := float64(c.NumParams())/1e9, float64(c.ActiveParams())/1e9
			if math.Abs(total-tc.total) > tc.tol {
				t.Errorf("total params %.3fB, want %.3fB ± %.2f", total, tc.total, tc.tol)
			}
			if math.Abs(active-tc.active) > tc.tol {
				t.Errorf("active params %.3fB, want %.3fB ± %.2f", active, tc.active, tc.tol)
			}
		})
	}
	if _, err := Preset("qwen3-7b"); err == nil || !strings.Contains(err.Error(), "qwen3-0.6b") {
		t.Errorf("unknown preset error %v should list the presets", err)
	}
}

// The tensor list must match real checkpoints name for name and shape for shape.
func TestTensorsMatchSharedModels(t *testing.T) {
	for _, tc := range []struct {
		model  string
		params int64
	}{{"tiny-qwen3-a", 9_798_016}, {"tiny-qwen3moe-a", 19_572_096}} {
		t.Run(tc.model, func(t *testing.T) {
			dir := sharedtest.Path(t, "models", tc.model)
			c, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.NumParams(); got != tc.params {
				t.Errorf("NumParams = %d, want %d", got, tc.params)
			}
			ck, err := safetensors.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			specs := c.Tensors()
			if len(specs) != len(ck.Names()) {
				t.Errorf("architecture has %d tensors, checkpoint %d", len(specs), len(ck.Names()))
			}
			for _, s := range specs {
				tn, ok := ck.Tensor(s.Name)
				if !ok {
					t.Errorf("%s missing from the checkpoint", s.Name)
					continue
				}
				if !equalShape(tn.Shape, s.Shape) {
					t.Errorf("%s: checkpoint shape %v, architecture %v", s.Name, tn.Shape, s.Shape)
				}
				if k := KindOf(s.Name); k != s.Kind {
					t.Errorf("KindOf(%s) = %v, Tensors says %v", s.Name, k, s.Kind)
				}
			}
		})
	}
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSparseLayers(t *testing.T) {
	c, err := Preset("qwen3-30b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	c.NumHiddenLayers = 6
	c.DecoderSparseStep = 2
	c.MLPOnlyLayers = []int{3}
	var got []bool
	for i := 0; i < 6; i++ {
		got = append(got, c.IsSparseLayer(i))
	}
	want := []bool{false, true, false, false, false, true}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sparse layers %v, want %v", got, want)
		}
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	var dense, routers int
	for _, s := range c.Tensors() {
		switch {
		case strings.HasSuffix(s.Name, "mlp.gate_proj.weight"):
			dense++
			if s.Shape[0] != c.IntermediateSize {
				t.Errorf("%s shape %v", s.Name, s.Shape)
			}
		case strings.HasSuffix(s.Name, "mlp.gate.weight"):
			routers++
			if s.Shape[0] != 128 || s.Shape[1] != 2048 {
				t.Errorf("%s shape %v, want [128 2048]", s.Name, s.Shape)
			}
		}
	}
	if dense != 4 || routers != 2 {
		t.Errorf("%d dense MLPs and %d routers, want 4 and 2", dense, routers)
	}
}

func TestValidate(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{
			"architectures": []string{ArchQwen3}, "vocab_size": 1000, "hidden_size": 64,
			"intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
			"num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 4096,
			"eos_token_id": 5,
		}
	}
	tests := []struct {
		name    string
		edit    func(m map[string]any)
		wantErr string // "" = valid
	}{
		{"valid", func(map[string]any) {}, ""},
		{"eos list", func(m map[string]any) { m["eos_token_id"] = []int{5, 6} }, ""},
		{"eos outside vocab", func(m map[string]any) { m["eos_token_id"] = []int{5, 1000} }, "eos_token_id 1000 is outside the vocabulary of 1000"},
		{"eos string", func(m map[string]any) { m["eos_token_id"] = "x" }, "int or a list"},
		{"heads not multiple", func(m map[string]any) { m["num_key_value_heads"] = 3 }, "num_attention_heads = 4 is not a multiple of num_key_value_heads = 3"},
		{"zero hidden", func(m map[string]any) { m["hidden_size"] = 0 }, "hidden_size = 0"},
		{"odd head_dim", func(m map[string]any) { m["head_dim"] = 15 }, "head_dim = 15 must be even"},
		{"unknown arch", func(m map[string]any) { m["architectures"] = []string{"LlamaForCausalLM"} }, `"LlamaForCausalLM" is not supported`},
		{"gelu", func(m map[string]any) { m["hidden_act"] = "gelu" }, `hidden_act "gelu"`},
		{"yarn", func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
		}, ""},
		{"yarn factor", func(m map[string]any) { m["rope_scaling"] = map[string]any{"type": "yarn", "factor": 0.5} }, "yarn factor = 0.5"},
		{"rope kind", func(m map[string]any) { m["rope_scaling"] = map[string]any{"rope_type": "longrope", "factor": 2} }, `"longrope"`},
		{"moe ok", func(m map[string]any) {
			m["architectures"] = []string{ArchQwen3MoE}
			m["num_experts"], m["num_experts_per_tok"], m["moe_intermediate_size"] = 8, 2, 32
		}, ""},
		{"moe topk", func(m map[string]any) {
			m["architectures"] = []string{ArchQwen3MoE}
			m["num_experts"], m["num_experts_per_tok"], m["moe_intermediate_size"] = 8, 9, 32
		}, "num_experts_per_tok = 9, want 1..num_experts = 8"},
		{"moe mlp_only out of range", func(m map[string]any) {
			m["architectures"] = []string{ArchQwen3MoE}
			m["num_experts"], m["num_experts_per_tok"], m["moe_intermediate_size"] = 8, 2, 32
			m["mlp_only_layers"] = []int{2}
		}, "mlp_only_layers entry 2 is outside 0..1"},
		{"moe intermediate", func(m map[string]any) {
			m["architectures"] = []string{ArchQwen3MoE}
			m["num_experts"], m["num_experts_per_tok"] = 8, 2
		}, "moe_intermediate_size = 0"},
		{"dense with experts", func(m map[string]any) { m["num_experts"] = 8 }, "num_experts = 8 but the architecture is Qwen3ForCausalLM"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := base()
			tc.edit(m)
			b, _ := json.Marshal(m)
			c, err := Parse(b)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if c.RMSNormEps != 1e-6 || c.HiddenAct != "silu" {
					t.Errorf("defaults not applied: eps %g act %q", c.RMSNormEps, c.HiddenAct)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestConfigJSONRoundTrip(t *testing.T) {
	c, err := Preset("qwen3-30b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if c2.NumParams() != c.NumParams() || c2.EOSTokenID[0] != 151645 || !c2.NormTopkProb {
		t.Errorf("round trip changed the config: %s", b)
	}
	if !strings.Contains(string(b), `"eos_token_id":151645`) {
		t.Errorf("single eos id should marshal as an int: %s", b)
	}
}

func TestTruncate(t *testing.T) {
	c, err := Preset("qwen3-235b-a22b")
	if err != nil {
		t.Fatal(err)
	}
	c.MLPOnlyLayers = []int{1, 50}
	tr, err := c.Truncate(4)
	if err != nil {
		t.Fatal(err)
	}
	if tr.NumHiddenLayers != 4 || len(tr.MLPOnlyLayers) != 1 || c.NumHiddenLayers != 94 || len(c.MLPOnlyLayers) != 2 {
		t.Errorf("Truncate(4): %d layers %v; original %d layers %v", tr.NumHiddenLayers, tr.MLPOnlyLayers, c.NumHiddenLayers, c.MLPOnlyLayers)
	}
	if err := tr.Validate(); err != nil {
		t.Error(err)
	}
	if _, err := c.Truncate(95); err == nil {
		t.Error("Truncate past the depth should fail")
	}
}

func TestGeneration(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	g, err := LoadGeneration(dir)
	if err != nil {
		t.Fatal(err)
	}
	if g.Temperature == nil || *g.Temperature != 0.6 || g.TopK == nil || *g.TopK != 20 {
		t.Errorf("sampling defaults %+v", g)
	}
	eos := EOSTokens(c, g)
	if len(eos) != 2 || eos[0] != 151645 || eos[1] != 151643 {
		t.Errorf("EOSTokens = %v, want [151645 151643]", eos)
	}
	if eos := EOSTokens(c, &GenerationConfig{}); len(eos) != 1 || eos[0] != 151645 {
		t.Errorf("EOSTokens without generation eos = %v, want config's [151645]", eos)
	}
	if _, err := ParseGeneration([]byte(`{"top_p": 1.5, "temperature": -1}`)); err == nil ||
		!strings.Contains(err.Error(), "top_p = 1.5") || !strings.Contains(err.Error(), "temperature = -1") {
		t.Errorf("bad generation config error: %v", err)
	}
	g2, err := LoadGeneration(t.TempDir())
	if err != nil || g2.Temperature != nil {
		t.Errorf("missing generation_config.json: %+v, %v", g2, err)
	}
}

func TestSizing(t *testing.T) {
	c, err := Preset("qwen3-0.6b")
	if err != nil {
		t.Fatal(err)
	}
	bf16, _ := WeightBytes(c, "bf16")
	if bf16 != 2*c.NumParams() {
		t.Errorf("bf16 bytes %d, want 2 × %d", bf16, c.NumParams())
	}
	i8, err := WeightBytes(c, "int8")
	if err != nil {
		t.Fatal(err)
	}
	// Only the (tied) embedding and norms stay 2 bytes per element.
	emb := int64(c.VocabSize * c.HiddenSize)
	if i8 <= c.NumParams()+emb || i8 >= bf16 {
		t.Errorf("int8 bytes %d outside (%d, %d)", i8, c.NumParams()+emb, bf16)
	}
	if _, err := WeightBytes(c, "fp8"); err == nil {
		t.Error("unknown dtype accepted")
	}
	// 28 layers × 8 kv heads × 128 × 2 (K and V) × 2 bytes = 114688 bytes per token.
	if got, err := KVCacheBytes(c, 1000, 2, "bf16"); got != 114688*2000 || err != nil {
		t.Errorf("KVCacheBytes = %d, %v, want %d", got, err, 114688*2000)
	}
	// int8: 28 × 8 × 2 × (128 values + a 4-byte scale) = 59136 bytes per token.
	if got, err := KVBytesPerPosition(c, "int8"); got != 59136 || err != nil {
		t.Errorf("KVBytesPerPosition(int8) = %d, %v, want 59136", got, err)
	}
	if _, err := KVBytesPerPosition(c, "fp8"); err == nil {
		t.Error("kv dtype fp8 accepted")
	}
	if s := ScratchBytes(c, 512, 1); s <= 4*int64(c.VocabSize) {
		t.Errorf("ScratchBytes = %d, below the logits alone", s)
	}
}

func TestPlanMemory(t *testing.T) {
	c, err := Preset("qwen3-30b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	p, err := PlanMemory(c, "int8", "f32", 8192, 4, 512)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := WeightBytes(c, "int8")
	kv, _ := KVCacheBytes(c, 8192, 4, "f32")
	if p.Weights != w || p.KVCache != kv || p.Scratch != ScratchBytes(c, 515, 4) {
		t.Errorf("plan %+v", p)
	}
	if p.Total() != p.Weights+p.KVCache+p.Scratch {
		t.Error("Total is not the sum")
	}
	for _, bad := range []struct {
		dtype, kv string
		seq       int
	}{{"fp4", "bf16", 10}, {"bf16", "fp8", 10}, {"bf16", "bf16", 0}} {
		if _, err := PlanMemory(c, bad.dtype, bad.kv, bad.seq, 1, 0); err == nil {
			t.Errorf("PlanMemory(%s, %s, seq %d) accepted", bad.dtype, bad.kv, bad.seq)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range PresetNames() {
		c, err := Preset(name)
		if err != nil {
			f.Fatal(err)
		}
		b, _ := json.Marshal(c)
		f.Add(b)
	}
	f.Add([]byte(`{"architectures":["Qwen3MoeForCausalLM"],"num_experts":4,"decoder_sparse_step":0}`))
	f.Add([]byte(`{"eos_token_id":[1,2],"rope_scaling":{"type":"yarn","factor":4}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			return
		}
		// A config that validates must describe a usable tensor list.
		if c.NumHiddenLayers > 64 || c.NumExperts > 64 {
			return // valid but too large to enumerate quickly
		}
		for _, s := range c.Tensors() {
			for _, d := range s.Shape {
				if d <= 0 {
					t.Fatalf("valid config yields tensor %s with shape %v", s.Name, s.Shape)
				}
			}
		}
	})
}

func TestValidateBounds(t *testing.T) {
	for _, b := range []string{
		`{"architectures":["Qwen3ForCausalLM"],"vocab_size":10,"hidden_size":8,"intermediate_size":8,"num_hidden_layers":1000000000,"num_attention_heads":1,"head_dim":8}`,
		`{"architectures":["Qwen3MoeForCausalLM"],"vocab_size":10,"hidden_size":8,"num_hidden_layers":1,"num_attention_heads":1,"head_dim":8,"num_experts":100000000,"num_experts_per_tok":1,"moe_intermediate_size":8}`,
	} {
		if _, err := Parse([]byte(b)); err == nil || !strings.Contains(err.Error(), "exceeds 4096") {
			t.Errorf("huge config: %v", err)
		}
	}
}

func TestLoadName(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	t.Chdir(dir)
	c, err := Load(".")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "tiny-qwen3-a" {
		t.Errorf("Name() = %q", c.Name())
	}
}
