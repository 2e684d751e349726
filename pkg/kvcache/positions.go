package kvcache

import (
	"fmt"
	"unsafe"
)

// span is one (layer, K|V, head) run of positions [from, from+n) of the
// cache, or for int8 that run's scales: the unit that export, import and the
// position copies move. Every dtype's bytes of a position lie in its spans,
// so code written over spans moves them all.
type span struct {
	c               *Cache
	layer, kv, head int
	scales          bool // the int8 scales of the run, not its values
	from, n         int
	stride          int // bytes per position
}

// bytes is the span's memory in slot. It aliases the cache (little-endian,
// as the file format is: ellm runs on amd64 and arm64 only).
func (sp *span) bytes(slot int) []byte {
	ly := &sp.c.layers[sp.layer]
	o := sp.c.offset(slot, sp.head, sp.from)
	var p unsafe.Pointer
	switch {
	case sp.scales && sp.kv == 0:
		p = unsafe.Pointer(&ly.KS[o/sp.c.HeadDim])
	case sp.scales:
		p = unsafe.Pointer(&ly.VS[o/sp.c.HeadDim])
	case sp.c.DType == F32 && sp.kv == 0:
		p = unsafe.Pointer(&ly.K32[o])
	case sp.c.DType == F32:
		p = unsafe.Pointer(&ly.V32[o])
	case sp.c.DType == Int8 && sp.kv == 0:
		p = unsafe.Pointer(&ly.K8[o])
	case sp.c.DType == Int8:
		p = unsafe.Pointer(&ly.V8[o])
	case sp.kv == 0:
		p = unsafe.Pointer(&ly.K16[o])
	default:
		p = unsafe.Pointer(&ly.V16[o])
	}
	return unsafe.Slice((*byte)(p), sp.n*sp.stride)
}

// eachSpan calls f with every span of positions [from, from+n), in a fixed
// order (the export format's: per head its values, then for int8 their
// scales). The span is reused between calls.
func (c *Cache) eachSpan(from, n int, f func(*span) error) error {
	if n == 0 {
		return nil
	}
	sp := span{c: c, from: from, n: n}
	for l := range c.layers {
		for kv := 0; kv < 2; kv++ {
			for h := 0; h < c.KVHeads; h++ {
				sp.layer, sp.kv, sp.head = l, kv, h
				sp.scales, sp.stride = false, c.HeadDim*c.DType.size()
				if err := f(&sp); err != nil {
					return err
				}
				if c.DType.scaleSize() == 0 {
					continue
				}
				sp.scales, sp.stride = true, c.DType.scaleSize()
				if err := f(&sp); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// PositionBytes is the size of one position of one slot: every layer's K
// and V, with int8's scales (BytesPerPosition of the cache's shape).
func (c *Cache) PositionBytes() int {
	total := 0
	_ = c.eachSpan(0, 1, func(sp *span) error { total += sp.stride; return nil })
	return total
}

func (c *Cache) checkRange(op string, slot, from, n int) error {
	if slot < 0 || slot >= c.Slots || from < 0 || n < 0 || from > c.SeqLen-n {
		return fmt.Errorf("kv %s: slot %d positions [%d, %d+%d) outside %d slots × %d positions", op, slot, from, from, n, c.Slots, c.SeqLen)
	}
	return nil
}

// CopyPositions copies positions [from, from+n) of every layer from slot
// src to slot dst. KV depends only on the tokens up to its position, so two
// slots holding the same tokens hold the same bits: copying a shared prefix
// replaces prefilling it.
func (c *Cache) CopyPositions(dst, src, from, n int) error {
	if err := c.checkRange("copy", dst, from, n); err != nil {
		return err
	}
	if err := c.checkRange("copy", src, from, n); err != nil {
		return err
	}
	if dst == src {
		return nil
	}
	return c.eachSpan(from, n, func(sp *span) error {
		copy(sp.bytes(dst), sp.bytes(src))
		return nil
	})
}

// SavePositions copies positions [from, from+n) of slot into buf, a buffer
// laid out for capacity positions (BufferBytes(capacity) bytes): each span
// gets room for capacity positions, and the n positions land at buffer
// positions [at, at+n).
func (c *Cache) SavePositions(buf []byte, capacity, at, slot, from, n int) error {
	return c.moveBuffer("save", buf, capacity, at, slot, from, n, true)
}

// LoadPositions is SavePositions' inverse: buffer positions [at, at+n) go to
// positions [from, from+n) of slot.
func (c *Cache) LoadPositions(buf []byte, capacity, at, slot, from, n int) error {
	return c.moveBuffer("load", buf, capacity, at, slot, from, n, false)
}

// BufferBytes is the size of a SavePositions buffer for capacity positions.
func (c *Cache) BufferBytes(capacity int) int { return capacity * c.PositionBytes() }

func (c *Cache) moveBuffer(op string, buf []byte, capacity, at, slot, from, n int, save bool) error {
	if err := c.checkRange(op, slot, from, n); err != nil {
		return err
	}
	if at < 0 || capacity < 0 || at > capacity-n || len(buf) < c.BufferBytes(capacity) {
		return fmt.Errorf("kv %s: buffer positions [%d, %d+%d) of %d in %d bytes", op, at, at, n, capacity, len(buf))
	}
	off := 0
	return c.eachSpan(from, n, func(sp *span) error {
		b := buf[off+at*sp.stride : off+(at+n)*sp.stride]
		if save {
			copy(b, sp.bytes(slot))
		} else {
			copy(sp.bytes(slot), b)
		}
		off += capacity * sp.stride
		return nil
	})
}
