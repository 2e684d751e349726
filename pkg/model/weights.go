package model

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/kernels/ops"
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
	t, found := b.ck.Tensor(name)
	if !found {
		b.errs = append(b.errs, missing(b.layer, name))
		return nil, nil, false
	}
	if !slices.Equal(t.Shape, shape) {
		b.fail(name, "has shape %v, want %v", t.Shape, shape)
		return nil, nil, false
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
		return nil, nil, false
	}
	if err != nil {
		b.fail(name, "unreadable: %v", err)
		return nil, nil, false
	}
	return bf, f, true
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
	bf, f, _ := b.data(name, n, k)
	b.bytes += int64(2*len(bf) + 4*len(f))
	return table{bf16: bf, f32: f, dim: k}
}

// linear queues linear weight name [n, k] to be packed into *dst in the
// model's dtype.
func (b *binder) linear(dst **gemm.Weight, name string, n, k int) {
	if bf, f, ok := b.data(name, n, k); ok {
		b.jobs = append(b.jobs, packJob{dst: dst, bf: bf, f: f, n: n, k: k, dtype: b.dtype})
	}
}

// router queues the MoE gate: like linear, but never quantized.
func (b *binder) router(dst **gemm.Weight, name string, n, k int) {
	dtype := b.dtype
	if dtype == "int8" {
		dtype = "bf16"
	}
	if bf, f, ok := b.data(name, n, k); ok {
		b.jobs = append(b.jobs, packJob{dst: dst, bf: bf, f: f, n: n, k: k, dtype: dtype})
	}
}

// tied queues lm_head = embed_tokens (tie_word_embeddings).
func (b *binder) tied(dst **gemm.Weight, t *table, n, k int) {
	if t.bf16 != nil || t.f32 != nil { // a missing table is already reported
		b.jobs = append(b.jobs, packJob{dst: dst, bf: t.bf16, f: t.f32, n: n, k: k, dtype: b.dtype})
	}
}

// packJob is one linear weight to pack (or quantize) for the kernels.
type packJob struct {
	dst   **gemm.Weight
	bf    []uint16
	f     []float32
	n, k  int
	dtype string
}

// packAll runs the queued packing jobs on every CPU: repacking (and
// quantizing) a large checkpoint is most of its load time.
func (b *binder) packAll() {
	jobs := make(chan *packJob)
	var wg sync.WaitGroup
	var bytes atomic.Int64
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				*j.dst = pack(j.bf, j.f, j.n, j.k, j.dtype)
				bytes.Add(int64((*j.dst).Bytes()))
			}
		}()
	}
	for i := range b.jobs {
		jobs <- &b.jobs[i]
	}
	close(jobs)
	wg.Wait()
	b.bytes += bytes.Load()
	b.jobs = nil
}

func pack(bf []uint16, f []float32, n, k int, dtype string) *gemm.Weight {
	switch {
	case dtype == "int8" && bf == nil:
		// Quantization is defined on bf16 weights; f32 sources are rounded first.
		return gemm.QuantizeInt8(roundBF16(f), n, k)
	case dtype == "int8":
		return gemm.QuantizeInt8(bf, n, k)
	case bf == nil:
		return gemm.FromF32(f, n, k)
	case dtype == "f32":
		return gemm.FromF32(widen(bf), n, k)
	}
	return gemm.FromBF16(bf, n, k)
}

func widen(bf []uint16) []float32 {
	f := make([]float32, len(bf))
	ops.ToF32(f, bf)
	return f
}

func roundBF16(f []float32) []uint16 {
	bf := make([]uint16, len(f))
	ops.ToBF16(bf, f)
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
