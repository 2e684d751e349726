package engine

import (
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ellm-dev/ellm/pkg/cpu"
	"github.com/ellm-dev/ellm/pkg/numa"
)

// prefixStore keeps the KV of prefixes that left the slots, in host memory,
// so that a prompt whose prefix no slot holds any more is restored with a
// memcpy instead of a prefill. This is what keeps an agent's long main prompt
// cached while a request with another system prompt uses its slot.
//
// The KV is kept in blocks of blockTokens positions. A full block is keyed
// by a chained hash of its tokens (the hash covers every token before it, as
// in vLLM's automatic prefix caching), so a prompt walks down its stored
// prefix block by block, and a prefix shared by many conversations (system
// prompt and tools) is stored once. The blocks form a tree: the last,
// partial block of a stored prefix is a leaf under its parent, and a prompt
// may also use the leading tokens of a block it diverges in, so reuse is
// exact to the token.
//
// Memory: one anonymous mapping of capacity bytes, committed as it fills;
// every block, full or partial, takes one buffer of blockTokens positions.
// Saving a prefix into never-touched memory waits on its first-touch page
// faults, which a VM whose memory the host backs lazily serves at ~100 MB/s
// (10 ms per MiB: half of a 512-token request's time to first token on the
// EPYC VM of docs/performance.md), so the idle scheduler commits the
// buffers ahead of use (warm): at most reserve bytes past those already
// handed out. When the store is full, the least
// recently used leaf block goes first (a block's descendants are never used
// after it, since a prefix is only used from its start).
//
// Each block knows who produced it (owners): the sessions whose slots
// held its tokens when they were stored, "" for a request without a
// session. Deleting a session (purge) removes the blocks it alone
// produced and leaves those another conversation or request produced too.
//
// Only the scheduler goroutine uses it.
type prefixStore struct {
	be          backend
	blockTokens int
	blockBytes  int
	arena       []byte
	buffers     int                // buffers in the arena
	handed      int                // buffers handed out at least once
	warmed      int                // arena bytes committed ahead of use, from its start
	reserve     int                // bytes warm keeps committed past the handed buffers
	free        []int              // buffers returned by evicted blocks
	blocks      map[uint64]*pblock // full blocks by chained hash
	root        pblock
	clock       uint64
	path        []*pblock   // blocks of the last match, in position order
	stack       []*pblock   // scratch of the LRU search
	disk        *prefixDisk // nil: no disk tier (prefix_disk.go)
	// lastUse is when each session among the owners was last active in the
	// slot its blocks were saved from, for the session TTL (expired); kept
	// only under a TTL, which removes the entries it expires.
	lastUse map[string]time.Time
}

// pblock is one block of stored positions.
type pblock struct {
	hash     uint64 // chained hash of every token up to the block's end
	parent   *pblock
	children []*pblock
	tokens   []int32 // ≤ blockTokens; fewer only in a leaf
	start    int     // position of tokens[0]
	buf      int     // arena buffer
	used     uint64  // LRU clock
	owners   []string
}

// maxOwners bounds the sessions a block names. A block produced by more
// (a system prompt many conversations share) names "" instead: it is held
// in common, and no session's deletion removes it.
const maxOwners = 8

// addOwner adds o to owners.
func addOwner(owners []string, o string) []string {
	switch {
	case slices.Contains(owners, o):
		return owners
	case len(owners) >= maxOwners:
		return []string{""}
	}
	return append(owners, o)
}

// DefaultPrefixCacheBytes is the prefix store's size when Options leave it
// at 0: a quarter of the memory available when the engine starts (the KV
// cache already committed), the weights' pages excluded as they may not be
// resident yet.
func DefaultPrefixCacheBytes(weightBytes int64) int64 {
	avail := cpu.Detect(cpu.System()).MemAvailable
	return max(0, avail-weightBytes) / 4
}

// newPrefixStore maps capacity bytes (rounded down to whole blocks), of
// which warm keeps reserve bytes committed ahead of use; it returns nil when
// not even one block fits.
func newPrefixStore(be backend, capacity int64, blockTokens int, reserve int64) (*prefixStore, error) {
	blockBytes := blockTokens * be.positionBytes()
	if blockBytes <= 0 || capacity < int64(blockBytes) {
		return nil, nil
	}
	n := capacity / int64(blockBytes)
	size := n * int64(blockBytes)
	if int64(int(size)) != size {
		return nil, fmt.Errorf("prefix cache: %d bytes cannot be mapped", size)
	}
	// NORESERVE and no prefault: pages are committed as blocks fill, so an
	// idle store costs nothing.
	arena, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("prefix cache: map %d bytes: %w", size, err)
	}
	return &prefixStore{be: be, blockTokens: blockTokens, blockBytes: blockBytes, arena: arena,
		buffers: int(n), reserve: int(min(max(reserve, 0), size)), blocks: map[uint64]*pblock{},
		lastUse: map[string]time.Time{}}, nil
}

// warmStep is how much of the arena one warm call commits: 2.5 ms of page
// faults where the host backs memory lazily (100 MB/s), which is how long
// a request arriving meanwhile waits for the scheduler.
const warmStep = 256 << 10

// warm commits the next warmStep bytes of the arena that the next saves
// will write (up to reserve bytes past the buffers handed out) and reports
// whether it did anything; the idle scheduler calls it until it reports
// false. Buffers freed by eviction are warm already.
func (p *prefixStore) warm() bool {
	if p == nil {
		return false
	}
	// Buffers handed out hold KV, and the saves that wrote it committed
	// them: only the arena past them is fresh, which numa.Commit needs.
	p.warmed = max(p.warmed, p.handed*p.blockBytes)
	target := min(len(p.arena), p.handed*p.blockBytes+p.reserve)
	if p.warmed >= target {
		return false
	}
	end := min(p.warmed+warmStep, target)
	numa.Commit(p.arena[p.warmed:end])
	p.warmed = end
	return true
}

func (p *prefixStore) close() error {
	if p == nil || p.arena == nil {
		return nil
	}
	p.disk.close()
	err := unix.Munmap(p.arena)
	p.arena = nil
	return err
}

// capacity and used are in bytes.
func (p *prefixStore) capacity() int64 { return int64(p.buffers) * int64(p.blockBytes) }
func (p *prefixStore) used() int64 {
	return int64(p.handed-len(p.free)) * int64(p.blockBytes)
}

func (p *prefixStore) buffer(i int) []byte { return p.arena[i*p.blockBytes : (i+1)*p.blockBytes] }

// chain extends hash h over tokens (FNV-1a over their little-endian bytes).
// A collision costs nothing but a miss: matches compare the tokens.
func chain(h uint64, tokens []int32) uint64 {
	const prime = 1099511628211
	for _, t := range tokens {
		u := uint32(t)
		for range 4 {
			h ^= uint64(u & 0xff)
			h *= prime
			u >>= 8
		}
	}
	return h
}

const hashBasis = 14695981039346656037

// match finds the longest stored prefix of prompt and returns its length;
// restore then loads it. The blocks it walks are kept in p.path.
func (p *prefixStore) match(prompt []int32) int {
	p.clock++ // the blocks matched are in use: a block brought back from disk does not evict them
	p.path = p.path[:0]
	node, h, pos := &p.root, uint64(hashBasis), 0
	for pos+p.blockTokens <= len(prompt) {
		want := prompt[pos : pos+p.blockTokens]
		hh := chain(h, want)
		b := p.blocks[hh]
		if b == nil || b.parent != node || !slices.Equal(b.tokens, want) {
			if b = p.promote(node, h, hh, want, pos); b == nil {
				break
			}
		}
		b.used = p.clock
		p.path = append(p.path, b)
		node, h, pos = b, hh, pos+p.blockTokens
	}
	// The child of the last full match that shares the most tokens with the
	// rest: a partial leaf, or a block the prompt diverges in.
	var best *pblock
	bestN := 0
	for _, c := range node.children {
		if n := commonPrefix(c.tokens, prompt[pos:]); n > bestN {
			best, bestN = c, n
		}
	}
	if d, n := p.bestDiskChild(h, prompt[pos:], bestN); d != nil {
		if b := p.promote(node, h, d.hash, d.tokens, pos); b != nil {
			best, bestN = b, n
		}
	}
	if best != nil {
		best.used = p.clock
		p.path = append(p.path, best)
	}
	return pos + bestN
}

// restore loads positions [from, to) of the last match into slot and marks
// the matched blocks used.
func (p *prefixStore) restore(slot, from, to int) error {
	p.clock++
	for _, b := range p.path {
		b.used = p.clock
		lo, hi := max(from, b.start), min(to, b.start+len(b.tokens))
		if lo >= hi {
			continue
		}
		if err := p.be.loadPositions(p.buffer(b.buf), p.blockTokens, lo-b.start, slot, lo, hi-lo); err != nil {
			return fmt.Errorf("prefix cache: restore: %w", err)
		}
	}
	return nil
}

// insert stores positions [0, len(tokens)) of slot, whose tokens they are.
// Blocks already stored are only marked used; when the store is full of
// blocks this prefix needs, the rest of it is not stored. It returns the
// positions copied.
// owner produced the tokens (see pblock.owners).
func (p *prefixStore) insert(tokens []int32, slot int, owner string) (int, error) {
	p.clock++ // blocks marked with this clock are not evicted by this insert
	node, h, pos, copied := &p.root, uint64(hashBasis), 0, 0
	for pos < len(tokens) {
		end := min(pos+p.blockTokens, len(tokens))
		toks := tokens[pos:end]
		full := len(toks) == p.blockTokens
		var b *pblock
		if full {
			h = chain(h, toks)
			if x := p.blocks[h]; x != nil && x.parent == node && slices.Equal(x.tokens, toks) {
				b = x
			}
		} else {
			// A stored block that begins with these tokens holds them already.
			for _, c := range node.children {
				if len(c.tokens) >= len(toks) && slices.Equal(c.tokens[:len(toks)], toks) {
					b = c
					break
				}
			}
		}
		if b == nil {
			buf, ok := p.alloc()
			if !ok {
				break
			}
			if err := p.be.savePositions(p.buffer(buf), p.blockTokens, 0, slot, pos, len(toks)); err != nil {
				p.free = append(p.free, buf)
				return copied, fmt.Errorf("prefix cache: save: %w", err)
			}
			copied += len(toks)
			b = &pblock{parent: node, tokens: slices.Clone(toks), start: pos, buf: buf}
			if full {
				b.hash = h
				p.blocks[h] = b
			}
			p.dropSubsumed(node, b)
			node.children = append(node.children, b)
		}
		b.used = p.clock
		b.owners = addOwner(b.owners, owner)
		node, pos = b, end
	}
	return copied, nil
}

// all lists the blocks in memory, each before those below it.
func (p *prefixStore) all() []*pblock {
	var all []*pblock
	p.stack = append(p.stack[:0], p.root.children...)
	for len(p.stack) > 0 {
		b := p.stack[len(p.stack)-1]
		p.stack = append(p.stack[:len(p.stack)-1], b.children...)
		all = append(all, b)
	}
	clear(p.stack[:cap(p.stack)])
	return all
}

// purged counts what a purge removed, and the blocks of the owner it kept
// because others hold them too.
type purged struct {
	blocks, tokens, kept int
	bytes                int64
}

// purge removes owner from every block's owners, and the blocks left
// without one from memory, zeroing their buffers; a block that another
// stored block continues stays (its continuation's owners hold it). The
// disk tier's blocks are purged alike (prefixDisk.purge).
func (p *prefixStore) purge(owner string) (mem, disk purged) {
	all := p.all()
	for i := len(all) - 1; i >= 0; i-- { // every block after those below it
		b := all[i]
		if !slices.Contains(b.owners, owner) {
			continue
		}
		b.owners = slices.DeleteFunc(b.owners, func(o string) bool { return o == owner })
		switch {
		case len(b.owners) > 0:
			mem.kept++
		case len(b.children) > 0:
			b.owners, mem.kept = []string{""}, mem.kept+1
		default:
			clear(p.buffer(b.buf))
			p.remove(b)
			mem.blocks, mem.tokens, mem.bytes = mem.blocks+1, mem.tokens+len(b.tokens), mem.bytes+int64(p.blockBytes)
		}
	}
	if p.disk != nil {
		disk = p.disk.purge(owner)
	}
	delete(p.lastUse, owner)
	return mem, disk
}

// touch records that session owner was last active at t (a save of its
// slot's content).
func (p *prefixStore) touch(owner string, t time.Time) {
	if p != nil && owner != "" && t.After(p.lastUse[owner]) {
		p.lastUse[owner] = t
	}
}

// expired lists the sessions among the owners of blocks, in memory or on
// disk, last active more than ttl before now, sorted. A session the store
// has no time for (its blocks came from the disk tier at start-up) counts
// as active now.
func (p *prefixStore) expired(now time.Time, ttl time.Duration) []string {
	if p == nil {
		return nil
	}
	seen := func(owners []string) {
		for _, o := range owners {
			if _, ok := p.lastUse[o]; !ok && o != "" {
				p.lastUse[o] = now
			}
		}
	}
	for _, b := range p.all() {
		seen(b.owners)
	}
	if p.disk != nil {
		for _, b := range p.disk.blocks {
			seen(b.owners)
		}
	}
	var ids []string
	for o, t := range p.lastUse {
		if now.Sub(t) > ttl {
			ids = append(ids, o)
		}
	}
	slices.Sort(ids)
	return ids
}

// dropSubsumed removes node's partial leaves whose tokens begin b's: b
// holds everything they do.
func (p *prefixStore) dropSubsumed(node, b *pblock) {
	for i := 0; i < len(node.children); {
		c := node.children[i]
		if len(c.tokens) < p.blockTokens && len(c.tokens) <= len(b.tokens) && slices.Equal(c.tokens, b.tokens[:len(c.tokens)]) {
			p.remove(c)
			continue
		}
		i++
	}
}

// alloc returns a free buffer, evicting the least recently used leaf not
// used by the current operation; false when there is none.
func (p *prefixStore) alloc() (int, bool) {
	if n := len(p.free); n > 0 {
		buf := p.free[n-1]
		p.free = p.free[:n-1]
		return buf, true
	}
	if p.handed < p.buffers {
		p.handed++
		return p.handed - 1, true
	}
	var victim *pblock
	p.stack = append(p.stack[:0], p.root.children...)
	for len(p.stack) > 0 {
		b := p.stack[len(p.stack)-1]
		p.stack = p.stack[:len(p.stack)-1]
		if len(b.children) > 0 {
			p.stack = append(p.stack, b.children...)
			continue
		}
		if b.used < p.clock && (victim == nil || b.used < victim.used) {
			victim = b
		}
	}
	clear(p.stack[:cap(p.stack)])
	if victim == nil {
		return 0, false
	}
	buf := victim.buf
	p.spill(victim)
	p.remove(victim)
	p.free = p.free[:len(p.free)-1] // remove returned it; hand it out again
	return buf, true
}

// remove unlinks leaf b and frees its buffer.
func (p *prefixStore) remove(b *pblock) {
	sib := b.parent.children
	if i := slices.Index(sib, b); i >= 0 {
		b.parent.children = slices.Delete(sib, i, i+1)
	}
	if len(b.tokens) == p.blockTokens && p.blocks[b.hash] == b {
		delete(p.blocks, b.hash)
	}
	p.free = append(p.free, b.buf)
	b.parent = nil
}
