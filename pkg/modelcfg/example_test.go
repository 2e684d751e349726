package modelcfg_test

import (
	"fmt"
	"log"

	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

func ExamplePreset() {
	cfg, err := modelcfg.Preset("Qwen3-30B-A3B")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d layers, %d experts (top %d), %.1fB params, %.1fB active\n",
		cfg.Name(), cfg.NumHiddenLayers, cfg.NumExperts, cfg.NumExpertsPerTok,
		float64(cfg.NumParams())/1e9, float64(cfg.ActiveParams())/1e9)

	// The static KV cache of 4 slots × 32768 positions in bf16 and in int8.
	bf16, _ := modelcfg.KVCacheBytes(cfg, 32768, 4, "bf16")
	i8, _ := modelcfg.KVCacheBytes(cfg, 32768, 4, "int8")
	fmt.Printf("KV cache: %d GiB bf16, %.1f GiB int8\n", bf16>>30, float64(i8)/(1<<30))
	// Output:
	// Qwen3-30B-A3B: 48 layers, 128 experts (top 8), 30.5B params, 3.4B active
	// KV cache: 12 GiB bf16, 6.2 GiB int8
}

func ExampleConfig_Tensors() {
	cfg, err := modelcfg.Preset("qwen3-0.6b")
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range cfg.Tensors()[:4] {
		fmt.Println(t.Name, t.Shape, t.Kind)
	}
	// Output:
	// model.embed_tokens.weight [151936 1024] embedding
	// model.layers.0.input_layernorm.weight [1024] norms
	// model.layers.0.self_attn.q_proj.weight [2048 1024] attention
	// model.layers.0.self_attn.k_proj.weight [1024 1024] attention
}
