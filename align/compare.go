package align

import (
	"fmt"
	"math"
)

// Status is a row's verdict.
type Status string

const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	// Info rows are measured but have no tolerance (e.g. hidden states of a
	// bf16 engine): they never fail a case.
	Info Status = "INFO"
)

// Row is one compared tensor.
type Row struct {
	Tensor string  `json:"tensor"`
	Shape  []int   `json:"shape"`
	MaxAbs float64 `json:"max_abs"`
	// MaxRel is MaxAbs relative to the reference's largest magnitude.
	MaxRel float64 `json:"max_rel"`
	// Cosine is the smallest cosine similarity over the tensor's rows
	// (positions), or of the whole tensor when it has one row.
	Cosine float64 `json:"cosine"`
	// Outside counts elements (or, for logits, positions) outside tolerance.
	Outside int    `json:"outside"`
	Status  Status `json:"status"`
	// FirstDiverging names the first layer whose output is outside tolerance,
	// for per-layer tensors ("" when none does or the tensor is not per layer).
	FirstDiverging string `json:"first_diverging,omitempty"`
	// Exact rows compare discrete values (ids, renders): the numeric
	// columns do not apply.
	Exact bool `json:"exact,omitempty"`
	// Note explains a FAIL or what was measured.
	Note string `json:"note,omitempty"`
}

// stats are the common measures of got against want.
type stats struct {
	maxAbs, refMax, meanAbs float64
}

func measure(got, want []float32) stats {
	var s stats
	for i, w := range want {
		d := math.Abs(float64(got[i]) - float64(w))
		if d > s.maxAbs || math.IsNaN(d) {
			s.maxAbs = d
		}
		s.refMax = max(s.refMax, math.Abs(float64(w)))
		s.meanAbs += d
	}
	if len(want) > 0 {
		s.meanAbs /= float64(len(want))
	}
	return s
}

func (s stats) rel() float64 {
	if s.refMax == 0 {
		return s.maxAbs
	}
	return s.maxAbs / s.refMax
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		ab += x * y
		aa += x * x
		bb += y * y
	}
	if aa == 0 || bb == 0 {
		if aa == bb {
			return 1
		}
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

// compareElems checks |got−want| ≤ abs + rel·|want| element-wise.
func compareElems(name string, shape []int, got, want []float32, abs, rel float64) Row {
	s := measure(got, want)
	r := Row{Tensor: name, Shape: shape, MaxAbs: s.maxAbs, MaxRel: s.rel(), Cosine: cosine(got, want), Status: Pass}
	for i, w := range want {
		d := math.Abs(float64(got[i]) - float64(w))
		if !(d <= abs+rel*math.Abs(float64(w))) {
			r.Outside++
		}
	}
	if r.Outside > 0 {
		r.Status = Fail
		r.Note = fmt.Sprintf("tolerance %.3g + %.3g·|ref|", abs, rel)
	}
	return r
}

// exactInts compares integer tensors (token ids, expert ids) element-wise.
func exactInts(name string, shape []int, got, want []int32) Row {
	r := Row{Tensor: name, Shape: shape, Status: Pass, Cosine: 1}
	for i := range want {
		if got[i] != want[i] {
			r.Outside++
		}
	}
	if r.Outside > 0 {
		r.Status = Fail
	}
	return r
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// top2Margin is top1 − top2 of x.
func top2Margin(x []float32) float32 {
	a, b := float32(math.Inf(-1)), float32(math.Inf(-1))
	for _, v := range x {
		switch {
		case v > a:
			a, b = v, a
		case v > b:
			b = v
		}
	}
	return a - b
}

// stageName names hidden-state stage s of a model with layers decoder layers.
func stageName(s, layers int) string {
	switch {
	case s == 0:
		return "embedding"
	case s <= layers:
		return fmt.Sprintf("layer %d", s-1)
	}
	return "final norm"
}
