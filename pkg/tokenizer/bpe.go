package tokenizer

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
)

// mergeTable maps a pair of token ids to its merge rank and the id of the
// merged token. It is an open-addressing table because this lookup is the
// inner loop of BPE and a Go map costs several times more.
type mergeTable struct {
	keys    []uint64 // pair+1, 0 = empty
	vals    []uint64 // rank<<32 | merged id
	shift   uint
	ordered bool // see checkOrdered
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func newMergeTable(n int) *mergeTable {
	size, shift := 16, uint(60)
	for size < 2*n {
		size <<= 1
		shift--
	}
	return &mergeTable{keys: make([]uint64, size), vals: make([]uint64, size), shift: shift}
}

func (m *mergeTable) slot(k uint64) int { return int((k * 0x9E3779B97F4A7C15) >> m.shift) }

// put inserts or replaces: a later duplicate merge wins, as in Hugging Face.
func (m *mergeTable) put(a, b int32, rank int, merged int32) {
	k := pairKey(a, b) + 1
	mask := len(m.keys) - 1
	for i := m.slot(k); ; i = (i + 1) & mask {
		if m.keys[i] == 0 || m.keys[i] == k {
			m.keys[i] = k
			m.vals[i] = uint64(rank)<<32 | uint64(uint32(merged))
			return
		}
	}
}

func (m *mergeTable) get(a, b int32) (rank, merged int32, ok bool) {
	k := pairKey(a, b) + 1
	mask := len(m.keys) - 1
	for i := m.slot(k); ; i = (i + 1) & mask {
		switch m.keys[i] {
		case k:
			v := m.vals[i]
			return int32(v >> 32), int32(uint32(v)), true
		case 0:
			return 0, 0, false
		}
	}
}

// noMerge is the rank of a pair with no merge rule.
const noMerge = int32(1<<31 - 1)

// rank returns the rank and result of merging a and b (noMerge if none).
func (m *mergeTable) rank(a, b int32) (int32, int32) {
	if r, id, ok := m.get(a, b); ok {
		return r, id
	}
	return noMerge, 0
}

// checkOrdered records whether every merge that consumes a token ranks after
// every merge that produces it, as in any trained BPE. Then merging all
// occurrences of the lowest-ranked pair at once (mergeLevels) equals Hugging
// Face's one-merge-at-a-time order: a merge creates only pairs of higher rank.
func (m *mergeTable) checkOrdered(vocabSize int) {
	maxProduce := make([]int32, vocabSize)
	minUse := make([]int32, vocabSize)
	for i := range maxProduce {
		maxProduce[i], minUse[i] = -1, noMerge
	}
	for i, k := range m.keys {
		if k == 0 {
			continue
		}
		a, b := int32(uint32((k-1)>>32)), int32(uint32(k-1))
		rank, merged := int32(m.vals[i]>>32), int32(uint32(m.vals[i]))
		maxProduce[merged] = max(maxProduce[merged], rank)
		minUse[a] = min(minUse[a], rank)
		minUse[b] = min(minUse[b], rank)
	}
	m.ordered = true
	for t := range maxProduce {
		if minUse[t] <= maxProduce[t] {
			m.ordered = false
			return
		}
	}
}

// bpeWork is the reusable scratch of one BPE run.
type bpeWork struct {
	ids, ranks, merged []int32
	syms               []symbol
	heap               []uint64 // rank<<32 | position: lowest rank, then leftmost
}

type symbol struct{ id, prev, next int32 } // id -1: merged into its left neighbour

var bpeWorkPool = sync.Pool{New: func() any { return new(bpeWork) }}

// merge appends the BPE of the bytes of word to dst: repeatedly merge the
// adjacent pair of lowest rank, leftmost first (Hugging Face's order).
func (m *mergeTable) merge(dst []int32, word string, byteID *[256]int32) []int32 {
	if word == "" {
		return dst
	}
	w := bpeWorkPool.Get().(*bpeWork)
	ids := w.ids[:0]
	for i := 0; i < len(word); i++ {
		ids = append(ids, byteID[word[i]])
	}
	done := false
	if m.ordered {
		ids, done = m.mergeLevels(w, ids)
	}
	if !done {
		ids = m.mergeHeap(w, ids)
	}
	dst = append(dst, ids...)
	w.ids = ids
	bpeWorkPool.Put(w)
	return dst
}

// mergeLevels merges, level by level, every occurrence of the lowest-ranked
// pair in one left-to-right pass over a compact array: a few tight loops for
// the usual word, and a handful of passes for long runs like "aaaa…" that
// cost a heap thousands of operations. Words that need many levels are left
// unfinished (done false) after a work budget, in a state Hugging Face's order
// also passes through, for mergeHeap to finish.
func (m *mergeTable) mergeLevels(w *bpeWork, ids []int32) (_ []int32, done bool) {
	const recompute = -1
	n := len(ids)
	ranks, merged := grow(w.ranks, n), grow(w.merged, n)
	w.ranks, w.merged = ranks, merged
	for i := 0; i+1 < n; i++ {
		ranks[i], merged[i] = m.rank(ids[i], ids[i+1])
	}
	ranks[n-1] = noMerge
	for budget := 8*n + 64; ; budget -= n {
		r := noMerge
		for _, x := range ranks[:n] {
			r = min(r, x)
		}
		if r == noMerge {
			return ids[:n], true
		}
		if budget < 0 {
			return ids[:n], false
		}
		k := 0
		for i := 0; i < n; k++ {
			if ranks[i] == r { // the pair (i, i+1) merges
				ids[k], ranks[k] = merged[i], recompute
				i += 2
				continue
			}
			ids[k], ranks[k], merged[k] = ids[i], ranks[i], merged[i]
			i++
		}
		n = k
		prevMerged := false
		for k := 0; k < n; k++ {
			if ranks[k] != recompute {
				prevMerged = false
				continue
			}
			if k > 0 && !prevMerged { // a merged left neighbour already did this pair
				ranks[k-1], merged[k-1] = m.rank(ids[k-1], ids[k])
			}
			ranks[k] = noMerge
			if k+1 < n {
				ranks[k], merged[k] = m.rank(ids[k], ids[k+1])
			}
			prevMerged = true
		}
	}
}

func grow(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n, 2*n)
	}
	return s[:n]
}

// mergeHeap is Hugging Face's algorithm: a heap of candidate pairs over a
// linked list of symbols, stale candidates skipped when popped.
func (m *mergeTable) mergeHeap(w *bpeWork, ids []int32) []int32 {
	syms := w.syms[:0]
	for i, id := range ids {
		syms = append(syms, symbol{id: id, prev: int32(i - 1), next: int32(i + 1)})
	}
	syms[len(syms)-1].next = -1
	w.heap = w.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		if r, _, ok := m.get(syms[i].id, syms[i+1].id); ok {
			w.push(r, int32(i))
		}
	}
	for len(w.heap) > 0 {
		rank, pos := w.pop()
		s := &syms[pos]
		if s.id < 0 || s.next < 0 {
			continue
		}
		// A rank names one pair, so an equal rank means the queued pair is
		// still the one at pos; otherwise a neighbour changed since.
		r, merged, ok := m.get(s.id, syms[s.next].id)
		if !ok || r != rank {
			continue
		}
		right := s.next
		s.id = merged
		s.next = syms[right].next
		syms[right].id = -1
		if s.next >= 0 {
			syms[s.next].prev = pos
			if r, _, ok := m.get(s.id, syms[s.next].id); ok {
				w.push(r, pos)
			}
		}
		if s.prev >= 0 {
			if r, _, ok := m.get(syms[s.prev].id, s.id); ok {
				w.push(r, s.prev)
			}
		}
	}
	ids = ids[:0]
	for i := int32(0); i >= 0; i = syms[i].next {
		ids = append(ids, syms[i].id)
	}
	w.syms = syms
	return ids
}

func (w *bpeWork) push(rank, pos int32) {
	h := append(w.heap, uint64(rank)<<32|uint64(pos))
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	w.heap = h
}

func (w *bpeWork) pop() (rank, pos int32) {
	h := w.heap
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, s := 2*i+1, i
		if l < n && h[l] < h[s] {
			s = l
		}
		if r := l + 1; r < n && h[r] < h[s] {
			s = r
		}
		if s == i {
			break
		}
		h[i], h[s] = h[s], h[i]
		i = s
	}
	w.heap = h
	return int32(top >> 32), int32(uint32(top))
}

// wordCache remembers the BPE of recent pieces: a two-way set-associative
// table of immutable entries behind atomic pointers, so lookups take no lock
// and allocate nothing, concurrent encoders never wait, and the size is fixed
// (a new entry evicts one of its set).
type wordCache struct {
	seed  maphash.Seed
	slots []atomic.Pointer[cacheEntry]
}

type cacheEntry struct {
	word string
	ids  []int32
}

const (
	cacheSlots      = 1 << 17 // at most this many words of up to cacheMaxWordLen bytes
	cacheMaxWordLen = 256     // longer pieces rarely repeat (Hugging Face's limit too)
)

func newWordCache() *wordCache {
	return &wordCache{seed: maphash.MakeSeed(), slots: make([]atomic.Pointer[cacheEntry], cacheSlots)}
}

// set returns the first slot of word's set and the hash.
func (c *wordCache) set(word string) (int, uint64) {
	h := maphash.String(c.seed, word)
	return int(h) & (cacheSlots - 2), h
}

func (c *wordCache) get(word string) ([]int32, bool) {
	i, _ := c.set(word)
	for _, e := range [2]*cacheEntry{c.slots[i].Load(), c.slots[i+1].Load()} {
		if e != nil && e.word == word {
			return e.ids, true
		}
	}
	return nil, false
}

// put stores ids for word, which must not be modified afterwards. It fills
// an empty way of the set, else replaces the way the hash picks.
func (c *wordCache) put(word string, ids []int32) {
	i, h := c.set(word)
	if c.slots[i].Load() != nil {
		i += int(h>>32) & 1
	}
	c.slots[i].Store(&cacheEntry{word: strings.Clone(word), ids: ids}) // word may pin a large input
}
