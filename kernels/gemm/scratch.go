package gemm

import (
	"unsafe"

	"github.com/ellm-dev/ellm/kernels"
)

// ContextBytes is what NewContext allocates on a pool of workers workers for
// products of up to maxM rows and maxK inputs on kernel path p. Callers size
// a deployment with it before allocating anything.
func ContextBytes(workers, maxM, maxK int, p kernels.Path) int64 {
	set := kernelsFor(p)
	kpad := int64(ceilDiv(maxK, 4) * 4)
	m := int64(maxM)
	n := 4*(m*kpad+m*kpad/2+m) + 2*4*16 // xf, xp, sx; 16 elements of alignment slack each for xf, xp
	per := int64(unsafe.Sizeof(workerState{})) + 4*(m*swigluChunk*panelWidth+16)
	if set.widen != nil && maxM > set.rows {
		per += 4 * (int64(blockPanels*maxK*panelWidth) + 16)
	}
	return n + int64(workers)*per
}

// Bytes is the scratch c holds, as ContextBytes predicts it.
func (c *Context) Bytes() int64 {
	n := 4*int64(cap(c.xf)+cap(c.xp)+len(c.sx)) + 2*4*16
	for i := range c.worker {
		w := &c.worker[i]
		n += int64(unsafe.Sizeof(*w)) + 4*int64(cap(w.up)+16)
		if w.wide != nil {
			n += 4 * int64(cap(w.wide)+16)
		}
	}
	return n
}
