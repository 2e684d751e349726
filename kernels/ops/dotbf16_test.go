package ops

import (
	"math"
	"testing"
)

func TestDPBF16(t *testing.T) {
	one, two, three := uint32(0x3f80), uint32(0x4000), uint32(0x4040)
	for _, tc := range []struct {
		acc  float32
		a, b uint32
		want float32
	}{
		{0, one | two<<16, three | one<<16, 5}, // 2·1 + 1·3
		{1, 0x0001, one, 1},                    // denormal bf16 is zero
		{0x1p-125, 0x80c0, one, 0},             // 2^-125 - 1.5·2^-126 is denormal: flushed
		{0x1p24, one, one, 0x1p24},             // 2^24 + 1 rounds to even
		{0x1p24 + 2, one, one, 0x1p24 + 4},     // ... and here up
	} {
		if got := DotBF16(tc.acc, tc.a, tc.b); math.Float32bits(got) != math.Float32bits(tc.want) {
			t.Errorf("DotBF16(%g, %#x, %#x) = %g, want %g", tc.acc, tc.a, tc.b, got, tc.want)
		}
	}
}
