// Package kvcache is the static key/value cache: every layer's K and V for
// every slot, allocated once at start-up and never paged or grown.
//
// Layout per layer and per tensor (K or V): [slots][kv_heads][seq_len][head_dim],
// so that the keys of one (slot, head) are contiguous in position order, the
// order attention reads them; an int8 cache adds one f32 scale per (slot,
// kv head, position) for each of K and V, [slots][kv_heads][seq_len]. The
// whole cache is one anonymous mapping with MADV_HUGEPAGE, committed (and
// locked, where RLIMIT_MEMLOCK allows) at start-up: a decode step touches
// every layer's cache, 2 MiB pages keep the TLB out of the way, and no
// request pays for page faults or swap.
package kvcache

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ellm-dev/ellm/kernels/attn"

	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/numa"
)

// DType is the element type of the cache.
type DType string

const (
	// BF16 stores K and V rounded to bfloat16 (round to nearest even): half the bytes.
	BF16 DType = "bf16"
	// F32 stores K and V exactly as computed.
	F32 DType = "f32"
	// Int8 stores each position's K and V of each kv head as int8 with one
	// f32 scale (symmetric, max |x|/127): about half the bytes of bf16.
	Int8 DType = "int8"
)

// ParseDType accepts "bf16" (or ""), "f32" and "int8".
func ParseDType(s string) (DType, error) {
	switch s {
	case "", "bf16":
		return BF16, nil
	case "f32":
		return F32, nil
	case "int8":
		return Int8, nil
	}
	return "", fmt.Errorf("kv cache dtype %q: want bf16, int8 or f32", s)
}

// size is the bytes of one K or V element, without int8's scales.
func (d DType) size() int {
	switch d {
	case F32:
		return 4
	case Int8:
		return 1
	}
	return 2
}

// scaleSize is the bytes of the scale of one (position, kv head) row.
func (d DType) scaleSize() int {
	if d == Int8 {
		return 4
	}
	return 0
}

// BytesPerPosition is what one position of one slot costs in a cache of
// cfg's shape: K and V of every layer and kv head, with int8's scales. The
// fit check (modelcfg.PlanMemory) counts the same bytes.
func BytesPerPosition(cfg *modelcfg.Config, dtype DType) (int64, error) {
	return modelcfg.KVBytesPerPosition(cfg, string(dtype))
}

// Cache holds every layer's K and V.
type Cache struct {
	DType   DType
	Layers  int
	Slots   int
	KVHeads int
	SeqLen  int
	HeadDim int

	cfg    *modelcfg.Config
	mem    []byte
	layers []attn.Cache
}

// New allocates the cache for cfg's shape: slots sequences of seqLen positions.
func New(cfg *modelcfg.Config, slots, seqLen int, dtype DType) (*Cache, error) {
	if slots < 1 || seqLen < 1 {
		return nil, fmt.Errorf("kv cache: %d slots × %d positions: both must be positive", slots, seqLen)
	}
	if dtype != BF16 && dtype != F32 && dtype != Int8 {
		return nil, fmt.Errorf("kv cache: unknown dtype %q", dtype)
	}
	c := &Cache{
		DType: dtype, Layers: cfg.NumHiddenLayers, Slots: slots, KVHeads: cfg.NumKeyValueHeads,
		SeqLen: seqLen, HeadDim: cfg.HeadDim, cfg: cfg,
	}
	// Every layer's K and V (rows where a bf16 cache has them), then for int8
	// every layer's K and V scales: head_dim is even (modelcfg checks it for
	// RoPE), so the values end 4-byte aligned.
	per := c.tensorElems()
	data := int64(per) * 2 * int64(c.Layers) * int64(dtype.size())
	scales := int64(per/c.HeadDim) * 2 * int64(c.Layers) * int64(dtype.scaleSize())
	total := data + scales
	if int64(int(total)) != total || total <= 0 {
		return nil, fmt.Errorf("kv cache: %d bytes cannot be allocated", total)
	}
	mem, err := unix.Mmap(-1, 0, int(total), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("kv cache: mmap %d bytes (%d layers × %d slots × %d positions): %w", total, c.Layers, slots, seqLen, err)
	}
	// Hints, best effort: kernels without THP, or a container with a small
	// RLIMIT_MEMLOCK, still get a working cache.
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	numa.Commit(mem) // committed at start-up, not page by page during the first long prompts
	_ = unix.Mlock(mem)
	c.mem = mem
	c.layers = make([]attn.Cache, c.Layers)
	for l := range c.layers {
		ly := &c.layers[l]
		ly.Slots, ly.KVHeads, ly.SeqLen, ly.HeadDim = slots, c.KVHeads, seqLen, c.HeadDim
		ly.Init()
		off := l * 2 * per * dtype.size()
		k := unsafe.Pointer(&mem[off])
		v := unsafe.Pointer(&mem[off+per*dtype.size()])
		switch dtype {
		case F32:
			ly.K32 = unsafe.Slice((*float32)(k), per)
			ly.V32 = unsafe.Slice((*float32)(v), per)
		case Int8:
			ly.K8 = unsafe.Slice((*int8)(k), per)
			ly.V8 = unsafe.Slice((*int8)(v), per)
			rows := per / c.HeadDim
			so := int(data) + l*2*rows*4
			ly.KS = unsafe.Slice((*float32)(unsafe.Pointer(&mem[so])), rows)
			ly.VS = unsafe.Slice((*float32)(unsafe.Pointer(&mem[so+rows*4])), rows)
		default:
			ly.K16 = unsafe.Slice((*uint16)(k), per)
			ly.V16 = unsafe.Slice((*uint16)(v), per)
		}
	}
	return c, nil
}

func (c *Cache) tensorElems() int { return c.Slots * c.KVHeads * c.SeqLen * c.HeadDim }

// Layer returns layer l's view, which kernels/attn reads and writes in place.
func (c *Cache) Layer(l int) *attn.Cache { return &c.layers[l] }

// offset is the element index of (slot, head, pos, 0) in a layer's K or V.
func (c *Cache) offset(slot, head, pos int) int {
	return ((slot*c.KVHeads+head)*c.SeqLen + pos) * c.HeadDim
}

// Bytes is the size of the whole cache.
func (c *Cache) Bytes() int64 { return int64(len(c.mem)) }

// Close releases the mapping; views must not be used afterwards.
func (c *Cache) Close() error {
	if c.mem == nil {
		return nil
	}
	err := unix.Munmap(c.mem)
	c.mem, c.layers = nil, nil
	return err
}
