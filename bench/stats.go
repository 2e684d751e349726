package bench

import (
	"math"
	"slices"
)

// Summary describes repeated measurements of one quantity. The median is the
// headline figure: on a shared machine a mean is dragged by the slowest run.
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
	Mean   float64 `json:"mean"`
	StdDev float64 `json:"stddev"`
}

// Summarize computes a Summary; it does not modify xs.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	mean := sum / float64(len(s))
	var ss float64
	for _, x := range s {
		ss += (x - mean) * (x - mean)
	}
	std := 0.0
	if len(s) > 1 {
		std = math.Sqrt(ss / float64(len(s)-1))
	}
	return Summary{
		N: len(s), Median: Percentile(s, 50), Min: s[0], Max: s[len(s)-1],
		P90: Percentile(s, 90), P99: Percentile(s, 99), Mean: mean, StdDev: std,
	}
}

// Percentile interpolates linearly between closest ranks of sorted data.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	if len(sorted) == 1 {
		return sorted[0]
	}
	r := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(r))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (r-float64(lo))*(sorted[hi]-sorted[lo])
}

// Spread is (max-min)/median: how much to trust a median on a noisy machine.
func (s Summary) Spread() float64 {
	if s.Median == 0 {
		return 0
	}
	return (s.Max - s.Min) / s.Median
}
