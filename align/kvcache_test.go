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
	status := func(rows []Row) (Status, Status) { return rows[0].Status, rows[1].Status }

	if l, t1 := status(kvCompare("same", clone(base), base, true)); l != Pass || t1 != Pass {
		t.Errorf("identical runs: %s %s", l, t1)
	}
	noise := run() // unrelated logits with the same clear top-1
	if l, t1 := status(kvCompare("noise", noise, base, true)); l != Fail || t1 != Pass {
		t.Errorf("unrelated logits: %s %s, want FAIL PASS", l, t1)
	}
	flipped := clone(base)
	for i := range 8 {
		flipped.logits[i][3] += 20 // another clear top-1 at 8 positions
	}
	if _, t1 := status(kvCompare("flipped", flipped, base, true)); t1 != Fail {
		t.Errorf("8 of 64 top-1 flips: %s, want FAIL", t1)
	}
	// a position routed to other experts does not count, unless many are
	routed := func(k kvRun, experts ...int32) kvRun {
		k.experts = [][]int32{slices.Repeat([]int32{0, 1}, kvWindow)}
		for i, e := range experts {
			k.experts[0][2*i+1] = e
		}
		return k
	}
	bad := clone(base)
	bad.logits[0] = noise.logits[1]
	if l, _ := status(kvCompare("rerouted", routed(bad, 2), routed(base), true)); l != Pass {
		t.Errorf("a bad position routed elsewhere: %s, want PASS", l)
	}
	if l, _ := status(kvCompare("routed the same", routed(bad), routed(base), true)); l != Fail {
		t.Errorf("a bad position routed the same: %s, want FAIL", l)
	}
	many := make([]int32, kvReroutedMax+1)
	for i := range many {
		many[i] = 2
	}
	if l, _ := status(kvCompare("rerouted often", routed(clone(base), many...), routed(base), true)); l != Fail {
		t.Errorf("%d of %d positions routed elsewhere: %s, want FAIL", len(many), kvWindow, l)
	}
	if l, _ := status(kvCompare("not judged", bad, base, false)); l != Info {
		t.Errorf("not judged: %s, want INFO", l)
	}
}
