package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/ellm-dev/ellm/pkg/conversation"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/server/openai"
)

// completionPrompt reads prompt: a string, an array of token ids, or a
// one-element array of either.
func (s *Server) completionPrompt(raw json.RawMessage) ([]int32, error) {
	raw = bytes.TrimSpace(raw)
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return s.tok.Encode(text), nil
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil {
		return ids, s.checkTokens("prompt", ids)
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil && len(list) == 1 {
		return s.completionPrompt(list[0])
	}
	if len(list) > 1 {
		return nil, invalid("prompt", "only one prompt per request is supported")
	}
	return nil, invalid("prompt", "prompt must be a string, an array of token ids, or a one-element array of either")
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) error {
	var req openai.CompletionRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.checkModel(req.Model); err != nil {
		return err
	}
	if err := checkN(req.N); err != nil {
		return err
	}
	if len(req.Prompt) == 0 {
		return invalid("prompt", "prompt is required")
	}
	if req.Echo {
		return invalid("echo", "echo is not supported")
	}
	prompt, err := s.completionPrompt(req.Prompt)
	if err != nil {
		return err
	}
	if len(prompt) == 0 {
		return invalid("prompt", "prompt is empty")
	}
	gen := engine.Request{Tokens: prompt}
	out, err := s.generation(req.Sampling, req.Stop, &gen)
	if err != nil {
		return err
	}
	g, _, err := s.guidedGrammar(req.VLLMSampling)
	if err != nil {
		return err
	}
	if g != nil {
		gen.Constraint = s.constraint(g)
	}
	if gen.MaxTokens, err = s.maxTokens("max_tokens", req.MaxTokens, len(prompt)); err != nil {
		return err
	}
	if err := s.applyMinTokens(&gen, out); err != nil {
		return err
	}
	if req.Logprobs != nil {
		if err := checkTopLogprobs("logprobs", *req.Logprobs); err != nil {
			return err
		}
		gen.Logprobs, gen.TopLogprobs = true, *req.Logprobs
	}
	id := "cmpl-" + newID()
	created := time.Now().Unix()
	var lps *openai.CompletionLogprobs
	if gen.Logprobs {
		lps = &openai.CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	}
	offset := 0
	addLogprob := func(dst *openai.CompletionLogprobs, ev engine.Event) {
		t, _ := s.tokenText(ev.Token)
		top := map[string]float64{}
		for _, alt := range ev.Top {
			at, _ := s.tokenText(alt.Token)
			top[at] = float64(alt.Logprob)
		}
		dst.Tokens = append(dst.Tokens, t)
		dst.TokenLogprobs = append(dst.TokenLogprobs, float64(ev.Logprob))
		dst.TopLogprobs = append(dst.TopLogprobs, top)
		dst.TextOffset = append(dst.TextOffset, offset)
	}
	u := newStreamUsage(req.StreamOptions, len(prompt))
	chunk := func(text string, lp *openai.CompletionLogprobs, finish *string) openai.Completion {
		return openai.Completion{ID: id, Object: "text_completion", Created: created, Model: s.model,
			Choices: []openai.CompletionChoice{{Text: text, Logprobs: lp, FinishReason: finish}}, Usage: u.chunk()}
	}
	ctx, cancel := s.generationContext(r)
	defer cancel()
	if !req.Stream {
		var b strings.Builder
		res, err := s.generate(ctx, gen, s.chat.NewStream(out), func(d conversation.Delta, ev *engine.Event) error {
			if ev != nil && lps != nil {
				addLogprob(lps, *ev)
			}
			b.WriteString(d.Content)
			offset += len(d.Content)
			return nil
		})
		if err != nil {
			return err
		}
		c := chunk(b.String(), lps, &res.FinishReason)
		c.Usage = usage(res)
		writeJSON(w, http.StatusOK, c)
		return nil
	}
	ev := newEventStream(w)
	res, err := s.generate(ctx, gen, s.chat.NewStream(out), func(d conversation.Delta, e *engine.Event) error {
		text := d.Content
		var lp *openai.CompletionLogprobs
		if e != nil {
			u.completion++
		}
		if e != nil && lps != nil {
			lp = &openai.CompletionLogprobs{}
			addLogprob(lp, *e)
		}
		offset += len(text)
		if text == "" && lp == nil {
			return nil
		}
		return ev.send(chunk(text, lp, nil))
	})
	if err != nil {
		if !ev.started {
			return err
		}
		ev.fail(err)
		return nil
	}
	u.final = usage(res)
	if err := ev.send(chunk("", nil, &res.FinishReason)); err != nil {
		return nil
	}
	if u.include {
		c := openai.Completion{ID: id, Object: "text_completion", Created: created, Model: s.model, Choices: []openai.CompletionChoice{}, Usage: u.final}
		if err := ev.send(c); err != nil {
			return nil
		}
	}
	ev.done()
	return nil
}
