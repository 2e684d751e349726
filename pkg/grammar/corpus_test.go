package grammar

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/chat"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/sample"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
	"github.com/ellm-dev/ellm/pkg/toolcall"
)

// corpusTool is one tool of testdata/tools, as clients send it.
type corpusTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// loadCorpus reads every tool of testdata/tools: the tools Qwen Code sends
// (captured from its requests), OpenAI's function-calling examples, and
// schemas with $ref recursion.
func loadCorpus(t testing.TB) map[string][]corpusTool {
	t.Helper()
	files, err := filepath.Glob("testdata/tools/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no tool corpus: %v", err)
	}
	corpus := map[string][]corpusTool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tools []corpusTool
		if err := json.Unmarshal(b, &tools); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		corpus[filepath.Base(f)] = tools
	}
	return corpus
}

// boundStrings gives every string of a schema a maxLength (arrays a
// maxItems, objects additionalProperties false where they allow any other
// key): a
// random-weight model almost never writes the one token that closes a
// string (and never the two that close a Qwen3-Coder text value), so
// without a bound its strings run to max_tokens. That is what maxLength is
// for.
func boundStrings(v any, limit int) any {
	switch s := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range s {
			switch k {
			case "properties", "$defs", "definitions":
				m := map[string]any{}
				for name, sub := range x.(map[string]any) {
					m[name] = boundStrings(sub, limit)
				}
				out[k] = m
			case "enum", "const", "required", "default", "examples":
				out[k] = x
			default:
				out[k] = boundStrings(x, limit)
			}
		}
		_, enum := s["enum"]
		_, max := s["maxLength"]
		if _, ok := s["maxItems"]; !ok && s["type"] == "array" {
			out["maxItems"] = json.Number("3") // so are free-length arrays
		}
		if _, ok := s["properties"]; ok {
			if _, ok := s["additionalProperties"]; !ok {
				out["additionalProperties"] = false // free keys are free strings too
			}
		}
		isString := s["type"] == "string"
		if list, ok := s["type"].([]any); ok {
			for _, t := range list {
				isString = isString || t == "string"
			}
		}
		_, pattern := s["pattern"]
		_, format := s["format"]
		if isString && !enum && !max {
			if pattern || format {
				out["maxLength"] = json.Number(fmt.Sprint(4 * limit)) // room for a uuid or date-time
			} else {
				out["maxLength"] = json.Number(fmt.Sprint(limit))
			}
		}
		return out
	case []any:
		out := make([]any, len(s))
		for i, x := range s {
			out[i] = boundStrings(x, limit)
		}
		return out
	}
	return v
}

// TestCorpusCompiles: every tool of the corpus compiles, as is, for both
// call formats.
func TestCorpusCompiles(t *testing.T) {
	for file, tools := range loadCorpus(t) {
		for _, tool := range tools {
			gt := []Tool{{Name: tool.Function.Name, Parameters: tool.Function.Parameters}}
			for _, f := range []CallFormat{JSONCalls, XMLCalls} {
				if _, err := ToolCalls(f, gt, false); err != nil {
					t.Errorf("%s: %v", file, err)
				}
			}
		}
	}
}

// TestForcedCallsRandomModel forces a call of every corpus tool, in both
// templates' formats, from the tiny random-weight Qwen3 sampling at
// temperature 1: every reply must parse as exactly one call of that tool
// (pkg/toolcall, as the server parses it), its arguments must validate
// against the schema, and it must take at most twice the tokens of the
// same call rendered compactly.
func TestForcedCallsRandomModel(t *testing.T) {
	if testing.Short() {
		t.Skip("generates with a model")
	}
	e, err := engine.New(engine.Options{ModelPath: sharedtest.Path(t, "models", "tiny-qwen3-a"), SequenceLength: 8192, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tok := e.Tokenizer()
	vocab := NewVocab(tok.VocabSize(), tok.TokenBytes, tok.IsSpecial, e.EOS())
	coder, err := chat.Load(sharedtest.Path(t, "qwen3-coder-template"))
	if err != nil {
		t.Fatal(err)
	}
	templates := []struct {
		name   string
		tmpl   *chat.Template
		format CallFormat
		parse  toolcall.Format
	}{
		{"qwen3", e.ChatTemplate(), JSONCalls, toolcall.FormatJSON},
		{"qwen3-coder", coder, XMLCalls, toolcall.FormatXML},
	}
	seed := uint64(0)
	for file, tools := range loadCorpus(t) {
		for _, tool := range tools {
			var raw any
			if err := json.Unmarshal(tool.Function.Parameters, &raw); err != nil {
				t.Fatal(err)
			}
			// encoding/json's map order (sorted keys) is the schema order
			// from here on: the same for the grammar and the validator.
			bounded, _ := json.Marshal(boundStrings(numbersOf(raw), 24))
			tool.Function.Parameters = bounded
			var schema any
			schema, _ = decodeNumbers(bounded)
			toolsJSON, _ := json.Marshal([]corpusTool{tool})
			for _, tp := range templates {
				seed++
				name := fmt.Sprintf("%s/%s/%s", file, tool.Function.Name, tp.name)
				g, err := ToolCalls(tp.format, []Tool{{Name: tool.Function.Name, Parameters: bounded}}, false)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				prompt, err := tp.tmpl.Render(chat.Input{Messages: json.RawMessage(`[{"role":"user","content":"Use the tool."}]`),
					Tools: toolsJSON, AddGenerationPrompt: true, Kwargs: json.RawMessage(`{"enable_thinking":false}`)})
				if err != nil {
					t.Fatal(err)
				}
				s := seed
				var out []int32
				res, err := e.Generate(context.Background(), engine.Request{Tokens: tok.Encode(prompt), MaxTokens: 1000,
					Sampling: sample.Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1, Seed: &s}, Constraint: g.Constraint(vocab)},
					func(ev engine.Event) error { out = append(out, ev.Token); return nil })
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				text := tok.Decode(out)
				if res.FinishReason != "stop" {
					t.Errorf("%s: finish %q after %d tokens: %q", name, res.FinishReason, len(out), text)
					continue
				}
				content, calls := toolcall.Parse(text, tp.parse, toolsJSON)
				if len(calls) != 1 || content != "" || calls[0].Name != tool.Function.Name {
					t.Errorf("%s: %q parsed as content %q, calls %+v", name, text, content, calls)
					continue
				}
				args, err := decodeNumbers([]byte(calls[0].Arguments))
				if err != nil || !validate(schema, args) {
					t.Errorf("%s: arguments %s do not validate (%v); reply %q", name, calls[0].Arguments, err, text)
					continue
				}
				compact := compactCall(tp.format, tool.Function.Name, calls[0].Arguments, args)
				minimal := len(tok.Encode(compact))
				if len(out) > 2*minimal {
					t.Errorf("%s: %d tokens, the compact rendering takes %d: %q vs %q", name, len(out), minimal, text, compact)
				}
				t.Logf("%s: %d tokens (compact %d)", name, len(out), minimal)
			}
		}
	}
}

// numbersOf re-reads a value decoded with float64 numbers as json.Number.
func numbersOf(v any) any {
	b, _ := json.Marshal(v)
	out, _ := decodeNumbers(b)
	return out
}

// compactCall renders a call as compactly as its format allows.
func compactCall(f CallFormat, name, arguments string, args any) string {
	if f == JSONCalls {
		var b strings.Builder
		b.WriteString("<tool_call>\n{\"name\":")
		n, _ := json.Marshal(name)
		b.Write(n)
		b.WriteString(",\"arguments\":")
		a, _ := json.Marshal(args)
		b.Write(a)
		b.WriteString("}\n</tool_call>")
		return b.String()
	}
	var b strings.Builder
	b.WriteString("<tool_call>\n<function=" + name + ">\n")
	var ordered *object
	if v, err := decodeOrdered([]byte(arguments)); err == nil {
		ordered, _ = v.(*object)
	}
	if ordered != nil {
		for _, k := range ordered.keys {
			b.WriteString("<parameter=" + k + ">\n")
			switch v := ordered.vals[k].(type) {
			case string:
				b.WriteString(v)
			default:
				render(&b, v, Compact)
			}
			b.WriteString("\n</parameter>\n")
		}
	}
	b.WriteString("</function>\n</tool_call>")
	return b.String()
}
