package attn

import "unsafe"

// ScratchBytes is what New allocates for workers workers and calls of up to
// maxRows query rows: the work-item list grows with the rows, the rest is
// per worker. Callers size a deployment with it before allocating anything.
func ScratchBytes(workers, maxRows, qHeads, kvHeads, headDim int) int64 {
	group := int64(qHeads / kvHeads)
	items := int64(maxRows/blockRows+maxRows) * int64(kvHeads) * int64(unsafe.Sizeof(item{}))
	floats := int64(2*Tile*headDim) + 2*blockRows*group + blockRows*group*int64(headDim) + groupQueries*Tile
	return items + int64(workers)*(4*floats+int64(unsafe.Sizeof(scratch{})))
}

// Bytes is the scratch a holds, as ScratchBytes predicts it.
func (a *Attention) Bytes() int64 {
	n := int64(cap(a.items))*int64(unsafe.Sizeof(item{})) + int64(len(a.ws))*int64(unsafe.Sizeof(scratch{}))
	for i := range a.ws {
		w := &a.ws[i]
		n += 4 * int64(len(w.kt)+len(w.vt)+len(w.ml)+len(w.acc)+len(w.s))
	}
	return n
}
