package synth

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// DefaultName is the built-in model's name in config.json (ellm_name), logs and /v1/models.
const DefaultName = "ellm-synthetic-tiny"

// defaultSeed fixes the built-in model's weights.
const defaultSeed = 20250429

// generatorVersion changes whenever Generate's output for the same inputs
// would change, so that a cached default model is never stale.
const generatorVersion = "synth-v2"

// DefaultConfig is the built-in model's shape: a small dense Qwen3 with the
// byte tokenizer's vocabulary (a few MB of bf16). Its embeddings are untied:
// the logit prior needs its own lm_head, and a tied random model only
// repeats its last input token.
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
	c.TieWordEmbeddings = false
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
	in := defaultInit()
	if err := Generate(DefaultConfig(), tmp, Options{Seed: defaultSeed, Tokenizer: TokenizerBytes, Init: &in}); err != nil {
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

// defaultInit gives the built-in model a unigram prior over its byte
// vocabulary, so that its (meaningless) output looks like words and ends:
// letters and spaces are likely, digits and punctuation less so, bytes of
// multi-byte UTF-8 sequences and control characters rare, and <|im_end|>
// likely enough that an answer stops after a few dozen tokens.
func defaultInit() Init {
	in := DefaultInit
	in.LogitStd = 1.5
	// Small layer outputs keep each position's own embedding dominant in the
	// residual stream, so the random lm_head acts like a random bigram table
	// on top of the prior instead of favouring the same few tokens everywhere.
	in.OutputScale = 0.2
	prior := make([]float32, ByteVocabSize)
	for i := range prior {
		prior[i] = -8 // special and reserved tokens
	}
	for b := 0; b < 256; b++ {
		switch {
		case b == ' ':
			prior[b] = 8
		case b >= 'a' && b <= 'z':
			// English letter frequency order: e is the likeliest, z the least.
			prior[b] = 6.5 - float32(0.15*float32(strings.IndexByte("etaoinshrdlcumwfgypbvkjxqz", byte(b))))
		case b >= 'A' && b <= 'Z':
			prior[b] = 2.5
		case b >= '0' && b <= '9', b == '.', b == ',', b == '\n':
			prior[b] = 2.5
		case b > ' ' && b < 0x7F:
			prior[b] = 0
		default:
			prior[b] = -6 // control characters and non-ASCII bytes
		}
	}
	prior[byteTokenID("<|im_end|>")] = 2
	in.Prior = prior
	return in
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
	fmt.Fprintf(h, "%s\n%d\n%v\n", generatorVersion, defaultSeed, defaultInit())
	h.Write(cfg)
	h.Write(tok)
	h.Write([]byte(chatTemplate))
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}
