package synth_test

import (
	"fmt"
	"log"
	"os"

	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/safetensors"
	"github.com/ellm-dev/ellm/pkg/synth"
)

// A real model's layer shapes, cut to one layer and given the byte-level
// tokenizer's small vocabulary, with random weights in sharded safetensors.
func ExampleGenerate() {
	cfg, err := modelcfg.Preset("qwen3-0.6b")
	if err != nil {
		log.Fatal(err)
	}
	if cfg, err = cfg.Truncate(1); err != nil {
		log.Fatal(err)
	}
	cfg.VocabSize = synth.ByteVocabSize
	dir, err := os.MkdirTemp("", "synth")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	opts := synth.Options{Seed: 1, Tokenizer: synth.TokenizerBytes, ShardBytes: 16 << 20}
	if err := synth.Generate(cfg, dir, opts); err != nil {
		log.Fatal(err)
	}

	ck, err := safetensors.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer ck.Close()
	fmt.Println(len(ck.Names()), "tensors in", len(ck.Files()), "shards")
	// Output:
	// 13 tensors in 3 shards
}
