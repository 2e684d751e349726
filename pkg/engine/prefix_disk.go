package engine

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// prefixDisk is the prefix store's disk tier (--prefix-cache-dir): a block
// evicted from host memory is written to a file of its own, and read back
// into host memory when a prompt needs it, also after a restart. The host
// store stays the only way into the slots; the disk holds a superset of
// what left it, bounded by maxBytes (least recently used blocks first).
//
// A block file is the session store's format: writeHeader's magic, length,
// metadata and CRC-32C, then the block's buffer as the host store holds it
// (kvcache.SavePositions' layout), whose CRC-32C is in the metadata. The
// metadata names the model identity (config and tokenizer: what token ids
// mean; it also prefixes the file names, so models share a directory
// without seeing each other's blocks) and the KV identity (weights, dtypes,
// kernel path, shape), the block size, the parent block's chained hash
// and the block's tokens. Who produced each block (its owners, as in
// memory) is in the owners journal beside the files (prefix_owners.go). A
// file whose identity or checksums do not match is deleted with a log line,
// never used.
//
// Only the scheduler goroutine uses it; the directory is locked against a
// second ellm serving the same model.
type prefixDisk struct {
	dir         string
	tid, kid    string
	blockTokens int
	blockBytes  int
	maxBytes    int64 // 0 = unbounded
	lock        *os.File
	journal     ownersJournal
	log         *slog.Logger
	now         func() time.Time

	blocks   map[uint64]*diskBlock   // by chained hash
	children map[uint64][]*diskBlock // by the parent's chained hash
	bytes    int64
	// counters for Stats
	written, read, evicted, discarded, purged int64
}

// diskBlock is one block file, as the index knows it.
type diskBlock struct {
	hash, parent uint64
	tokens       []int32
	start        int
	size         int64
	used         time.Time
	owners       []string
}

// prefixBlockMeta precedes a block's buffer in its file.
type prefixBlockMeta struct {
	Model       string  `json:"model"`    // transcript identity: what token ids mean
	Identity    string  `json:"identity"` // KV identity
	BlockTokens int     `json:"block_tokens"`
	Bytes       int     `json:"bytes"` // of the buffer that follows
	CRC         uint32  `json:"crc"`   // CRC-32C of the buffer
	Parent      uint64  `json:"parent"`
	Start       int     `json:"start"`
	Tokens      []int32 `json:"tokens"`
}

// prefixMagic begins a block file, named MODEL-HASH.pkv (the model
// identity's first 16 hex digits, the block's chained hash).
var prefixMagic = [8]byte{'E', 'L', 'L', 'M', 'P', 'K', 'V', 1}

type prefixDiskConfig struct {
	dir      string
	tid, kid string
	maxBytes int64 // 0 = defaultStoreShare % of the free space; < 0 = unbounded
	log      *slog.Logger
	now      func() time.Time
}

// openPrefixDisk opens dir for blocks of blockTokens positions of
// blockBytes bytes: it takes the directory's lock for the model, indexes
// the model's block files (reading their metadata, deleting those that are
// unusable and unfinished writes) and applies the bound.
func openPrefixDisk(c prefixDiskConfig, blockTokens, blockBytes int) (*prefixDisk, error) {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("prefix cache dir: %w", err)
	}
	d := &prefixDisk{dir: c.dir, tid: c.tid, kid: c.kid, blockTokens: blockTokens, blockBytes: blockBytes,
		log: c.log, now: c.now, blocks: map[uint64]*diskBlock{}, children: map[uint64][]*diskBlock{}}
	if d.now == nil {
		d.now = time.Now
	}
	var err error
	if d.maxBytes, err = dirBound(c.dir, c.maxBytes); err != nil {
		return nil, fmt.Errorf("prefix cache dir: %w", err)
	}
	lock, err := lockDir(filepath.Join(c.dir, "prefix-"+c.tid+".lock"), "prefix cache dir")
	if err != nil {
		return nil, err
	}
	d.lock = lock
	paths, err := filepath.Glob(filepath.Join(c.dir, c.tid[:16]+"-*"))
	if err != nil {
		d.close()
		return nil, fmt.Errorf("prefix cache dir: %w", err)
	}
	for _, path := range paths {
		name := filepath.Base(path)
		hashHex, ok := strings.CutSuffix(strings.TrimPrefix(name, c.tid[:16]+"-"), ".pkv")
		if !ok || len(hashHex) != 16 {
			if strings.Contains(name, ".pkv.tmp") {
				_ = os.Remove(path) // a write that did not finish
			}
			continue
		}
		b, err := d.readMeta(path, hashHex)
		if err != nil {
			d.discard(path, err)
			continue
		}
		d.add(b)
	}
	d.enforce(nil)
	if err := d.loadOwners(); err != nil {
		d.close()
		return nil, fmt.Errorf("prefix cache dir: %w", err)
	}
	return d, nil
}

func (d *prefixDisk) close() {
	if d != nil && d.lock != nil {
		d.journal.close()
		d.lock.Close()
		d.lock = nil
	}
}

func (d *prefixDisk) path(hash uint64) string {
	return filepath.Join(d.dir, fmt.Sprintf("%s-%016x.pkv", d.tid[:16], hash))
}

// readMeta reads and checks a block file's metadata (not its buffer).
func (d *prefixDisk) readMeta(path, hashHex string) (*diskBlock, error) {
	meta, size, mtime, err := d.readBlockFile(path, nil)
	if err != nil {
		return nil, err
	}
	hash, err := strconv.ParseUint(hashHex, 16, 64)
	if err != nil || chain(meta.Parent, meta.Tokens) != hash {
		return nil, errors.New("tokens do not hash to the file's name")
	}
	return &diskBlock{hash: hash, parent: meta.Parent, tokens: meta.Tokens, start: meta.Start, size: size, used: mtime}, nil
}

// readBlockFile reads a block file's metadata and checks it (checkMeta),
// then, when buf is not nil, reads its KV buffer into buf and checks its
// CRC. It returns the file's size and modification time too.
func (d *prefixDisk) readBlockFile(path string, buf []byte) (*prefixBlockMeta, int64, time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, time.Time{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, time.Time{}, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	meta, err := d.checkMeta(r, st.Size())
	if err != nil {
		return nil, 0, time.Time{}, err
	}
	if buf != nil {
		if _, err := io.ReadFull(r, buf[:meta.Bytes]); err != nil {
			return nil, 0, time.Time{}, fmt.Errorf("buffer: %w", err)
		}
		if crc32.Checksum(buf[:meta.Bytes], castagnoli) != meta.CRC {
			return nil, 0, time.Time{}, errors.New("buffer checksum mismatch: file is corrupt")
		}
	}
	return meta, st.Size(), st.ModTime(), nil
}

// checkMeta reads the header of a block file of size bytes and checks that
// it is this model's and this cache's, with a buffer of the right size.
func (d *prefixDisk) checkMeta(r io.Reader, size int64) (*prefixBlockMeta, error) {
	raw, err := readHeader(r, prefixMagic, size)
	if err != nil {
		return nil, err
	}
	var meta prefixBlockMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	switch {
	case meta.Model != d.tid || meta.Identity != d.kid:
		return nil, errors.New("written for other weights, dtypes, kernel path or cache shape")
	case meta.BlockTokens != d.blockTokens || meta.Bytes != d.blockBytes:
		return nil, fmt.Errorf("blocks of %d positions (%d bytes), not %d (%d)", meta.BlockTokens, meta.Bytes, d.blockTokens, d.blockBytes)
	case len(meta.Tokens) == 0 || len(meta.Tokens) > d.blockTokens || meta.Start < 0 || meta.Start%d.blockTokens != 0:
		return nil, errors.New("bad block bounds")
	case size != int64(headerBytes(raw)+meta.Bytes):
		return nil, errors.New("truncated")
	}
	return &meta, nil
}

// headerBytes is the size of writeHeader's output for meta.
func headerBytes(meta []byte) int { return len(prefixMagic) + 4 + len(meta) + 4 }

func (d *prefixDisk) add(b *diskBlock) {
	if old := d.blocks[b.hash]; old != nil {
		d.unlink(old)
	}
	d.blocks[b.hash] = b
	d.children[b.parent] = append(d.children[b.parent], b)
	d.bytes += b.size
}

func (d *prefixDisk) unlink(b *diskBlock) {
	delete(d.blocks, b.hash)
	sib := d.children[b.parent]
	if i := slices.Index(sib, b); i >= 0 {
		sib = slices.Delete(sib, i, i+1)
	}
	if len(sib) == 0 {
		delete(d.children, b.parent)
	} else {
		d.children[b.parent] = sib
	}
	d.bytes -= b.size
}

// drop deletes block b's file.
func (d *prefixDisk) drop(b *diskBlock) {
	d.unlink(b)
	if err := os.Remove(d.path(b.hash)); err != nil && !errors.Is(err, os.ErrNotExist) {
		d.log.Warn("prefix cache dir: cannot delete a block", "path", d.path(b.hash), "err", err)
	}
}

// discard deletes an unusable file, saying why.
func (d *prefixDisk) discard(path string, why error) {
	d.log.Warn("prefix cache dir: block unusable, discarded", "path", path, "err", why)
	d.discarded++
	_ = os.Remove(path)
}

// get returns the block stored under hash, child of parent, with tokens
// (nil when there is none).
func (d *prefixDisk) get(hash, parent uint64, tokens []int32) *diskBlock {
	b := d.blocks[hash]
	if b == nil || b.parent != parent || !slices.Equal(b.tokens, tokens) {
		return nil
	}
	return b
}

// touch marks b used now, also for the next run (the file's mtime).
func (d *prefixDisk) touch(b *diskBlock) {
	b.used = d.now()
	_ = os.Chtimes(d.path(b.hash), b.used, b.used)
}

// put writes a block evicted from host memory: buf is its buffer, parent
// the chained hash of the blocks before it, start its first position,
// owners who produced it. A block already on disk is only marked used, and
// gains owners.
func (d *prefixDisk) put(parent uint64, tokens []int32, start int, buf []byte, owners []string) error {
	hash := chain(parent, tokens)
	if b := d.get(hash, parent, tokens); b != nil {
		d.addOwners(b, owners)
		d.touch(b)
		return nil
	}
	meta, err := json.Marshal(prefixBlockMeta{Model: d.tid, Identity: d.kid, BlockTokens: d.blockTokens, Bytes: len(buf),
		CRC: crc32.Checksum(buf, castagnoli), Parent: parent, Start: start, Tokens: tokens})
	if err != nil {
		return err
	}
	size, err := writeFileAtomic(d.path(hash), func(w *bufio.Writer) error {
		if err := writeHeader(w, prefixMagic, meta); err != nil {
			return err
		}
		_, err := w.Write(buf)
		return err
	})
	if err != nil {
		return fmt.Errorf("prefix cache dir: write: %w", err)
	}
	b := &diskBlock{hash: hash, parent: parent, tokens: slices.Clone(tokens), start: start, size: size, used: d.now()}
	d.add(b)
	d.addOwners(b, owners)
	d.written++
	d.enforce(b)
	return nil
}

// purge removes owner from every block's owners: a block left without
// one, and continued by no other block on disk, has its file deleted at
// once; the others keep their remaining owners. The journal records the
// removals (synced) before any file goes.
func (d *prefixDisk) purge(owner string) purged {
	var hit []*diskBlock
	for _, b := range d.blocks {
		if slices.Contains(b.owners, owner) {
			hit = append(hit, b)
		}
	}
	// Deepest first: a block's continuations go before it.
	slices.SortFunc(hit, func(a, b *diskBlock) int { return cmp.Or(cmp.Compare(b.start, a.start), cmp.Compare(a.hash, b.hash)) })
	var out purged
	var gone []*diskBlock
	for _, b := range hit {
		b.owners = slices.DeleteFunc(b.owners, func(o string) bool { return o == owner })
		d.journal.log('-', b.hash, owner)
		switch {
		case len(b.owners) > 0:
			out.kept++
		case slices.ContainsFunc(d.children[b.hash], func(c *diskBlock) bool { return len(c.owners) > 0 }):
			d.addOwners(b, []string{""}) // continued by a block others hold
			out.kept++
		default:
			gone = append(gone, b)
		}
	}
	d.syncOwners()
	for _, b := range gone {
		out.blocks, out.tokens, out.bytes = out.blocks+1, out.tokens+len(b.tokens), out.bytes+b.size
		d.drop(b)
		d.purged++
	}
	return out
}

// load reads b's buffer into buf, checking the file again (it may have
// changed since it was indexed). An unusable file is deleted.
func (d *prefixDisk) load(b *diskBlock, buf []byte) error {
	meta, _, _, err := d.readBlockFile(d.path(b.hash), buf)
	if err == nil && (meta.Parent != b.parent || !slices.Equal(meta.Tokens, b.tokens)) {
		err = errors.New("the file holds another block")
	}
	if err != nil {
		d.unlink(b)
		d.discard(d.path(b.hash), err)
		return err
	}
	d.read++
	d.touch(b)
	return nil
}

// enforce deletes the least recently used blocks (never keep, the block
// just written) until the directory is within maxBytes.
func (d *prefixDisk) enforce(keep *diskBlock) {
	if d.maxBytes <= 0 || d.bytes <= d.maxBytes {
		return
	}
	vs := make([]*diskBlock, 0, len(d.blocks))
	for _, b := range d.blocks {
		if b != keep {
			vs = append(vs, b)
		}
	}
	slices.SortFunc(vs, func(a, b *diskBlock) int { return cmp.Or(a.used.Compare(b.used), cmp.Compare(a.hash, b.hash)) })
	for _, b := range vs {
		if d.bytes <= d.maxBytes {
			break
		}
		d.drop(b)
		d.evicted++
	}
	if d.bytes > d.maxBytes && keep != nil { // one block beyond the bound on its own
		d.drop(keep)
		d.evicted++
	}
}

// spill writes b, a block leaving host memory, to the disk tier.
func (p *prefixStore) spill(b *pblock) {
	if p.disk == nil {
		return
	}
	if err := p.disk.put(p.chainOf(b.parent), b.tokens, b.start, p.buffer(b.buf), b.owners); err != nil {
		p.disk.log.Warn("prefix cache: cannot keep a block on disk", "err", err)
	}
}

// chainOf is the chained hash of the tokens up to the end of b, a block
// with children (full) or the root.
func (p *prefixStore) chainOf(b *pblock) uint64 {
	if b == &p.root {
		return hashBasis
	}
	return b.hash
}

// promote brings the disk tier's block hash (tokens, after node, whose
// chained hash is parent, from position start) into host memory as a child
// of node; nil when the disk has no such block or it cannot be read.
func (p *prefixStore) promote(node *pblock, parent, hash uint64, tokens []int32, start int) *pblock {
	if p.disk == nil || p.disk.get(hash, parent, tokens) == nil {
		return nil
	}
	buf, ok := p.alloc()
	if !ok {
		return nil
	}
	// The buffer's previous block went to disk, which may have evicted
	// this one to stay within its bound.
	d := p.disk.get(hash, parent, tokens)
	if d == nil || p.disk.load(d, p.buffer(buf)) != nil {
		p.free = append(p.free, buf)
		return nil
	}
	b := &pblock{parent: node, tokens: slices.Clone(d.tokens), start: start, buf: buf, used: p.clock, owners: slices.Clone(d.owners)}
	if len(b.tokens) == p.blockTokens {
		b.hash = hash
		p.blocks[hash] = b
	}
	p.dropSubsumed(node, b)
	node.children = append(node.children, b)
	return b
}

// bestDiskChild is the disk tier's child of parent (a chained hash) that
// shares the most tokens with rest, if it shares more than n.
func (p *prefixStore) bestDiskChild(parent uint64, rest []int32, n int) (*diskBlock, int) {
	if p.disk == nil {
		return nil, n
	}
	var best *diskBlock
	for _, c := range p.disk.children[parent] {
		if k := commonPrefix(c.tokens, rest); k > n {
			best, n = c, k
		}
	}
	return best, n
}

// prefixStatsLocked copies the prefix store's memory in use and the disk
// tier's counters into the stats; the scheduler goroutine calls it, with
// e.mu held, after using the store.
func (e *Engine) prefixStatsLocked() {
	s := &e.stats
	s.PrefixStoreBytes = e.prefix.used()
	d := e.prefix.disk
	if d == nil {
		return
	}
	s.PrefixDiskBytes, s.PrefixDiskCapacity = d.bytes, d.maxBytes
	s.PrefixDiskBlocks = len(d.blocks)
	s.PrefixDiskWritten, s.PrefixDiskRead, s.PrefixDiskEvicted, s.PrefixDiskDiscarded = d.written, d.read, d.evicted, d.discarded
	s.PrefixDiskPurged = d.purged
}

// openPrefixDisk adds the disk tier of Options.PrefixCacheDir to the
// prefix store; kid is the KV identity.
func (e *Engine) openPrefixDisk(kid string) error {
	o := e.opts
	if o.PrefixCacheDir == "" {
		return nil
	}
	if e.prefix == nil {
		return fmt.Errorf("prefix cache dir %s: the prefix store has no memory to serve it from (prefix cache bytes off or below one block)", o.PrefixCacheDir)
	}
	d, err := openPrefixDisk(prefixDiskConfig{dir: o.PrefixCacheDir, tid: cmp.Or(e.info.ModelIdentity, kid), kid: kid,
		maxBytes: o.PrefixCacheDiskBytes, log: e.log, now: o.Clock}, e.prefix.blockTokens, e.prefix.blockBytes)
	if err != nil {
		return err
	}
	e.prefix.disk = d
	e.info.PrefixCacheDir, e.info.PrefixCacheDiskBytes = o.PrefixCacheDir, d.maxBytes
	bound := "set"
	switch {
	case o.PrefixCacheDiskBytes == 0:
		bound = "10% of the free space"
	case o.PrefixCacheDiskBytes < 0:
		bound = "unbounded"
	}
	e.log.Info("prefix cache dir", "dir", o.PrefixCacheDir, "max_bytes", d.maxBytes, "max_bytes_from", bound,
		"bytes", d.bytes, "blocks", len(d.blocks))
	e.mu.Lock()
	e.prefixStatsLocked()
	e.mu.Unlock()
	return nil
}

// persistPrefixes writes, at shutdown, what the slots and the prefix
// store's memory hold to its disk tier, so that a restarted engine finds
// the prompts in use rather than only those evicted earlier: the slots'
// prefixes go to the store (as when a slot is reused), then the store's
// blocks to disk, most recently used first, as many as the bound holds.
// Scheduler goroutine only.
func (e *Engine) persistPrefixes() {
	if e.prefix == nil || e.prefix.disk == nil {
		return
	}
	start := time.Now()
	for _, s := range e.slots {
		e.savePrefix(s)
	}
	n, err := e.prefix.flush()
	if err != nil {
		e.log.Warn("prefix cache dir: cannot write the prefixes in memory", "err", err)
	}
	e.log.Info("prefix cache dir: prefixes in memory written", "blocks", n, "took", time.Since(start))
}

// flush writes the blocks in memory to disk (those already there are only
// marked used), most recently used first, as many as the disk bound holds;
// it returns how many it wrote or marked. A block's parents are used at
// least as recently as it, so they come first.
func (p *prefixStore) flush() (int, error) {
	all := p.all()
	slices.SortStableFunc(all, func(a, b *pblock) int { return cmp.Or(cmp.Compare(b.used, a.used), cmp.Compare(a.start, b.start)) })
	if fit := p.disk.maxBytes / int64(p.blockBytes); p.disk.maxBytes > 0 && int64(len(all)) > fit {
		all = all[:fit] // the headers make it a little less
	}
	// Oldest first: the newest end up the most recently used on disk.
	for i := len(all) - 1; i >= 0; i-- {
		b := all[i]
		if err := p.disk.put(p.chainOf(b.parent), b.tokens, b.start, p.buffer(b.buf), b.owners); err != nil {
			return len(all) - 1 - i, err
		}
	}
	return len(all), nil
}
