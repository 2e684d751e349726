package grammar

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"unsafe"
)

// Matcher follows a grammar byte by byte. Its frames come from two arenas
// it keeps: a holds the live stacks and the garbage of the bytes read
// since the last compaction, which copies the live stacks into old and
// swaps the two; so a matcher allocates nothing once its arenas have
// grown to its working set.
type Matcher struct {
	alts       []*frame
	live       []*frame // backs alts (never a scratch buffer: probes in tests share alts)
	buf, spare []*frame // scratch for Feed
	a, old     *arena   // nil: frames on the heap (a probe: &Matcher{alts: m.alts})
	memo       map[*frame]*frame
	compactAt  int // frames in a beyond which Feed compacts
}

// minCompact is the least number of frames a matcher's arena holds before
// it is compacted: 80 KB, a few hundred tokens of structural JSON.
const minCompact = 1024

// Matcher returns a matcher at the start of a document.
func (g *Grammar) Matcher() *Matcher {
	m := &Matcher{a: newArena(), old: newArena(), memo: map[*frame]*frame{}, compactAt: minCompact}
	m.live = append(m.live, m.a.new(frame{up: m.a.new(frame{n: doneNode}), n: g.root}))
	m.alts = m.live
	return m
}

func (a *arena) advance(alts []*frame, c byte, out []*frame) []*frame {
	for _, f := range alts {
		out = a.step(f, c, out)
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
	if len(b) == 0 {
		return true
	}
	mark := m.a.mark()
	alts, cur, next := m.alts, m.buf, m.spare
	for _, c := range b {
		next = m.a.advance(alts, c, next[:0])
		if len(next) == 0 {
			m.buf, m.spare = cur, next
			m.a.release(mark) // nothing built for b is referenced
			return false
		}
		alts = next
		cur, next = next, cur
	}
	m.live = append(m.live[:0], alts...)
	m.alts = m.live
	m.buf, m.spare = cur, next
	m.compact()
	return true
}

// compact copies the live stacks into the spare arena once the current one
// holds compactAt frames, and swaps them: the garbage of earlier bytes is
// dropped at a cost proportional to the live frames.
func (m *Matcher) compact() {
	if m.a == nil || m.a.n < m.compactAt {
		return
	}
	m.old.release(0)
	m.old.copyStacks(m.live, m.memo)
	clear(m.memo)
	m.a, m.old = m.old, m.a
	m.compactAt = max(minCompact, 4*m.a.n)
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
	maxLen int32 // the longest token, in bytes
	// plain are the tokens of printable text without quotes or
	// backslashes (isPlain): between characters of a free string they are
	// all allowed, so the mask there is plain plus a walk over the others
	// (nonPlain).
	plain    []uint64
	nonPlain *trie
	// textPlain are the tokens free text (Qwen3-Coder values) takes
	// anywhere (isTextPlain), nonTextPlain the others.
	textPlain    []uint64
	nonTextPlain *trie
}

// NewVocab prepares a vocabulary of size ids. tokenBytes gives a token's
// bytes; excluded tokens (special tokens) are never allowed, except the end
// tokens, which are allowed exactly when the document is complete.
func NewVocab(size int, tokenBytes func(int32) []byte, excluded func(int32) bool, end []int32) *Vocab {
	v := &Vocab{size: size, tokens: make([][]byte, size), end: end, plain: make([]uint64, (size+63)/64), textPlain: make([]uint64, (size+63)/64)}
	var all, nonPlain, nonTextPlain []int32
	for id := range int32(size) {
		if excluded(id) || slices.Contains(end, id) {
			continue
		}
		b := tokenBytes(id)
		if len(b) == 0 {
			continue
		}
		v.tokens[id] = b
		v.maxLen = max(v.maxLen, int32(len(b)))
		all = append(all, id)
		if isPlain(b) {
			v.plain[id/64] |= 1 << (id % 64)
		} else {
			nonPlain = append(nonPlain, id)
		}
		if isTextPlain(b) {
			v.textPlain[id/64] |= 1 << (id % 64)
		} else {
			nonTextPlain = append(nonTextPlain, id)
		}
	}
	v.all = buildTrie(all, v.tokens)
	v.nonPlain = buildTrie(nonPlain, v.tokens)
	v.nonTextPlain = buildTrie(nonTextPlain, v.tokens)
	return v
}

// isPlain reports whether string text may hold b anywhere a character may
// start: no quote, backslash or control character, and UTF-8 that is valid
// or ends in the valid beginning of a character (byte-level BPE splits
// characters across tokens).
func isPlain(b []byte) bool {
	return plainUTF8(b, func(c byte) bool { return c < 0x20 || c == '"' || c == '\\' })
}

// isTextPlain reports whether free text may hold b anywhere a character
// may start, whatever came before: no '<' (which may begin the
// terminator), no newline (after which it may), no other control
// character, and UTF-8 as isPlain.
func isTextPlain(b []byte) bool {
	return plainUTF8(b, func(c byte) bool { return c < 0x20 && c != '\t' || c == '<' })
}

// plainUTF8 reports whether b holds no byte that reject refuses and is UTF-8
// that is valid or ends in the valid beginning of a character.
func plainUTF8(b []byte, reject func(c byte) bool) bool {
	var f frame
	for _, c := range b {
		if reject(c) {
			return false
		}
		u8, lo, hi, ok := stepUTF8(&f, c)
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

// A mask is the set of tokens allowed in one automaton state: a list of
// ids when few are (most states outside free text), else a bit set.
type mask struct {
	ids   []int32
	words []uint64
}

func (m *mask) bytes() int { return 4*len(m.ids) + 8*len(m.words) + 64 }

// maskCacheBytes bounds the masks one grammar keeps: beyond it, new states
// are computed each time (still correct, only slower).
const maskCacheBytes = 64 << 20

// maskCache maps an automaton state (its stacks, serialised by stateKey)
// to its mask. A state reached again, within a generation or by a later
// request with the same grammar, costs a map lookup: inside free strings
// the state repeats at every token, and structural states repeat across
// the requests of an agent that sends the same tools every turn.
type maskCache struct {
	mu    sync.Mutex
	vocab *Vocab
	m     map[string]*mask
	size  int
}

func (c *maskCache) get(v *Vocab, key []byte) *mask {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.vocab != v {
		return nil
	}
	return c.m[string(key)]
}

// put caches a copy of m under key and returns it; when the cache is full
// it returns m itself (the caller's scratch), uncached.
func (c *maskCache) put(v *Vocab, key []byte, m *mask) *mask {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.vocab != v {
		c.vocab, c.m, c.size = v, map[string]*mask{}, 0
	}
	if c.size+m.bytes()+len(key) > maskCacheBytes {
		return m
	}
	kept := &mask{ids: slices.Clip(slices.Clone(m.ids)), words: slices.Clone(m.words)}
	c.m[string(key)] = kept
	c.size += kept.bytes() + len(key)
	return kept
}

// cachedMasks is the number of states whose masks g keeps.
func (g *Grammar) cachedMasks() int {
	g.cache.mu.Lock()
	defer g.cache.mu.Unlock()
	return len(g.cache.m)
}

// stateKey serialises alts into key: everything a mask depends on. Counters
// that only matter near a bound (string lengths, item counts) are clamped
// to the longest token, so that a long free string is one state.
func stateKey(key []byte, alts []*frame, maxTok int32) []byte {
	for _, f := range alts {
		for ; f != nil; f = f.up {
			n := f.n
			key = binary.LittleEndian.AppendUint64(key, uint64(uintptr(unsafe.Pointer(n))))
			key = append(key, f.st, f.u8, f.u8lo, f.u8hi, f.hex)
			cnt := f.cnt
			switch {
			case n.kind == kString || n.kind == kText:
				cnt = clampCount(cnt, n.minLen, n.maxLen, maxTok)
			case n.kind == kArray || n.kind == kRepeat:
				cnt = clampCount(cnt, n.minItems, n.maxItems, maxTok)
			}
			for _, x := range [...]int32{f.lo, f.hi, f.pos, cnt, f.rn} {
				key = binary.LittleEndian.AppendUint32(key, uint32(x))
			}
			key = binary.LittleEndian.AppendUint64(key, f.seen)
			key = binary.LittleEndian.AppendUint64(key, f.re[0])
			key = binary.LittleEndian.AppendUint64(key, f.re[1])
			key = binary.LittleEndian.AppendUint64(key, uint64(f.val))
		}
		key = append(key, 0xFF) // between stacks
	}
	return key
}

// clampCount maps a count to one that decides the same tokens: below lo it
// matters exactly; above, only the room left below hi, up to a token's
// length.
func clampCount(cnt, lo, hi, maxTok int32) int32 {
	if cnt < lo {
		return cnt
	}
	if hi < 0 {
		return lo
	}
	return lo + 1 + min(hi-cnt, maxTok+1)
}

// Constraint applies a grammar to a token stream; it implements
// pkg/sample.Constraint and its optional Prepare. It is not safe for
// concurrent use, and starts no goroutine: a caller that wants the mask
// of the next state computed while it does something else (the engine,
// during the model's forward pass) calls Prepare on a thread of its own.
// Its buffers grow to their working size once and are reused: once the
// grammar's cache holds the masks of the states met, Accept and Mask
// allocate nothing.
type Constraint struct {
	g     *Grammar
	v     *Vocab
	m     *Matcher
	ended bool
	next  *mask // the mask of the current state; nil until Prepare
	// scratch of compute
	mine    []uint64
	bufs    [][]*frame // per trie depth
	settled []*frame
	probe   []*frame
	ahead   [2][]*frame // forceLongest's look-ahead, alternately
	forced  []byte
	path    []int32
	key     []byte
	keep    []int32
	scratch mask // the mask of a state the full cache could not keep
}

// Constraint starts constraining a generation to g. The first mask is
// worked out by the first Prepare or Mask.
func (g *Grammar) Constraint(v *Vocab) *Constraint {
	return &Constraint{g: g, v: v, m: g.Matcher(), mine: make([]uint64, len(v.plain))}
}

// Prepare works out the current state's mask: a lookup in the grammar's
// cache, else a walk of the vocabulary (tens of µs to a few ms on the
// Qwen3 vocabulary; docs/server.md, Mask cost). Mask calls it when nobody
// did; pkg/engine calls it on its mask worker while the model computes the
// logits the mask applies to.
func (c *Constraint) Prepare() {
	if !c.Prepared() {
		c.next = c.compute()
	}
}

// Prepared reports whether the current state's mask is known, looking it
// up in the grammar's cache (about a µs): when it is, Mask costs no walk
// and Prepare nothing.
func (c *Constraint) Prepared() bool {
	if c.next != nil || c.ended {
		return true
	}
	c.key = stateKey(c.key[:0], c.m.alts, c.v.maxLen)
	c.next = c.g.cache.get(c.v, c.key)
	return c.next != nil
}

// Mask clears in allowed the tokens that cannot come next.
func (c *Constraint) Mask(allowed []uint64) {
	c.Prepare()
	if c.ended {
		clear(allowed)
		return
	}
	m := c.next
	if m.words != nil {
		for i := range allowed {
			if i < len(m.words) {
				allowed[i] &= m.words[i]
			} else {
				allowed[i] = 0
			}
		}
		return
	}
	keep := c.keep[:0]
	for _, id := range m.ids {
		if int(id/64) < len(allowed) && allowed[id/64]&(1<<(id%64)) != 0 {
			keep = append(keep, id)
		}
	}
	clear(allowed)
	for _, id := range keep {
		allowed[id/64] |= 1 << (id % 64)
	}
	c.keep = keep
}

// sparseMax is the largest mask kept as a list of ids.
const sparseMax = 2048

// compute works out the current state's mask by walking the vocabulary
// trie, and caches it. The frames it builds are released when it returns.
func (c *Constraint) compute() *mask {
	a := c.m.a
	defer a.release(a.mark())
	clear(c.mine)
	alts := c.settle(c.m.alts)
	if slices.ContainsFunc(alts, complete) {
		for _, id := range c.v.end {
			c.mine[id/64] |= 1 << (id % 64)
		}
	}
	t := c.v.all
	switch {
	case c.inPlainString(alts):
		copy(c.mine, c.v.plain)
		t = c.v.nonPlain
	case inPlainText(alts):
		copy(c.mine, c.v.textPlain)
		t = c.v.nonTextPlain
	default:
		if b, ok := inPartialTerm(alts); ok {
			// Inside a partial terminator, a plain-text token that does
			// not continue it turns it into text: allowed. Those that
			// begin with its next byte are walked.
			copy(c.mine, c.v.textPlain)
			c.clearSubtree(c.v.all, c.v.all.child(0, b))
			c.walkEdges(c.v.nonTextPlain, 0, alts, 0, int(b), -1)
			c.walkEdges(c.v.all, 0, alts, 0, -1, int(b))
			t = nil
		}
	}
	if t != nil {
		c.walk(t, 0, alts, 0)
	}
	c.forceLongest(alts)
	n := 0
	for _, w := range c.mine {
		n += bits.OnesCount64(w)
	}
	m := &c.scratch
	m.ids, m.words = m.ids[:0], nil
	if n <= sparseMax {
		for w, word := range c.mine {
			for ; word != 0; word &= word - 1 {
				m.ids = append(m.ids, int32(w*64+bits.TrailingZeros64(word)))
			}
		}
	} else {
		m.words = c.mine // valid until the next compute, as the scratch is
	}
	return c.g.cache.put(c.v, c.key, m)
}

// inPlainString reports whether every alternative is in the text of a
// free JSON string or of an object key that may be any string, between
// characters, with room for any token.
func (c *Constraint) inPlainString(alts []*frame) bool {
	for _, f := range alts {
		n := f.n
		switch {
		case n.kind == kKey:
			obj := f.up.n
			if f.u8 != 0 || obj.additional == nil || !objectMayEnd(obj, f.up.pos) {
				return false
			}
		case n.kind != kString || f.st != stStrBody || f.u8 != 0 || n.raw || n.re != nil ||
			n.maxLen >= 0 && n.maxLen-f.cnt < c.v.maxLen:
			return false
		}
	}
	return true
}

// settle replaces a finished fixed text (a literal read to its end) that a
// sequence continues with free text by that text's first state: the two
// accept the same bytes, and the latter lets inPlainText see that the
// mask is the plain-text set (a Qwen3-Coder value starts right after its
// tag).
func (c *Constraint) settle(alts []*frame) []*frame {
	a, out := c.m.a, c.settled[:0]
	changed := false
	for _, f := range alts {
		g := f
		if f.st == stLit && f.hi-f.lo == 1 && int(f.pos) == len(f.n.lits[f.lo]) && f.n.next == nil {
			if seq := f.up; seq.st == stSeq && int(seq.pos) < len(seq.n.parts) && seq.n.parts[seq.pos].kind == kText {
				up := seq.up
				if int(seq.pos)+1 < len(seq.n.parts) {
					up = a.new(frame{up: seq.up, n: seq.n, st: stSeq, pos: seq.pos + 1})
				}
				g = a.new(frame{up: up, n: seq.n.parts[seq.pos], st: stText})
				changed = true
			}
		}
		out = append(out, g)
	}
	c.settled = out
	if !changed {
		return alts
	}
	return out
}

// inPartialTerm reports whether every alternative is unbounded free text
// in the middle of its terminator, and the byte that continues the
// terminator (the same for all).
func inPartialTerm(alts []*frame) (byte, bool) {
	var b byte
	for i, f := range alts {
		n := f.n
		if n.kind != kText || f.pos == 0 || n.maxLen >= 0 || n.minLen > 0 {
			return 0, false
		}
		if i > 0 && n.term[f.pos] != b {
			return 0, false
		}
		b = n.term[f.pos]
	}
	return b, len(alts) > 0
}

// child is node's child by byte b, or -1.
func (t *trie) child(node int32, b byte) int32 {
	for e := t.edgeLo[node]; e < t.edgeHi[node]; e++ {
		if t.edgeByte[e] == b {
			return t.edgeNode[e]
		}
	}
	return -1
}

// clearSubtree clears the mask bits of every token under node.
func (c *Constraint) clearSubtree(t *trie, node int32) {
	if node < 0 {
		return
	}
	for _, id := range t.toks[t.tokLo[node]:t.tokHi[node]] {
		c.mine[id/64] &^= 1 << (id % 64)
	}
	for e := t.edgeLo[node]; e < t.edgeHi[node]; e++ {
		c.clearSubtree(t, t.edgeNode[e])
	}
}

// inPlainText reports whether every alternative is in unbounded free text
// (a Qwen3-Coder value), between characters, outside its terminator.
func inPlainText(alts []*frame) bool {
	for _, f := range alts {
		n := f.n
		if n.kind != kText || f.pos != 0 || f.u8 != 0 || n.maxLen >= 0 || n.minLen > 0 {
			return false
		}
	}
	return true
}

func (c *Constraint) walk(t *trie, node int32, alts []*frame, depth int) {
	c.walkEdges(t, node, alts, depth, -1, -1)
}

// walkEdges walks node's subtrees, skipping the edge of byte skip and, when
// only ≥ 0, all edges but that of byte only.
func (c *Constraint) walkEdges(t *trie, node int32, alts []*frame, depth, skip, only int) {
	if depth == len(c.bufs) {
		c.bufs = append(c.bufs, nil)
	}
	a := c.m.a
	for e := t.edgeLo[node]; e < t.edgeHi[node]; e++ {
		if b := int(t.edgeByte[e]); b == skip || only >= 0 && b != only {
			continue
		}
		mark := a.mark()
		next := a.advance(alts, t.edgeByte[e], c.bufs[depth][:0])
		c.bufs[depth] = next
		if len(next) > 0 {
			child := t.edgeNode[e]
			for _, id := range t.toks[t.tokLo[child]:t.tokHi[child]] {
				c.mine[id/64] |= 1 << (id % 64)
			}
			c.walk(t, child, next, depth+1)
		}
		a.release(mark) // the subtree's frames are dead
	}
}

// maxForced bounds the forced text looked ahead.
const maxForced = 64

// forceLongest narrows the mask where the grammar allows exactly one text
// for the next bytes (a key, a separator, a tag): of the allowed tokens
// that lie within that text, only the longest is kept, so a model cannot
// spell fixed text out one byte at a time. Tokens reaching past the forced
// text are kept.
func (c *Constraint) forceLongest(alts []*frame) {
	a := c.m.a
	forced := c.forced[:0]
	cur := alts
	for len(forced) < maxForced && !slices.ContainsFunc(cur, complete) {
		only, n := byte(0), 0
		for b := range 256 {
			mark := a.mark()
			c.probe = a.advance(cur, byte(b), c.probe[:0])
			ok := len(c.probe) > 0
			a.release(mark)
			if ok {
				only, n = byte(b), n+1
				if n > 1 {
					break
				}
			}
		}
		if n != 1 {
			break
		}
		forced = append(forced, only)
		i := len(forced) % 2 // not the buffer cur is in
		c.ahead[i] = a.advance(cur, only, c.ahead[i][:0])
		cur = c.ahead[i]
	}
	c.forced = forced
	if len(forced) < 2 {
		return
	}
	// Walk the trie along forced: the deepest token on the path wins.
	t, node, best := c.v.all, int32(0), int32(-1)
	path := c.path[:0]
	for _, b := range forced {
		child := int32(-1)
		for e := t.edgeLo[node]; e < t.edgeHi[node]; e++ {
			if t.edgeByte[e] == b {
				child = t.edgeNode[e]
				break
			}
		}
		if child < 0 {
			break
		}
		node = child
		for _, id := range t.toks[t.tokLo[node]:t.tokHi[node]] {
			if c.mine[id/64]&(1<<(id%64)) != 0 {
				path = append(path, id)
				best = id
			}
		}
	}
	for _, id := range path {
		if id != best {
			c.mine[id/64] &^= 1 << (id % 64)
		}
	}
	c.path = path
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
	c.next = nil
	return nil
}

// Complete reports whether the tokens accepted so far form a whole document.
func (c *Constraint) Complete() bool { return c.ended || c.m.Complete() }
