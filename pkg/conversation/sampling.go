package conversation

import (
	"fmt"
	"math"

	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/sample"
)

// Overrides are the sampling parameters a request sets; nil leaves the
// model's default.
type Overrides struct {
	Temperature, TopP, MinP                              *float64
	RepetitionPenalty, PresencePenalty, FrequencyPenalty *float64
	// TopK: -1 and 0 turn top-k off.
	TopK *int
	Seed *uint64
}

// ParamError is a request parameter out of its range.
type ParamError struct {
	Param, Msg string
}

func (e *ParamError) Error() string { return e.Msg }

// Sampling resolves a request's sampling parameters as vLLM does: what the
// request sets, else generation_config.json's default (g), else the
// documented default: temperature 1 (transformers'), top_p 1, top_k off,
// min_p 0, no penalties (repetition 1, presence and frequency 0). A
// generation_config with do_sample false makes the default greedy
// (temperature 0). Values out of range are a *ParamError naming the field.
func Sampling(g modelcfg.GenerationConfig, r Overrides) (sample.Params, error) {
	p := sample.Params{TopP: 1, RepetitionPenalty: 1}
	f32 := func(dst *float32, vals ...*float64) {
		for _, v := range vals {
			if v != nil {
				*dst = float32(*v)
			}
		}
	}
	if g.DoSample == nil || *g.DoSample {
		f32(&p.Temperature, g.Temperature)
	}
	if p.Temperature == 0 && g.DoSample == nil && g.Temperature == nil {
		p.Temperature = 1 // transformers' default
	}
	f32(&p.TopP, g.TopP, r.TopP)
	f32(&p.MinP, g.MinP, r.MinP)
	f32(&p.RepetitionPenalty, g.RepetitionPenalty, r.RepetitionPenalty)
	f32(&p.PresencePenalty, g.PresencePenalty, r.PresencePenalty)
	f32(&p.FrequencyPenalty, g.FrequencyPenalty, r.FrequencyPenalty)
	f32(&p.Temperature, r.Temperature)
	if g.TopK != nil {
		p.TopK = *g.TopK
	}
	if r.TopK != nil {
		p.TopK = *r.TopK
	}
	p.Seed = r.Seed
	for _, c := range []struct {
		name string
		v    *float64
		ok   func(float64) bool
		want string
	}{
		{"temperature", r.Temperature, func(v float64) bool { return v >= 0 && v <= 100 }, "in [0, 100]"},
		{"top_p", r.TopP, func(v float64) bool { return v > 0 && v <= 1 }, "in (0, 1]"},
		{"min_p", r.MinP, func(v float64) bool { return v >= 0 && v <= 1 }, "in [0, 1]"},
		{"presence_penalty", r.PresencePenalty, func(v float64) bool { return v >= -2 && v <= 2 }, "in [-2, 2]"},
		{"frequency_penalty", r.FrequencyPenalty, func(v float64) bool { return v >= -2 && v <= 2 }, "in [-2, 2]"},
		{"repetition_penalty", r.RepetitionPenalty, func(v float64) bool { return v > 0 && v <= 10 }, "in (0, 10]"},
	} {
		if c.v != nil && (math.IsNaN(*c.v) || !c.ok(*c.v)) {
			return p, &ParamError{c.name, fmt.Sprintf("%s %v: must be %s", c.name, *c.v, c.want)}
		}
	}
	if r.TopK != nil && *r.TopK < -1 {
		return p, &ParamError{"top_k", fmt.Sprintf("top_k %d: must be -1 (off), 0 (off) or positive", *r.TopK)}
	}
	if err := p.Validate(); err != nil {
		return p, &ParamError{"", err.Error()}
	}
	return p, nil
}
