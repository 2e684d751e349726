package synth

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// DefaultName is the built-in model's name in config.json (ellm_name), logs and /v1/models.
const DefaultName = "ellm-synthetic-tiny"

// defaultSeed fixes the built-in model's weights.
const defaultSeed = 20250429

// generatorVersion changes whenever Generate's output for the same inputs
// would change, so that a cached default model is never stale.
const generatorVersion = "synth-v1"

// DefaultConfig is the built-in model's shape: a small dense Qwen3 with the
// byte tokenizer's vocabulary and tied embeddings (a few MB of bf16).
func DefaultConfig() *modelcfg.Config {
	c := modelcfg.Defaults()
	c.Architectures = []string{modelcfg.ArchQwen3}
	c.ModelType = "qwen3"
	c.VocabSize = ByteVocabSize
	c.HiddenSize = 256
	c.IntermediateSize = 768
	c.NumHiddenLayers = 4
	c.NumAttentionHeads = 8
	c.NumKeyValueHeads = 4
	c.HeadDim = 32
	c.MaxPositionEmbeddings = 32768
	c.RopeTheta = 1e6
	c.TieWordEmbeddings = true
	c.MaxWindowLayers = c.NumHiddenLayers
	c.InitializerRange = 0.02
	c.EllmName = DefaultName
	return &c
}

// DefaultModel returns the directory of the built-in model, generating it on
// first use into <user cache dir>/ellm/default-model-<hash> (the hash covers
// the generator version, config, seed and tokenizer, so changes regenerate).
// Generation goes to a temporary directory renamed into place, so concurrent
// first uses and interrupted runs never leave a half-written model behind.
func DefaultModel() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("default model: %w", err)
	}
	return defaultModelIn(filepath.Join(cache, "ellm"))
}

func defaultModelIn(parent string) (string, error) {
	key, err := defaultModelKey()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(parent, "default-model-"+key)
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("default model: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, ".default-model-*")
	if err != nil {
		return "", fmt.Errorf("default model: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op after a successful rename
	if err := Generate(DefaultConfig(), tmp, Options{Seed: defaultSeed, Tokenizer: TokenizerBytes}); err != nil {
		return "", fmt.Errorf("default model: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another process may have won the race; its model is as good as ours.
		if _, statErr := os.Stat(filepath.Join(dir, "config.json")); statErr == nil {
			return dir, nil
		}
		return "", fmt.Errorf("default model: %w", err)
	}
	return dir, nil
}

func defaultModelKey() (string, error) {
	h := sha256.New()
	cfg, err := marshalJSON(DefaultConfig())
	if err != nil {
		return "", err
	}
	tok, err := ByteTokenizerJSON()
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "%s\n%d\n", generatorVersion, defaultSeed)
	h.Write(cfg)
	h.Write(tok)
	h.Write([]byte(chatTemplate))
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}
