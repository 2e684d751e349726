package ceiling

import "encoding/binary"

// readSumGo is readSum in Go: the reference for the asm reader, and the
// reader where there is no asm.
func readSumGo(b []byte) uint64 {
	var s uint64
	for i := 0; i+8 <= len(b); i += 8 {
		s += binary.LittleEndian.Uint64(b[i:])
	}
	return s
}
