package grammar

import (
	"encoding/json"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/pkg/sharedtest"
	"github.com/ellm-dev/ellm/pkg/tokenizer"
)

func qwenVocab(tb testing.TB) *Vocab {
	tb.Helper()
	tok, err := tokenizer.Load(sharedtest.Path(tb, "qwen3-tokenizer"))
	if err != nil {
		tb.Fatal(err)
	}
	var end []int32
	for _, s := range []string{"<|im_end|>", "<|endoftext|>"} {
		if id, ok := tok.TokenID(s); ok {
			end = append(end, id)
		}
	}
	start := time.Now()
	v := NewVocab(tok.VocabSize(), tok.TokenBytes, tok.IsSpecial, end)
	tb.Logf("vocabulary of %d tokens prepared in %v", tok.VocabSize(), time.Since(start))
	return v
}

// feed advances c past text without tokens.
func feed(c *Constraint, text string) bool {
	if !c.m.Feed([]byte(text)) {
		return false
	}
	c.Prepare()
	return true
}

// BenchmarkMask measures one mask over the Qwen3 vocabulary at typical
// points of a document: "cached" is the cost when the state was seen
// before (a lookup and the mask applied), "computed" the trie walk of a
// state seen for the first time.
func BenchmarkMask(b *testing.B) {
	v := qwenVocab(b)
	g := mustCompile(b, personSchema)
	for _, pt := range []struct{ name, prefix string }{
		{"value-start", ``},
		{"key", `{"na`},
		{"string", `{"name": "Ann Lee`},
		{"number", `{"name": "Ann", "age": 4`},
		{"enum", `{"name": "Ann", "age": 4, "tags": ["a`},
	} {
		c := g.Constraint(v)
		if !feed(c, pt.prefix) {
			b.Fatalf("prefix %q rejected", pt.prefix)
		}
		mask := make([]uint64, (v.size+63)/64)
		b.Run(pt.name+"/cached", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for i := range mask {
					mask[i] = ^uint64(0)
				}
				c.Mask(mask)
			}
		})
		b.Run(pt.name+"/computed", func(b *testing.B) {
			for b.Loop() {
				c.compute()
			}
		})
	}
}

// toolScripts are forced calls of Qwen Code's read_file, as the grammar
// lays them out in each format.
var toolScripts = map[CallFormat]string{
	JSONCalls: "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"file_path\": \"/home/user/project/src/main.go\", \"offset\": 120, \"limit\": 80}}\n</tool_call>",
	XMLCalls:  "<tool_call>\n<function=read_file>\n<parameter=file_path>\n/home/user/project/src/main.go\n</parameter>\n<parameter=offset>\n120\n</parameter>\n<parameter=limit>\n80\n</parameter>\n</function>\n</tool_call>",
}

// follow generates script under c as a model that wants to write it would:
// each step masks, then takes the longest allowed token that the script
// continues with. It returns the tokens taken.
func follow(tb testing.TB, c *Constraint, v *Vocab, mask []uint64, script string) int {
	n := 0
	for {
		for i := range mask {
			mask[i] = ^uint64(0)
		}
		c.Mask(mask)
		allowed := func(id int32) bool { return mask[id/64]&(1<<(id%64)) != 0 }
		if script == "" {
			if !allowed(v.end[0]) {
				tb.Fatal("the end token is not allowed at the end of the script")
			}
			if err := c.Accept(v.end[0]); err != nil {
				tb.Fatal(err)
			}
			return n + 1
		}
		t, node, best := v.all, int32(0), int32(-1)
		for i := 0; i < len(script); i++ {
			child := int32(-1)
			for e := t.edgeLo[node]; e < t.edgeHi[node]; e++ {
				if t.edgeByte[e] == script[i] {
					child = t.edgeNode[e]
				}
			}
			if child < 0 {
				break
			}
			node = child
			for _, id := range t.toks[t.tokLo[node]:t.tokHi[node]] {
				if allowed(id) {
					best = id
				}
			}
		}
		if best < 0 {
			tb.Fatalf("no allowed token continues %q", script)
		}
		if err := c.Accept(best); err != nil {
			tb.Fatal(err)
		}
		script = script[len(v.tokens[best]):]
		n++
	}
}

// cpuTime is the CPU time this process used, in ns: on a loaded machine
// it is steadier than wall-clock time.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkToolCall measures the added latency per generated token of a
// forced call of one of Qwen Code's 11 tools, on the Qwen3 vocabulary: the
// masks and automaton steps of a whole call, divided by its tokens
// (ns/token). "first" compiles the grammar anew each time (the first
// request with these tools: every state is computed), "again" reuses it
// (later requests: masks come from the grammar's cache).
func BenchmarkToolCall(b *testing.B) {
	v := qwenVocab(b)
	var tools []Tool
	for _, t := range loadCorpus(b)["qwen-code.json"] {
		tools = append(tools, Tool{Name: t.Function.Name, Parameters: t.Function.Parameters})
	}
	mask := make([]uint64, (v.size+63)/64)
	for _, f := range []struct {
		name   string
		format CallFormat
	}{{"json", JSONCalls}, {"xml", XMLCalls}} {
		compile := func() *Grammar {
			g, err := ToolCalls(f.format, tools, false)
			if err != nil {
				b.Fatal(err)
			}
			return g
		}
		b.Run(f.name+"/first", func(b *testing.B) {
			tokens, cpu := 0, cpuTime()
			for b.Loop() {
				tokens += follow(b, compile().Constraint(v), v, mask, toolScripts[f.format])
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(tokens), "ns/token")
			b.ReportMetric(float64(cpuTime()-cpu)/float64(tokens), "cpu-ns/token")
		})
		b.Run(f.name+"/again", func(b *testing.B) {
			g := compile()
			follow(b, g.Constraint(v), v, mask, toolScripts[f.format])
			tokens, cpu := 0, cpuTime()
			b.ReportAllocs()
			for b.Loop() {
				tokens += follow(b, g.Constraint(v), v, mask, toolScripts[f.format])
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(tokens), "ns/token")
			b.ReportMetric(float64(cpuTime()-cpu)/float64(tokens), "cpu-ns/token")
		})
	}
}

// TestQwenVocabMask checks masks on the real vocabulary: inside a string
// most tokens are allowed, after a key only the separator, and every
// allowed token's bytes are accepted; inside free text (a string, a free
// key, a Qwen3-Coder value), where the plain-token sets stand in for the
// walk, exactly the accepted tokens are allowed, as in plain-text grammars
// (guided_regex, guided_choice) wherever the text ahead is not forced; the
// end tokens are allowed exactly where the text so far is whole.
func TestQwenVocabMask(t *testing.T) {
	v := qwenVocab(t)
	person := mustCompile(t, personSchema)
	xml, err := ToolCalls(XMLCalls, []Tool{{Name: "write", Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)}}, false)
	if err != nil {
		t.Fatal(err)
	}
	re := func(p string) *Grammar {
		g, err := Regex(p)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	email := re(`[a-z]{1,8}@example\.(com|org)`)
	choice, err := Choice([]string{"positive", "negative", "neutral"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		g        *Grammar
		prefix   string
		min, max int // tokens allowed, the end tokens included
		exact    bool
		end      bool // the end tokens are allowed
	}{
		{person, `{"name": "Ann`, 100000, v.size, true, false},
		{person, `{"name"`, 1, 1000, false, false},
		{person, `{"name": "Ann", "age": 4`, 10, 2000, false, false},
		{JSONObject(Spaced), `{"na`, 100000, v.size, true, false},
		{xml, "<tool_call>\n<function=write>\n<parameter=text>\n", 100000, v.size, true, false},
		{xml, "<tool_call>\n<function=write>\n<parameter=text>\nsome text", 100000, v.size, true, false},
		{xml, "<tool_call>\n<function=write>\n<parameter=text>\nline\n", 100000, v.size, true, false},
		{xml, "<tool_call>\n<function=write>\n<parameter=text>\nline\n</par", 100000, v.size, true, false},
		{xml, "<tool_call>\n<function=write>\n<parameter=text>\nline</param", 100000, v.size, true, false},
		{xml, "<tool_call>\n<function=write>\n<parameter=text>\nline\n</parameter", 100000, v.size, true, false},
		{xml, "<tool_call>\n<function=write>\n<parameter=text>\nline</parameter", 100000, v.size, true, false},
		{email, "", 5000, 30000, true, false},
		{email, "bob", 5000, 30000, true, false},
		{email, "bob@", 1, 1, false, false}, // forced: only the longest token within "example."
		{email, "bob@example.com", 2, 2, true, true},
		{re(`(?s).*`), "anything", 100000, v.size, true, true},
		{re(`[^\n]*\n`), "a line", 100000, v.size, true, false},
		{re(`\d+`), "12", 10, 2000, true, true},
		{choice, "", 2, 50, true, false},
		{choice, "ne", 2, 50, true, false},
		{choice, "pos", 1, 1, false, false},
		{choice, "neutral", 2, 2, true, true},
	} {
		c := tc.g.Constraint(v)
		if !feed(c, tc.prefix) {
			t.Fatalf("prefix %q rejected", tc.prefix)
		}
		mask := make([]uint64, (v.size+63)/64)
		for i := range mask {
			mask[i] = ^uint64(0)
		}
		c.Mask(mask)
		n := 0
		for id := range int32(v.size) {
			allowed := mask[id/64]&(1<<(id%64)) != 0
			if allowed {
				n++
			}
			if slices.Contains(v.end, id) && allowed != tc.end {
				t.Errorf("after %q: end token %d allowed %v, want %v", tc.prefix, id, allowed, tc.end)
			}
			if !allowed && !tc.exact || v.tokens[id] == nil {
				continue
			}
			probe := &Matcher{alts: c.m.alts}
			if ok := probe.Feed(v.tokens[id]); ok != allowed {
				t.Fatalf("after %q: token %d %q allowed %v, accepted %v", tc.prefix, id, v.tokens[id], allowed, ok)
			}
		}
		if n < tc.min || n > tc.max {
			t.Errorf("after %q: %d tokens allowed, want %d..%d", tc.prefix, n, tc.min, tc.max)
		}
	}
}
