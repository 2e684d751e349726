// Package modelcfg reads Hugging Face config.json and generation_config.json
// for Qwen3 (dense) and Qwen3-MoE, validates them, knows the exact tensor list
// an architecture needs, and holds the built-in shape presets.
package modelcfg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Architecture names as config.json's "architectures" spells them.
const (
	ArchQwen3    = "Qwen3ForCausalLM"
	ArchQwen3MoE = "Qwen3MoeForCausalLM"
)

// Config mirrors config.json. Fields missing from the file take the defaults
// of transformers' Qwen3Config / Qwen3MoeConfig (see Defaults).
type Config struct {
	Architectures         []string     `json:"architectures"`
	ModelType             string       `json:"model_type"`
	VocabSize             int          `json:"vocab_size"`
	HiddenSize            int          `json:"hidden_size"`
	IntermediateSize      int          `json:"intermediate_size"`
	NumHiddenLayers       int          `json:"num_hidden_layers"`
	NumAttentionHeads     int          `json:"num_attention_heads"`
	NumKeyValueHeads      int          `json:"num_key_value_heads"`
	HeadDim               int          `json:"head_dim"`
	HiddenAct             string       `json:"hidden_act"`
	MaxPositionEmbeddings int          `json:"max_position_embeddings"`
	RMSNormEps            float64      `json:"rms_norm_eps"`
	RopeTheta             float64      `json:"rope_theta"`
	RopeScaling           *RopeScaling `json:"rope_scaling"`
	AttentionBias         bool         `json:"attention_bias"`
	TieWordEmbeddings     bool         `json:"tie_word_embeddings"`
	BOSTokenID            *int         `json:"bos_token_id,omitempty"`
	EOSTokenID            TokenIDs     `json:"eos_token_id,omitempty"`
	PadTokenID            *int         `json:"pad_token_id,omitempty"`
	TorchDType            string       `json:"torch_dtype,omitempty"`
	DType                 string       `json:"dtype,omitempty"`
	UseSlidingWindow      bool         `json:"use_sliding_window"`
	SlidingWindow         *int         `json:"sliding_window"`
	MaxWindowLayers       int          `json:"max_window_layers,omitempty"`
	InitializerRange      float64      `json:"initializer_range,omitempty"`

	// Qwen3-MoE.
	NumExperts          int   `json:"num_experts,omitempty"`
	NumExpertsPerTok    int   `json:"num_experts_per_tok,omitempty"`
	MoEIntermediateSize int   `json:"moe_intermediate_size,omitempty"`
	NormTopkProb        bool  `json:"norm_topk_prob,omitempty"`
	DecoderSparseStep   int   `json:"decoder_sparse_step,omitempty"`
	MLPOnlyLayers       []int `json:"mlp_only_layers,omitempty"`

	// EllmSynthetic marks checkpoints made by pkg/synth (random weights).
	EllmSynthetic bool `json:"ellm_synthetic,omitempty"`
	// EllmName names a synthetic model or the preset it was made from.
	EllmName string `json:"ellm_name,omitempty"`

	// Path is the directory the config was loaded from ("" for presets).
	Path string `json:"-"`
}

// RopeScaling is config.json's rope_scaling (Qwen3 uses YaRN for long context).
type RopeScaling struct {
	RopeType                      string   `json:"rope_type,omitempty"`
	Type                          string   `json:"type,omitempty"` // legacy spelling of rope_type
	Factor                        float64  `json:"factor,omitempty"`
	OriginalMaxPositionEmbeddings int      `json:"original_max_position_embeddings,omitempty"`
	AttentionFactor               *float64 `json:"attention_factor,omitempty"`
	BetaFast                      *float64 `json:"beta_fast,omitempty"`
	BetaSlow                      *float64 `json:"beta_slow,omitempty"`
	MScale                        *float64 `json:"mscale,omitempty"`
	MScaleAllDim                  *float64 `json:"mscale_all_dim,omitempty"`
}

// Kind is rope_type, falling back to the legacy "type" key, "default" if neither.
func (r *RopeScaling) Kind() string {
	if r == nil {
		return "default"
	}
	switch {
	case r.RopeType != "":
		return r.RopeType
	case r.Type != "":
		return r.Type
	}
	return "default"
}

// TokenIDs is a token id field that config files write as an int or a list.
type TokenIDs []int

// UnmarshalJSON accepts null, an int or a list of ints.
func (t *TokenIDs) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*t = nil
		return nil
	}
	if len(b) > 0 && b[0] == '[' {
		var ids []int
		if err := json.Unmarshal(b, &ids); err != nil {
			return fmt.Errorf("token ids: %w", err)
		}
		*t = ids
		return nil
	}
	var id int
	if err := json.Unmarshal(b, &id); err != nil {
		return fmt.Errorf("token id must be an int or a list of ints: %w", err)
	}
	*t = TokenIDs{id}
	return nil
}

// MarshalJSON writes a single id as an int, as Hugging Face does.
func (t TokenIDs) MarshalJSON() ([]byte, error) {
	if len(t) == 1 {
		return json.Marshal(t[0])
	}
	return json.Marshal([]int(t))
}

// Defaults returns a Config holding transformers' defaults for fields that
// config.json may omit.
func Defaults() Config {
	return Config{
		HiddenAct:             "silu",
		MaxPositionEmbeddings: 32768,
		RMSNormEps:            1e-6,
		RopeTheta:             10000,
		HeadDim:               128,
		DecoderSparseStep:     1,
	}
}

// Parse decodes config.json bytes on top of Defaults and validates the result.
func Parse(b []byte) (*Config, error) {
	c := Defaults()
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	if c.NumKeyValueHeads == 0 {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Load reads dir/config.json (dir may also be the config file itself).
func Load(dir string) (*Config, error) {
	path := dir
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		path = filepath.Join(dir, "config.json")
	} else {
		dir = filepath.Dir(dir)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs // so that Name() of "." is the directory's name
	}
	c.Path = dir
	return c, nil
}

// Architecture is the first entry of architectures, or derived from model_type.
func (c *Config) Architecture() string {
	if len(c.Architectures) > 0 {
		return c.Architectures[0]
	}
	switch c.ModelType {
	case "qwen3":
		return ArchQwen3
	case "qwen3_moe":
		return ArchQwen3MoE
	}
	return ""
}

// IsMoE reports whether the model has any sparse (mixture-of-experts) layer.
func (c *Config) IsMoE() bool {
	for i := 0; i < c.NumHiddenLayers; i++ {
		if c.IsSparseLayer(i) {
			return true
		}
	}
	return false
}

// IsSparseLayer reports whether layer i uses experts instead of a dense MLP,
// by the rule of transformers' Qwen3MoeDecoderLayer.
func (c *Config) IsSparseLayer(i int) bool {
	return c.NumExperts > 0 && c.DecoderSparseStep > 0 && (i+1)%c.DecoderSparseStep == 0 &&
		!slices.Contains(c.MLPOnlyLayers, i)
}

// QDim is the width of the query projection: heads × head_dim (not hidden_size in Qwen3).
func (c *Config) QDim() int { return c.NumAttentionHeads * c.HeadDim }

// KVDim is the width of the key and value projections.
func (c *Config) KVDim() int { return c.NumKeyValueHeads * c.HeadDim }

// Name is a label for logs: ellm_name, else the directory name, else the architecture.
func (c *Config) Name() string {
	switch {
	case c.EllmName != "":
		return c.EllmName
	case c.Path != "":
		return filepath.Base(c.Path)
	}
	return c.Architecture()
}

const (
	maxLayers  = 4096
	maxExperts = 4096
)

// Validate checks that the config describes a Qwen3 or Qwen3-MoE model ellm
// can run; every message names the offending numbers.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	arch := c.Architecture()
	if arch != ArchQwen3 && arch != ArchQwen3MoE {
		bad("architecture %q is not supported (want %s or %s)", arch, ArchQwen3, ArchQwen3MoE)
	}
	positive := []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads}, {"num_key_value_heads", c.NumKeyValueHeads},
		{"head_dim", c.HeadDim}, {"max_position_embeddings", c.MaxPositionEmbeddings},
	}
	for _, p := range positive {
		if p.v <= 0 {
			bad("%s = %d, must be positive", p.name, p.v)
		}
	}
	// Bounds far above any real model keep a hostile config from making
	// per-layer or per-expert loops (and the tensor list) enormous.
	if c.NumHiddenLayers > maxLayers {
		bad("num_hidden_layers = %d exceeds %d", c.NumHiddenLayers, maxLayers)
		return errors.Join(errs...)
	}
	if c.NumExperts > maxExperts {
		bad("num_experts = %d exceeds %d", c.NumExperts, maxExperts)
		return errors.Join(errs...)
	}
	if c.NumKeyValueHeads > 0 && c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		bad("num_attention_heads = %d is not a multiple of num_key_value_heads = %d", c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.HeadDim%2 != 0 {
		bad("head_dim = %d must be even for rotary embeddings", c.HeadDim)
	}
	if c.RMSNormEps <= 0 || c.RMSNormEps > 0.1 {
		bad("rms_norm_eps = %g, want a small positive number", c.RMSNormEps)
	}
	if c.RopeTheta <= 0 {
		bad("rope_theta = %g, must be positive", c.RopeTheta)
	}
	if c.HiddenAct != "silu" {
		bad("hidden_act %q is not supported (want silu)", c.HiddenAct)
	}
	if c.UseSlidingWindow {
		bad("use_sliding_window = true is not supported")
	}
	if err := c.validateRope(); err != nil {
		errs = append(errs, err)
	}
	for _, id := range c.EOSTokenID {
		if id < 0 || id >= c.VocabSize {
			bad("eos_token_id %d is outside the vocabulary of %d", id, c.VocabSize)
		}
	}
	if arch == ArchQwen3MoE {
		if c.NumExperts <= 0 {
			bad("num_experts = %d, must be positive for %s", c.NumExperts, arch)
		}
		if c.NumExpertsPerTok <= 0 || c.NumExpertsPerTok > c.NumExperts {
			bad("num_experts_per_tok = %d, want 1..num_experts = %d", c.NumExpertsPerTok, c.NumExperts)
		}
		if c.DecoderSparseStep <= 0 {
			bad("decoder_sparse_step = %d, must be positive", c.DecoderSparseStep)
		}
		for _, l := range c.MLPOnlyLayers {
			if l < 0 || l >= c.NumHiddenLayers {
				bad("mlp_only_layers entry %d is outside 0..%d", l, c.NumHiddenLayers-1)
			}
		}
		if c.IsMoE() && c.MoEIntermediateSize <= 0 {
			bad("moe_intermediate_size = %d, must be positive", c.MoEIntermediateSize)
		}
	} else if c.NumExperts > 0 {
		bad("num_experts = %d but the architecture is %s (dense)", c.NumExperts, arch)
	}
	if c.NumHiddenLayers > 0 && c.denseLayers() > 0 && c.IntermediateSize <= 0 {
		bad("intermediate_size = %d, must be positive (the model has %d dense MLP layers)", c.IntermediateSize, c.denseLayers())
	}
	return errors.Join(errs...)
}

func (c *Config) validateRope() error {
	r := c.RopeScaling
	if r == nil {
		return nil
	}
	switch k := r.Kind(); k {
	case "default":
	case "linear", "dynamic":
		if r.Factor <= 0 {
			return fmt.Errorf("rope_scaling %s factor = %g, must be positive", k, r.Factor)
		}
	case "yarn":
		if r.Factor < 1 {
			return fmt.Errorf("rope_scaling yarn factor = %g, must be >= 1", r.Factor)
		}
		if r.OriginalMaxPositionEmbeddings < 0 {
			return fmt.Errorf("rope_scaling original_max_position_embeddings = %d, must be positive", r.OriginalMaxPositionEmbeddings)
		}
		if r.BetaFast != nil && r.BetaSlow != nil && *r.BetaFast < *r.BetaSlow {
			return fmt.Errorf("rope_scaling beta_fast = %g is below beta_slow = %g", *r.BetaFast, *r.BetaSlow)
		}
	default:
		return fmt.Errorf("rope_scaling type %q is not supported (want default, linear, dynamic or yarn)", k)
	}
	return nil
}

func (c *Config) denseLayers() int {
	n := 0
	for i := 0; i < c.NumHiddenLayers; i++ {
		if !c.IsSparseLayer(i) {
			n++
		}
	}
	return n
}

// Truncate returns a copy with only the first layers layers (benchmarks cut
// deep models to measure per-layer cost); mlp_only_layers past the cut are dropped.
func (c *Config) Truncate(layers int) (*Config, error) {
	if layers <= 0 || layers > c.NumHiddenLayers {
		return nil, fmt.Errorf("truncate to %d layers: want 1..%d", layers, c.NumHiddenLayers)
	}
	t := c.Clone()
	t.NumHiddenLayers = layers
	t.MLPOnlyLayers = slices.DeleteFunc(t.MLPOnlyLayers, func(l int) bool { return l >= layers })
	if t.MaxWindowLayers > layers {
		t.MaxWindowLayers = layers
	}
	return t, nil
}

// Clone is a deep copy.
func (c *Config) Clone() *Config {
	t := *c
	t.Architectures = slices.Clone(c.Architectures)
	t.EOSTokenID = slices.Clone(c.EOSTokenID)
	t.MLPOnlyLayers = slices.Clone(c.MLPOnlyLayers)
	if c.RopeScaling != nil {
		r := *c.RopeScaling
		t.RopeScaling = &r
	}
	return &t
}
