package attn

import (
	"testing"

	"github.com/ellm-dev/ellm/kernels/threads"
)

// The fit check sizes attention scratch with ScratchBytes before New runs:
// the two must agree on every shape.
func TestScratchBytesMatchesNew(t *testing.T) {
	for _, c := range []struct{ workers, rows, qh, kvh, hd int }{
		{1, 1, 2, 1, 8}, {2, 64, 16, 8, 128}, {3, 1000, 32, 4, 128}, {2, 4097, 8, 8, 64},
	} {
		pool := threads.New(c.workers, false)
		a, err := New(pool, c.rows, c.qh, c.kvh, c.hd)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := a.ScratchBytes(), ScratchBytes(c.workers, c.rows, c.qh, c.kvh, c.hd); got != want || got <= 0 {
			t.Errorf("%+v: New allocated %d bytes, ScratchBytes says %d", c, got, want)
		}
		pool.Close()
	}
}
