package grammar

import (
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
	c.prepare(false)
	return true
}

// BenchmarkMask measures one mask over the Qwen3 vocabulary at typical
// points of a document: ns/op is the cost per generated token.
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
		b.Run(pt.name, func(b *testing.B) {
			c := g.Constraint(v)
			if !feed(c, pt.prefix) {
				b.Fatalf("prefix %q rejected", pt.prefix)
			}
			mask := make([]uint64, (v.size+63)/64)
			b.ReportAllocs()
			for b.Loop() {
				for i := range mask {
					mask[i] = ^uint64(0)
				}
				c.Mask(mask)
			}
		})
	}
	b.Run("json_object-string", func(b *testing.B) {
		c := JSONObject(Spaced).Constraint(v)
		feed(c, `{"text": "once upon`)
		mask := make([]uint64, (v.size+63)/64)
		for b.Loop() {
			c.Mask(mask)
		}
	})
}

// TestQwenVocabMask checks masks on the real vocabulary: inside a string
// most tokens are allowed, after a key only ':' and spaces, and every
// allowed token's bytes are accepted.
func TestQwenVocabMask(t *testing.T) {
	v := qwenVocab(t)
	g := mustCompile(t, personSchema)
	for _, tc := range []struct {
		prefix   string
		min, max int
	}{
		{`{"name": "Ann`, 100000, v.size},
		{`{"name"`, 1, 1000}, // ":" and whitespace runs
		{`{"name": "Ann", "age": 4`, 10, 2000},
	} {
		c := g.Constraint(v)
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
			if mask[id/64]&(1<<(id%64)) == 0 {
				continue
			}
			n++
			probe := &Matcher{alts: c.m.alts}
			if !probe.Feed(v.tokens[id]) {
				t.Fatalf("after %q: token %d %q allowed but rejected", tc.prefix, id, v.tokens[id])
			}
		}
		if n < tc.min || n > tc.max {
			t.Errorf("after %q: %d tokens allowed, want %d..%d", tc.prefix, n, tc.min, tc.max)
		}
	}
}
