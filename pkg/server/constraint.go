package server

import (
	"bytes"
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"sync"

	"github.com/ellm-dev/ellm/pkg/grammar"
	"github.com/ellm-dev/ellm/pkg/sample"
	"github.com/ellm-dev/ellm/pkg/server/openai"
	"github.com/ellm-dev/ellm/pkg/toolcall"
)

// chatGrammar is the grammar a chat request asks for: its response_format
// or vLLM's guided_* alias, or with tool_choice "required" / a named
// function, calls of the tools in the template's tool-call format (one call
// unless parallel). nil means unconstrained.
func (s *Server) chatGrammar(rf *openai.ResponseFormat, guided openai.VLLMSampling, choice openai.ToolChoice, tools []openai.Tool, parallel bool) (*grammar.Grammar, error) {
	forced := choice.Mode == "required" || choice.Mode == "function"
	g, gparam, err := s.guidedGrammar(guided)
	if err != nil {
		return nil, err
	}
	switch {
	case rf != nil && rf.Type != "text" && forced:
		return nil, invalid("response_format", "response_format %s cannot be combined with tool_choice %q", rf.Type, choice.Mode)
	case g != nil && forced:
		return nil, invalid(gparam, "%s cannot be combined with tool_choice %q", gparam, choice.Mode)
	case g != nil && rf != nil && rf.Type != "text":
		return nil, invalid(gparam, "give either response_format or %s, not both", gparam)
	case g != nil:
		return g, nil
	case forced:
		return s.toolCallGrammar(choice, tools, parallel)
	case rf == nil:
		return nil, nil
	}
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		return s.jsonObjectGrammar()
	case "json_schema":
		if rf.JSONSchema == nil || len(bytes.TrimSpace(rf.JSONSchema.Schema)) == 0 {
			return nil, invalid("response_format.json_schema.schema", "json_schema needs a schema")
		}
		return s.compileSchema("response_format.json_schema.schema", rf.JSONSchema.Schema)
	}
	return nil, invalid("response_format.type", "unknown response_format type %q (text, json_object or json_schema)", rf.Type)
}

// minTokens forbids the stop tokens until n tokens have been generated
// (vLLM's min_tokens), over the request's grammar if any. When the grammar
// allows nothing but a stop token (its document is complete), the stop
// token stays allowed: the grammar wins.
type minTokens struct {
	inner sample.Constraint
	stops []int32
	left  int
}

func newMinTokens(inner sample.Constraint, stops []int32, n int) *minTokens {
	return &minTokens{inner: inner, stops: slices.Compact(slices.Sorted(slices.Values(stops))), left: n}
}

func (m *minTokens) Mask(allowed []uint64) {
	if m.inner != nil {
		m.inner.Mask(allowed)
	}
	if m.left <= 0 {
		return
	}
	total, stopsAllowed := 0, 0
	for _, w := range allowed {
		total += bits.OnesCount64(w)
	}
	for _, id := range m.stops {
		if w := int(id) / 64; w < len(allowed) && allowed[w]&(1<<(id%64)) != 0 {
			stopsAllowed++
		}
	}
	if stopsAllowed == total {
		return
	}
	for _, id := range m.stops {
		if w := int(id) / 64; w < len(allowed) {
			allowed[w] &^= 1 << (id % 64)
		}
	}
}

// Prepared and Prepare pass the engine's early calls on to the grammar
// (sample.Preparer).
func (m *minTokens) Prepared() bool {
	p, ok := m.inner.(sample.Preparer)
	return !ok || p.Prepared()
}

func (m *minTokens) Prepare() {
	if p, ok := m.inner.(sample.Preparer); ok {
		p.Prepare()
	}
}

func (m *minTokens) Accept(token int32) error {
	m.left--
	if m.inner != nil {
		return m.inner.Accept(token)
	}
	return nil
}

// compileSchema compiles a schema for output in the server's JSON style,
// through the grammar cache.
func (s *Server) compileSchema(param string, schema json.RawMessage) (*grammar.Grammar, error) {
	return s.grammars.get("schema\x00"+s.jsonStyle.Name+"\x00"+string(schema), func() (*grammar.Grammar, error) {
		g, err := grammar.CompileSchema(schema, s.jsonStyle)
		var se *grammar.SchemaError
		if errors.As(err, &se) {
			return nil, invalid(param, "%s: %v", param, err)
		}
		return g, err
	})
}

// grammarTools are a request's tools as the grammar package takes them.
func grammarTools(tools []openai.Tool) []grammar.Tool {
	gt := make([]grammar.Tool, len(tools))
	for i, t := range tools {
		gt[i] = grammar.Tool{Name: t.Function.Name, Parameters: t.Function.Parameters}
	}
	return gt
}

// checkTools validates every tool of a request, whatever its tool_choice:
// a schema that could not be enforced is an error now, not when a later
// request forces a call.
func checkTools(tools []openai.Tool) error {
	err := grammar.CheckTools(grammarTools(tools))
	var te *grammar.ToolError
	if errors.As(err, &te) {
		return invalid(fmt.Sprintf("tools[%d]", te.Index), "%v", err)
	}
	return err
}

// toolCallGrammar constrains the reply to calls of the chosen tools, laid
// out as the template renders them: Qwen3's JSON format or Qwen3-Coder's
// XML format.
func (s *Server) toolCallGrammar(choice openai.ToolChoice, tools []openai.Tool, parallel bool) (*grammar.Grammar, error) {
	var format grammar.CallFormat
	switch f := s.chat.Template.ToolCallFormat(); f {
	case toolcall.FormatJSON:
		format = grammar.JSONCalls
	case toolcall.FormatXML:
		format = grammar.XMLCalls
	default:
		return nil, invalid("tool_choice", "tool_choice %q needs a chat template with tool calls; this one has none", choice.Mode)
	}
	var chosen []openai.Tool
	for _, t := range tools {
		if choice.Mode != "function" || t.Function.Name == choice.Name {
			chosen = append(chosen, t)
		}
	}
	key, err := json.Marshal(struct {
		Format   grammar.CallFormat
		Parallel bool
		Tools    []openai.Tool
	}{format, parallel, chosen})
	if err != nil {
		return nil, err
	}
	return s.grammars.get("tools\x00"+string(key), func() (*grammar.Grammar, error) {
		g, err := grammar.ToolCalls(format, grammarTools(chosen), parallel)
		var te *grammar.ToolError
		if errors.As(err, &te) {
			return nil, invalid("tools", "%v", err)
		}
		return g, err
	})
}

// grammarCache keeps the grammars of recent requests: a grammar keeps the
// masks it computed, so an agent that sends the same tools or schema every
// turn gets its masks from the cache after the first request.
type grammarCache struct {
	mu    sync.Mutex
	m     map[string]*list.Element
	order *list.List // of *grammarEntry, most recent first
}

type grammarEntry struct {
	key string
	g   *grammar.Grammar
}

// grammarCacheSize bounds the grammars kept (each keeps at most 64 MiB of
// masks, most far less).
const grammarCacheSize = 16

func (c *grammarCache) get(key string, build func() (*grammar.Grammar, error)) (*grammar.Grammar, error) {
	c.mu.Lock()
	if c.m == nil {
		c.m, c.order = map[string]*list.Element{}, list.New()
	}
	if e, ok := c.m[key]; ok {
		c.order.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*grammarEntry).g, nil
	}
	c.mu.Unlock()
	g, err := build()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok { // built concurrently
		return e.Value.(*grammarEntry).g, nil
	}
	c.m[key] = c.order.PushFront(&grammarEntry{key, g})
	if c.order.Len() > grammarCacheSize {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.m, last.Value.(*grammarEntry).key)
	}
	return g, nil
}

// constraint starts a generation's constraint for g.
func (s *Server) constraint(g *grammar.Grammar) sample.Constraint {
	s.vocabOnce.Do(func() {
		s.vocab = grammar.NewVocab(s.tok.VocabSize(), s.tok.TokenBytes, s.tok.IsSpecial, s.chat.EOS)
	})
	return g.Constraint(s.vocab)
}

// reasoningEffort maps OpenAI's reasoning_effort onto Qwen3's thinking
// switch: none and minimal turn thinking off, the others on.
func reasoningEffort(effort *string) (on, set bool, err error) {
	if effort == nil {
		return false, false, nil
	}
	switch *effort {
	case "none", "minimal":
		return false, true, nil
	case "low", "medium", "high", "xhigh":
		return true, true, nil
	}
	return false, false, invalid("reasoning_effort", "reasoning_effort %q: must be none, minimal, low, medium, high or xhigh", *effort)
}

// withThinking sets enable_thinking unless the request's
// chat_template_kwargs set it.
func withThinking(kwargs json.RawMessage, on bool) (json.RawMessage, error) {
	v := json.RawMessage(strconv.FormatBool(on))
	if len(bytes.TrimSpace(kwargs)) == 0 || string(kwargs) == "null" {
		return json.RawMessage(`{"enable_thinking":` + string(v) + `}`), nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(kwargs, &m); err != nil {
		return nil, invalid("chat_template_kwargs", "chat_template_kwargs must be a JSON object")
	}
	if _, ok := m["enable_thinking"]; ok {
		return kwargs, nil
	}
	return openai.ReplaceKeys(kwargs, map[string]json.RawMessage{"enable_thinking": v})
}
