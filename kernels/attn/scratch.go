package attn

import "unsafe"

// ScratchBytes is the scratch (Attention.ScratchBytes) New allocates for
// workers workers and calls of up to maxRows query rows, computed before
// anything is allocated: the work-item list grows with the rows, the rest
// is per worker.
func ScratchBytes(workers, maxRows, qHeads, kvHeads, headDim int) int64 {
	group := int64(qHeads / kvHeads)
	items := int64(maxRows/blockRows+maxRows) * int64(kvHeads) * int64(unsafe.Sizeof(item{}))
	// K/V tiles, softmax state, accumulators, scores, the bf16 queries
	// (two per float), their rounding scratch and the lone query's state
	floats := int64(2*Tile*headDim) + 2*blockRows*group + blockRows*group*int64(headDim) + groupQueries*Tile +
		blockRows*group*int64(headDim) + 2*int64(headDim) + 2 + int64(headDim)
	queries := blockRows * group * int64(unsafe.Sizeof(query{})+unsafe.Sizeof(qref{}))
	return items + int64(workers)*(4*floats+queries)
}
