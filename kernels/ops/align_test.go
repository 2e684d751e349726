package ops

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/ellm-dev/ellm/pkg/safetensors"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// alignCase is one kernel case of the shared alignment references.
type alignCase struct {
	dir    string
	inputs map[string]any
	ckpt   *safetensors.Checkpoint
}

func loadCase(t *testing.T, name string) *alignCase {
	t.Helper()
	dir := sharedtest.Path(t, "align", "tiny-qwen3-a", name)
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Inputs map[string]any `json:"inputs"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s manifest: %v", name, err)
	}
	ck, err := safetensors.Open(filepath.Join(dir, "tensors.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return &alignCase{dir, m.Inputs, ck}
}

func (c *alignCase) f32(t *testing.T, name string) []float32 {
	t.Helper()
	x, ok := c.ckpt.Tensor(name)
	if !ok {
		t.Fatalf("%s: no tensor %s", c.dir, name)
	}
	v, err := x.F32()
	if err != nil {
		t.Fatalf("%s: %s: %v", c.dir, name, err)
	}
	return v
}

func (c *alignCase) num(t *testing.T, name string) float64 {
	t.Helper()
	v, ok := c.inputs[name].(float64)
	if !ok {
		t.Fatalf("%s: input %s missing", c.dir, name)
	}
	return v
}

// maxRelErr is max |got−want| / max(1, |want|), the manifests' relative measure.
func maxRelErr(got, want []float32) float64 {
	var worst float64
	for i := range want {
		d := math.Abs(float64(got[i])-float64(want[i])) / max(1, math.Abs(float64(want[i])))
		if d != d {
			return math.Inf(1)
		}
		worst = max(worst, d)
	}
	return worst
}

func TestAlignRope(t *testing.T) {
	for _, name := range []string{"rope", "rope_hd128"} {
		t.Run(name, func(t *testing.T) {
			c := loadCase(t, name)
			hd := int(c.num(t, "head_dim"))
			hq, hkv := int(c.num(t, "n_q_heads")), int(c.num(t, "n_kv_heads"))
			var pos []int32
			for _, p := range c.inputs["positions"].([]any) {
				pos = append(pos, int32(p.(float64)))
			}
			rope, err := NewRope(hd, 40960, c.num(t, "rope_theta"), nil)
			if err != nil {
				t.Fatal(err)
			}
			inv, _, _ := invFreq(hd, c.num(t, "rope_theta"), nil)
			// torch's f32 pow is not correctly rounded: allow 1 ulp
			for i, want := range c.f32(t, "inv_freq") {
				if d := int64(math.Float32bits(inv[i])) - int64(math.Float32bits(want)); d < -1 || d > 1 {
					t.Errorf("inv_freq[%d] = %v, HF %v", i, inv[i], want)
				}
			}
			eachPath(t, func(t *testing.T, k *Kernels) {
				for _, x := range []struct {
					in, want string
					heads    int
				}{{"q", "q_out", hq}, {"k", "k_out", hkv}} {
					got := append([]float32(nil), c.f32(t, x.in)...)
					if err := k.ApplyRope(rope, got, x.heads, pos); err != nil {
						t.Fatal(err)
					}
					want := c.f32(t, x.want)
					row := x.heads * hd
					for i, p := range pos {
						tol := 1e-5
						if p > 4096 {
							tol = 2e-5
						}
						var worst float64
						for j := i * row; j < (i+1)*row; j++ {
							worst = max(worst, math.Abs(float64(got[j]-want[j])))
						}
						if worst > tol {
							t.Errorf("%s at position %d: max-abs %.3g > %.0e", x.want, p, worst, tol)
						}
					}
				}
			})
		})
	}
}

func TestAlignRMSNorm(t *testing.T) {
	c := loadCase(t, "rmsnorm")
	eps := float32(c.num(t, "eps"))
	w, hw := c.f32(t, "weight"), c.f32(t, "head_weight")
	eachPath(t, func(t *testing.T, k *Kernels) {
		out := make([]float32, len(c.f32(t, "x")))
		if err := k.RMSNorm(out, c.f32(t, "x"), w, eps); err != nil {
			t.Fatal(err)
		}
		check(t, "out", out, c.f32(t, "out"), 1e-5)

		res := append([]float32(nil), c.f32(t, "fused_residual_in")...)
		if err := k.AddRMSNorm(out, res, c.f32(t, "fused_x"), w, eps); err != nil {
			t.Fatal(err)
		}
		check(t, "fused_residual_out", res, c.f32(t, "fused_residual_out"), 1e-5)
		check(t, "fused_out", out, c.f32(t, "fused_out"), 1e-5)

		head := append([]float32(nil), c.f32(t, "head_x")...)
		if err := k.HeadRMSNorm(head, hw, eps); err != nil {
			t.Fatal(err)
		}
		check(t, "head_out", head, c.f32(t, "head_out"), 1e-5)
	})
}

func TestAlignSiLUMul(t *testing.T) {
	c := loadCase(t, "silu_and_mul")
	x, want := c.f32(t, "x"), c.f32(t, "out")
	eachPath(t, func(t *testing.T, k *Kernels) {
		inter := int(c.num(t, "I"))
		out := make([]float32, len(want))
		for r := range len(want) / inter {
			gu := x[2*r*inter : 2*(r+1)*inter]
			k.SiLUMul(out[r*inter:(r+1)*inter], gu[:inter], gu[inter:])
		}
		check(t, "out", out, want, 1e-5)
	})
}

func check(t *testing.T, name string, got, want []float32, tol float64) {
	t.Helper()
	if e := maxRelErr(got, want); e > tol {
		t.Errorf("%s: max relative error %.3g > %.0e", name, e, tol)
	} else {
		t.Log(fmt.Sprintf("%s: max relative error %.3g", name, e))
	}
}
