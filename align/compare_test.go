package align

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func ptr(v float64) *float64 { return &v }

func TestLogitsRow(t *testing.T) {
	fp32 := modelTol{LogitsMaxAbs: ptr(2e-3), LogitsCosineMin: ptr(0.999999), ArgmaxMustMatch: true}.withRules("fp32_engine")
	argmaxOnly := modelTol{ArgmaxMustMatch: true}.withRules("fp32_engine")
	// A bf16 manifest says argmax_must_match false and gives an all-position
	// agreement fraction; FORMAT.md's margin rule still applies.
	bf16 := modelTol{ArgmaxAgreeFracMin: ptr(1)}.withRules("bf16_engine")
	want := []float32{1, 5, 2, 4.9995, 0}
	tests := []struct {
		name    string
		got     []float32
		margins []float32
		tol     modelTol
		status  Status
	}{
		{"equal", []float32{1, 5, 2, 4.9995, 0}, nil, fp32, Pass},
		{"within max-abs", []float32{1.001, 5, 2, 4.9995, 0}, nil, fp32, Pass},
		{"beyond max-abs", []float32{1.01, 5, 2, 4.9995, 0}, nil, fp32, Fail},
		// 5 vs 4.9995: the margin 5e-4 < 2e-3 lets the argmax flip...
		{"argmax flip on a tiny margin", []float32{1, 4.9996, 2, 4.9999, 0}, nil, argmaxOnly, Pass},
		// ...but not where the reference margin is large.
		{"argmax flip on a large margin", []float32{1, 4.9996, 2, 4.9999, 0}, []float32{1}, argmaxOnly, Fail},
		{"bf16: flip below a 0.1 margin is reported, not failed", []float32{1, 4.9996, 2, 4.9999, 0}, []float32{0.05}, bf16, Pass},
		{"bf16: flip at a 0.1 margin fails", []float32{1, 4.9996, 2, 4.9999, 0}, []float32{0.1}, bf16, Fail},
		{"mean-abs bound", []float32{2, 6, 3, 5.9995, 1}, nil, modelTol{LogitsMeanAbsMax: ptr(0.5)}, Fail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := logitsRow("logits", []int{5}, [][]float32{tt.got}, want, tt.margins, tt.tol)
			if r.Status != tt.status {
				t.Errorf("status %s, want %s (%s)", r.Status, tt.status, r.Note)
			}
			if r.Status == Pass && !slices.Equal(tt.got, want) && argmax(tt.got) != argmax(want) && !strings.Contains(r.Note, "flipped") {
				t.Errorf("an allowed argmax flip must be reported: %q", r.Note)
			}
		})
	}
}

func TestHiddenRowFirstDiverging(t *testing.T) {
	// 2 layers → 4 stages of 3 values.
	want := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	got := append([]float32(nil), want...)
	got[7] += 0.01 // stage 2 = layer 1
	got[10] += 0.01
	r := hiddenRow("hidden", []int{4, 3}, got, want, 2, modelTol{HiddenMaxAbs: ptr(1e-3)})
	if r.Status != Fail || r.FirstDiverging != "layer 1" || r.Outside != 2 {
		t.Errorf("got %s, first %q, outside %d; want FAIL at layer 1 with 2 outside", r.Status, r.FirstDiverging, r.Outside)
	}
	r = hiddenRow("hidden", []int{4, 3}, got, want, 2, modelTol{})
	if r.Status != Info {
		t.Errorf("without a tolerance: %s, want INFO", r.Status)
	}
}

func TestIdentityRow(t *testing.T) {
	a := [][]float32{{1, 2}, {3, 4}}
	if r := identityRow("x", nil, a, [][]float32{{1, 2}, {3, 4}}); r.Status != Pass {
		t.Errorf("equal rows: %s", r.Status)
	}
	if r := identityRow("x", nil, a, [][]float32{{1, 2}, {3, math.Nextafter32(4, 5)}}); r.Status != Fail || r.Outside != 1 {
		t.Errorf("one ulp off: %s, %d outside", r.Status, r.Outside)
	}
}

func TestCompareMaxOne(t *testing.T) {
	want := []float32{0.5, 1000}
	if r := compareMaxOne("out", nil, []float32{0.500009, 1000.009}, want, 1e-5); r.Status != Pass {
		t.Errorf("within 1e-5·max(1,|ref|): %s", r.Status)
	}
	if r := compareMaxOne("out", nil, []float32{0.50002, 1000}, want, 1e-5); r.Status != Fail {
		t.Errorf("2e-5 off a small value: %s", r.Status)
	}
	if r := compareMaxOne("out", nil, []float32{float32(math.NaN()), 1000}, want, 1e-5); r.Status != Fail {
		t.Errorf("NaN: %s", r.Status)
	}
}

func TestTopKGap(t *testing.T) {
	// softmax of (0, 0, ln 2): probabilities 1/4, 1/4, 1/2
	gap := topKGap([]float32{0, 0, float32(math.Ln2)}, 1)
	if math.Abs(gap-0.25) > 1e-6 {
		t.Errorf("top-1 gap %g, want 0.25", gap)
	}
	if gap := topKGap([]float32{0, 0, float32(math.Ln2)}, 2); math.Abs(gap) > 1e-6 {
		t.Errorf("top-2 gap %g, want 0 (a tie)", gap)
	}
}

func TestTopFive(t *testing.T) {
	ids, vals := make([]int32, 5), make([]float32, 5)
	topFive(ids, vals, []float32{3, 9, 1, 9, 7, 0, 8, 2})
	if want := []int32{1, 3, 6, 4, 0}; !slices.Equal(ids, want) {
		t.Errorf("ids %v, want %v", ids, want)
	}
}
