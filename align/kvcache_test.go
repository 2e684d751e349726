package align

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// The kv_cache case on the shared tiny models, at a short length: an int8
// cache stays within the thresholds of a bf16 one, and the f32 rows give
// the scale.
func TestKVCacheCase(t *testing.T) {
	results, err := Run(Options{Kind: "kv-cache", Ref: sharedtest.Path(t, "align"), Path: kernels.Active(), KVDType: "int8", Positions: []int{300}})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 {
		t.Fatalf("%d results, want one per tiny model", len(results))
	}
	for _, r := range results {
		if !r.Pass || r.KVDType != "int8" || len(r.Rows) != 6 {
			t.Errorf("%s: pass %v, kv %q, %d rows, error %q", r.Case, r.Pass, r.KVDType, len(r.Rows), r.Error)
		}
		if r.Rows[0].Cosine >= 1 || r.Rows[0].MaxAbs == 0 {
			t.Errorf("%s: int8 logits identical to bf16's: the case compared a cache with itself", r.Model)
		}
		if !strings.HasPrefix(r.Rows[3].Tensor, "f32:") || r.Rows[3].Status != Info {
			t.Errorf("%s: row 3 is %q %s, want the f32 scale row", r.Model, r.Rows[3].Tensor, r.Rows[3].Status)
		}
	}
	if _, err := Run(Options{Kind: "kv-cache", Ref: sharedtest.Path(t, "align"), Path: kernels.Active(), KVDType: "fp4"}); err == nil {
		t.Error("kv dtype fp4 accepted")
	}
}

func TestKVCompare(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	run := func() kvRun {
		var k kvRun
		for range kvWindow {
			l := make([]float32, 50)
			for i := range l {
				l[i] = float32(r.NormFloat64())
			}
			l[7] += 5 // a clear top-1
			k.logits = append(k.logits, l)
		}
		k.greedy = make([]int32, kvSteps)
		return k
	}
	clone := func(k kvRun) kvRun {
		c := kvRun{greedy: slices.Clone(k.greedy)}
		for _, l := range k.logits {
			c.logits = append(c.logits, slices.Clone(l))
		}
		return c
	}
	base := run()
	floor := clone(base)
	status := func(rows []Row) (Status, Status) { return rows[0].Status, rows[1].Status }

	if l, t1 := status(kvCompare("same", clone(base), base, &floor)); l != Pass || t1 != Pass {
		t.Errorf("identical runs: %s %s", l, t1)
	}
	noise := run() // unrelated logits with the same clear top-1
	if l, t1 := status(kvCompare("noise", noise, base, &floor)); l != Fail || t1 != Pass {
		t.Errorf("unrelated logits: %s %s, want FAIL PASS", l, t1)
	}
	flipped := clone(base)
	for i := range 8 {
		flipped.logits[i][3] += 20 // another clear top-1 at 8 positions
	}
	if _, t1 := status(kvCompare("flipped", flipped, base, &floor)); t1 != Fail {
		t.Errorf("8 of 64 top-1 flips: %s, want FAIL", t1)
	}
	// where f32 is as far off, a position does not count
	fragile := clone(base)
	fragile.logits[0] = noise.logits[0]
	bad := clone(base)
	bad.logits[0] = noise.logits[1]
	if l, _ := status(kvCompare("fragile", bad, base, &fragile)); l != Pass {
		t.Errorf("a position f32 also misses: %s, want PASS", l)
	}
	if l, _ := status(kvCompare("no floor", bad, base, nil)); l != Info {
		t.Errorf("without a floor: %s, want INFO", l)
	}
}
