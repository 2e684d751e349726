package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ellm-dev/ellm/pkg/grammar"
	"github.com/ellm-dev/ellm/pkg/sample"
	"github.com/ellm-dev/ellm/pkg/server/openai"
	"github.com/ellm-dev/ellm/pkg/toolcall"
)

// chatGrammar is the grammar a chat request asks for: its response_format,
// or with tool_choice "required" / a named function, one call of a tool in
// the template's tool-call format. nil means unconstrained.
func (s *Server) chatGrammar(rf *openai.ResponseFormat, choice openai.ToolChoice, tools []openai.Tool) (*grammar.Grammar, error) {
	forced := choice.Mode == "required" || choice.Mode == "function"
	if rf != nil && rf.Type != "text" && forced {
		return nil, invalid("response_format", "response_format %s cannot be combined with tool_choice %q", rf.Type, choice.Mode)
	}
	if forced {
		return s.toolCallGrammar(choice, tools)
	}
	if rf == nil {
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

// withoutThinking sets enable_thinking false unless the request set it:
// a constrained reply has no room for a <think> block.
func withoutThinking(kwargs json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(kwargs)) == 0 || string(kwargs) == "null" {
		return json.RawMessage(`{"enable_thinking":false}`), nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(kwargs, &m); err != nil {
		return nil, invalid("chat_template_kwargs", "chat_template_kwargs must be a JSON object")
	}
	if _, ok := m["enable_thinking"]; ok {
		return kwargs, nil
	}
	return openai.ReplaceKeys(kwargs, map[string]json.RawMessage{"enable_thinking": json.RawMessage("false")})
}
