package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"

	"github.com/ellm-dev/ellm/pkg/grammar"
	"github.com/ellm-dev/ellm/pkg/sample"
	"github.com/ellm-dev/ellm/pkg/server/openai"
	"github.com/ellm-dev/ellm/pkg/toolcall"
)

// chatGrammar is the grammar a chat request asks for: its response_format
// or vLLM's guided_* alias, or with tool_choice "required" / a named
// function, one call of a tool in the template's tool-call format. nil
// means unconstrained.
func (s *Server) chatGrammar(rf *openai.ResponseFormat, guided openai.VLLMSampling, choice openai.ToolChoice, tools []openai.Tool) (*grammar.Grammar, error) {
	forced := choice.Mode == "required" || choice.Mode == "function"
	g, gparam, err := guidedGrammar(guided)
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
		return s.toolCallGrammar(choice, tools)
	case rf == nil:
		return nil, nil
	}
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		return grammar.JSONObject(), nil
	case "json_schema":
		if rf.JSONSchema == nil || len(bytes.TrimSpace(rf.JSONSchema.Schema)) == 0 {
			return nil, invalid("response_format.json_schema.schema", "json_schema needs a schema")
		}
		return compileSchema("response_format.json_schema.schema", rf.JSONSchema.Schema)
	}
	return nil, invalid("response_format.type", "unknown response_format type %q (text, json_object or json_schema)", rf.Type)
}

// guidedGrammar compiles vLLM's structured-output fields: guided_json (a
// schema, or its JSON text) is response_format json_schema under another
// name. guided_regex and guided_choice need a grammar of plain text, which
// pkg/grammar does not have: they are a 400 rather than ignored. param names
// the field used.
func guidedGrammar(v openai.VLLMSampling) (g *grammar.Grammar, param string, err error) {
	switch {
	case v.GuidedRegex != nil:
		return nil, "", invalid("guided_regex", "guided_regex is not supported (use guided_json or response_format)")
	case v.GuidedChoice != nil:
		return nil, "", invalid("guided_choice", "guided_choice is not supported (use guided_json with an enum, which yields a JSON string)")
	case len(v.GuidedJSON) == 0 || string(v.GuidedJSON) == "null":
		return nil, "", nil
	}
	schema := v.GuidedJSON
	var text string
	if json.Unmarshal(schema, &text) == nil {
		schema = json.RawMessage(text)
	}
	g, err = compileSchema("guided_json", schema)
	return g, "guided_json", err
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

func (m *minTokens) Accept(token int32) error {
	m.left--
	if m.inner != nil {
		return m.inner.Accept(token)
	}
	return nil
}

func compileSchema(param string, schema json.RawMessage) (*grammar.Grammar, error) {
	g, err := grammar.CompileSchema(schema)
	var se *grammar.SchemaError
	if errors.As(err, &se) {
		return nil, invalid(param, "%s: %v", param, err)
	}
	return g, err
}

// toolCallGrammar constrains the reply to one call, in Qwen3's format:
// <tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>, with ARGS
// valid for the tool's parameters.
func (s *Server) toolCallGrammar(choice openai.ToolChoice, tools []openai.Tool) (*grammar.Grammar, error) {
	if f := s.tmpl.ToolCallFormat(); f != toolcall.FormatJSON {
		return nil, invalid("tool_choice", "tool_choice %q is enforced only for the Qwen3 JSON tool-call format; this template uses %s", choice.Mode, f)
	}
	var alts []json.RawMessage
	for _, t := range tools {
		if choice.Mode == "function" && t.Function.Name != choice.Name {
			continue
		}
		params := t.Function.Parameters
		if len(bytes.TrimSpace(params)) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type":"object"}`)
		}
		name, _ := json.Marshal(t.Function.Name)
		alts = append(alts, json.RawMessage(fmt.Sprintf(
			`{"type":"object","properties":{"name":{"const":%s},"arguments":%s},"required":["name","arguments"],"additionalProperties":false}`, name, params)))
	}
	schema, _ := json.Marshal(map[string]any{"anyOf": alts})
	g, err := compileSchema("tools", schema)
	if err != nil {
		return nil, err
	}
	return g.Wrap("<tool_call>\n", "\n</tool_call>"), nil
}

// constraint starts a generation's constraint for g.
func (s *Server) constraint(g *grammar.Grammar) sample.Constraint {
	s.vocabOnce.Do(func() {
		s.vocab = grammar.NewVocab(s.tok.VocabSize(), s.tok.TokenBytes, s.tok.IsSpecial, s.endIDs)
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
