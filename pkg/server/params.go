package server

import (
	"fmt"
	"math"

	"github.com/ellm-dev/ellm/pkg/sample"
	"github.com/ellm-dev/ellm/pkg/server/openai"
)

// samplingParams applies the request's sampling fields over the model's
// generation_config defaults.
func (s *Server) samplingParams(r openai.Sampling) (sample.Params, error) {
	d := s.eng.GenerationDefaults()
	p := sample.Params{TopP: 1, RepetitionPenalty: 1}
	f32 := func(dst *float32, vals ...*float64) {
		for _, v := range vals {
			if v != nil {
				*dst = float32(*v)
			}
		}
	}
	if d.DoSample == nil || *d.DoSample {
		f32(&p.Temperature, d.Temperature)
	}
	if p.Temperature == 0 && d.DoSample == nil && d.Temperature == nil {
		p.Temperature = 1 // transformers' default
	}
	f32(&p.TopP, d.TopP, r.TopP)
	f32(&p.MinP, d.MinP, r.MinP)
	f32(&p.RepetitionPenalty, d.RepetitionPenalty, r.RepetitionPenalty)
	f32(&p.PresencePenalty, d.PresencePenalty, r.PresencePenalty)
	f32(&p.FrequencyPenalty, d.FrequencyPenalty, r.FrequencyPenalty)
	f32(&p.Temperature, r.Temperature)
	if d.TopK != nil {
		p.TopK = *d.TopK
	}
	if r.TopK != nil {
		p.TopK = *r.TopK
	}
	if r.Seed != nil {
		seed := uint64(*r.Seed)
		p.Seed = &seed
	}
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
			return p, invalid(c.name, "%s %v: must be %s", c.name, *c.v, c.want)
		}
	}
	if r.TopK != nil && *r.TopK < -1 {
		return p, invalid("top_k", "top_k %d: must be -1 (off), 0 (off) or positive", *r.TopK)
	}
	if err := p.Validate(); err != nil {
		return p, invalid("", "%v", err)
	}
	return p, nil
}

// maxTokens resolves max_tokens: absent means the rest of the sequence.
func (s *Server) maxTokens(param string, v *int, prompt int) (int, error) {
	seq := s.eng.Info().SequenceLength
	if v == nil {
		if prompt >= seq {
			return 0, tooLong(prompt, 1, seq)
		}
		return seq - prompt, nil
	}
	if *v < 1 {
		return 0, invalid(param, "%s %d: must be at least 1", param, *v)
	}
	if prompt+*v > seq {
		return 0, tooLong(prompt, *v, seq)
	}
	return *v, nil
}

func tooLong(prompt, maxTokens, seq int) error {
	return &apiError{status: 400, typ: "invalid_request_error", param: "max_tokens", code: "context_length_exceeded",
		msg: fmt.Sprintf("this model's maximum context length is %d tokens; the prompt has %d tokens and max_tokens asks for %d (%d in all)", seq, prompt, maxTokens, prompt+maxTokens)}
}

func checkN(n *int) error {
	if n != nil && *n != 1 {
		return invalid("n", "n %d: only n = 1 is supported", *n)
	}
	return nil
}
