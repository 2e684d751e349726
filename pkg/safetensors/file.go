package safetensors

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// File is one memory-mapped safetensors file.
type File struct {
	Path   string
	Header *Header
	data   []byte // the whole mapping; nil for an empty data section
}

// OpenFile maps path and validates its header.
func OpenFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if size < 8 {
		return nil, fmt.Errorf("%s: file is %d bytes, too short for the 8-byte header length", path, size)
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("%s: %d bytes cannot be mapped on this platform", path, size)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	h, err := ParseHeader(data, size)
	if err != nil {
		_ = unix.Munmap(data)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &File{Path: path, Header: h, data: data}, nil
}

// Close unmaps the file; views obtained from its tensors must not be used afterwards.
func (f *File) Close() error {
	if f.data == nil {
		return nil
	}
	err := unix.Munmap(f.data)
	f.data = nil
	if err != nil {
		return fmt.Errorf("%s: munmap: %w", f.Path, err)
	}
	return nil
}

// Advise passes an madvise hint (e.g. unix.MADV_WILLNEED) for the whole mapping.
func (f *File) Advise(advice int) error {
	if f.data == nil {
		return nil
	}
	return unix.Madvise(f.data, advice)
}

func (f *File) tensors() []*Tensor {
	ts := make([]*Tensor, len(f.Header.Tensors))
	for i := range f.Header.Tensors {
		ti := &f.Header.Tensors[i]
		lo, hi := f.Header.DataOffset+ti.Begin, f.Header.DataOffset+ti.End
		ts[i] = &Tensor{TensorInfo: *ti, File: f.Path, data: f.data[lo:hi:hi]}
	}
	return ts
}

// Tensor is one tensor of a checkpoint, backed by the file mapping.
type Tensor struct {
	TensorInfo
	// File is the path of the shard that holds the tensor.
	File string
	data []byte
}

// Bytes is the tensor's raw little-endian data (zero-copy, read-only).
func (t *Tensor) Bytes() []byte { return t.data }

// NumBytes is the size of the tensor's data.
func (t *Tensor) NumBytes() int64 { return int64(len(t.data)) }

func (t *Tensor) check(want DType) error {
	if t.DType != want {
		return fmt.Errorf("%s: tensor %q is %s, not %s", t.File, t.Name, t.DType, want)
	}
	return nil
}

// view reinterprets the tensor bytes as []E without copying when they are
// aligned for E; headers written by other tools need not align tensors, and
// then the data is copied once into an aligned slice.
func view[E any](t *Tensor, want DType) ([]E, error) {
	if err := t.check(want); err != nil {
		return nil, err
	}
	var zero E
	size := int(unsafe.Sizeof(zero))
	n := len(t.data) / size
	if n == 0 {
		return []E{}, nil
	}
	p := unsafe.Pointer(unsafe.SliceData(t.data))
	if uintptr(p)%unsafe.Alignof(zero) == 0 {
		return unsafe.Slice((*E)(p), n), nil
	}
	out := make([]E, n)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(out))), len(t.data)), t.data)
	return out, nil
}

// F32 views an F32 tensor.
func (t *Tensor) F32() ([]float32, error) { return view[float32](t, F32) }

// F64 views an F64 tensor.
func (t *Tensor) F64() ([]float64, error) { return view[float64](t, F64) }

// BF16 views a BF16 tensor as raw bfloat16 bits.
func (t *Tensor) BF16() ([]uint16, error) { return view[uint16](t, BF16) }

// F16 views an F16 tensor as raw IEEE half bits.
func (t *Tensor) F16() ([]uint16, error) { return view[uint16](t, F16) }

// I64 views an I64 tensor.
func (t *Tensor) I64() ([]int64, error) { return view[int64](t, I64) }

// I32 views an I32 tensor.
func (t *Tensor) I32() ([]int32, error) { return view[int32](t, I32) }

// I16 views an I16 tensor.
func (t *Tensor) I16() ([]int16, error) { return view[int16](t, I16) }

// I8 views an I8 tensor.
func (t *Tensor) I8() ([]int8, error) { return view[int8](t, I8) }

// U8 views a U8 tensor.
func (t *Tensor) U8() ([]uint8, error) { return view[uint8](t, U8) }

// F8E4M3 views an F8_E4M3 tensor as raw bytes.
func (t *Tensor) F8E4M3() ([]uint8, error) { return view[uint8](t, F8E4M3) }

// Bool views a BOOL tensor. Every byte must be 0 or 1: any other value is not
// a Go bool, so it is rejected rather than reinterpreted.
func (t *Tensor) Bool() ([]bool, error) {
	if err := t.check(Bool); err != nil {
		return nil, err
	}
	for i, b := range t.data {
		if b > 1 {
			return nil, fmt.Errorf("%s: tensor %q: element %d is byte %d, not a boolean", t.File, t.Name, i, b)
		}
	}
	if len(t.data) == 0 {
		return []bool{}, nil
	}
	return unsafe.Slice((*bool)(unsafe.Pointer(unsafe.SliceData(t.data))), len(t.data)), nil
}
