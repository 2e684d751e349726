//go:build amd64 && !purego

package attn

import (
	"unsafe"

	"github.com/ellm-dev/ellm/kernels"
)

// The SIMD tile kernels compute the same steps as tileGo with FMA dot
// products: each score is a 16-lane FMA accumulation over head_dim folded in
// the fixed tree (i, i+8), (i, i+4), (i, i+2), (i, i+1); probabilities use
// the exponential of kernels/ops (Exp32) bit for bit; the V accumulation is
// one FMA per position in position order. The AVX2 kernel holds each 16-lane
// accumulator in two registers, so both paths give the same bits. They need
// head_dim % 16 == 0 and read K in the chunk-major tile layout that widenK
// writes; other head sizes take the Go kernel.

// simdKernels puts path p's assembly into s where the path has kernels for
// head size hd.
func simdKernels(s *kernelSet, p kernels.Path, hd int) {
	switch {
	case hd%16 != 0 || p < kernels.AVX2:
	case p >= kernels.AVX512:
		s.tile = func(ml, acc, q, k, v, sc []float32, n int, scale float32) {
			tileAVX512(&ml[0], &acc[0], &q[0], &k[0], &v[0], &sc[0], n, len(q), scale)
		}
		s.group, s.direct = tileGroups(tile4AVX512, tile2AVX512), inPlaceAVX512.direct
		s.widenK, s.widenV = widenKSIMD(widenKAVX512), widenVSIMD(widenAVX512)
		s.dequantK, s.dequantV = dequantKSIMD(dequantAVX512), dequantVSIMD(dequantAVX512)
		if p.RoundsToBF16() {
			s.dot = dotAVX512
			s.pairV = func(dst []float32, src []uint16, rows, hd int) {
				pairVAVX512((*uint32)(unsafe.Pointer(&dst[0])), &src[0], rows, hd)
			}
			s.prefetch = func(p []uint16) { prefetchL2(&p[0], 2*len(p)) }
			s.roundQ = func(qb []uint16, q, _ []float32, scale float32) {
				roundQueryAVX512(&qb[0], &q[0], len(q), scale)
			}
			s.dotRefs, s.dotAll = dotRefs, dotAllAVX512
		}
	default:
		s.tile = func(ml, acc, q, k, v, sc []float32, n int, scale float32) {
			tileAVX2(&ml[0], &acc[0], &q[0], &k[0], &v[0], &sc[0], n, len(q), scale)
		}
		s.group, s.direct = tileGroups(tile4AVX2, tile2AVX2), inPlaceAVX2.direct
		s.widenK, s.widenV = widenKSIMD(widenKAVX2), widenVSIMD(widenAVX2)
		s.dequantK, s.dequantV = dequantKSIMD(dequantAVX2), dequantVSIMD(dequantAVX2)
	}
}

//go:noescape
func tileAVX512(ml, acc, q, k, v, s *float32, n, hd int, scale float32)

//go:noescape
func tile4AVX512(qs *[groupQueries]qref, k, v *float32, n, hd int, scale float32)

//go:noescape
func tile2AVX512(qs *[groupQueries]qref, k, v *float32, n, hd int, scale float32)

//go:noescape
func tile4AVX2(qs *[groupQueries]qref, k, v *float32, n, hd int, scale float32)

//go:noescape
func tile2AVX2(qs *[groupQueries]qref, k, v *float32, n, hd int, scale float32)

// qref is a query as the group kernels read it (offsets fixed in the assembly).
type qref struct {
	ml, acc, q, s *float32
	corr          float32
	_             [4]byte
}

// groupAsm is a group kernel over a widened tile: the queries of qs over
// its n positions.
type groupAsm func(qs *[groupQueries]qref, k, v *float32, n, hd int, scale float32)

// tileGroups is kernelSet.group by the kernels of four queries and, where
// two is not nil, of two: it runs the pending queries of w from index i on
// four (then two) at a time and returns how many it took.
func tileGroups(four, two groupAsm) func(w *scratch, i int, k, v []float32, n, hd int, scale float32) int {
	return func(w *scratch, i int, k, v []float32, n, hd int, scale float32) int {
		done := 0
		for _, g := range [...]struct {
			size int
			run  groupAsm
		}{{4, four}, {2, two}} {
			for ; g.run != nil && w.np-i-done >= g.size; done += g.size {
				pendingRefs(w, i+done, g.size)
				g.run(&w.refs, &k[0], &v[0], n, hd, scale)
			}
		}
		return done
	}
}

//go:noescape
func tile2BF16AVX512(qs *[groupQueries]qref, k, v *uint16, n, hd int, scale float32)

//go:noescape
func tile4BF16AVX512(qs *[groupQueries]qref, k, v *uint16, n, hd int, scale float32)

//go:noescape
func tile2I8AVX512(qs *[groupQueries]qref, k, v *int8, ks, vs *float32, n, hd int, scale float32)

//go:noescape
func tile4I8AVX512(qs *[groupQueries]qref, k, v *int8, ks, vs *float32, n, hd int, scale float32)

// bf16Asm and i8Asm are in-place kernels over a bf16 or an int8 cache.
type (
	bf16Asm func(qs *[groupQueries]qref, k, v *uint16, n, hd int, scale float32)
	i8Asm   func(qs *[groupQueries]qref, k, v *int8, ks, vs *float32, n, hd int, scale float32)
)

// inPlace is a path's decode kernels that read the cache in place, [0] of
// two queries and [1] of four; nil where the path has none.
type inPlace struct {
	bf16 [2]bf16Asm
	i8   [2]i8Asm
	// keyBlock is the keys the kernels read at a time: a tile of n reads
	// n rounded up to it of K rows (and int8 K scales).
	keyBlock int
}

// direct runs the two or four pending queries over the n positions of the
// tile of c at element offset o, read in place from a bf16 or int8 cache,
// when the kernels have the cache's type and every row they read is inside
// its slices.
func (k *inPlace) direct(w *scratch, c *Cache, o, n int, scale float32) bool {
	if w.np != 2 && w.np != 4 {
		return false
	}
	hd, r, four := c.HeadDim, (n+k.keyBlock-1)/k.keyBlock*k.keyBlock, w.np/4
	switch {
	case c.K16 != nil && k.bf16[four] != nil && len(c.K16) >= o+r*hd && len(c.V16) >= o+n*hd:
		pendingRefs(w, 0, w.np)
		k.bf16[four](&w.refs, &c.K16[o], &c.V16[o], n, hd, scale)
	case c.K8 != nil && k.i8[four] != nil && len(c.K8) >= o+r*hd && len(c.V8) >= o+n*hd && len(c.KS) >= o/hd+r && len(c.VS) >= o/hd+n:
		pendingRefs(w, 0, w.np)
		k.i8[four](&w.refs, &c.K8[o], &c.V8[o], &c.KS[o/hd], &c.VS[o/hd], n, hd, scale)
	default:
		return false
	}
	w.np = 0
	return true
}

// The in-place kernels of each path: AVX2 has none for an int8 cache (it is
// dequantized a tile at a time), and reads rows up to n exactly.
var (
	inPlaceAVX512 = &inPlace{
		bf16:     [2]bf16Asm{tile2BF16AVX512, tile4BF16AVX512},
		i8:       [2]i8Asm{tile2I8AVX512, tile4I8AVX512},
		keyBlock: 8,
	}
	inPlaceAVX2 = &inPlace{
		bf16:     [2]bf16Asm{tile2BF16AVX2, tile4BF16AVX2},
		keyBlock: 1,
	}
)

// pendingRefs puts w's pending queries [i, i+n) into w.refs[:n] as the
// group kernels read them.
func pendingRefs(w *scratch, i, n int) {
	for j := range n {
		q := &w.pend[i+j]
		w.refs[j] = qref{ml: &q.ml[0], acc: &q.acc[0], q: &q.q[0], s: &w.s[j*Tile]}
	}
}

//go:noescape
func tile2BF16AVX2(qs *[groupQueries]qref, k, v *uint16, n, hd int, scale float32)

//go:noescape
func tile4BF16AVX2(qs *[groupQueries]qref, k, v *uint16, n, hd int, scale float32)

//go:noescape
func tile2DotAVX512(qs *[groupQueries]qref, k, v *uint16, n, hd int)

//go:noescape
func tile4DotAVX512(qs *[groupQueries]qref, k, v *uint16, n, hd int)

// prefetchL2 requests the n bytes from p into L2 and returns at once.
//
//go:noescape
func prefetchL2(p *uint16, n int)

// warmAVX512 reads the first n &^ 255 bytes from p and discards them.
//
//go:noescape
func warmAVX512(p *uint16, n int)

//go:noescape
func tile2DotPairsAVX512(qs *[groupQueries]qref, k *uint16, v *uint32, n, hd int)

//go:noescape
func tile4DotPairsAVX512(qs *[groupQueries]qref, k *uint16, v *uint32, n, hd int)

// roundQueryAVX512 is roundQuery for hd % 16 == 0 (the qb rows of 2·hd
// values; no scratch).
//
//go:noescape
func roundQueryAVX512(qb *uint16, q *float32, hd int, scale float32)

// pairVAVX512 writes n bf16 rows of hd values as (n+1)/2 rows of hd dwords
// (positions 2j low, 2j+1 high, zero past n): the V tile of the pairs kernels.
//
//go:noescape
func pairVAVX512(dst *uint32, src *uint16, n, hd int)

// dotAVX512 is dotGo by the VDPBF16PS kernels: the pending queries four or
// two at a time, a lone one paired with a stand-in (w.alone, whose result
// is dropped: each query's lanes are its own), V from w.vt's pairs where
// w.vpairs says so, else read in place. The kernels read keys up to n
// rounded up to 8; a tile whose rows end the cache's slice earlier takes
// dotGo.
func dotAVX512(w *scratch, c *Cache, o, n int) {
	if !dotFits(c, o, n) {
		dotGo(w, c, o, n)
		return
	}
	if !w.vpairs { // in place, as decode reads the cache: tile_amd64.s says why
		bytes := n * c.HeadDim * 2
		warmAVX512(&c.K16[o], bytes)
		warmAVX512(&c.V16[o], bytes)
	}
	i := 0
	for ; w.np-i >= 4; i += 4 {
		for j := range 4 {
			w.refs[j] = dotRef(w, &w.pend[i+j], j)
		}
		dot4(w, &w.refs, c, o, n)
	}
	hd := c.HeadDim
	for ; i < w.np; i += 2 {
		w.refs[0] = dotRef(w, &w.pend[i], 0)
		if i+1 < w.np {
			w.refs[1] = dotRef(w, &w.pend[i+1], 1)
		} else {
			copy(w.alone.ml, w.pend[i].ml)
			w.alone.qb = w.pend[i].qb
			w.refs[1] = dotRef(w, &w.alone, 1)
		}
		if w.vpairs {
			tile2DotPairsAVX512(&w.refs, &c.K16[o], (*uint32)(unsafe.Pointer(&w.vt[0])), n, hd)
		} else {
			tile2DotAVX512(&w.refs, &c.K16[o], &c.V16[o], n, hd)
		}
	}
	w.np = 0
}

// dotFits reports whether the dot kernels may read the tile of n keys at
// element offset o of c in place: they read keys up to n rounded up to 8.
func dotFits(c *Cache, o, n int) bool { return len(c.K16) >= o+((n+7)&^7)*c.HeadDim }

// dotRef is query q as the dot kernels read it, with score row j of w.s.
func dotRef(w *scratch, q *query, j int) qref {
	return qref{ml: &q.ml[0], acc: &q.acc[0], q: (*float32)(unsafe.Pointer(&q.qb[0])), s: &w.s[j*Tile]}
}

// dot4 runs the four queries refs over the tile at o through the 4-query
// kernel for where w has V: its pairs in w.vt, or the cache.
func dot4(w *scratch, refs *[groupQueries]qref, c *Cache, o, n int) {
	if w.vpairs {
		tile4DotPairsAVX512(refs, &c.K16[o], (*uint32)(unsafe.Pointer(&w.vt[0])), n, c.HeadDim)
	} else {
		tile4DotAVX512(refs, &c.K16[o], &c.V16[o], n, c.HeadDim)
	}
}

// dotRefs writes the block's first nq queries into w.allRefs as the dot
// kernels read them; four consecutive refs have four different score rows.
func dotRefs(w *scratch, nq int) {
	for i := range nq {
		w.allRefs[i] = dotRef(w, &w.all[i], i%groupQueries)
	}
}

// dotAllAVX512 runs the block's queries [i0, i0+count) four at a time
// through the kernels dotAVX512 would take, straight from w.allRefs, and
// returns how many it ran (none where dotAVX512 would run dotGo).
func dotAllAVX512(w *scratch, c *Cache, o, n, i0, count int) int {
	if !dotFits(c, o, n) {
		return 0
	}
	done := count &^ (groupQueries - 1)
	for i := i0; i < i0+done; i += groupQueries {
		dot4(w, (*[groupQueries]qref)(w.allRefs[i:i+groupQueries]), c, o, n)
	}
	return done
}

//go:noescape
func widenKAVX512(dst *float32, src *uint16, rows, hd int)

//go:noescape
func widenAVX512(dst *float32, src *uint16, n int)

//go:noescape
func expAVX512(dst, src *float32, n int)

//go:noescape
func tileAVX2(ml, acc, q, k, v, s *float32, n, hd int, scale float32)

//go:noescape
func widenKAVX2(dst *float32, src *uint16, rows, hd int)

//go:noescape
func widenAVX2(dst *float32, src *uint16, n int)

// widenKSIMD is widenK for the SIMD kernels, whose K tile is chunk-major,
// [hd/16][Tile][16], so that the 16 keys of a score block sit at fixed
// offsets; dst then always spans a whole tile.
func widenKSIMD(widen func(dst *float32, src *uint16, rows, hd int)) widenFunc {
	return func(dst []float32, src16 []uint16, src32 []float32, rows, hd int) []float32 {
		if src16 != nil {
			widen(&dst[0], &src16[0], rows, hd)
			return dst
		}
		for t := range rows {
			for c := 0; c < hd; c += 16 {
				copy(dst[(c/16*Tile+t)*16:][:16], src32[t*hd+c:])
			}
		}
		return dst
	}
}

// widenVSIMD is widenV with a SIMD bf16 widening.
func widenVSIMD(widen func(dst *float32, src *uint16, n int)) widenFunc {
	return func(dst []float32, src16 []uint16, src32 []float32, rows, hd int) []float32 {
		if src32 != nil {
			return src32[:rows*hd]
		}
		widen(&dst[0], &src16[0], rows*hd)
		return dst[:rows*hd]
	}
}

// The int8 dequantizers widen each 16 values with VPMOVSXBD, convert exactly
// (VCVTDQ2PS) and multiply by the row's scale: one rounding, the bits of
// dequantGo. Rows advance dst by rowStride bytes, 16-value chunks within a
// row by chunkStride: (64, Tile·64) writes widenK's chunk-major K tile,
// (hd·4, 64) plain rows. Like the bf16 widening loops they prefetch the next
// tile into L2.

//go:noescape
func dequantAVX512(dst *float32, src *int8, scale *float32, rows, hd, rowStride, chunkStride int)

//go:noescape
func dequantAVX2(dst *float32, src *int8, scale *float32, rows, hd, rowStride, chunkStride int)

type dequantAsm func(dst *float32, src *int8, scale *float32, rows, hd, rowStride, chunkStride int)

// dequantKSIMD fills the K tile dst from rows of int8 keys and their scales,
// in widenKSIMD's layout.
func dequantKSIMD(dequant dequantAsm) dequantFunc {
	return func(dst []float32, src []int8, scale []float32, rows, hd int) []float32 {
		dequant(&dst[0], &src[0], &scale[0], rows, hd, 64, Tile*64)
		return dst
	}
}

// dequantVSIMD returns the V tile of int8 rows as f32 rows.
func dequantVSIMD(dequant dequantAsm) dequantFunc {
	return func(dst []float32, src []int8, scale []float32, rows, hd int) []float32 {
		dequant(&dst[0], &src[0], &scale[0], rows, hd, 4*hd, 64)
		return dst[:rows*hd]
	}
}
