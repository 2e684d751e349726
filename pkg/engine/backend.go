package engine

import (
	"io"

	"github.com/ellm-dev/ellm/kernels/threads"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/model"
)

// backend is the model as the scheduler sees it: a forward pass over
// segments of cache slots and the slots' KV export. The scheduler is tested
// against a fake that checks which positions it is asked to compute.
type backend interface {
	// forward computes segs: their K/V enter the cache, and each segment
	// with logits set gets the logits of its last token, readable by
	// logits(i) with i counting those segments in order.
	forward(segs []model.Segment) error
	logits(i int) []float32
	// exportSlot writes the first n positions of slot; importSlot reads them
	// back and returns n (kvcache.ErrMismatch or a checksum error when the
	// data is not this cache's).
	exportSlot(w io.Writer, slot, n int) error
	importSlot(r io.Reader, slot int) (int, error)
	// copyPositions copies positions [from, from+n) of slot src into slot
	// dst; savePositions and loadPositions move positions [from, from+n) of
	// slot to and from positions [at, at+n) of a host buffer laid out for
	// capacity positions of positionBytes each (kvcache.SavePositions).
	copyPositions(dst, src, from, n int) error
	positionBytes() int
	savePositions(buf []byte, capacity, at, slot, from, n int) error
	loadPositions(buf []byte, capacity, at, slot, from, n int) error
}

// screener is a backend that can screen the logits of the rows whose draws
// depend only on their largest few (model.Runner.Screened): after a forward
// pass that screened, interval(i) holds row i's logits between two ends,
// and refine computes the panels of gemm.PanelWidth tokens that the draws
// can choose from.
type screener interface {
	screened() bool
	interval(i int) (lo, hi []float32)
	refine(panels []int32)
}

// modelBackend runs the real model over the static cache.
type modelBackend struct {
	runner *model.Runner
	cache  *kvcache.Cache
	pool   *threads.Pool // the runner's; the scheduler goroutine is its worker 0
}

func (b *modelBackend) forward(segs []model.Segment) error { return b.runner.Forward(segs) }
func (b *modelBackend) logits(i int) []float32             { return b.runner.Logits(i) }
func (b *modelBackend) screened() bool                     { return b.runner.Screened() }
func (b *modelBackend) interval(i int) (lo, hi []float32)  { return b.runner.Interval(i) }
func (b *modelBackend) refine(panels []int32)              { b.runner.Refine(panels) }
func (b *modelBackend) exportSlot(w io.Writer, slot, n int) error {
	return b.cache.Export(w, slot, n)
}
func (b *modelBackend) importSlot(r io.Reader, slot int) (int, error) {
	return b.cache.Import(r, slot)
}
func (b *modelBackend) copyPositions(dst, src, from, n int) error {
	return b.cache.CopyPositions(dst, src, from, n)
}
func (b *modelBackend) positionBytes() int { return b.cache.PositionBytes() }
func (b *modelBackend) savePositions(buf []byte, capacity, at, slot, from, n int) error {
	return b.cache.SavePositions(buf, capacity, at, slot, from, n)
}
func (b *modelBackend) loadPositions(buf []byte, capacity, at, slot, from, n int) error {
	return b.cache.LoadPositions(buf, capacity, at, slot, from, n)
}
