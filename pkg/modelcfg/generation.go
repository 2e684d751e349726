package modelcfg

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// GenerationConfig mirrors generation_config.json. Pointer fields are nil when
// the file does not set them, so callers can tell "unset" from zero.
type GenerationConfig struct {
	BOSTokenID        *int     `json:"bos_token_id,omitempty"`
	EOSTokenID        TokenIDs `json:"eos_token_id,omitempty"`
	PadTokenID        *int     `json:"pad_token_id,omitempty"`
	DoSample          *bool    `json:"do_sample,omitempty"`
	Temperature       *float64 `json:"temperature,omitempty"`
	TopP              *float64 `json:"top_p,omitempty"`
	TopK              *int     `json:"top_k,omitempty"`
	MinP              *float64 `json:"min_p,omitempty"`
	RepetitionPenalty *float64 `json:"repetition_penalty,omitempty"`
	PresencePenalty   *float64 `json:"presence_penalty,omitempty"`
	FrequencyPenalty  *float64 `json:"frequency_penalty,omitempty"`
	MaxNewTokens      *int     `json:"max_new_tokens,omitempty"`
	MaxLength         *int     `json:"max_length,omitempty"`
}

// ParseGeneration decodes and validates generation_config.json bytes.
func ParseGeneration(b []byte) (*GenerationConfig, error) {
	var g GenerationConfig
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, err
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return &g, nil
}

// LoadGeneration reads dir/generation_config.json. A missing file is not an
// error: it yields an empty GenerationConfig (every default unset).
func LoadGeneration(dir string) (*GenerationConfig, error) {
	path := filepath.Join(dir, "generation_config.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &GenerationConfig{}, nil
	}
	if err != nil {
		return nil, err
	}
	g, err := ParseGeneration(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

// Validate checks the sampling defaults are in range.
func (g *GenerationConfig) Validate() error {
	var errs []error
	if g.Temperature != nil && *g.Temperature < 0 {
		errs = append(errs, fmt.Errorf("temperature = %g, must be >= 0", *g.Temperature))
	}
	if g.TopP != nil && (*g.TopP <= 0 || *g.TopP > 1) {
		errs = append(errs, fmt.Errorf("top_p = %g, want (0, 1]", *g.TopP))
	}
	if g.TopK != nil && *g.TopK < 0 {
		errs = append(errs, fmt.Errorf("top_k = %d, must be >= 0", *g.TopK))
	}
	if g.MinP != nil && (*g.MinP < 0 || *g.MinP > 1) {
		errs = append(errs, fmt.Errorf("min_p = %g, want [0, 1]", *g.MinP))
	}
	if g.RepetitionPenalty != nil && *g.RepetitionPenalty <= 0 {
		errs = append(errs, fmt.Errorf("repetition_penalty = %g, must be positive", *g.RepetitionPenalty))
	}
	for _, id := range g.EOSTokenID {
		if id < 0 {
			errs = append(errs, fmt.Errorf("eos_token_id %d is negative", id))
		}
	}
	return errors.Join(errs...)
}

// EOSTokens is the set of ids that end generation: generation_config's
// eos_token_id when set (it lists every stop id, e.g. <|im_end|> and
// <|endoftext|>), else config.json's, without duplicates.
func EOSTokens(c *Config, g *GenerationConfig) []int32 {
	src := c.EOSTokenID
	if g != nil && len(g.EOSTokenID) > 0 {
		src = g.EOSTokenID
	}
	var ids []int32
	seen := map[int]bool{}
	for _, id := range src {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, int32(id))
		}
	}
	return ids
}
