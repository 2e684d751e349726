//go:build !purego

package ceiling

import (
	"math/rand/v2"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
)

// Every reader the CPU can run, not only the one readSum picks on it.
func TestReadSumAsmMatchesGo(t *testing.T) {
	f := kernels.CPU()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, r := range []struct {
		name string
		ok   bool
		sum  func(p *byte, n int) uint64
	}{{"512-bit", f.AVX512F, readSumAsm}, {"256-bit", f.AVX2, readSum256Asm}} {
		if !r.ok {
			t.Logf("%s loads: not on this CPU", r.name)
			continue
		}
		for _, n := range []int{256, 512, 768, 4096, 1<<16 + 256} {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			if got, want := r.sum(&b[0], n), readSumGo(b); got != want {
				t.Errorf("%s loads, %d bytes: %#x, Go %#x", r.name, n, got, want)
			}
		}
	}
}
