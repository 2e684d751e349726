package grammar

// arena hands out frames from chunks it keeps, so that following a grammar
// allocates nothing once its chunks cover the working set. Frames are
// immutable once built and shared between stacks, so none is freed alone:
// a walk that branches (a mask's trie walk, the forced-text look-ahead)
// releases everything allocated since a mark when it backs out, and a
// Matcher copies its live stacks into a second arena (compact) when the
// garbage of past bytes has piled up. A nil arena allocates on the heap
// (probes in tests).
type arena struct {
	chunks [][]frame
	n      int // frames handed out
}

const arenaChunk = 256

// newArena returns an arena with room for the chunks a matcher's arena
// usually grows to (minCompact frames and the bytes of a token).
func newArena() *arena {
	return &arena{chunks: make([][]frame, 0, minCompact/arenaChunk+4)}
}

func (a *arena) new(f frame) *frame {
	if a == nil {
		p := new(frame)
		*p = f
		return p
	}
	c, i := a.n/arenaChunk, a.n%arenaChunk
	if c == len(a.chunks) {
		a.chunks = append(a.chunks, make([]frame, arenaChunk))
	}
	p := &a.chunks[c][i]
	*p = f // overwritten whole: nothing of a released frame survives
	a.n++
	return p
}

// mark and release bracket frames that are dead once a branch is done.
// A nil arena has nothing to release.
func (a *arena) mark() int {
	if a == nil {
		return 0
	}
	return a.n
}

func (a *arena) release(mark int) {
	if a != nil {
		a.n = mark
	}
}

// copyStacks copies alts and every frame below them into a, sharing what
// they share (memo maps a frame to its copy), and rewrites alts in place.
func (a *arena) copyStacks(alts []*frame, memo map[*frame]*frame) {
	for i, f := range alts {
		alts[i] = a.copyFrame(f, memo)
	}
}

func (a *arena) copyFrame(f *frame, memo map[*frame]*frame) *frame {
	if f == nil {
		return nil
	}
	if g, ok := memo[f]; ok {
		return g
	}
	g := a.new(*f)
	memo[f] = g
	g.up = a.copyFrame(f.up, memo)
	return g
}
