package grammar

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// recordsSchema is a long JSON generation: an array of records, each with
// free strings, integers, numbers, an enum array and an anyOf.
const recordsSchema = `{"type":"array","items":` + personSchema + `}`

// records is a document of n records of recordsSchema.
func records(n int) string {
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"name": "Person number %d, who lives at %d Main Street", "age": %d, "height": %d.%d, "tags": ["a", "ab"], "role": {"level": %d}, "ok": true}`,
			i, 100+i, 20+i%50, 150+i%40, i%10, i%5)
	}
	b.WriteString("]")
	return b.String()
}

// TestConstraintAllocs checks that constrained decoding allocates nothing
// per token once the grammar's masks are cached: a generation costs a
// fixed number of allocations (the Constraint, its matcher's two frame
// arenas and the other buffers, which grow to their working size once),
// the same for a document four times longer.
func TestConstraintAllocs(t *testing.T) {
	v := qwenVocab(t)
	g := mustCompile(t, recordsSchema)
	mask := make([]uint64, (v.size+63)/64)
	short, long := records(16), records(64)
	follow(t, g.Constraint(v), v, mask, long) // every state's mask cached
	var tokShort, tokLong int
	aShort := testing.AllocsPerRun(5, func() { tokShort = follow(t, g.Constraint(v), v, mask, short) })
	aLong := testing.AllocsPerRun(5, func() { tokLong = follow(t, g.Constraint(v), v, mask, long) })
	t.Logf("%d tokens: %.0f allocations; %d tokens: %.0f", tokShort, aShort, tokLong, aLong)
	if tokLong < 3*tokShort {
		t.Fatalf("documents of %d and %d tokens: not a long generation", tokShort, tokLong)
	}
	if aLong > aShort {
		t.Errorf("%.0f allocations for %d tokens, %.0f for %d: %.3f per token, want 0",
			aShort, tokShort, aLong, tokLong, (aLong-aShort)/float64(tokLong-tokShort))
	}
	if aShort > 40 {
		t.Errorf("%.0f allocations per generation, want at most 40 (the Constraint, its arenas and buffers)", aShort)
	}
}

// TestConstraintStartsNoGoroutine checks that Accept and Mask run on the
// caller's goroutine: every state of a fresh grammar is computed (the
// walk of the 151,669-token vocabulary takes milliseconds), and no
// goroutine appears meanwhile.
func TestConstraintStartsNoGoroutine(t *testing.T) {
	v := qwenVocab(t)
	g := mustCompile(t, recordsSchema)
	c := g.Constraint(v)
	mask := make([]uint64, (v.size+63)/64)
	base := runtime.NumGoroutine()
	script := records(2)
	for script != "" {
		for i := range mask {
			mask[i] = ^uint64(0)
		}
		c.Mask(mask)
		var best int32 = -1
		for id, b := range v.tokens {
			if b != nil && mask[id/64]&(1<<(id%64)) != 0 && strings.HasPrefix(script, string(b)) && (best < 0 || len(b) > len(v.tokens[best])) {
				best = int32(id)
			}
		}
		if best < 0 {
			t.Fatalf("no allowed token continues %q", script)
		}
		if err := c.Accept(best); err != nil {
			t.Fatal(err)
		}
		if n := runtime.NumGoroutine(); n != base {
			t.Fatalf("after Accept: %d goroutines, %d before", n, base)
		}
		script = script[len(v.tokens[best]):]
	}
}

// BenchmarkJSONGeneration measures Accept and Mask per token of a long
// JSON generation (24 records, ~1,400 tokens) on the Qwen3 vocabulary
// with the grammar's masks cached: ns/token, allocs/token.
func BenchmarkJSONGeneration(b *testing.B) {
	v := qwenVocab(b)
	g := mustCompile(b, recordsSchema)
	mask := make([]uint64, (v.size+63)/64)
	doc := records(24)
	follow(b, g.Constraint(v), v, mask, doc)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	allocs := ms.Mallocs
	tokens, cpu := 0, cpuTime()
	for b.Loop() {
		tokens += follow(b, g.Constraint(v), v, mask, doc)
	}
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(tokens), "ns/token")
	b.ReportMetric(float64(cpuTime()-cpu)/float64(tokens), "cpu-ns/token")
	b.ReportMetric(float64(ms.Mallocs-allocs)/float64(tokens), "allocs/token")
}
