package kvcache

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// magic starts every exported slot; the last byte is the format version.
var magic = [8]byte{'E', 'L', 'L', 'M', 'K', 'V', 0, 1}

// header follows the magic. All fields little-endian.
type header struct {
	ConfigHash                     [32]byte
	DType                          uint32 // 0 bf16, 1 f32, 2 int8
	Layers, KVHeads, HeadDim, NPos uint32
}

// ErrMismatch reports an exported slot made for another model, dtype or shape.
var ErrMismatch = errors.New("kv cache file does not match this cache")

// ConfigHash identifies a model configuration: the SHA-256 of its JSON form.
func ConfigHash(cfg *modelcfg.Config) [32]byte {
	b, err := json.Marshal(cfg)
	if err != nil { // a Config is plain data: Marshal cannot fail
		panic(err)
	}
	return sha256.Sum256(b)
}

func (c *Cache) header(n int) header {
	h := header{ConfigHash: ConfigHash(c.cfg), Layers: uint32(c.Layers), KVHeads: uint32(c.KVHeads),
		HeadDim: uint32(c.HeadDim), NPos: uint32(n)}
	switch c.DType {
	case F32:
		h.DType = 1
	case Int8:
		h.DType = 2
	}
	return h
}

// Export writes the first n positions of slot (every layer's K and V) to w,
// with a header naming the model config, dtype and shape, and a CRC-32C trailer.
func (c *Cache) Export(w io.Writer, slot, n int) error {
	if slot < 0 || slot >= c.Slots || n < 0 || n > c.SeqLen {
		return fmt.Errorf("kv export: slot %d positions %d outside %d slots × %d positions", slot, n, c.Slots, c.SeqLen)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	mw := io.MultiWriter(bw, crc)
	if _, err := bw.Write(magic[:]); err != nil {
		return fmt.Errorf("kv export: %w", err)
	}
	if err := binary.Write(mw, binary.LittleEndian, c.header(n)); err != nil {
		return fmt.Errorf("kv export: %w", err)
	}
	err := c.eachSpan(0, n, func(sp *span) error {
		_, err := mw.Write(sp.bytes(slot))
		return err
	})
	if err != nil {
		return fmt.Errorf("kv export: %w", err)
	}
	if err := binary.Write(bw, binary.LittleEndian, crc.Sum32()); err != nil {
		return fmt.Errorf("kv export: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("kv export: %w", err)
	}
	return nil
}

// Import reads a slot written by Export into slot and returns its number of
// positions. On any error the slot's contents are undefined: the caller must
// treat it as empty.
func (c *Cache) Import(r io.Reader, slot int) (int, error) {
	if slot < 0 || slot >= c.Slots {
		return 0, fmt.Errorf("kv import: slot %d outside %d slots", slot, c.Slots)
	}
	br := bufio.NewReaderSize(r, 1<<20)
	var m [8]byte
	if _, err := io.ReadFull(br, m[:]); err != nil {
		return 0, fmt.Errorf("kv import: %w", err)
	}
	if m != magic {
		return 0, fmt.Errorf("kv import: not an ellm kv file (magic %q)", m[:])
	}
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	tr := io.TeeReader(br, crc)
	var h header
	if err := binary.Read(tr, binary.LittleEndian, &h); err != nil {
		return 0, fmt.Errorf("kv import: header: %w", err)
	}
	want := c.header(int(h.NPos))
	switch {
	case h.ConfigHash != want.ConfigHash:
		return 0, fmt.Errorf("kv import: written for another model config: %w", ErrMismatch)
	case h.DType != want.DType:
		return 0, fmt.Errorf("kv import: dtype %d, cache is %s: %w", h.DType, c.DType, ErrMismatch)
	case h != want:
		return 0, fmt.Errorf("kv import: shape %d layers × %d heads × %d dims, cache has %d × %d × %d: %w",
			h.Layers, h.KVHeads, h.HeadDim, c.Layers, c.KVHeads, c.HeadDim, ErrMismatch)
	case int(h.NPos) > c.SeqLen:
		return 0, fmt.Errorf("kv import: %d positions, slots hold %d: %w", h.NPos, c.SeqLen, ErrMismatch)
	}
	n := int(h.NPos)
	if err := c.eachSpan(0, n, func(sp *span) error {
		_, err := io.ReadFull(tr, sp.bytes(slot))
		return err
	}); err != nil {
		return 0, fmt.Errorf("kv import: data: %w", err)
	}
	sum := crc.Sum32()
	var got uint32
	if err := binary.Read(br, binary.LittleEndian, &got); err != nil {
		return 0, fmt.Errorf("kv import: checksum: %w", err)
	}
	if got != sum {
		return 0, fmt.Errorf("kv import: checksum %08x, data hashes to %08x: file is corrupt", got, sum)
	}
	return n, nil
}
