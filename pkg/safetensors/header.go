// Package safetensors reads and writes the safetensors checkpoint format:
// single files and sharded checkpoints with a model.safetensors.index.json.
//
// Files are memory-mapped and tensors are exposed as zero-copy typed views.
// The header is validated completely before any tensor is handed out, so a
// truncated or corrupted checkpoint is an error that names the file and the
// tensor, never a panic or an out-of-bounds read later in a kernel.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"
)

// DType is a tensor element type as the safetensors header spells it.
type DType string

// The element types ellm reads. F8_E4M3 is stored as raw bytes.
const (
	F64    DType = "F64"
	F32    DType = "F32"
	F16    DType = "F16"
	BF16   DType = "BF16"
	I64    DType = "I64"
	I32    DType = "I32"
	I16    DType = "I16"
	I8     DType = "I8"
	U8     DType = "U8"
	F8E4M3 DType = "F8_E4M3"
	Bool   DType = "BOOL"
)

var dtypeSizes = map[DType]int{
	F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, F8E4M3: 1, Bool: 1,
}

// Size is the byte size of one element, 0 for an unknown dtype.
func (d DType) Size() int { return dtypeSizes[d] }

// Valid reports whether d is a dtype this package knows.
func (d DType) Valid() bool { return d.Size() > 0 }

// MaxHeaderSize bounds the JSON header; the reference implementation uses the same limit.
const MaxHeaderSize = 100_000_000

// MetadataKey is the reserved header key holding string metadata.
const MetadataKey = "__metadata__"

// TensorInfo is one header entry. Begin and End are byte offsets into the
// data section, which starts right after the header.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int
	Begin int64
	End   int64
}

// NumElements is the product of the shape (1 for a scalar).
func (t *TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// Header is a parsed and validated safetensors header.
type Header struct {
	// Tensors are sorted by Begin.
	Tensors  []TensorInfo
	Metadata map[string]string
	// DataOffset is where the data section starts in the file (8 + header length).
	DataOffset int64
}

type rawEntry struct {
	DType       DType   `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// ParseHeader parses and validates the header of a safetensors file whose
// first bytes are prefix and whose total size is fileSize. prefix must hold at
// least the 8-byte length and the header (the whole file is fine).
func ParseHeader(prefix []byte, fileSize int64) (*Header, error) {
	if fileSize < 8 || len(prefix) < 8 {
		return nil, fmt.Errorf("file is %d bytes, too short for the 8-byte header length", fileSize)
	}
	n := binary.LittleEndian.Uint64(prefix[:8])
	if n > MaxHeaderSize {
		return nil, fmt.Errorf("header length %d exceeds the limit of %d bytes", n, MaxHeaderSize)
	}
	if int64(n) > fileSize-8 {
		return nil, fmt.Errorf("header length %d exceeds the %d bytes after the length prefix (truncated file?)", n, fileSize-8)
	}
	if uint64(len(prefix)-8) < n {
		return nil, fmt.Errorf("header length %d: only %d bytes available", n, len(prefix)-8)
	}
	raw := prefix[8 : 8+n]
	if len(bytes.TrimSpace(raw)) == 0 || bytes.TrimSpace(raw)[0] != '{' {
		return nil, errors.New("header is not a JSON object")
	}
	h := &Header{DataOffset: 8 + int64(n)}
	dataSize := fileSize - h.DataOffset

	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("header JSON: %w", err)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("header JSON: %w", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("header JSON: unexpected %v", tok)
		}
		if seen[name] {
			return nil, fmt.Errorf("tensor %q: listed twice in the header", name)
		}
		seen[name] = true
		if name == MetadataKey {
			var md map[string]string
			if err := dec.Decode(&md); err != nil {
				return nil, fmt.Errorf("header %s: must map strings to strings: %w", MetadataKey, err)
			}
			h.Metadata = md
			continue
		}
		var e rawEntry
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("tensor %q: header entry: %w", name, err)
		}
		ti, err := checkEntry(name, e, dataSize)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		h.Tensors = append(h.Tensors, ti)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("header JSON: %w", err)
	}
	if rest := bytes.TrimSpace(raw[dec.InputOffset():]); len(rest) > 0 {
		return nil, fmt.Errorf("header JSON: %d unexpected bytes after the object", len(rest))
	}
	sort.Slice(h.Tensors, func(i, j int) bool {
		a, b := &h.Tensors[i], &h.Tensors[j]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		return a.End < b.End
	})
	for i := 1; i < len(h.Tensors); i++ {
		prev, cur := &h.Tensors[i-1], &h.Tensors[i]
		if cur.Begin < prev.End {
			return nil, fmt.Errorf("tensor %q: bytes [%d, %d) overlap tensor %q [%d, %d)",
				cur.Name, cur.Begin, cur.End, prev.Name, prev.Begin, prev.End)
		}
	}
	return h, nil
}

func checkEntry(name string, e rawEntry, dataSize int64) (TensorInfo, error) {
	ti := TensorInfo{Name: name, DType: e.DType}
	if name == "" || strings.TrimSpace(name) != name {
		return ti, errors.New("invalid tensor name")
	}
	if !e.DType.Valid() {
		return ti, fmt.Errorf("unknown dtype %q", e.DType)
	}
	if e.Shape == nil {
		return ti, errors.New("missing shape")
	}
	if len(e.DataOffsets) != 2 {
		return ti, fmt.Errorf("data_offsets has %d values, want 2", len(e.DataOffsets))
	}
	// Count elements with overflow checks: a hostile header must not wrap around.
	elems := uint64(1)
	ti.Shape = make([]int, len(e.Shape))
	for i, d := range e.Shape {
		if d < 0 {
			return ti, fmt.Errorf("shape %v: dimension %d is out of range", e.Shape, d)
		}
		hi, lo := bits.Mul64(elems, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return ti, fmt.Errorf("shape %v overflows", e.Shape)
		}
		elems = lo
		ti.Shape[i] = int(d)
	}
	hi, want := bits.Mul64(elems, uint64(e.DType.Size()))
	if hi != 0 || want > math.MaxInt64 {
		return ti, fmt.Errorf("shape %v overflows", e.Shape)
	}
	ti.Begin, ti.End = e.DataOffsets[0], e.DataOffsets[1]
	if ti.Begin < 0 || ti.End < ti.Begin {
		return ti, fmt.Errorf("data_offsets [%d, %d] are not an interval", ti.Begin, ti.End)
	}
	if uint64(ti.End-ti.Begin) != want {
		return ti, fmt.Errorf("%s shape %v needs %d bytes but data_offsets [%d, %d] span %d",
			e.DType, e.Shape, want, ti.Begin, ti.End, ti.End-ti.Begin)
	}
	if ti.End > dataSize {
		return ti, fmt.Errorf("data_offsets [%d, %d] end past the %d-byte data section (truncated file?)", ti.Begin, ti.End, dataSize)
	}
	return ti, nil
}
