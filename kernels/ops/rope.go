package ops

import (
	"fmt"
	"math"
)

// YaRN is the "yarn" rope_scaling of a Hugging Face config.json, applied as
// transformers' _compute_yarn_parameters does. Zero fields take HF's defaults.
type YaRN struct {
	Factor                        float64 // context extension factor (> 1)
	OriginalMaxPositionEmbeddings int     // the pre-extension context length
	BetaFast                      float64 // default 32
	BetaSlow                      float64 // default 1
	AttentionFactor               float64 // cos/sin scale; default 0.1·ln(Factor)+1
	NoTruncate                    bool    // HF's truncate=false: do not round the correction range
}

// Rope applies neox-style rotary embeddings (rotate_half: element i pairs with
// i+D/2) from a table of cos and sin per position.
//
// The table reproduces Hugging Face's float32 computation — inv_freq =
// 1/theta^(2i/D) in f32, angle = f32(pos)·inv_freq rounded to f32, then cos and
// sin of that f32 angle — rather than exact angles: at position 40k the two
// differ by ~1e-2 in q for head_dim 128, and the reference model is HF's.
type Rope struct {
	HeadDim, MaxPos int
	tab             []float32 // per position: cos[D/2] then sin[D/2]
}

// NewRope builds the table for positions [0, maxPos).
func NewRope(headDim, maxPos int, theta float64, scaling *YaRN) (*Rope, error) {
	if headDim <= 0 || headDim%2 != 0 || maxPos <= 0 || theta <= 1 {
		return nil, fmt.Errorf("rope: head_dim %d (want even > 0), max positions %d, theta %g (want > 1)", headDim, maxPos, theta)
	}
	half := headDim / 2
	inv, attn, err := invFreq(headDim, theta, scaling)
	if err != nil {
		return nil, err
	}
	r := &Rope{HeadDim: headDim, MaxPos: maxPos, tab: make([]float32, maxPos*headDim)}
	for p := range maxPos {
		row := r.tab[p*headDim : (p+1)*headDim]
		for i := range half {
			a := float64(float32(p) * inv[i])
			c, s := float32(math.Cos(a)), float32(math.Sin(a))
			if attn != 1 {
				c, s = c*attn, s*attn
			}
			row[i], row[half+i] = c, s
		}
	}
	return r, nil
}

// RopeBytes is the size of NewRope's table for headDim and maxPos.
func RopeBytes(headDim, maxPos int) int64 { return 4 * int64(headDim) * int64(maxPos) }

// Bytes is the size of r's table.
func (r *Rope) Bytes() int64 { return 4 * int64(len(r.tab)) }

// invFreq returns the f32 inverse frequencies and the cos/sin scale.
func invFreq(dim int, theta float64, y *YaRN) ([]float32, float32, error) {
	half := dim / 2
	posFreq := make([]float32, half)
	for i := range half {
		e := float32(2*i) / float32(dim)
		posFreq[i] = float32(math.Pow(float64(float32(theta)), float64(e)))
	}
	inv := make([]float32, half)
	for i, pf := range posFreq {
		inv[i] = 1 / pf
	}
	if y == nil {
		return inv, 1, nil
	}
	if y.Factor <= 1 || y.OriginalMaxPositionEmbeddings <= 0 {
		return nil, 0, fmt.Errorf("rope: yarn factor %g (want > 1), original_max_position_embeddings %d (want > 0)", y.Factor, y.OriginalMaxPositionEmbeddings)
	}
	attn := y.AttentionFactor
	if attn == 0 {
		attn = float64(0.1*math.Log(y.Factor)) + 1 // unfused on every CPU
	}
	fast, slow := y.BetaFast, y.BetaSlow
	if fast == 0 {
		fast = 32
	}
	if slow == 0 {
		slow = 1
	}
	corrDim := func(rot float64) float64 {
		return float64(dim) * math.Log(float64(y.OriginalMaxPositionEmbeddings)/(rot*2*math.Pi)) / (2 * math.Log(theta))
	}
	low, high := corrDim(fast), corrDim(slow)
	if !y.NoTruncate {
		low, high = math.Floor(low), math.Ceil(high)
	}
	low, high = max(low, 0), min(high, float64(dim-1))
	if low == high {
		high += 0.001
	}
	factor := float32(y.Factor)
	for i, pf := range posFreq {
		ramp := min(max((float32(i)-float32(low))/float32(high-low), 0), 1)
		extra := 1 - ramp // weight of the unscaled (extrapolated) frequency
		interp := 1 / (factor * pf)
		inv[i] = float32(interp*(1-extra)) + float32(inv[i]*extra)
	}
	return inv, float32(attn), nil
}

// ApplyRope rotates x in place with r's table: x is [len(pos), heads,
// r.HeadDim] and row t is at absolute position pos[t].
func (k *Kernels) ApplyRope(r *Rope, x []float32, heads int, pos []int32) error {
	d := r.HeadDim
	if len(x) != len(pos)*heads*d {
		return fmt.Errorf("rope: x has %d elements, want %d positions × %d heads × %d", len(x), len(pos), heads, d)
	}
	for t, ps := range pos {
		if ps < 0 || int(ps) >= r.MaxPos {
			return fmt.Errorf("rope: position %d outside the table [0, %d)", ps, r.MaxPos)
		}
		cs := r.tab[int(ps)*d : (int(ps)+1)*d]
		k.rotate(x[t*heads*d:(t+1)*heads*d], cs)
	}
	return nil
}

// rotate rotates consecutive head vectors of x with one position's table
// row cs = cos‖sin: out[i] = x[i]·cos[i] − x[i+h]·sin[i] and
// out[i+h] = x[i+h]·cos[i] + x[i]·sin[i], each product rounded to f32 (as HF's
// q·cos + rotate_half(q)·sin).
func (k *Kernels) rotate(x, cs []float32) {
	h := len(cs) / 2
	if k.asm != nil && h%k.asm.rotateBy == 0 {
		k.asm.rotate(&x[0], &cs[0], h, len(x)/(2*h))
		return
	}
	c, s := cs[:h], cs[h:]
	for o := 0; o < len(x); o += 2 * h {
		a, b := x[o:o+h], x[o+h:o+2*h]
		for i := range h {
			x0, x1 := a[i], b[i]
			a[i] = float32(x0*c[i]) - float32(x1*s[i])
			b[i] = float32(x1*c[i]) + float32(x0*s[i])
		}
	}
}
