package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/ellm-dev/ellm/pkg/conversation"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/sample"
	"github.com/ellm-dev/ellm/pkg/server/openai"
)

// samplingParams resolves the request's sampling fields over the model's
// generation_config defaults (conversation.Sampling), then its logit_bias.
func (s *Server) samplingParams(r openai.Sampling) (sample.Params, error) {
	o := conversation.Overrides{Temperature: r.Temperature, TopP: r.TopP, MinP: r.MinP, RepetitionPenalty: r.RepetitionPenalty,
		PresencePenalty: r.PresencePenalty, FrequencyPenalty: r.FrequencyPenalty, TopK: r.TopK}
	if r.Seed != nil {
		seed := uint64(*r.Seed)
		o.Seed = &seed
	}
	p, err := conversation.Sampling(s.chat.Generation, o)
	var pe *conversation.ParamError
	if errors.As(err, &pe) {
		return p, invalid(pe.Param, "%s", pe.Msg)
	}
	if err != nil {
		return p, err
	}
	p.LogitBias, err = s.logitBias(r.LogitBias)
	return p, err
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
func (s *Server) generation(r openai.Sampling, stop json.RawMessage, gen *engine.Request) (conversation.StreamOptions, error) {
	var out conversation.StreamOptions
	var err error
	if gen.Sampling, err = s.samplingParams(r); err != nil {
		return out, err
	}
	if out.Stops, err = openai.Stops(stop); err != nil {
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
		gen.StopTokens = append(slices.Clone(s.chat.EOS), r.StopTokenIDs...)
	}
	out.IncludeStop = r.IncludeStopStrInOutput
	out.KeepSpecial = r.SkipSpecialTokens != nil && !*r.SkipSpecialTokens
	if r.MinTokens != nil {
		if *r.MinTokens < 0 {
			return out, invalid("min_tokens", "min_tokens %d: must be at least 0", *r.MinTokens)
		}
		out.MinTokens = *r.MinTokens
	}
	return out, nil
}

// applyMinTokens checks min_tokens against the resolved max_tokens and, when
// it is set, keeps the end tokens from being sampled until it is reached.
func (s *Server) applyMinTokens(gen *engine.Request, out conversation.StreamOptions) error {
	if out.MinTokens == 0 {
		return nil
	}
	if out.MinTokens > gen.MaxTokens {
		return invalid("min_tokens", "min_tokens %d: must be at most max_tokens (%d)", out.MinTokens, gen.MaxTokens)
	}
	stops := gen.StopTokens
	if stops == nil {
		stops = s.chat.EOS
	}
	gen.Constraint = newMinTokens(gen.Constraint, stops, out.MinTokens)
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

// checkTopLogprobs checks the alternatives asked for per token against the
// engine's limit, naming the request's field.
func checkTopLogprobs(param string, n int) error {
	if n < 0 || n > engine.MaxTopLogprobs {
		return invalid(param, "%s %d: must be in [0, %d]", param, n, engine.MaxTopLogprobs)
	}
	return nil
}

func checkN(n *int) error {
	if n != nil && *n != 1 {
		return invalid("n", "n %d: only n = 1 is supported", *n)
	}
	return nil
}
