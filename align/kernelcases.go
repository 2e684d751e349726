package align

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/ellm-dev/ellm/kernels/ops"
)

// rope applies an ops.Rope to the reference q and k.
func (c *caseRun) rope() error {
	var in struct {
		RopeTheta float64 `json:"rope_theta"`
		HeadDim   int     `json:"head_dim"`
		NQ        int     `json:"n_q_heads"`
		NKV       int     `json:"n_kv_heads"`
	}
	if err := unmarshalJSON(c.m.Inputs, &in); err != nil {
		return err
	}
	var tol struct {
		Small float64 `json:"vs_q_out_max_abs_small_pos(<=4096)"`
		Any   float64 `json:"vs_q_out_max_abs_any_pos"`
		Exact float64 `json:"vs_q_out_exact_max_abs_any_pos"`
	}
	if err := unmarshalTolerances(c.m.Tolerances, &tol); err != nil {
		return err
	}
	pos, _, err := c.ref.i32("positions")
	if err != nil {
		return err
	}
	maxPos := int(slices.Max(pos)) + 1
	r, err := ops.NewRope(in.HeadDim, maxPos, in.RopeTheta, nil)
	if err != nil {
		return err
	}
	for _, t := range []struct {
		in    string
		heads int
	}{{"q", in.NQ}, {"k", in.NKV}} {
		x, shape, err := c.ref.f32(t.in)
		if err != nil {
			return err
		}
		got := slices.Clone(x)
		if err := c.s.ops.ApplyRope(r, got, t.heads, pos); err != nil {
			return err
		}
		c.dump.f32(t.in+"_out", shape, got)
		want, _, err := c.ref.f32(t.in + "_out")
		if err != nil {
			return err
		}
		// The bound depends on the position: angles lose precision with it.
		row := compareElems(t.in+"_out", shape, got, want, 0, 0)
		row.Outside, row.Status, row.Note = 0, Pass, fmt.Sprintf("max-abs %.3g up to position 4096, %.3g beyond", tol.Small, tol.Any)
		width := t.heads * in.HeadDim
		for i, p := range pos {
			lim := tol.Any
			if p <= 4096 {
				lim = tol.Small
			}
			for j := i * width; j < (i+1)*width; j++ {
				if d := diff(got[j], want[j]); !(d <= lim) {
					row.Outside++
				}
			}
		}
		if row.Outside > 0 {
			row.Status = Fail
		}
		c.add(row)
		if !c.ref.has(t.in + "_out_exact") { // optional (ellm's own dumps have none)
			continue
		}
		exact, _, err := c.ref.f32(t.in + "_out_exact")
		if err != nil {
			return err
		}
		c.add(compareElems(t.in+"_out_exact", shape, got, exact, tol.Exact, 0))
	}
	return nil
}

// siluAndMul runs ops.Kernels.SiLUMul, the SwiGLU epilogue of the model's
// products (gemm), on the reference gate‖up rows.
func (c *caseRun) siluAndMul() error {
	var tol struct {
		MaxRel float64 `json:"out_max_rel"`
	}
	if err := unmarshalTolerances(c.m.Tolerances, &tol); err != nil {
		return err
	}
	x, shape, err := c.ref.f32("x")
	if err != nil {
		return err
	}
	inter := shape[1] / 2
	if inter == 0 || len(x) != shape[0]*2*inter {
		return fmt.Errorf("silu_and_mul: x of shape %v, want [T, 2·I]", shape)
	}
	got := make([]float32, len(x)/2)
	for t := range shape[0] {
		gu := x[2*t*inter : 2*(t+1)*inter]
		c.s.ops.SiLUMul(got[t*inter:(t+1)*inter], gu[:inter], gu[inter:])
	}
	oshape := []int{shape[0], inter}
	c.dump.f32("out", oshape, got)
	for _, name := range []string{"out", "out_exact"} {
		if name == "out_exact" && !c.ref.has(name) {
			continue
		}
		want, _, err := c.ref.f32(name)
		if err != nil {
			return err
		}
		// |a−b| ≤ tol·max(1, |ref|)
		c.add(compareMaxOne(name, oshape, got, want, tol.MaxRel))
	}
	return nil
}

// rmsnorm runs ops.RMSNorm, ops.AddRMSNorm and ops.HeadRMSNorm.
func (c *caseRun) rmsnorm() error {
	var in struct {
		Eps float32 `json:"eps"`
	}
	if err := unmarshalJSON(c.m.Inputs, &in); err != nil {
		return err
	}
	var tol struct {
		MaxAbs float64 `json:"out_max_abs"`
	}
	if err := unmarshalTolerances(c.m.Tolerances, &tol); err != nil {
		return err
	}
	get := func(names ...string) ([][]float32, []int, error) {
		var out [][]float32
		var shape []int
		for _, n := range names {
			v, s, err := c.ref.f32(n)
			if err != nil {
				return nil, nil, err
			}
			out, shape = append(out, v), s
		}
		return out, shape, nil
	}
	// plain: out = weight · x / sqrt(mean(x²) + eps)
	v, shape, err := get("weight", "x", "out")
	if err != nil {
		return err
	}
	out := make([]float32, len(v[1]))
	if err := c.s.ops.RMSNorm(out, v[1], v[0], in.Eps); err != nil {
		return err
	}
	c.dump.f32("out", shape, out)
	c.add(compareMaxOne("out", shape, out, v[2], tol.MaxAbs))
	if c.ref.has("out_exact") {
		exact, _, err := c.ref.f32("out_exact")
		if err != nil {
			return err
		}
		c.add(compareMaxOne("out_exact", shape, out, exact, tol.MaxAbs))
	}
	// fused: residual += x; out = rmsnorm(residual)
	f, shape, err := get("fused_x", "fused_residual_in", "fused_residual_out", "fused_out")
	if err != nil {
		return err
	}
	res := slices.Clone(f[1])
	fout := make([]float32, len(f[0]))
	if err := c.s.ops.AddRMSNorm(fout, res, f[0], v[0], in.Eps); err != nil {
		return err
	}
	c.dump.f32("fused_residual_out", shape, res)
	c.dump.f32("fused_out", shape, fout)
	c.add(compareMaxOne("fused_residual_out", shape, res, f[2], tol.MaxAbs))
	c.add(compareMaxOne("fused_out", shape, fout, f[3], tol.MaxAbs))
	// per head (Qwen3 q_norm)
	h, shape, err := get("head_weight", "head_x", "head_out")
	if err != nil {
		return err
	}
	hout := slices.Clone(h[1])
	if err := c.s.ops.HeadRMSNorm(hout, h[0], in.Eps); err != nil {
		return err
	}
	c.dump.f32("head_out", shape, hout)
	c.add(compareMaxOne("head_out", shape, hout, h[2], tol.MaxAbs))
	return nil
}

// compareMaxOne checks |got−want| ≤ tol·max(1, |want|): absolute for small
// values, relative for large ones (the kernel cases' rule).
func compareMaxOne(name string, shape []int, got, want []float32, tol float64) Row {
	r := compareElems(name, shape, got, want, tol, 0)
	r.Outside, r.Status, r.Note = 0, Pass, ""
	for i, w := range want {
		if d := diff(got[i], w); !(d <= tol*max(1, abs64(w))) {
			r.Outside++
		}
	}
	if r.Outside > 0 {
		r.Status = Fail
		r.Note = fmt.Sprintf("tolerance %.3g·max(1, |ref|)", tol)
	}
	return r
}

func diff(a, b float32) float64 { return abs64f(float64(a) - float64(b)) }

func abs64f(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

func abs64(v float32) float64 {
	if v < 0 {
		return -float64(v)
	}
	return float64(v)
}

func unmarshalTolerances(t map[string]json.RawMessage, v any) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("tolerances: %w", err)
	}
	return nil
}

func unmarshalJSON(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	return nil
}
