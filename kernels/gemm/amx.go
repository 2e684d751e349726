package gemm

import "unsafe"

// amxTile is one worker's state for the AMX tile kernels (kargs.amx): the
// tile configuration and the operands of one call, read by offset by
// amx_amd64.s (keep the field order), and the worker's buffer for the
// accumulator tiles. AMX computes a tile of up to 16 rows × 16 channels
// per instruction, from rows stored one after the other (formBF16Rows,
// formQuadRows). The coded kernels of the AVX-512 paths use it too: they
// read a call's coded operands from it and restore into its buffer
// (coded_amd64.h).
type amxTile struct {
	cfg   [64]byte       // LDTILECFG: palette 1; tiles 0–3 (C) and 4 (A) rows × 64 bytes, 5–7 (B) 16 × 64
	x     unsafe.Pointer // A: the tile's first row of activations
	lda   uintptr        // bytes between rows of A
	w     unsafe.Pointer // B: the first panel of weights
	ps    uintptr        // bytes between panels
	steps int            // 64-byte steps along K
	np    int            // panels: 1, 2 or 4
	acc   unsafe.Pointer // the C tiles stored: [np][rows][16] int32

	rows int // the shape cfg holds

	// amxCodedPairs: the first panel's coded blocks, the bytes between
	// panels', the raw flag of the first panel's first step, the flags
	// between steps (the weight's panels), from a raw flag to its block's
	// escape, and the high-byte table.
	coded  unsafe.Pointer
	cps    uintptr
	raw    unsafe.Pointer
	panels uintptr
	escOff uintptr
	lut    unsafe.Pointer
}

// amxFewRows is the most rows of a product that streams its weights from
// memory (a decode step's): the tile product prefetches its next step for
// it, and a coded weight (codedPairs) is read coded.
const amxFewRows = 8

// amxSteps is the K steps (bf16 pairs or u8 quads) one tile instruction
// consumes: 64 bytes of a row of A, 16 rows of a panel of B.
const amxSteps = 16

// amxAccBytes is the buffer of a worker's amxTile: the four C tiles a
// product stores, and amxCodedPairs's two buffers of amxRestoreBytes (a
// step's four blocks restored), one restored while the tiles load the
// other; aligned to its size, so that an XOR flips between the two. The C
// tiles go to the first after the last step.
const (
	amxRestoreBytes = maxPanels * amxSteps * panelWidth * 4
	amxAccBytes     = 2 * amxRestoreBytes
)

func newAMXTile() *amxTile {
	t := &amxTile{acc: unsafe.Pointer(&aligned[uint32](amxAccBytes/4, amxAccBytes)[0])}
	t.cfg[0] = 1 // palette 1
	for i := range 8 {
		t.cfg[16+2*i] = 64 // colsb, little-endian uint16
	}
	for i := 5; i < 8; i++ {
		t.cfg[48+i] = amxSteps
	}
	return t
}

// shape configures tiles of rows rows of activations.
func (t *amxTile) shape(rows int) {
	if t.rows == rows {
		return
	}
	for i := range 5 {
		t.cfg[48+i] = byte(rows)
	}
	t.rows = rows
}
