package gemm

import "github.com/ellm-dev/ellm/kernels"

// ContextBytes is the scratch (Context.ScratchBytes) NewContext allocates on
// a pool of workers workers for products of up to maxM rows and maxK inputs
// with bf16 weights on path p, computed before anything is allocated.
func ContextBytes(workers, maxM, maxK int, p kernels.Path) int64 {
	set := kernelsFor(p)
	m := int64(maxM)
	n := 4 * (m*int64(ceilDiv(maxK, 4)*4) + m) // xf (xp shares it), sx
	per := 4 * m * swigluChunk * panelWidth
	if set.widens(maxM) {
		per += 4 * int64(blockPanels*maxK*panelWidth)
	}
	if set.usesTile() {
		per += amxAccBytes
	}
	return n + int64(workers)*per
}
