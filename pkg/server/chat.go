package server

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/ellm-dev/ellm/pkg/chat"
	"github.com/ellm-dev/ellm/pkg/conversation"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/server/openai"
	"github.com/ellm-dev/ellm/pkg/toolcall"
)

// chatPlan is a validated chat request, ready to generate.
type chatPlan struct {
	req    *openai.ChatCompletionRequest
	conv   conversation.Chat
	prompt []int32
	tools  []openai.Tool
	gen    engine.Request
	// out says how the reply is streamed: stop strings, reasoning, tool calls.
	out      conversation.StreamOptions
	logprobs bool
	session  string
}

func fieldError(err error) error {
	var fe *openai.FieldError
	if errors.As(err, &fe) {
		return invalid(fe.Param, "%s", fe.Error())
	}
	return err
}

func (s *Server) planChat(r *http.Request, req *openai.ChatCompletionRequest) (*chatPlan, error) {
	if err := s.checkModel(req.Model); err != nil {
		return nil, err
	}
	if err := checkN(req.N); err != nil {
		return nil, err
	}
	if s.chat.Template == nil {
		return nil, errNoTemplate
	}
	p := &chatPlan{req: req, session: sessionID(r, req.SessionID)}
	msgs, err := openai.NormalizeMessages(req.Messages)
	if err != nil {
		return nil, fieldError(err)
	}
	if p.tools, err = openai.ParseTools(req.Tools); err != nil {
		return nil, fieldError(err)
	}
	if err := checkTools(p.tools); err != nil {
		return nil, err
	}
	choice, err := openai.ParseToolChoice(req.ToolChoice, p.tools)
	if err != nil {
		return nil, fieldError(err)
	}
	if len(req.ChatTemplateKwargs) > 0 && string(req.ChatTemplateKwargs) != "null" && req.ChatTemplateKwargs[0] != '{' {
		return nil, invalid("chat_template_kwargs", "chat_template_kwargs must be a JSON object")
	}
	p.conv = conversation.Chat{Messages: msgs, Kwargs: req.ChatTemplateKwargs}
	if p.out, err = s.generation(req.Sampling, req.Stop, &p.gen); err != nil {
		return nil, err
	}
	p.out.Reasoning = true
	if choice.Mode != "none" {
		p.conv.Tools = req.Tools
		p.out.ToolCalls = toolcall.Parser{Format: s.chat.Template.ToolCallFormat(), Tools: req.Tools}
	}
	think, thinkSet, err := reasoningEffort(req.ReasoningEffort)
	if err != nil {
		return nil, err
	}
	if req.Logprobs != nil && *req.Logprobs {
		p.logprobs = true
		p.gen.Logprobs = true
	}
	if req.TopLogprobs != nil {
		if err := checkTopLogprobs("top_logprobs", *req.TopLogprobs); err != nil {
			return nil, err
		}
		if !p.logprobs && *req.TopLogprobs > 0 {
			return nil, invalid("top_logprobs", "top_logprobs needs logprobs: true")
		}
		p.gen.TopLogprobs = *req.TopLogprobs
	}
	g, err := s.chatGrammar(req.ResponseFormat, req.VLLMSampling, choice, p.tools, req.ParallelToolCalls == nil || *req.ParallelToolCalls)
	if err != nil {
		return nil, err
	}
	// A constrained reply has no room for a <think> block, whatever the
	// reasoning effort.
	switch {
	case g != nil:
		p.gen.Constraint = s.constraint(g)
		p.conv.Kwargs, err = withThinking(p.conv.Kwargs, false)
	case thinkSet:
		p.conv.Kwargs, err = withThinking(p.conv.Kwargs, think)
	}
	if err != nil {
		return nil, err
	}
	prompt, err := s.chatPrompt(p.conv, p.session)
	if err != nil {
		return nil, err
	}
	p.prompt, p.out.Thinking = prompt.Tokens, prompt.Thinking
	maxParam, maxTok := "max_tokens", req.MaxTokens
	if req.MaxCompletionTokens != nil {
		maxParam, maxTok = "max_completion_tokens", req.MaxCompletionTokens
	}
	if p.gen.MaxTokens, err = s.maxTokens(maxParam, maxTok, len(p.prompt)); err != nil {
		return nil, err
	}
	if err := s.applyMinTokens(&p.gen, p.out); err != nil {
		return nil, err
	}
	p.gen.Tokens = p.prompt
	p.gen.SessionID = p.session
	return p, nil
}

var errNoTemplate = invalid("messages", "this model has no chat template: use /v1/completions")

// render renders a conversation with the model's chat template.
func (s *Server) render(c conversation.Chat, addGenerationPrompt bool) (string, error) {
	text, err := s.chat.Render(c, addGenerationPrompt)
	return text, renderError(err)
}

// renderError maps a rendering error: what the template rejects is the
// client's error.
func renderError(err error) error {
	var ce *chat.Error
	switch {
	case errors.Is(err, conversation.ErrNoTemplate):
		return errNoTemplate
	case errors.As(err, &ce):
		return invalid("messages", "%v", err)
	}
	return err
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) error {
	var req openai.ChatCompletionRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	p, err := s.planChat(r, &req)
	if err != nil {
		return err
	}
	id := "chatcmpl-" + newID()
	created := time.Now().Unix()
	ctx, cancel := s.generationContext(r)
	defer cancel()
	if req.Stream {
		return s.streamChat(w, ctx, p, id, created)
	}
	var (
		content, reasoningText strings.Builder
		calls                  []openai.ToolCall
		lps                    []openai.TokenLogprob
	)
	res, err := s.generate(ctx, p.gen, s.chat.NewStream(p.out), func(d conversation.Delta, ev *engine.Event) error {
		if ev != nil && p.logprobs {
			lps = append(lps, s.tokenLogprob(*ev))
		}
		content.WriteString(d.Content)
		reasoningText.WriteString(d.Reasoning)
		calls = mergeToolCalls(calls, toolCalls(d.Calls))
		return nil
	})
	s.remember(p, res)
	if err != nil {
		return err
	}
	msg := openai.ResponseMessage{Role: "assistant"}
	if c := content.String(); c != "" || len(calls) == 0 {
		msg.Content = &c
	}
	if rt := reasoningText.String(); rt != "" {
		msg.ReasoningContent = &rt
	}
	msg.ToolCalls = calls
	choice := openai.ChatChoice{Message: msg, FinishReason: finishReason(res, len(calls) > 0)}
	if p.logprobs {
		choice.Logprobs = &openai.ChoiceLogprobs{Content: lps}
	}
	writeJSON(w, http.StatusOK, openai.ChatCompletion{ID: id, Object: "chat.completion", Created: created, Model: s.model,
		Choices: []openai.ChatChoice{choice}, Usage: usage(res)})
	return nil
}

func (s *Server) streamChat(w http.ResponseWriter, ctx context.Context, p *chatPlan, id string, created int64) error {
	ev := newEventStream(w)
	u := newStreamUsage(p.req.StreamOptions, len(p.prompt))
	chunk := func(d openai.Delta, lp *openai.ChoiceLogprobs, finish *string) openai.ChatCompletionChunk {
		return openai.ChatCompletionChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.model,
			Choices: []openai.ChunkChoice{{Delta: d, Logprobs: lp, FinishReason: finish}}, Usage: u.chunk()}
	}
	sawCalls := false
	send := func(d conversation.Delta, lp *openai.ChoiceLogprobs) error {
		if d.Empty() && lp == nil {
			return nil
		}
		delta := openai.Delta{ToolCalls: toolCalls(d.Calls)}
		if d.Content != "" {
			delta.Content = &d.Content
		}
		if d.Reasoning != "" {
			delta.ReasoningContent = &d.Reasoning
		}
		sawCalls = sawCalls || len(d.Calls) > 0
		return ev.send(chunk(delta, lp, nil))
	}
	// The first chunk carries the role, as OpenAI's do.
	begin := func() error {
		if ev.started {
			return nil
		}
		empty := ""
		return ev.send(chunk(openai.Delta{Role: "assistant", Content: &empty}, nil, nil))
	}
	res, err := s.generate(ctx, p.gen, s.chat.NewStream(p.out), func(d conversation.Delta, e *engine.Event) error {
		if err := begin(); err != nil {
			return err
		}
		if e != nil {
			u.completion++
		}
		var lp *openai.ChoiceLogprobs
		if e != nil && p.logprobs {
			lp = &openai.ChoiceLogprobs{Content: []openai.TokenLogprob{s.tokenLogprob(*e)}}
		}
		return send(d, lp)
	})
	if err == nil {
		err = begin()
	}
	s.remember(p, res)
	if err != nil {
		if !ev.started {
			return err
		}
		ev.fail(err)
		return nil
	}
	u.final = usage(res)
	finish := finishReason(res, sawCalls)
	if err := ev.send(chunk(openai.Delta{}, nil, &finish)); err != nil {
		return nil
	}
	if u.include {
		c := chunk(openai.Delta{}, nil, nil)
		c.Choices = []openai.ChunkChoice{}
		c.Usage = u.final
		if err := ev.send(c); err != nil {
			return nil
		}
	}
	ev.done()
	return nil
}

// streamUsage is the usage a stream reports: in a last chunk with
// include_usage, and also in every chunk with continuous_usage_stats
// (vLLM: only together with include_usage). Cached tokens are known at the
// end only.
type streamUsage struct {
	include, continuous bool
	prompt, completion  int
	final               *openai.Usage
}

func newStreamUsage(o *openai.StreamOptions, prompt int) *streamUsage {
	u := &streamUsage{prompt: prompt}
	if o != nil {
		u.include = o.IncludeUsage
		u.continuous = o.IncludeUsage && o.ContinuousUsageStats
	}
	return u
}

// chunk is the usage of the next chunk: nil without continuous usage.
func (u *streamUsage) chunk() *openai.Usage {
	switch {
	case !u.continuous:
		return nil
	case u.final != nil:
		return u.final
	}
	return &openai.Usage{PromptTokens: u.prompt, CompletionTokens: u.completion, TotalTokens: u.prompt + u.completion}
}

func finishReason(res engine.Result, calls bool) string {
	if calls && res.FinishReason == "stop" {
		return "tool_calls"
	}
	return res.FinishReason
}

func usage(res engine.Result) *openai.Usage {
	return &openai.Usage{PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens,
		TotalTokens:         res.PromptTokens + res.CompletionTokens,
		PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: res.CachedTokens}}
}

func (s *Server) tokenLogprob(ev engine.Event) openai.TokenLogprob {
	text, bs := s.tokenText(ev.Token)
	lp := openai.TokenLogprob{Token: text, Logprob: float64(ev.Logprob), Bytes: bs, TopLogprobs: []openai.TopLogprob{}}
	for _, t := range ev.Top {
		text, bs := s.tokenText(t.Token)
		lp.TopLogprobs = append(lp.TopLogprobs, openai.TopLogprob{Token: text, Logprob: float64(t.Logprob), Bytes: bs})
	}
	return lp
}

func (s *Server) tokenText(id int32) (string, []int) {
	b := s.tok.TokenBytes(id)
	ints := make([]int, len(b))
	for i, c := range b {
		ints[i] = int(c)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), ints
}

func newID() string { return rand.Text() }
