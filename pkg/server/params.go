package server

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

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
	var err error
	if p.LogitBias, err = s.logitBias(r.LogitBias); err != nil {
		return p, err
	}
	if err := p.Validate(); err != nil {
		return p, invalid("", "%v", err)
	}
	return p, nil
}

// logitBias reads OpenAI's logit_bias: token ids (as strings) within the
// vocabulary, biases in [-100, 100]; sorted by id.
func (s *Server) logitBias(m map[string]float64) ([]sample.TokenBias, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make([]sample.TokenBias, 0, len(m))
	for _, key := range slices.Sorted(maps.Keys(m)) {
		id, err := strconv.ParseInt(key, 10, 32)
		if err != nil || id < 0 || id >= int64(s.tok.VocabSize()) {
			return nil, invalid("logit_bias", "logit_bias key %q: not a token id (vocabulary size %d)", key, s.tok.VocabSize())
		}
		if b := m[key]; b < -100 || b > 100 {
			return nil, invalid("logit_bias", "logit_bias[%s] = %v: must be in [-100, 100]", key, b)
		}
		out = append(out, sample.TokenBias{Token: int32(id), Bias: float32(m[key])})
	}
	slices.SortFunc(out, func(a, b sample.TokenBias) int { return int(a.Token - b.Token) })
	return out, nil
}

// generation resolves the fields chat and text completions share: sampling
// (gen.Sampling), end tokens (gen.StopTokens) and how tokens become text.
func (s *Server) generation(r openai.Sampling, stop json.RawMessage, gen *Request) (output, error) {
	var out output
	var err error
	if gen.Sampling, err = s.samplingParams(r); err != nil {
		return out, err
	}
	if out.stops, err = openai.Stops(stop); err != nil {
		return out, fieldError(err)
	}
	if err := s.checkTokens("stop_token_ids", r.StopTokenIDs); err != nil {
		return out, err
	}
	// nil leaves the engine's default, the model's end tokens.
	switch {
	case r.IgnoreEOS:
		gen.StopTokens = append([]int32{}, r.StopTokenIDs...)
	case len(r.StopTokenIDs) > 0:
		gen.StopTokens = append(slices.Clone(s.endIDs), r.StopTokenIDs...)
	}
	out.includeStop = r.IncludeStopStrInOutput
	out.keepSpecial = r.SkipSpecialTokens != nil && !*r.SkipSpecialTokens
	if r.MinTokens != nil {
		if *r.MinTokens < 0 {
			return out, invalid("min_tokens", "min_tokens %d: must be at least 0", *r.MinTokens)
		}
		out.minTokens = *r.MinTokens
	}
	return out, nil
}

// applyMinTokens checks min_tokens against the resolved max_tokens and, when
// it is set, keeps the end tokens from being sampled until it is reached.
func (s *Server) applyMinTokens(gen *Request, out output) error {
	if out.minTokens == 0 {
		return nil
	}
	if out.minTokens > gen.MaxTokens {
		return invalid("min_tokens", "min_tokens %d: must be at most max_tokens (%d)", out.minTokens, gen.MaxTokens)
	}
	stops := gen.StopTokens
	if stops == nil {
		stops = s.endIDs
	}
	gen.Constraint = newMinTokens(gen.Constraint, stops, out.minTokens)
	return nil
}

// maxTokens resolves max_tokens: absent means the rest of the sequence; more
// than fits is a 400 with the numbers (vLLM's behaviour). The comparison is
// written so that no client number can overflow it.
func (s *Server) maxTokens(param string, v *int, prompt int) (int, error) {
	seq := s.eng.Info().SequenceLength
	if prompt >= seq {
		return 0, tooLong(param, prompt, v, seq)
	}
	if v == nil {
		return seq - prompt, nil
	}
	if *v < 1 {
		return 0, invalid(param, "%s %d: must be at least 1", param, *v)
	}
	if *v > seq-prompt {
		return 0, tooLong(param, prompt, v, seq)
	}
	return *v, nil
}

func tooLong(param string, prompt int, maxTokens *int, seq int) error {
	msg := fmt.Sprintf("this model's maximum context length is %d tokens and your request has %d input tokens", seq, prompt)
	if maxTokens != nil {
		msg = fmt.Sprintf("%s is too large: %d. %s (%d > %d - %d)", param, *maxTokens, msg, *maxTokens, seq, prompt)
	} else {
		msg += ": no room is left for a reply"
	}
	return &apiError{status: 400, typ: "invalid_request_error", param: param, code: "context_length_exceeded", msg: msg}
}

func checkN(n *int) error {
	if n != nil && *n != 1 {
		return invalid("n", "n %d: only n = 1 is supported", *n)
	}
	return nil
}
