package engine

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// newTestDiskStore is a prefix store of blocks blocks of 8 positions over
// be, with a disk tier in dir for the model tid and KV identity kid.
func newTestDiskStore(t *testing.T, be backend, dir, tid, kid string, blocks int, maxBytes int64) (*prefixStore, error) {
	t.Helper()
	p := newTestPrefixStore(t, be, blocks, 8)
	d, err := openPrefixDisk(prefixDiskConfig{dir: dir, tid: tid, kid: kid, maxBytes: maxBytes, log: slog.New(slog.DiscardHandler)}, p.blockTokens, p.blockBytes)
	if err != nil {
		return nil, err
	}
	p.disk = d
	return p, nil
}

func mustDiskStore(t *testing.T, be backend, dir, kid string, blocks int, maxBytes int64) *prefixStore {
	t.Helper()
	p, err := newTestDiskStore(t, be, dir, testTID, kid, blocks, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// restoreInto restores prompt's stored prefix into slot (emptied first)
// and checks the slot then holds exactly want of its tokens.
func restoreInto(t *testing.T, be *fakeBackend, p *prefixStore, slot int, prompt []int32, want int) {
	t.Helper()
	computed(be, slot, nil)
	if n := p.match(prompt); n != want {
		t.Fatalf("match %d, want %d", n, want)
	}
	if err := p.restore(slot, 0, want); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(be.kv[slot][:want], prompt[:want]) || be.kv[slot][want] != -1 {
		t.Fatalf("restored %v, want %v then nothing", be.kv[slot][:want+1], prompt[:want])
	}
}

// TestPrefixDiskSpillRestoreRestart: blocks evicted from memory go to disk
// and come back on a hit, exactly; a new store on the same directory (a
// restart) finds them; a corrupt block is discarded, never used; blocks of
// other KV identities are discarded, other models' files left alone.
func TestPrefixDiskSpillRestoreRestart(t *testing.T) {
	dir := t.TempDir()
	be := newFake(2, 128, 97)
	p := mustDiskStore(t, be, dir, "kv-a", 4, -1)
	a, b := seqTokens(1, 30), seqTokens(40, 30) // 3 full blocks and a partial one each
	computed(be, 0, a)
	if _, err := p.insert(a, 0, ""); err != nil {
		t.Fatal(err)
	}
	if p.disk.written != 0 {
		t.Fatalf("%d blocks written before any eviction", p.disk.written)
	}
	computed(be, 1, b)
	if _, err := p.insert(b, 1, ""); err != nil {
		t.Fatal(err)
	}
	if p.disk.written != 4 || len(p.disk.blocks) != 4 {
		t.Fatalf("after b evicted a: %d written, %d on disk; want 4, 4", p.disk.written, len(p.disk.blocks))
	}
	// a comes back from disk (b's blocks go there in turn).
	restoreInto(t, be, p, 1, append(slices.Clone(a), 3, 4), 30)
	if p.disk.read != 4 || len(p.disk.blocks) != 8 {
		t.Fatalf("%d blocks read, %d on disk; want 4, 8", p.disk.read, len(p.disk.blocks))
	}
	// A prompt diverging inside a's partial block uses its leading tokens.
	if n := p.match(append(slices.Clone(a[:27]), 96)); n != 27 {
		t.Errorf("diverging prompt: match %d, want 27", n)
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}

	// Restart: an empty memory, the same directory.
	p = mustDiskStore(t, be, dir, "kv-a", 4, -1)
	if len(p.disk.blocks) != 8 {
		t.Fatalf("restart found %d blocks, want 8", len(p.disk.blocks))
	}
	restoreInto(t, be, p, 0, b, 30)
	restoreInto(t, be, p, 1, a, 30)
	p.close()

	// Corrupt a's third block: a is restored up to it, the file deleted.
	third := p.disk.path(chain(chain(chain(hashBasis, a[:8]), a[8:16]), a[16:24]))
	raw, err := os.ReadFile(third)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-3] ^= 0x40 // in the KV buffer: only its checksum can tell
	if err := os.WriteFile(third, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	p = mustDiskStore(t, be, dir, "kv-a", 4, -1)
	restoreInto(t, be, p, 0, a, 16)
	if p.disk.discarded != 1 {
		t.Errorf("%d blocks discarded, want 1", p.disk.discarded)
	}
	if _, err := os.Stat(third); !os.IsNotExist(err) {
		t.Errorf("corrupt block still on disk: %v", err)
	}
	p.close()

	// Another model's store in the same directory sees none of it and
	// touches nothing.
	files, _ := filepath.Glob(filepath.Join(dir, "*.pkv"))
	other, err := newTestDiskStore(t, be, dir, "fedcba9876543210fedcba9876543210", "kv-a", 4, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(other.disk.blocks) != 0 || other.match(a) != 0 {
		t.Errorf("another model sees %d blocks", len(other.disk.blocks))
	}
	other.close()
	if after, _ := filepath.Glob(filepath.Join(dir, "*.pkv")); len(after) != len(files) {
		t.Errorf("another model's store changed the files: %d, then %d", len(files), len(after))
	}
	// Other weights (KV identity) for the same model: every block discarded.
	p = mustDiskStore(t, be, dir, "kv-b", 4, -1)
	if len(p.disk.blocks) != 0 || p.disk.discarded != int64(len(files)) {
		t.Errorf("other KV identity: %d blocks kept, %d discarded of %d", len(p.disk.blocks), p.disk.discarded, len(files))
	}
}

// TestPrefixDiskBound: the directory stays within its bound, least
// recently used blocks first; a second engine on the same model and
// directory is refused.
func TestPrefixDiskBound(t *testing.T) {
	dir := t.TempDir()
	be := newFake(1, 128, 97)
	p := mustDiskStore(t, be, dir, "kv-a", 2, 0)
	if p.disk.maxBytes <= 0 {
		t.Fatalf("default bound %d", p.disk.maxBytes)
	}
	p.close()
	p = mustDiskStore(t, be, dir, "kv-a", 2, -1)
	blockFile := int64(0)
	for i := range 12 {
		if i == 1 {
			p = mustDiskStore(t, be, dir, "kv-a", 2, 5*blockFile)
		}
		toks := seqTokens(i*3+1, 16) // two full blocks
		computed(be, 0, toks)
		if _, err := p.insert(toks, 0, ""); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			computed(be, 0, seqTokens(89, 16))
			p.insert(seqTokens(89, 16), 0, "") // evict toks: two files
			blockFile = p.disk.bytes / 2
			p.close()
		}
	}
	if p.disk.bytes > p.disk.maxBytes || p.disk.evicted == 0 {
		t.Errorf("%d bytes on disk, bound %d, %d evicted", p.disk.bytes, p.disk.maxBytes, p.disk.evicted)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.pkv"))
	var onDisk int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		onDisk += st.Size()
	}
	if onDisk != p.disk.bytes || len(files) != len(p.disk.blocks) {
		t.Errorf("%d files of %d bytes, index says %d blocks of %d bytes", len(files), onDisk, len(p.disk.blocks), p.disk.bytes)
	}
	// The most recently evicted prompt is still there, the first ones not.
	last := seqTokens(10*3+1, 16)
	if n := p.match(last); n != 16 {
		t.Errorf("most recent prompt: match %d, want 16", n)
	}
	if n := p.match(seqTokens(2*3+1, 16)); n != 0 {
		t.Errorf("an old prompt: match %d, want 0 (evicted)", n)
	}
	if _, err := newTestDiskStore(t, be, dir, testTID, "kv-a", 2, -1); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second store on the directory: %v", err)
	}
}

// topTokens are a generation's tokens and, per token, the log
// probabilities of its 5 most likely alternatives.
type topTokens struct {
	tokens   []int32
	logprobs []float32
}

// generateTop generates 6 tokens of p greedily (the zero Sampling)
// (no end token), keeping the top-5 log probabilities: two engines that
// hold the same KV give the same bits.
func generateTop(t *testing.T, e *Engine, p []int32) (topTokens, Result) {
	t.Helper()
	var o topTokens
	res, err := e.Generate(context.Background(), Request{Tokens: p, MaxTokens: 6, StopTokens: []int32{}, TopLogprobs: 5},
		func(ev Event) error {
			o.tokens = append(o.tokens, ev.Token)
			for _, tl := range ev.Top {
				o.logprobs = append(o.logprobs, tl.Logprob)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return o, res
}

// TestModelPrefixDiskRestartIsBitIdentical: a prompt's blocks are evicted
// from the prefix store's memory to disk, the engine restarts, and the
// prompt's next turn restores them from disk: its tokens and log
// probabilities are those of an engine that computes everything.
func TestModelPrefixDiskRestartIsBitIdentical(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	cfg, err := modelcfg.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	perPos, err := kvcache.BytesPerPosition(cfg, kvcache.BF16)
	if err != nil {
		t.Fatal(err)
	}
	scratch := newModelEngine(t, dir, Options{BatchSize: 1, PrefixCacheBytes: -1})
	tok := scratch.Model().Tokenizer
	run := func(e *Engine, p []int32) (topTokens, Result) { return generateTop(t, e, p) }
	a := tok.Encode("The quick brown fox jumps over the lazy dog, again and again, every single morning.")
	b := tok.Encode("Completely unrelated: what is the weather like in Lisbon in May?")
	c := tok.Encode("A third prompt, to push the second one out of the slot.")
	store := t.TempDir()
	// Memory for the blocks of one prompt and its reply.
	const block = 8
	blocks := (max(len(a), len(b), len(c)) + 6 + block - 1) / block
	opts := Options{BatchSize: 1, PrefixBlockTokens: block, PrefixCacheBytes: int64(blocks*block) * perPos,
		PrefixCacheDir: store, PrefixCacheDiskBytes: -1}
	e := newModelEngine(t, dir, opts)
	_, ra := run(e, a)
	run(e, b) // a goes to the store's memory
	run(e, c) // b too, evicting a to disk
	if st := e.Stats(); st.PrefixDiskWritten < int64(len(ra.Tokens)/block) {
		t.Fatalf("a not evicted to disk: %+v", st)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	a2 := append(slices.Clone(ra.Tokens), tok.Encode(" And then?")...)
	want, _ := run(scratch, a2)
	e = newModelEngine(t, dir, opts)
	if st := e.Stats(); st.PrefixDiskBlocks < len(ra.Tokens)/block {
		t.Fatalf("restart: %d blocks on disk", st.PrefixDiskBlocks)
	}
	got, res := run(e, a2)
	if n := held(ra); res.StoreTokens != n || res.CachedTokens != n {
		t.Errorf("after the restart: %d restored, %d cached; want %d (all but the reply's last token)", res.StoreTokens, res.CachedTokens, n)
	}
	if st := e.Stats(); st.PrefixDiskRead < int64(len(ra.Tokens)/block) {
		t.Errorf("%d blocks read from disk", st.PrefixDiskRead)
	}
	if !slices.Equal(got.tokens, want.tokens) || !slices.Equal(got.logprobs, want.logprobs) {
		t.Errorf("restored from disk: %v %v, from scratch: %v %v", got.tokens, got.logprobs, want.tokens, want.logprobs)
	}
}
