// Package modeldir loads a Hugging Face model directory: config.json, the
// tokenizer (tokenizer.json with tokenizer_config.json's added tokens), the
// chat template (chat_template.jinja, else tokenizer_config.json's), the
// sampling defaults of generation_config.json and the end tokens, each file
// read once and checked (Open); then the weights, once the engine has
// checked that they fit (LoadWeights).
//
// Which directory to load (a --model-path, else the built-in synthetic
// model) is the command's choice; the engine takes what Open returns.
package modeldir

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/ellm-dev/ellm/pkg/chat"
	"github.com/ellm-dev/ellm/pkg/conversation"
	"github.com/ellm-dev/ellm/pkg/hfdir"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/model"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/tokenizer"
)

// Model is a model directory read and checked, its weights aside.
type Model struct {
	Dir    string
	Config *modelcfg.Config
	// Synthetic: random weights (config.json's ellm_synthetic, or the
	// command chose the built-in model), so the output is not language.
	Synthetic bool
	Tokenizer *tokenizer.Tokenizer
	// Template is the chat template; nil when the directory has none
	// (NoTemplate says why): raw prompts still work.
	Template   *chat.Template
	NoTemplate error
	// Generation is generation_config.json (empty when absent).
	Generation modelcfg.GenerationConfig
	// EOS are the tokens that end a generation: either file's eos ids
	// (Qwen3's config.json names <|endoftext|>, its generation_config also
	// <|im_end|>), generation_config's first.
	EOS []int32
	// Identity hashes the model config and the tokenizer files: what a
	// session transcript's token ids are valid for.
	Identity string
}

// Open reads the model directory dir.
func Open(dir string) (*Model, error) {
	cfg, err := modelcfg.Load(dir)
	if err != nil {
		return nil, err
	}
	read := func(name string, optional bool) ([]byte, error) {
		b, err := hfdir.ReadFile(dir, name)
		if optional && errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return b, err
	}
	tj, err := read("tokenizer.json", false)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	tc, err := read("tokenizer_config.json", true)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	jinja, err := read("chat_template.jinja", true)
	if err != nil {
		return nil, fmt.Errorf("load chat template: %w", err)
	}
	tok, err := tokenizer.New(tj, tc)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", dir, err)
	}
	m := &Model{Dir: dir, Config: cfg, Synthetic: cfg.EllmSynthetic, Tokenizer: tok}
	if m.Template, err = chat.FromFiles(tc, jinja); err != nil {
		m.Template, m.NoTemplate = nil, fmt.Errorf("load chat template of %s: %w", dir, err)
	}
	gen, err := modelcfg.LoadGeneration(dir)
	if err != nil {
		return nil, err
	}
	m.Generation = *gen
	m.EOS = modelcfg.EOSTokens(cfg, gen)
	for _, id := range modelcfg.EOSTokens(cfg, nil) {
		if !slices.Contains(m.EOS, id) {
			m.EOS = append(m.EOS, id)
		}
	}
	h := sha256.New()
	ch := kvcache.ConfigHash(cfg)
	h.Write(ch[:])
	for _, f := range []struct {
		name string
		b    []byte
	}{{"tokenizer.json", tj}, {"tokenizer_config.json", tc}} {
		if f.b == nil {
			fmt.Fprintf(h, "|%s:none", f.name)
			continue
		}
		fmt.Fprintf(h, "|%s:%x", f.name, sha256.Sum256(f.b))
	}
	m.Identity = hex.EncodeToString(h.Sum(nil))[:32]
	return m, nil
}

// LoadWeights maps the safetensors checkpoint and binds the weights of the
// model's architecture. The bf16 weights stay memory-mapped where the
// kernels can read them as stored; other dtypes are converted here.
func (m *Model) LoadWeights(opts model.LoadOptions) (*model.Model, error) {
	return model.LoadWith(m.Config, m.Dir, opts)
}

// Conversation is what the conversation layer needs of the model.
func (m *Model) Conversation() *conversation.Model {
	return &conversation.Model{Tokenizer: m.Tokenizer, Template: m.Template, Generation: m.Generation, EOS: slices.Clone(m.EOS)}
}
