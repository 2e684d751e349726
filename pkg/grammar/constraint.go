package grammar

import (
	"bytes"
	"fmt"
	"slices"
)

// Matcher follows a grammar byte by byte.
type Matcher struct {
	alts, buf []*frame
	ws        int // whitespace bytes just read between tokens of JSON
}

// MaxSpace bounds a run of whitespace between JSON tokens (enough for
// pretty-printed, deeply nested output): a model cannot stall a constrained
// generation by emitting spaces forever.
const MaxSpace = 64

// spaceRun returns the length of the whitespace run after byte c read from
// alts, and false if it is too long.
func spaceRun(alts []*frame, ws int, c byte) (int, bool) {
	if !isSpace(c) {
		return 0, true
	}
	for _, f := range alts {
		if f.n.kind == kString || f.n.kind == kKey || f.st == stLit {
			return 0, true // text, not layout
		}
	}
	return ws + 1, ws < MaxSpace
}

// Matcher returns a matcher at the start of a document.
func (g *Grammar) Matcher() *Matcher {
	top := &frame{n: doneNode}
	if g.suffix != "" {
		top = fixed(g.suffix, top)
	}
	top = &frame{up: top, n: g.root}
	if g.prefix != "" {
		top = fixed(g.prefix, top)
	}
	return &Matcher{alts: []*frame{top}}
}

// fixed is a frame reading exactly text.
func fixed(text string, up *frame) *frame {
	return &frame{up: up, n: &node{kind: kLiteral, lits: []string{text}}, st: stLit, hi: 1}
}

func advance(alts []*frame, c byte, out []*frame) []*frame {
	for _, f := range alts {
		out = step(f, c, out)
		if len(out) >= maxAlternatives {
			return out[:maxAlternatives]
		}
	}
	return out
}

// Feed advances past b and reports whether the grammar still accepts the
// text read so far as the beginning of a document. On false the matcher is
// unchanged.
func (m *Matcher) Feed(b []byte) bool {
	alts, ws := m.alts, m.ws
	for _, c := range b {
		var ok bool
		if ws, ok = spaceRun(alts, ws, c); !ok {
			return false
		}
		m.buf = advance(alts, c, m.buf[:0])
		if len(m.buf) == 0 {
			return false
		}
		alts = slices.Clone(m.buf)
	}
	m.alts, m.ws = alts, ws
	return true
}

// Complete reports whether the text read so far is a whole document.
func (m *Matcher) Complete() bool {
	return slices.ContainsFunc(m.alts, complete)
}

// Vocab is a tokenizer's vocabulary prepared for masks: every token's bytes
// in a trie, and the tokens that can only continue a string's text.
type Vocab struct {
	size   int
	tokens [][]byte // nil: never allowed by a grammar (special tokens)
	end    []int32
	all    *trie
	// plain are the tokens of printable text without quotes or
	// backslashes (isPlain): between characters of a string they are all
	// allowed, so the mask there is plain plus a walk over the others
	// (nonPlain).
	plain    []uint64
	nonPlain *trie
}

// NewVocab prepares a vocabulary of size ids. tokenBytes gives a token's
// bytes; excluded tokens (special tokens) are never allowed, except the end
// tokens, which are allowed exactly when the document is complete.
func NewVocab(size int, tokenBytes func(int32) []byte, excluded func(int32) bool, end []int32) *Vocab {
	v := &Vocab{size: size, tokens: make([][]byte, size), end: end, plain: make([]uint64, (size+63)/64)}
	var all, nonPlain []int32
	for id := range int32(size) {
		if excluded(id) || slices.Contains(end, id) {
			continue
		}
		b := tokenBytes(id)
		if len(b) == 0 {
			continue
		}
		v.tokens[id] = b
		all = append(all, id)
		if isPlain(b) {
			v.plain[id/64] |= 1 << (id % 64)
		} else {
			nonPlain = append(nonPlain, id)
		}
	}
	v.all = buildTrie(all, v.tokens)
	v.nonPlain = buildTrie(nonPlain, v.tokens)
	return v
}

// isPlain reports whether string text may hold b anywhere a character may
// start: no quote, backslash or control character, and UTF-8 that is valid
// or ends in the valid beginning of a character (byte-level BPE splits
// characters across tokens).
func isPlain(b []byte) bool {
	f := &frame{}
	for _, c := range b {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
		u8, lo, hi, ok := stepUTF8(f, c)
		if !ok {
			return false
		}
		f.u8, f.u8lo, f.u8hi = u8, lo, hi
	}
	return true
}

// trie holds token ids by their bytes; node 0 is the root.
type trie struct {
	edgeLo, edgeHi []int32 // node → its edges
	tokLo, tokHi   []int32 // node → the tokens ending there, in toks
	edgeByte       []byte
	edgeNode       []int32
	toks           []int32
}

func buildTrie(ids []int32, tokens [][]byte) *trie {
	ids = slices.Clone(ids)
	slices.SortFunc(ids, func(a, b int32) int { return bytes.Compare(tokens[a], tokens[b]) })
	t := &trie{}
	t.build(ids, tokens, 0)
	return t
}

// build adds the node for ids, which share their first depth bytes and are
// sorted, and returns its index.
func (t *trie) build(ids []int32, tokens [][]byte, depth int) int32 {
	n := int32(len(t.edgeLo))
	i := 0
	for i < len(ids) && len(tokens[ids[i]]) == depth {
		i++
	}
	t.tokLo = append(t.tokLo, int32(len(t.toks)))
	t.toks = append(t.toks, ids[:i]...)
	t.tokHi = append(t.tokHi, int32(len(t.toks)))
	type group struct{ lo, hi int }
	var groups []group
	for j := i; j < len(ids); {
		c := tokens[ids[j]][depth]
		k := j
		for k < len(ids) && tokens[ids[k]][depth] == c {
			k++
		}
		groups = append(groups, group{j, k})
		j = k
	}
	e0 := int32(len(t.edgeByte))
	t.edgeLo = append(t.edgeLo, e0)
	t.edgeHi = append(t.edgeHi, e0+int32(len(groups)))
	t.edgeByte = append(t.edgeByte, make([]byte, len(groups))...)
	t.edgeNode = append(t.edgeNode, make([]int32, len(groups))...)
	for gi, g := range groups {
		child := t.build(ids[g.lo:g.hi], tokens, depth+1)
		t.edgeByte[e0+int32(gi)] = tokens[ids[g.lo]][depth]
		t.edgeNode[e0+int32(gi)] = child
	}
	return n
}

// Constraint applies a grammar to a token stream; it implements
// pkg/sample.Constraint. It is not safe for concurrent use.
type Constraint struct {
	v     *Vocab
	m     *Matcher
	ended bool
	mine  []uint64
	bufs  [][]*frame // per trie depth
}

// Constraint starts constraining a generation to g.
func (g *Grammar) Constraint(v *Vocab) *Constraint {
	return &Constraint{v: v, m: g.Matcher(), mine: make([]uint64, len(v.plain))}
}

// Mask clears in allowed the tokens that cannot come next.
func (c *Constraint) Mask(allowed []uint64) {
	clear(c.mine)
	if c.ended {
		c.apply(allowed)
		return
	}
	if c.m.Complete() {
		for _, id := range c.v.end {
			c.mine[id/64] |= 1 << (id % 64)
		}
	}
	t := c.v.all
	if inPlainString(c.m.alts) {
		copy(c.mine, c.v.plain)
		t = c.v.nonPlain
	}
	c.walk(t, 0, c.m.alts, c.m.ws, 0)
	c.apply(allowed)
}

func (c *Constraint) apply(allowed []uint64) {
	for i := range allowed {
		if i < len(c.mine) {
			allowed[i] &= c.mine[i]
		} else {
			allowed[i] = 0
		}
	}
}

// inPlainString reports whether every alternative is in the text of a
// string value, between characters.
func inPlainString(alts []*frame) bool {
	for _, f := range alts {
		if f.n.kind != kString || f.st != stStrBody || f.u8 != 0 {
			return false
		}
	}
	return true
}

func (c *Constraint) walk(t *trie, node int32, alts []*frame, ws, depth int) {
	if depth == len(c.bufs) {
		c.bufs = append(c.bufs, nil)
	}
	for e := t.edgeLo[node]; e < t.edgeHi[node]; e++ {
		nws, ok := spaceRun(alts, ws, t.edgeByte[e])
		if !ok {
			continue
		}
		next := advance(alts, t.edgeByte[e], c.bufs[depth][:0])
		c.bufs[depth] = next
		if len(next) == 0 {
			continue
		}
		child := t.edgeNode[e]
		for _, id := range t.toks[t.tokLo[child]:t.tokHi[child]] {
			c.mine[id/64] |= 1 << (id % 64)
		}
		c.walk(t, child, next, nws, depth+1)
	}
}

// Accept advances past token.
func (c *Constraint) Accept(token int32) error {
	if token < 0 || int(token) >= c.v.size {
		return fmt.Errorf("grammar: token %d is outside the vocabulary", token)
	}
	if c.ended {
		return fmt.Errorf("grammar: token %d after the end", token)
	}
	if slices.Contains(c.v.end, token) {
		if !c.m.Complete() {
			return fmt.Errorf("grammar: end token %d before the document is complete", token)
		}
		c.ended = true
		return nil
	}
	b := c.v.tokens[token]
	if b == nil || !c.m.Feed(b) {
		return fmt.Errorf("grammar: token %d (%q) is not allowed here", token, b)
	}
	return nil
}

// Complete reports whether the tokens accepted so far form a whole document.
func (c *Constraint) Complete() bool { return c.ended || c.m.Complete() }
