package gemm

import "unsafe"

// Memory is the packed weight's main buffer as bytes (the panels the
// kernels stream), for placing its pages (pkg/numa); the small per-channel
// scales are left out.
func (w *Weight) Memory() []byte {
	var p unsafe.Pointer
	var n int
	switch {
	case len(w.pairs) > 0:
		p, n = unsafe.Pointer(unsafe.SliceData(w.pairs)), 4*len(w.pairs)
	case len(w.f32) > 0:
		p, n = unsafe.Pointer(unsafe.SliceData(w.f32)), 4*len(w.f32)
	case len(w.quads) > 0:
		p, n = unsafe.Pointer(unsafe.SliceData(w.quads)), 4*len(w.quads)
	default:
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}
