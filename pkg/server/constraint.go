package server

import (
	"bytes"
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/ellm-dev/ellm/pkg/grammar"
	"github.com/ellm-dev/ellm/pkg/sample"
	"github.com/ellm-dev/ellm/pkg/server/openai"
	"github.com/ellm-dev/ellm/pkg/toolcall"
)

// chatGrammar is the grammar a chat request asks for: its response_format,
// or with tool_choice "required" / a named function, calls of the tools in
// the template's tool-call format (one call unless parallel). nil means
// unconstrained.
func (s *Server) chatGrammar(rf *openai.ResponseFormat, choice openai.ToolChoice, tools []openai.Tool, parallel bool) (*grammar.Grammar, error) {
	forced := choice.Mode == "required" || choice.Mode == "function"
	if rf != nil && rf.Type != "text" && forced {
		return nil, invalid("response_format", "response_format %s cannot be combined with tool_choice %q", rf.Type, choice.Mode)
	}
	if forced {
		return s.toolCallGrammar(choice, tools, parallel)
	}
	if rf == nil {
		return nil, nil
	}
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		return s.grammars.get("object\x00"+s.jsonStyle.Name, func() (*grammar.Grammar, error) { return grammar.JSONObject(s.jsonStyle), nil })
	case "json_schema":
		if rf.JSONSchema == nil || len(bytes.TrimSpace(rf.JSONSchema.Schema)) == 0 {
			return nil, invalid("response_format.json_schema.schema", "json_schema needs a schema")
		}
		const param = "response_format.json_schema.schema"
		return s.grammars.get("schema\x00"+s.jsonStyle.Name+"\x00"+string(rf.JSONSchema.Schema), func() (*grammar.Grammar, error) {
			g, err := grammar.CompileSchema(rf.JSONSchema.Schema, s.jsonStyle)
			var se *grammar.SchemaError
			if errors.As(err, &se) {
				return nil, invalid(param, "%s: %v", param, err)
			}
			return g, err
		})
	}
	return nil, invalid("response_format.type", "unknown response_format type %q (text, json_object or json_schema)", rf.Type)
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
	switch f := s.tmpl.ToolCallFormat(); f {
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
