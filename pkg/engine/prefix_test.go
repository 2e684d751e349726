package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newTestPrefixStore is a store of capacity blocks of blockTokens over be.
func newTestPrefixStore(t *testing.T, be backend, blocks, blockTokens int) *prefixStore {
	t.Helper()
	p, err := newPrefixStore(be, int64(blocks*blockTokens*be.positionBytes()), blockTokens, 0)
	if err != nil || p == nil {
		t.Fatalf("newPrefixStore: %v, %v", p, err)
	}
	t.Cleanup(func() { p.close() })
	return p
}

// The idle scheduler's warm commits the arena a step at a time, up to
// reserve bytes past the buffers handed out and never past the arena, and
// then reports that it has nothing left to do.
func TestPrefixStoreWarm(t *testing.T) {
	if (*prefixStore)(nil).warm() {
		t.Fatal("warm on no store did something")
	}
	be := newFake(2, 64, 97)
	const blockTokens = 8
	blockBytes := blockTokens * be.positionBytes()
	p, err := newPrefixStore(be, int64(16*blockBytes), blockTokens, int64(3*blockBytes))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	warmAll := func() {
		t.Helper()
		for i := 0; p.warm(); i++ {
			if i > len(p.arena)/warmStep+1 {
				t.Fatal("warm never reports that it is done")
			}
		}
	}
	warmAll()
	if p.warmed != 3*blockBytes {
		t.Fatalf("warmed %d bytes with nothing handed out, want the reserve %d", p.warmed, 3*blockBytes)
	}
	resident(t, p.arena[:p.warmed])
	a := seqTokens(1, 2*blockTokens)
	computed(be, 0, a)
	if _, err := p.insert(a, 0, ""); err != nil {
		t.Fatal(err)
	}
	warmAll()
	if p.warmed != 5*blockBytes {
		t.Fatalf("warmed %d bytes with 2 buffers handed out, want %d", p.warmed, 5*blockBytes)
	}
	resident(t, p.arena[:p.warmed])

	// Saves that run ahead of warm (a busy scheduler) hand out buffers
	// warm has not reached: it must leave their KV as it is.
	ahead, err := newPrefixStore(be, int64(16*blockBytes), blockTokens, int64(2*blockBytes))
	if err != nil {
		t.Fatal(err)
	}
	defer ahead.close()
	b := seqTokens(2, 4*blockTokens)
	computed(be, 0, b)
	if _, err := ahead.insert(b, 0, ""); err != nil {
		t.Fatal(err)
	}
	saved := slices.Clone(ahead.arena[:4*blockBytes])
	if !slices.ContainsFunc(saved, func(v byte) bool { return v != 0 }) {
		t.Fatal("the saved blocks are all zeros: the test cannot see them overwritten")
	}
	for ahead.warm() {
	}
	if !bytes.Equal(ahead.arena[:4*blockBytes], saved) {
		t.Fatal("warm changed the KV of buffers handed out before it ran")
	}
	if ahead.warmed != 6*blockBytes {
		t.Fatalf("warmed %d bytes with 4 buffers handed out, want %d", ahead.warmed, 6*blockBytes)
	}
	resident(t, ahead.arena[:ahead.warmed])

	big, err := newPrefixStore(be, int64(4*blockBytes), blockTokens, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	defer big.close()
	for big.warm() {
	}
	if big.warmed != len(big.arena) {
		t.Fatalf("a reserve beyond the arena warmed %d of %d bytes", big.warmed, len(big.arena))
	}
}

// resident fails unless every page of b is in memory.
func resident(t *testing.T, b []byte) {
	t.Helper()
	pages := (len(b) + 4095) / 4096
	vec := make([]byte, pages)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	for i, v := range vec {
		if v&1 == 0 {
			t.Fatalf("page %d of %d not resident", i, pages)
		}
	}
}

// computed fills slot's fake KV with tokens, as a prefill would.
func computed(be *fakeBackend, slot int, tokens []int32) {
	copy(be.kv[slot], tokens)
	for p := len(tokens); p < len(be.kv[slot]); p++ {
		be.kv[slot][p] = -1
	}
}

func TestPrefixStoreMatchInsertRestore(t *testing.T) {
	be := newFake(2, 128, 97)
	p := newTestPrefixStore(t, be, 16, 8)
	a := seqTokens(1, 30) // blocks [0,8) [8,16) [16,24) and a partial [24,30)
	computed(be, 0, a)
	if n, err := p.insert(a, 0, ""); err != nil || n != 30 {
		t.Fatalf("insert = %d, %v", n, err)
	}
	if blocks := p.used() / int64(p.blockBytes); blocks != 4 {
		t.Fatalf("%d blocks in use, want 4", blocks)
	}
	tests := []struct {
		name   string
		prompt []int32
		want   int
	}{
		{"whole prefix and more", append(slices.Clone(a), 5, 6, 7), 30},
		{"diverges inside a full block", append(slices.Clone(a[:13]), 96, 95, 94), 13},
		{"diverges inside the partial block", append(slices.Clone(a[:27]), 96), 27},
		{"shorter than a block", slices.Clone(a[:5]), 5},
		{"unrelated", seqTokens(40, 20), 0},
	}
	for _, tt := range tests {
		if got := p.match(tt.prompt); got != tt.want {
			t.Errorf("%s: match %d, want %d", tt.name, got, tt.want)
		}
	}
	// Restoring positions [3, 27) into slot 1 gives exactly a's tokens there.
	computed(be, 1, a[:3])
	if p.match(a) != 30 {
		t.Fatal("a not found")
	}
	if err := p.restore(1, 3, 27); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(be.kv[1][:27], a[:27]) || be.kv[1][27] != -1 {
		t.Errorf("restored %v, want %v then nothing", be.kv[1][:28], a[:27])
	}

	// b shares a's first two blocks: only its own blocks are stored, and
	// a's partial leaf, which b's full third block... does not begin, stays.
	b := append(slices.Clone(a[:16]), seqTokens(60, 20)...)
	computed(be, 1, b)
	if n, _ := p.insert(b, 1, ""); n != 20 {
		t.Errorf("inserting b copied %d positions, want its 20 unshared ones", n)
	}
	if p.match(a) != 30 || p.match(b) != 36 {
		t.Errorf("after b: a matches %d, b %d", p.match(a), p.match(b))
	}
	// a extended: its partial leaf [24,30) is subsumed by the new full block.
	a2 := append(slices.Clone(a), seqTokens(70, 10)...)
	computed(be, 0, a2)
	before := p.used()
	if n, _ := p.insert(a2, 0, ""); n != 16 {
		t.Errorf("inserting a2 copied %d positions, want 16 (blocks [24,32) and [32,40))", n)
	}
	if after := p.used(); after != before+int64(p.blockBytes) {
		t.Errorf("store grew by %d bytes, want one block (two new, the subsumed leaf freed)", after-before)
	}
	if p.match(a2) != 40 {
		t.Errorf("a2 matches %d", p.match(a2))
	}
	// A prefix of what is stored adds nothing.
	if n, _ := p.insert(a2[:35], 0, ""); n != 0 {
		t.Errorf("inserting a stored prefix copied %d positions", n)
	}
}

func TestPrefixStoreEvictsLeastRecentlyUsedLeaves(t *testing.T) {
	be := newFake(1, 256, 97)
	p := newTestPrefixStore(t, be, 6, 8)
	seqs := [][]int32{seqTokens(1, 24), seqTokens(2, 24), seqTokens(3, 24)} // 3 blocks each
	for i, s := range seqs[:2] {
		computed(be, 0, s)
		if n, _ := p.insert(s, 0, ""); n != 24 {
			t.Fatalf("seq %d: copied %d", i, n)
		}
	}
	// Use seq 0, then store seq 2: seq 1 (least recently used) goes, leaf first.
	if p.match(seqs[0]) != 24 {
		t.Fatal("seq 0 not stored")
	}
	if err := p.restore(0, 0, 0); err != nil {
		t.Fatal(err)
	}
	computed(be, 0, seqs[2])
	if n, _ := p.insert(seqs[2], 0, ""); n != 24 {
		t.Fatalf("seq 2: copied %d", n)
	}
	if p.used() > p.capacity() {
		t.Fatalf("store uses %d bytes of %d", p.used(), p.capacity())
	}
	if got := []int{p.match(seqs[0]), p.match(seqs[1]), p.match(seqs[2])}; !slices.Equal(got, []int{24, 0, 24}) {
		t.Errorf("matches after eviction %v, want [24 0 24]", got)
	}
	// A prefix longer than the whole store keeps what fits, from its start.
	long := seqTokens(4, 80)
	computed(be, 0, long)
	n, err := p.insert(long, 0, "")
	if err != nil || n != 48 || p.match(long) != 48 {
		t.Errorf("inserting 80 positions into 6 blocks of 8: copied %d (%v), match %d; want 48", n, err, p.match(long))
	}
}

// agentTurns replays the Qwen Code pattern against e: each turn a main
// request (system prompt A, the conversation so far, a new user message)
// then a memory-extraction request (system prompt B, the conversation).
// It returns, per main turn from the second, the tokens cached and the
// tokens the prompt shares with the previous main transcript.
func agentTurns(t *testing.T, e *Engine, turns int) (cached, shared []int) {
	t.Helper()
	sysA, sysB := append([]int32{1, 2, 3}, seqTokens(11, 300)...), append([]int32{1, 2, 3}, seqTokens(23, 120)...)
	var history, prev []int32
	for turn := range turns {
		history = append(history, seqTokens(100+turn, 20)...)
		prompt := append(slices.Clone(sysA), history...)
		got, res := collect(t, e, Request{Tokens: prompt, MaxTokens: 8, StopTokens: []int32{}})
		if want := greedyRef(prompt, 8, 97, nil); !slices.Equal(got, want) {
			t.Fatalf("main turn %d: %v, want %v", turn, got, want)
		}
		if !slices.Equal(res.Tokens, append(slices.Clone(prompt), got...)) {
			t.Fatalf("main turn %d: transcript is not the prompt and the reply", turn)
		}
		if turn > 0 {
			cached, shared = append(cached, res.CachedTokens), append(shared, commonPrefix(prev, prompt))
		}
		prev = res.Tokens
		history = append(history, got...)
		memory := append(slices.Clone(sysB), history...)
		memory = append(memory, 7, 7, 7)
		got, _ = collect(t, e, Request{Tokens: memory, MaxTokens: 4, StopTokens: []int32{}})
		if want := greedyRef(memory, 4, 97, nil); !slices.Equal(got, want) {
			t.Fatalf("memory turn %d: %v, want %v", turn, got, want)
		}
	}
	return cached, shared
}

func TestAgentPatternKeepsMainPromptCached(t *testing.T) {
	for _, slots := range []int{1, 2, 4} {
		for _, block := range []int{16, 256} {
			t.Run(fmt.Sprintf("slots=%d/block=%d", slots, block), func(t *testing.T) {
				e, _ := newFakeEngine(t, fakeOpts{slots: slots, seqLen: 1024, opts: Options{PrefixBlockTokens: block}})
				cached, shared := agentTurns(t, e, 6)
				for i := range cached {
					if cached[i]*100 < shared[i]*99 {
						t.Errorf("main turn %d: %d tokens cached of %d reusable", i+1, cached[i], shared[i])
					}
				}
				st := e.Stats()
				if slots == 1 && (st.PrefixStoreHits < 5 || st.PrefixStoreRestored == 0 || st.PrefixStoreBytes == 0) {
					t.Errorf("one slot: the main prompt must come back from the prefix store: %+v", st)
				}
				if slots > 1 && st.PrefixStoreHits != 0 {
					t.Errorf("%d slots: each prompt keeps a slot, yet %d restores", slots, st.PrefixStoreHits)
				}
			})
		}
	}
	// Without the prefix store, one slot loses the main prompt every turn.
	e, _ := newFakeEngine(t, fakeOpts{slots: 1, seqLen: 1024, opts: Options{PrefixCacheBytes: -1}})
	cached, _ := agentTurns(t, e, 3)
	for i, c := range cached {
		if c > 3 {
			t.Errorf("no prefix store, main turn %d: %d tokens cached", i+1, c)
		}
	}
}

// The reproduction: --batch-size 4, a long prompt L1, an unrelated
// L2 (sharing only the template's first tokens), L1 again.
func TestUnrelatedPromptDoesNotEvictLongPrefix(t *testing.T) {
	e, be := newFakeEngine(t, fakeOpts{slots: 4, seqLen: 1024})
	l1 := append([]int32{1, 2, 3}, seqTokens(5, 813)...)
	l2 := append([]int32{1, 2, 3}, seqTokens(9, 400)...)
	var cached []int
	for _, p := range [][]int32{l1, l2, l1} {
		_, res := collect(t, e, Request{Tokens: p, MaxTokens: 4})
		cached = append(cached, res.CachedTokens)
	}
	if want := []int{0, 3, len(l1) - 1}; !slices.Equal(cached, want) {
		t.Errorf("cached tokens %v, want %v", cached, want)
	}
	// L2 went to an empty slot and copied the 3 shared tokens; L1 stayed.
	if len(be.copies) != 1 || be.copies[0] != [4]int{1, 0, 0, 3} {
		t.Errorf("copies %v, want one of 3 positions from slot 0 to slot 1", be.copies)
	}
	if st := e.Stats(); st.PrefixStoreSaved != 0 {
		t.Errorf("nothing had to leave a slot, yet %d positions were saved", st.PrefixStoreSaved)
	}
}

// A prefix held by a busy slot (decoding) is copied into the slot that
// needs it, and the copy computes what a prefill would.
func TestPrefixCopiedFromBusySlot(t *testing.T) {
	e, be := newFakeEngine(t, fakeOpts{slots: 3, seqLen: 512, delay: time.Millisecond})
	system := seqTokens(3, 200)
	a := append(slices.Clone(system), seqTokens(40, 30)...)
	wait := background(e, Request{Tokens: a, MaxTokens: 200, StopTokens: []int32{}})
	b := append(slices.Clone(system), seqTokens(60, 25)...)
	got, res := collect(t, e, Request{Tokens: b, MaxTokens: 6, StopTokens: []int32{}})
	// a decodes in the same steps as b, one token each: it is still running.
	if busy := e.Stats().SlotsBusy; busy != 1 {
		t.Errorf("%d slots busy after b, want a's", busy)
	}
	wait()
	if want := greedyRef(b, 6, 97, nil); !slices.Equal(got, want) {
		t.Errorf("after a copy: %v, prefilled: %v", got, want)
	}
	if res.CachedTokens != len(system) || res.CopiedTokens != len(system) || res.Prefilled != 25 {
		t.Errorf("result %+v, want the %d system tokens copied", res, len(system))
	}
	if len(be.copies) != 1 || be.copies[0] != [4]int{1, 0, 0, len(system)} {
		t.Errorf("copies %v", be.copies)
	}
	if st := e.Stats(); st.CopiedTokens != int64(len(system)) || st.ReusedTokens != int64(len(system)) {
		t.Errorf("stats %+v", st)
	}
}

// Sessions keep their behaviour with the prefix store: a session's first
// turn may use a prefix another slot holds, and its later turns stay pinned.
func TestSessionUsesSharedPrefix(t *testing.T) {
	e, _ := newFakeEngine(t, fakeOpts{slots: 2, seqLen: 512})
	system := seqTokens(3, 100)
	collect(t, e, Request{Tokens: append(slices.Clone(system), seqTokens(40, 150)...), MaxTokens: 4})
	first := append(slices.Clone(system), seqTokens(50, 10)...)
	_, r1 := collect(t, e, Request{Tokens: first, MaxTokens: 4, SessionID: "s"})
	if r1.CopiedTokens != len(system) {
		t.Errorf("session's first turn copied %d tokens, want the %d shared", r1.CopiedTokens, len(system))
	}
	turn2 := append(slices.Clone(r1.Tokens), 9, 9, 9)
	got, r2 := collect(t, e, Request{Tokens: turn2, MaxTokens: 4, SessionID: "s"})
	if !r2.SessionHit || r2.CachedTokens != held(r1) || r2.CopiedTokens != 0 {
		t.Errorf("turn 2 %+v", r2)
	}
	if want := greedyRef(turn2, 4, 97, nil); !slices.Equal(got, want) {
		t.Errorf("turn 2: %v, want %v", got, want)
	}
}

func TestPrefixStoreDisabledAndTooSmall(t *testing.T) {
	e, _ := newFakeEngine(t, fakeOpts{opts: Options{PrefixCacheBytes: -1}})
	if e.prefix != nil || e.Info().PrefixCacheBytes != 0 {
		t.Error("PrefixCacheBytes < 0 must disable the prefix store")
	}
	// Less than a block: no store, and no error.
	e, _ = newFakeEngine(t, fakeOpts{opts: Options{PrefixCacheBytes: 100, PrefixBlockTokens: 256}})
	if e.prefix != nil {
		t.Error("a store smaller than one block was created")
	}
	e, _ = newFakeEngine(t, fakeOpts{opts: Options{PrefixCacheBytes: 10 * 1024, PrefixBlockTokens: 256}})
	if got := e.Info().PrefixCacheBytes; got != 10*1024 || e.Stats().PrefixStoreCapacity != got {
		t.Errorf("capacity %d, want 10 blocks of 256 × 4 bytes", got)
	}
	_, err := e.Generate(context.Background(), Request{Tokens: seqTokens(1, 5), MaxTokens: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
}

// With no empty slot, the least recently used slot is replaced, except the
// one holding the request's longest prefix: that prefix is copied out of it
// and it stays for the prompt that continues it.
func TestVictimIsNotTheLongestPrefixHolder(t *testing.T) {
	e, be := newFakeEngine(t, fakeOpts{slots: 2, seqLen: 512})
	system := seqTokens(3, 60)
	a := append(slices.Clone(system), seqTokens(40, 100)...)
	collect(t, e, Request{Tokens: a, MaxTokens: 4})                 // slot 0, least recently used
	collect(t, e, Request{Tokens: seqTokens(70, 80), MaxTokens: 4}) // slot 1
	b := append(slices.Clone(system), seqTokens(50, 20)...)
	got, res := collect(t, e, Request{Tokens: b, MaxTokens: 4})
	if want := greedyRef(b, 4, 97, nil); !slices.Equal(got, want) {
		t.Errorf("b: %v, want %v", got, want)
	}
	if res.CopiedTokens != len(system) || len(be.copies) != 1 || be.copies[0] != [4]int{1, 0, 0, len(system)} {
		t.Errorf("b copied %d tokens (%v); want the system prompt from slot 0 into slot 1", res.CopiedTokens, be.copies)
	}
	// a is still whole in slot 0; the unrelated prompt went to the prefix store.
	_, res = collect(t, e, Request{Tokens: a, MaxTokens: 4})
	if res.CachedTokens != len(a)-1 || res.CopiedTokens != 0 || res.StoreTokens != 0 {
		t.Errorf("a again: %+v, want all cached in place", res)
	}
	if st := e.Stats(); st.PrefixStoreSaved != 83 {
		t.Errorf("%d positions saved, want the replaced prompt's 80 and 3 of its 4 generated tokens (the last has no KV)", st.PrefixStoreSaved)
	}
}

// Random inserts and lookups over branching token sequences, in a store
// too small for them: whatever match reports, restore must load exactly
// those tokens' KV, and the store never exceeds its capacity.
func TestPrefixStoreRandomized(t *testing.T) {
	const seqLen = 64
	be := newFake(2, seqLen, 97)
	p := newTestPrefixStore(t, be, 10, 4)
	rng := rand.New(rand.NewPCG(7, 7))
	var seqs [][]int32
	for i := range 3000 {
		// A new sequence branches off an earlier one at a random point.
		var s []int32
		if len(seqs) > 0 && rng.IntN(4) > 0 {
			base := seqs[rng.IntN(len(seqs))]
			s = slices.Clone(base[:rng.IntN(len(base)+1)])
		}
		for n := 1 + rng.IntN(seqLen); len(s) < n; {
			s = append(s, int32(rng.IntN(3)))
		}
		seqs = append(seqs, s)
		if rng.IntN(2) == 0 {
			computed(be, 0, s)
			if _, err := p.insert(s, 0, ""); err != nil {
				t.Fatalf("op %d: insert: %v", i, err)
			}
			// What fits is stored whole, evicting whatever else it must.
			if fits := (len(s)+p.blockTokens-1)/p.blockTokens <= p.buffers; fits && p.match(s) != len(s) {
				t.Fatalf("op %d: %d of the %d tokens just inserted are found", i, p.match(s), len(s))
			}
		}
		if p.used() > p.capacity() {
			t.Fatalf("op %d: %d bytes used of %d", i, p.used(), p.capacity())
		}
		q := seqs[rng.IntN(len(seqs))]
		n := p.match(q)
		if n > len(q) {
			t.Fatalf("op %d: match %d of a %d-token prompt", i, n, len(q))
		}
		computed(be, 1, nil)
		if err := p.restore(1, 0, n); err != nil {
			t.Fatalf("op %d: restore: %v", i, err)
		}
		if !slices.Equal(be.kv[1][:n], q[:n]) {
			t.Fatalf("op %d: restored %v for prompt prefix %v", i, be.kv[1][:n], q[:n])
		}
	}
	// Every stored block hangs off a live parent, and full blocks are indexed.
	var walk func(b *pblock, depth int)
	blocks := 0
	walk = func(b *pblock, depth int) {
		for _, c := range b.children {
			blocks++
			if c.parent != b || c.start != depth*p.blockTokens {
				t.Fatalf("block at %d: parent or start wrong", c.start)
			}
			if len(c.tokens) < p.blockTokens && len(c.children) > 0 {
				t.Fatal("a partial block has children")
			}
			walk(c, depth+1)
		}
	}
	walk(&p.root, 0)
	if want := int(p.used() / int64(p.blockBytes)); blocks != want {
		t.Errorf("%d blocks in the tree, %d buffers in use", blocks, want)
	}
}
