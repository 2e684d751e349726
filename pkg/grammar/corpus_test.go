package grammar

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/chat"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modeldir"
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
		if items, ok := s["items"].(map[string]any); ok && items["$ref"] != nil && s["type"] == "array" {
			// Arrays of referenced (possibly recursive) items, one item: a
			// tree of up to two children per node is a branching process that
			// a random model ends within max_tokens only by luck (which draw
			// it gets changes with the last bits of the logits); a chain of
			// single children ends as soon as one node leaves them out.
			out["maxItems"] = json.Number("1")
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
	md, err := modeldir.Open(sharedtest.Path(t, "models", "tiny-qwen3-a"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(md, engine.Options{SequenceLength: 8192, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tok := md.Tokenizer
	vocab := NewVocab(tok.VocabSize(), tok.TokenBytes, tok.IsSpecial, md.EOS)
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
		{"qwen3", md.Template, JSONCalls, toolcall.FormatJSON},
		{"qwen3-coder", coder, XMLCalls, toolcall.FormatXML},
	}
	seed := uint64(0)
	corpus := loadCorpus(t)
	// In file order: a call's seed is its place in the corpus and the
	// engine's slots keep prefixes from one call to the next, so map order
	// made the replies differ from run to run.
	for _, file := range slices.Sorted(maps.Keys(corpus)) {
		for _, tool := range corpus[file] {
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

// maskedGrammars are the grammars FuzzMaskedTokens drives: schemas, and
// calls of tools in both formats, with the schema each output must satisfy
// (for calls, per tool).
type maskedGrammar struct {
	g      *Grammar
	schema any            // a document's schema
	tools  map[string]any // a call's arguments' schema, by tool name
	format toolcall.Format
	max    int               // calls
	text   func([]byte) bool // a plain-text grammar's check of a whole output
}

func maskedGrammars(tb testing.TB) []maskedGrammar {
	var out []maskedGrammar
	for _, s := range fuzzSchemas {
		schema, _ := decodeNumbers([]byte(s))
		out = append(out, maskedGrammar{g: mustCompile(tb, s), schema: schema})
	}
	tools := []Tool{
		{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string","maxLength":8},"unit":{"enum":["c","f"]},"days":{"type":"integer","minimum":1,"maximum":14}},"required":["location"],"additionalProperties":false}`)},
		{Name: "tag", Parameters: json.RawMessage(`{"type":"object","properties":{"ids":{"type":"array","items":{"type":"integer"},"maxItems":3},"meta":{"type":"object","properties":{"x":{"type":"boolean"}},"additionalProperties":false},"note":{"type":["string","null"],"pattern":"^[a-z]{1,4}$"}},"additionalProperties":false}`)},
	}
	schemas := map[string]any{}
	for _, t := range tools {
		schemas[t.Name], _ = decodeNumbers(t.Parameters)
	}
	for _, f := range []struct {
		c CallFormat
		p toolcall.Format
	}{{JSONCalls, toolcall.FormatJSON}, {XMLCalls, toolcall.FormatXML}} {
		for _, parallel := range []bool{false, true} {
			g, err := ToolCalls(f.c, tools, parallel)
			if err != nil {
				tb.Fatal(err)
			}
			max := 1
			if parallel {
				max = MaxParallelCalls
			}
			out = append(out, maskedGrammar{g: g, tools: schemas, format: f.p, max: max})
		}
	}
	return append(out, textGrammars(tb)...)
}

// maskedTools are the tools of maskedGrammars as a request sends them
// (what pkg/toolcall reads parameter types from).
var maskedTools = json.RawMessage(`[
 {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"days": {"type": "integer"}}}}},
 {"type": "function", "function": {"name": "tag", "parameters": {"type": "object", "properties": {"ids": {"type": "array"}, "meta": {"type": "object"}, "note": {"type": ["string", "null"]}}}}}]`)

// runMasked generates with choices among the tokens each mask allows:
// every allowed token must be accepted, a mask is never empty before the
// end, and a finished output must be valid (a document that validates, or
// calls that pkg/toolcall parses and whose arguments validate). It reports
// whether the output finished before the choices ran out.
func runMasked(t *testing.T, toks [][]byte, v *Vocab, mg maskedGrammar, choices []byte) bool {
	c := mg.g.Constraint(v)
	mask := make([]uint64, (len(toks)+63)/64)
	var out []byte
	for i := 0; ; i++ {
		allowed := allowedTokens(c, mask, len(toks))
		if len(allowed) == 0 {
			t.Fatalf("dead end after %q", out)
		}
		if i >= len(choices) {
			return false // cut short: nothing to check but the prefix
		}
		id := allowed[int(choices[i])%len(allowed)]
		if err := c.Accept(id); err != nil {
			t.Fatalf("after %q: allowed token %q refused: %v", out, toks[id], err)
		}
		if id == v.end[0] {
			break
		}
		out = append(out, toks[id]...)
	}
	switch {
	case mg.text != nil:
		if !mg.text(out) {
			t.Fatalf("finished %q, which the plain-text grammar rejects", out)
		}
		return true
	case mg.tools == nil:
		val, err := decodeNumbers(out)
		if err != nil || !validate(mg.schema, val) {
			t.Fatalf("finished %q, which does not validate: %v", out, err)
		}
		return true
	}
	content, calls := toolcall.Parse(string(out), mg.format, maskedTools)
	if content != "" || len(calls) == 0 || len(calls) > mg.max {
		t.Fatalf("finished %q: content %q, %d calls", out, content, len(calls))
	}
	for _, call := range calls {
		args, err := decodeNumbers([]byte(call.Arguments))
		if err != nil || !validate(mg.tools[call.Name], args) {
			t.Fatalf("finished %q: call %s(%s) does not validate: %v", out, call.Name, call.Arguments, err)
		}
	}
	return true
}

// FuzzMaskedTokens: any token sequence the masks allow keeps the output a
// valid prefix, and finished ones are valid (runMasked).
func FuzzMaskedTokens(f *testing.F) {
	toks, v := testVocab()
	grams := maskedGrammars(f)
	for i := range len(grams) {
		f.Add(uint8(i), []byte{1, 200, 3, 77, 5, 9, 250, 0, 17})
	}
	f.Fuzz(func(t *testing.T, which uint8, choices []byte) {
		runMasked(t, toks, v, grams[int(which)%len(grams)], choices)
	})
}

// TestMaskedRandomWalks runs runMasked on random choices, long enough that
// most outputs finish, for every grammar.
func TestMaskedRandomWalks(t *testing.T) {
	toks, v := testVocab()
	rng := rand.New(rand.NewPCG(3, 4))
	for i, mg := range maskedGrammars(t) {
		finished := 0
		for range 40 {
			choices := make([]byte, 3000)
			for j := range choices {
				choices[j] = byte(rng.UintN(256))
			}
			if runMasked(t, toks, v, mg, choices) {
				finished++
			}
		}
		if finished < 10 {
			t.Errorf("grammar %d: only %d of 40 random walks finished", i, finished)
		}
	}
}

// BenchmarkTPOT measures time per output token at batch 1 with and without
// a forced tool call (the whole engine: forward pass, sampling, mask), on
// the model in ELLM_BENCH_MODEL (a Hugging Face Qwen3 directory; default:
// the tiny shared model, whose forward pass is so short that the overhead
// looks far larger than on a real model). Each iteration forces a call of
// Qwen Code's tools (greedy), then generates as many tokens unconstrained
// from the same prompt; it reports both TPOTs and the overhead in percent.
// The grammar is compiled once, as the server's grammar cache does for an
// agent that sends the same tools every turn.
func BenchmarkTPOT(b *testing.B) {
	dir := os.Getenv("ELLM_BENCH_MODEL")
	if dir == "" {
		dir = sharedtest.Path(b, "models", "tiny-qwen3-a")
	}
	md, err := modeldir.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	e, err := engine.New(md, engine.Options{SequenceLength: 8192})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	tok := md.Tokenizer
	vocab := NewVocab(tok.VocabSize(), tok.TokenBytes, tok.IsSpecial, md.EOS)
	var tools []Tool
	corpus := loadCorpus(b)["qwen-code.json"]
	for _, t := range corpus {
		tools = append(tools, Tool{Name: t.Function.Name, Parameters: t.Function.Parameters})
	}
	format := JSONCalls
	if strings.Contains(md.Template.Source(), "<function=") {
		format = XMLCalls
	}
	g, err := ToolCalls(format, tools, false)
	if err != nil {
		b.Fatal(err)
	}
	toolsJSON, _ := json.Marshal(corpus)
	text, err := md.Template.Render(chat.Input{Messages: json.RawMessage(`[{"role":"user","content":"Read the file main.go."}]`),
		Tools: toolsJSON, AddGenerationPrompt: true, Kwargs: json.RawMessage(`{"enable_thinking":false}`)})
	if err != nil {
		b.Fatal(err)
	}
	prompt := tok.Encode(text)
	greedy := sample.Params{TopP: 1, RepetitionPenalty: 1}
	tpot := func(r engine.Result, n int) float64 {
		return float64((r.Total - r.TTFT).Nanoseconds()) / float64(max(n-1, 1))
	}
	var with, without float64
	for b.Loop() {
		n := 0
		res, err := e.Generate(context.Background(), engine.Request{Tokens: prompt, MaxTokens: 256, Sampling: greedy, Constraint: g.Constraint(vocab)},
			func(engine.Event) error { n++; return nil })
		if err != nil {
			b.Fatal(err)
		}
		with += tpot(res, n)
		m := 0
		res, err = e.Generate(context.Background(), engine.Request{Tokens: prompt, MaxTokens: max(n, 2), Sampling: greedy, StopTokens: []int32{-1}},
			func(engine.Event) error { m++; return nil })
		if err != nil {
			b.Fatal(err)
		}
		without += tpot(res, m)
	}
	iters := float64(b.N)
	b.ReportMetric(with/iters/1e6, "ms-tpot-constrained")
	b.ReportMetric(without/iters/1e6, "ms-tpot-free")
	b.ReportMetric(100*(with-without)/without, "%-overhead")
}
