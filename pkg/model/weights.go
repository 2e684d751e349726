package model

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/kernels/ops"
	"github.com/ellm-dev/ellm/kernels/threads"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/safetensors"
)

// binder looks tensors up by Hugging Face name, checks their shapes and
// converts them for the kernels, collecting every problem instead of
// stopping at the first so that a bad checkpoint is diagnosed in one go.
type binder struct {
	ck    *safetensors.Checkpoint
	dtype string
	layer int // -1 outside the decoder layers (set by the caller)
	errs  []error
	bytes int64
	jobs  []packJob
	// packer is where packAll packs: into the weights image being made
	// (openImage), or the heap.
	packer gemm.Packer
}

func (b *binder) fail(name, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if b.layer >= 0 && strings.HasPrefix(name, modelcfg.LayerPrefix(b.layer)) {
		b.errs = append(b.errs, fmt.Errorf("layer %d: %s %s", b.layer, strings.TrimPrefix(name, modelcfg.LayerPrefix(b.layer)), msg))
		return
	}
	b.errs = append(b.errs, fmt.Errorf("%s %s", name, msg))
}

func (b *binder) err() error { return errors.Join(b.errs...) }

// data returns the tensor as bf16 bits (bf16 checkpoints: a view of the
// mapping) or as f32 (f32 checkpoints: a view; f16: converted).
func (b *binder) data(name string, shape ...int) (bf []uint16, f []float32, ok bool) {
	bf, f, _, ok = b.mapped(name, shape...)
	return bf, f, ok
}

// mapped is data plus the tensor's bytes in the mapping, which packing
// leaves unused.
func (b *binder) mapped(name string, shape ...int) (bf []uint16, f []float32, src []byte, ok bool) {
	t, found := b.ck.Tensor(name)
	if !found {
		b.errs = append(b.errs, missing(b.layer, name))
		return nil, nil, nil, false
	}
	if !slices.Equal(t.Shape, shape) {
		b.fail(name, "has shape %v, want %v", t.Shape, shape)
		return nil, nil, nil, false
	}
	var err error
	switch t.DType {
	case safetensors.BF16:
		bf, err = t.BF16()
	case safetensors.F32:
		f, err = t.F32()
	case safetensors.F16:
		var h []uint16
		if h, err = t.F16(); err == nil {
			f = make([]float32, len(h))
			for i, v := range h {
				f[i] = f16ToF32(v)
			}
		}
	default:
		b.fail(name, "is %s; want BF16, F16 or F32", t.DType)
		return nil, nil, nil, false
	}
	if err != nil {
		b.fail(name, "unreadable: %v", err)
		return nil, nil, nil, false
	}
	return bf, f, t.Bytes(), true
}

func missing(layer int, name string) error {
	if layer >= 0 && strings.HasPrefix(name, modelcfg.LayerPrefix(layer)) {
		return fmt.Errorf("layer %d: missing %s", layer, strings.TrimPrefix(name, modelcfg.LayerPrefix(layer)))
	}
	return fmt.Errorf("missing %s", name)
}

// norm returns an RMSNorm weight (or a bias) widened to f32.
func (b *binder) norm(name string, n int) []float32 {
	bf, f, ok := b.data(name, n)
	if !ok {
		return nil
	}
	if f == nil {
		f = widen(bf)
	} else {
		f = slices.Clone(f)
	}
	b.bytes += int64(4 * n)
	return f
}

// table returns an embedding table as stored.
func (b *binder) table(name string, n, k int) table {
	bf, f, src, _ := b.mapped(name, n, k)
	b.bytes += int64(2*len(bf) + 4*len(f))
	return table{bf16: bf, f32: f, dim: k, src: src}
}

// linear queues linear weight name [n, k] to be packed into *dst in the
// model's dtype.
func (b *binder) linear(dst **gemm.Weight, name string, n, k int) {
	b.fused(dst, k, part{name, n})
}

// part is one tensor of a fused linear weight: name, out_features.
type part struct {
	name string
	n    int
}

// fused queues the linear weights parts (each [n_i, k]) to be packed as one
// weight [Σn_i, k], their output channels side by side in parts order: one
// product then reads them all with one pass over the activations. Every
// output channel is computed as it would be alone (kernels reduce each
// channel in its own lane), so fusing changes no result.
func (b *binder) fused(dst **gemm.Weight, k int, parts ...part) {
	j := packJob{dst: dst, k: k, dtype: b.dtype}
	ok := true
	for i, p := range parts {
		if i > 0 {
			j.name += "+"
		}
		j.name += p.name
		bf, f, src, found := b.mapped(p.name, p.n, k)
		if !found {
			ok = false
			continue
		}
		j.bf, j.f, j.src = append(j.bf, bf), append(j.f, f), append(j.src, src)
		j.n += p.n
	}
	if ok {
		b.jobs = append(b.jobs, j)
	}
}

// router queues the MoE gate: like linear, but never quantized.
func (b *binder) router(dst **gemm.Weight, name string, n, k int) {
	dtype := b.dtype
	if dtype == "int8" {
		dtype = "bf16"
	}
	if bf, f, src, ok := b.mapped(name, n, k); ok {
		b.jobs = append(b.jobs, packJob{name: name, dst: dst, bf: [][]uint16{bf}, f: [][]float32{f}, src: [][]byte{src}, n: n, k: k, dtype: dtype})
	}
}

// tied queues lm_head = embed_tokens (tie_word_embeddings). Packing reads
// the whole table, but the embedding gather needs only the rows of the
// tokens it sees: the table's pages are dropped too and come back, from the
// page cache, as tokens touch them.
func (b *binder) tied(dst **gemm.Weight, t *table, n, k int) {
	if t.bf16 != nil || t.f32 != nil { // a missing table is already reported
		b.jobs = append(b.jobs, packJob{name: "lm_head tied", dst: dst, bf: [][]uint16{t.bf16}, f: [][]float32{t.f32}, src: [][]byte{t.src}, n: n, k: k, dtype: b.dtype})
	}
}

// packJob is one linear weight to pack (or quantize) for the kernels, from
// one or more tensors ([i] is tensor i: bf16 or f32, and its mapped bytes).
type packJob struct {
	name  string // the tensors', joined by "+"
	dst   **gemm.Weight
	bf    [][]uint16
	f     [][]float32
	src   [][]byte
	n, k  int
	dtype string
}

// packAll runs the queued packing jobs on every CPU: repacking (and
// quantizing) a large checkpoint is most of its load time. The kernels read
// only the packed copy, so each source's pages are then dropped from the
// process (MADV_DONTNEED; they stay in the page cache, clean and
// reclaimable): the model does not hold its linear weights twice.
func (b *binder) packAll() {
	var bytes atomic.Int64
	threads.Each(len(b.jobs), func(i int) {
		j := &b.jobs[i]
		bf, f := j.parts()
		*j.dst = pack(b.packer, bf, f, j.n, j.k, j.dtype)
		bytes.Add(int64((*j.dst).Bytes()))
		for _, s := range j.src {
			dropPages(s)
		}
	})
	b.bytes += bytes.Load()
	b.jobs = nil
	// Weights widened to f32 (dtype f32, or a fused weight with an f32
	// part) went through temporaries, one weight at a time per CPU; hand
	// their memory back now rather than let it sit in the heap until the
	// scavenger gets to it.
	debug.FreeOSMemory()
}

// parts returns the job's tensors as pack takes them: the bf16 parts where
// they are mapped when every part is bf16 and the weights stay bf16 or are
// quantized from it, else one f32 [n, k] matrix (bf16 parts widened
// exactly).
func (j *packJob) parts() ([][]uint16, []float32) {
	if j.dtype != "f32" && !slices.ContainsFunc(j.bf, func(bf []uint16) bool { return bf == nil }) {
		return j.bf, nil
	}
	if len(j.f) == 1 && j.f[0] != nil {
		return nil, j.f[0]
	}
	if len(j.bf) == 1 {
		return nil, widen(j.bf[0])
	}
	out := make([]float32, 0, j.n*j.k)
	for i, f := range j.f {
		if f == nil {
			f = widen(j.bf[i])
		}
		out = append(out, f...)
	}
	return nil, out
}

// dropPages releases the whole pages of mapped bytes b from the process,
// unlocking them first (a weights image is locked in memory: lockImage).
func dropPages(b []byte) {
	page := uintptr(os.Getpagesize())
	if len(b) < int(page) {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (start + page - 1) &^ (page - 1)
	hi := (start + uintptr(len(b))) &^ (page - 1)
	if hi <= lo {
		return
	}
	_ = unix.Munlock(b[lo-start : hi-start])
	_ = unix.Madvise(b[lo-start:hi-start], unix.MADV_DONTNEED) // advice only: keeping the pages is correct too
}

func pack(pk gemm.Packer, bf [][]uint16, f []float32, n, k int, dtype string) *gemm.Weight {
	switch {
	case dtype == "int8" && bf == nil:
		// Quantization is defined on bf16 weights; f32 sources are rounded first.
		return pk.Int8Parts([][]uint16{roundBF16(f)}, k)
	case dtype == "int8":
		return pk.Int8Parts(bf, k)
	case bf == nil:
		return pk.F32(f, n, k)
	}
	return pk.BF16Parts(bf, k)
}

func widen(bf []uint16) []float32 {
	f := make([]float32, len(bf))
	ops.For(kernels.Active()).ToF32(f, bf) // at load: the path's conversion, the same bits on every path
	return f
}

func roundBF16(f []float32) []uint16 {
	bf := make([]uint16, len(f))
	ops.For(kernels.Active()).ToBF16(bf, f)
	return bf
}

// f16ToF32 converts IEEE binary16 bits exactly.
func f16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf / NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// subnormal: value = mant · 2^-24
	f := float32(mant) * (1.0 / (1 << 24))
	if sign != 0 {
		f = -f
	}
	return f
}
