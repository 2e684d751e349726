package bench

import (
	"math"
	"testing"
)

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{5, 1, 3, 2, 4})
	if s.N != 5 || s.Median != 3 || s.Min != 1 || s.Max != 5 || s.Mean != 3 {
		t.Fatalf("got %+v", s)
	}
	if want := math.Sqrt(2.5); math.Abs(s.StdDev-want) > 1e-12 {
		t.Errorf("stddev %v, want %v", s.StdDev, want)
	}
	if got := s.P90; math.Abs(got-4.6) > 1e-12 {
		t.Errorf("p90 %v, want 4.6", got)
	}
	if got := s.Spread(); math.Abs(got-4.0/3) > 1e-12 {
		t.Errorf("spread %v", got)
	}
	if z := Summarize(nil); z.N != 0 {
		t.Errorf("empty: %+v", z)
	}
}

func TestPercentileEndpoints(t *testing.T) {
	xs := []float64{10, 20, 30}
	for _, tc := range []struct{ p, want float64 }{{0, 10}, {50, 20}, {100, 30}, {75, 25}} {
		if got := Percentile(xs, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
}
