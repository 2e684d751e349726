package ops

import "math"

// TopK writes the k largest values of x in descending order into vals and
// their indices into idx (k = len(idx) = len(vals) ≤ len(x)). Equal values
// keep ascending index order, which is what torch.topk returns on CPU for the
// MoE router (whose probabilities are in practice distinct). x must not
// hold NaNs.
func TopK(idx []int32, vals []float32, x []float32) {
	k := len(idx)
	n := 0 // entries filled so far
	for i, v := range x {
		if n == k && !(v > vals[k-1]) {
			continue
		}
		j := min(n, k-1)
		// shift smaller entries down; equal ones stay ahead (lower index first)
		for j > 0 && v > vals[j-1] {
			vals[j], idx[j] = vals[j-1], idx[j-1]
			j--
		}
		vals[j], idx[j] = v, int32(i)
		if n < k {
			n++
		}
	}
}

// Argmax is the index of the largest element of x, the first one on ties
// (greedy decoding's rule); -1 for an empty x. NaNs are skipped.
func (k *Kernels) Argmax(x []float32) int {
	switch {
	case len(x) == 0:
		return -1
	case k.asm != nil:
		return k.argmaxSIMD(x)
	}
	return argmaxGo(x)
}

// Max is the largest element of x, NaNs skipped: −Inf if x is empty or
// holds only NaNs.
func (k *Kernels) Max(x []float32) float32 {
	n := k.lead16(len(x))
	m := float32(math.Inf(-1))
	if n > 0 {
		m = k.asm.max(&x[0], n)
	}
	for _, v := range x[n:] {
		if v > m {
			m = v
		}
	}
	return m
}

// argmaxSIMD finds the largest non-NaN value, then its first index: the
// same answer as argmaxGo (which returns 0 when every element is NaN).
func (k *Kernels) argmaxSIMD(x []float32) int {
	n := k.lead16(len(x))
	m := k.Max(x)
	if n > 0 {
		if i := k.asm.findEq(&x[0], n, m); i >= 0 {
			return i
		}
	}
	for i, v := range x[n:] {
		if v == m {
			return n + i
		}
	}
	return 0
}

func argmaxGo(x []float32) int {
	best, bi := x[0], 0
	for i, v := range x {
		if v > best || (best != best && v == v) {
			best, bi = v, i
		}
	}
	return bi
}
