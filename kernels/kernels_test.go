package kernels

import (
	"slices"
	"testing"
)

func TestBestFollowsFeatures(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Features
		want Path
	}{
		{"none", Features{}, Generic},
		{"avx2 without fma", Features{AVX2: true}, Generic},
		{"haswell", Features{AVX2: true, FMA: true}, AVX2},
		{"skylake-x", Features{AVX2: true, FMA: true, AVX512F: true, AVX512BW: true, AVX512VL: true}, AVX512},
		{"avx512 without bw", Features{AVX2: true, FMA: true, AVX512F: true}, AVX2},
		{"zen4", Features{AVX2: true, FMA: true, AVX512F: true, AVX512BW: true, AVX512VL: true, AVX512BF16: true, AVX512VNNI: true}, AVX512BF16},
		{"sapphire rapids, AMX granted", Features{AVX2: true, FMA: true, AVX512F: true, AVX512BW: true, AVX512VL: true, AVX512BF16: true, AVX512VNNI: true,
			AMXTile: true, AMXBF16: true, AMXInt8: true, AMXGranted: true}, AMX},
		{"sapphire rapids, AMX not granted", Features{AVX2: true, FMA: true, AVX512F: true, AVX512BW: true, AVX512VL: true, AVX512BF16: true, AVX512VNNI: true,
			AMXTile: true, AMXBF16: true, AMXInt8: true}, AVX512BF16},
		{"AMX without AVX512_BF16", Features{AVX2: true, FMA: true, AVX512F: true, AVX512BW: true, AVX512VL: true,
			AMXTile: true, AMXBF16: true, AMXInt8: true, AMXGranted: true}, AVX512},
		{"arm64", Features{ASIMD: true}, NEON},
	} {
		if got := tc.f.Best(); got != tc.want {
			t.Errorf("%s: Best() = %s, want %s", tc.name, got, tc.want)
		}
		// The x86 paths nest; NEON stands beside Generic alone.
		for p := range NumPaths {
			want := p == Generic || p == tc.want || tc.want != NEON && p != NEON && p < tc.want
			if tc.f.Supports(p) != want {
				t.Errorf("%s: Supports(%s) = %t", tc.name, p, !want)
			}
		}
	}
}

func TestStartPath(t *testing.T) {
	avx2 := Features{AVX2: true, FMA: true}
	for _, tc := range []struct {
		name   string
		f      Features
		asm    bool
		env    string
		want   Path
		forced bool
		err    bool
	}{
		{"the best path", avx2, true, "", AVX2, false, false},
		{"no assembly: generic", avx2, false, "", Generic, false, false},
		{"no assembly, a path asked for", avx2, false, "avx2", AVX2, true, false},
		{"asked for a lower path", avx2, true, "generic", Generic, true, false},
		{"asked for a path the CPU lacks", avx2, true, "avx512", AVX2, false, true},
		{"no assembly, asked for a path the CPU lacks", avx2, false, "avx512bf16", Generic, false, true},
		{"asked for no path at all", avx2, true, "fast", AVX2, false, true},
	} {
		p, forced, err := startPath(tc.f, tc.asm, tc.env)
		if p != tc.want || forced != tc.forced || (err != nil) != tc.err {
			t.Errorf("%s: startPath = %s, forced %v, error %v; want %s, forced %v, error %v", tc.name, p, forced, err, tc.want, tc.forced, tc.err)
		}
	}
}

func TestParsePath(t *testing.T) {
	for _, p := range []Path{Generic, AVX2, AVX512, AVX512BF16, AMX} {
		got, err := ParsePath(" " + p.String() + " ")
		if err != nil || got != p {
			t.Errorf("ParsePath(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := ParsePath("avx10"); err == nil {
		t.Error("an unknown path parsed")
	}
}

func TestForce(t *testing.T) {
	prev := Active()
	defer Force(prev)
	for _, p := range Available() {
		if _, err := Force(p); err != nil {
			t.Fatalf("Force(%s): %v", p, err)
		}
		if Active() != p {
			t.Fatalf("Active() = %s after Force(%s)", Active(), p)
		}
	}
	for p := range NumPaths {
		if _, err := Force(p); !slices.Contains(Available(), p) && err == nil {
			t.Errorf("forcing %s, which this CPU lacks, succeeded", p)
		}
	}
}

func TestChoosePerOp(t *testing.T) {
	if Forced() {
		if err := Choose(MatMulBF16, Generic); err == nil || PathFor(MatMulBF16) != Active() {
			t.Errorf("ELLM_KERNELS is set, yet Choose succeeded (%v)", err)
		}
		return
	}
	prev := Active()
	defer Force(prev)
	best := CPU().Best()
	if _, err := Force(best); err != nil {
		t.Fatal(err)
	}
	if Describe() != best.String() || PathFor(MatMulBF16) != best || PathFor(MatMulInt8) != best {
		t.Fatalf("before Choose: %q, bf16 %s, int8 %s", Describe(), PathFor(MatMulBF16), PathFor(MatMulInt8))
	}
	if best == Generic {
		t.Skip("one path only")
	}
	avail := Available()
	lower := avail[len(avail)-2]
	if err := Choose(MatMulBF16, lower); err != nil {
		t.Fatal(err)
	}
	if PathFor(MatMulBF16) != lower || PathFor(MatMulInt8) != best || Active() != best {
		t.Errorf("after Choose: bf16 %s, int8 %s, active %s", PathFor(MatMulBF16), PathFor(MatMulInt8), Active())
	}
	if want := best.String() + ", matmul-bf16 " + lower.String(); Describe() != want {
		t.Errorf("Describe() = %q, want %q", Describe(), want)
	}
	// Force is for every operation: it undoes Choose.
	if _, err := Force(best); err != nil {
		t.Fatal(err)
	}
	if PathFor(MatMulBF16) != best || Describe() != best.String() {
		t.Errorf("after Force: bf16 %s, %q", PathFor(MatMulBF16), Describe())
	}
	if err := Choose(MatMulInt8, best+1); !CPU().Supports(best+1) && err == nil {
		t.Error("choosing a path this CPU lacks succeeded")
	}
	if err := Choose(NumOps, best); err == nil {
		t.Error("choosing for an unknown op succeeded")
	}
}
