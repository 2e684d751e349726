package gemm

import (
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// The fit check sizes GEMM scratch with ContextBytes before NewContext runs:
// the two must agree on every path and shape.
func TestContextBytesMatchesNewContext(t *testing.T) {
	for _, p := range kernels.Available() {
		for _, c := range []struct{ workers, m, k int }{{1, 1, 1}, {2, 1, 1024}, {2, 300, 3072}, {3, 4097, 777}} {
			pool := threads.New(c.workers, false)
			ctx := newContext(pool, c.m, c.k, p, p)
			if got, want := ctx.ScratchBytes(), ContextBytes(c.workers, c.m, c.k, p); got != want || got <= 0 {
				t.Errorf("%s %+v: NewContext allocated %d bytes, ContextBytes says %d", p, c, got, want)
			}
			pool.Close()
		}
	}
}
