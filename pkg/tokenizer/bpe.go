package tokenizer

import (
	"hash/maphash"
	"strings"
	"sync"
)

// mergeTable maps a pair of token ids to its merge rank and the id of the
// merged token. It is an open-addressing table because this lookup is the
// inner loop of BPE and a Go map costs several times more.
type mergeTable struct {
	keys  []uint64 // pair+1, 0 = empty
	vals  []uint64 // rank<<32 | merged id
	shift uint
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

type symbol struct{ id, prev, next int32 } // id -1: merged into its left neighbour

type candidate struct{ rank, pos, merged int32 }

func (a candidate) less(b candidate) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

// bpeWork is the reusable scratch of one BPE run.
type bpeWork struct {
	syms []symbol
	heap []candidate
}

var bpeWorkPool = sync.Pool{New: func() any { return new(bpeWork) }}

func (w *bpeWork) push(c candidate) {
	h := append(w.heap, c)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	w.heap = h
}

func (w *bpeWork) pop() candidate {
	h := w.heap
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, s := 2*i+1, i
		if l < n && h[l].less(h[s]) {
			s = l
		}
		if r := l + 1; r < n && h[r].less(h[s]) {
			s = r
		}
		if s == i {
			break
		}
		h[i], h[s] = h[s], h[i]
		i = s
	}
	w.heap = h
	return top
}

// merge appends the BPE of the bytes of word to dst: repeatedly merge the
// adjacent pair of lowest rank, leftmost first (Hugging Face's order).
func (m *mergeTable) merge(dst []int32, word string, byteID *[256]int32) []int32 {
	w := bpeWorkPool.Get().(*bpeWork)
	syms := w.syms[:0]
	for i := 0; i < len(word); i++ {
		syms = append(syms, symbol{id: byteID[word[i]], prev: int32(i - 1), next: int32(i + 1)})
	}
	syms[len(syms)-1].next = -1
	w.heap = w.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		if r, id, ok := m.get(syms[i].id, syms[i+1].id); ok {
			w.push(candidate{r, int32(i), id})
		}
	}
	for len(w.heap) > 0 {
		c := w.pop()
		s := &syms[c.pos]
		if s.id < 0 || s.next < 0 {
			continue
		}
		if _, id, ok := m.get(s.id, syms[s.next].id); !ok || id != c.merged {
			continue // stale: a neighbour changed since this pair was queued
		}
		right := s.next
		s.id = c.merged
		s.next = syms[right].next
		syms[right].id = -1
		if s.next >= 0 {
			syms[s.next].prev = c.pos
			if r, id, ok := m.get(s.id, syms[s.next].id); ok {
				w.push(candidate{r, c.pos, id})
			}
		}
		if s.prev >= 0 {
			if r, id, ok := m.get(syms[s.prev].id, s.id); ok {
				w.push(candidate{r, s.prev, id})
			}
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		dst = append(dst, syms[i].id)
	}
	w.syms = syms
	bpeWorkPool.Put(w)
	return dst
}

// wordCache remembers the BPE of recent pieces. It is sharded so concurrent
// encoders rarely meet on a lock, and bounded by emptying a full shard, which
// is cheaper than tracking recency and loses little on natural text.
type wordCache struct {
	seed   maphash.Seed
	shards [64]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]int32
}

const (
	cacheShardEntries = 2048
	cacheMaxWordLen   = 64 // longer pieces rarely repeat
)

func newWordCache() *wordCache {
	c := &wordCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string][]int32)
	}
	return c
}

func (c *wordCache) shard(word string) *cacheShard {
	return &c.shards[maphash.String(c.seed, word)%uint64(len(c.shards))]
}

func (c *wordCache) get(word string) ([]int32, bool) {
	s := c.shard(word)
	s.mu.RLock()
	ids, ok := s.m[word]
	s.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(word string, ids []int32) {
	s := c.shard(word)
	s.mu.Lock()
	if len(s.m) >= cacheShardEntries {
		clear(s.m)
	}
	s.m[strings.Clone(word)] = ids // word may pin a large input
	s.mu.Unlock()
}
