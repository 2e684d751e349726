package tune

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/kernels"
)

var both = []kernels.Path{kernels.AVX512BF16, kernels.AVX512}

func rates(bf16, f32 float64) func(kernels.Path) float64 {
	return func(p kernels.Path) float64 {
		if p == kernels.AVX512BF16 {
			return bf16
		}
		return f32
	}
}

func TestPick(t *testing.T) {
	tests := []struct {
		name      string
		bf16, f32 float64
		want      kernels.Path
	}{
		{"AMD Zen 5: VDPBF16PS at twice the FMA rate", 160, 80, kernels.AVX512BF16},
		{"Intel Xeon measured: VDPBF16PS at half the FMA rate", 82, 160, kernels.AVX512},
		{"equal: keep the bf16 path", 100, 100, kernels.AVX512BF16},
		{"within the margin: keep the bf16 path", 100, 109, kernels.AVX512BF16},
		{"beyond the margin", 100, 111, kernels.AVX512},
		{"bf16 not measured: the f32 path must still beat it by the margin", 0, 50, kernels.AVX512},
		{"nothing measured: the first", 0, 0, kernels.AVX512BF16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Pick(kernels.MatMulBF16, both, rates(tc.bf16, tc.f32))
			if c.Path != tc.want || c.Op != kernels.MatMulBF16 {
				t.Errorf("Pick = %s %s, want %s", c.Op, c.Path, tc.want)
			}
			if !strings.HasPrefix(c.Why, "measured avx512bf16 ") || !strings.Contains(c.Why, " vs avx512 ") {
				t.Errorf("why %q", c.Why)
			}
		})
	}
	if c := Pick(kernels.MatMulInt8, []kernels.Path{kernels.AVX2}, nil); c.Path != kernels.AVX2 || !strings.Contains(c.Why, "no other path") {
		t.Errorf("one candidate: %+v", c)
	}
}

func TestCandidates(t *testing.T) {
	// Attention has no AMX kernels: on the amx path it chooses as on avx512bf16.
	if got := Candidates(kernels.Attention, kernels.AMX); !slices.Equal(got, []kernels.Path{kernels.AVX512BF16, kernels.AVX512}) {
		t.Errorf("attention on amx: %v", got)
	}
	// Int8 products run the same VPDPBUSD kernels on avx512bf16 and avx512.
	if got := Candidates(kernels.MatMulInt8, kernels.AVX512BF16); !slices.Equal(got, []kernels.Path{kernels.AVX512BF16}) {
		t.Errorf("int8 on avx512bf16: %v", got)
	}
	if got := Candidates(kernels.MatMulInt8, kernels.AMX); !slices.Equal(got, []kernels.Path{kernels.AMX, kernels.AVX512BF16}) {
		t.Errorf("int8 on amx: %v", got)
	}
	if got := Candidates(kernels.MatMulBF16, kernels.AVX512BF16); !slices.Equal(got, []kernels.Path{kernels.AVX512BF16, kernels.AVX512}) {
		t.Errorf("bf16 on avx512bf16: %v", got)
	}
	if got := Candidates(kernels.MatMulBF16, kernels.AMX); !slices.Equal(got, []kernels.Path{kernels.AMX, kernels.AVX512BF16, kernels.AVX512}) {
		t.Errorf("bf16 on amx: %v", got)
	}
	for _, op := range []kernels.Op{kernels.MatMulBF16, kernels.MatMulInt8} {
		for _, p := range []kernels.Path{kernels.Generic, kernels.AVX2, kernels.AVX512} {
			if got := Candidates(op, p); len(got) != 1 || got[0] != p {
				t.Errorf("%s on %s: %v", op, p, got)
			}
		}
	}
}

var testKey = Key{CPU: "Test CPU", Family: 26, Model: 2, Stepping: 1, Microcode: "0x1000065", Features: "{AVX2:true}", Build: "v1.2.3"}

func TestCacheRoundTripAndInvalidation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sub", "kernels.json")
	if _, err := Load(file, testKey); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load of a missing file: %v", err)
	}
	c := &Calibration{Key: testKey, Rates: []Rate{{"matmul-bf16", "avx512bf16", 160}, {"matmul-bf16", "avx512", 80}},
		Measured: time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC), Took: 97 * time.Millisecond}
	if err := Save(file, c); err != nil {
		t.Fatal(err)
	}
	got, err := Load(file, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if got.rate(kernels.MatMulBF16, kernels.AVX512BF16) != 160 || got.rate(kernels.MatMulBF16, kernels.AVX512) != 80 ||
		!got.Measured.Equal(c.Measured) || got.Took != c.Took {
		t.Errorf("round trip: %+v", got)
	}
	// Any part of the key changing makes the cached rates stale.
	for name, change := range map[string]func(*Key){
		"cpu":       func(k *Key) { k.CPU = "Other CPU" },
		"stepping":  func(k *Key) { k.Stepping++ },
		"microcode": func(k *Key) { k.Microcode = "0x1000066" },
		"features":  func(k *Key) { k.Features = "{AVX2:false}" },
		"build":     func(k *Key) { k.Build = "v1.2.4" },
	} {
		k := testKey
		change(&k)
		if _, err := Load(file, k); !errors.Is(err, ErrStale) {
			t.Errorf("%s changed: Load = %v, want ErrStale", name, err)
		}
	}
	if err := os.WriteFile(file, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(file, testKey); err == nil || errors.Is(err, ErrStale) || errors.Is(err, os.ErrNotExist) {
		t.Errorf("corrupt file: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".kernels-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// fakeMeasure returns fixed rates and counts its calls.
type fakeMeasure struct {
	calls     int
	bf16, f32 float64
}

func (f *fakeMeasure) measure(_ time.Duration, cands map[kernels.Op][]kernels.Path) []Rate {
	f.calls++
	var out []Rate
	for op, ps := range cands {
		for _, p := range ps {
			r := f.f32
			if p == kernels.AVX512BF16 {
				r = f.bf16
			}
			out = append(out, Rate{op.String(), p.String(), r})
		}
	}
	return out
}

// Apply measures once, then reads the cache; a new key measures again; the
// choice reaches kernels.PathFor.
func TestApply(t *testing.T) {
	if kernels.Forced() {
		r, err := Apply(Options{CacheFile: filepath.Join(t.TempDir(), "k.json")})
		if err != nil || r.Source != kernels.EnvVar || r.Calibration != nil {
			t.Errorf("under ELLM_KERNELS: %+v, %v", r, err)
		}
		return
	}
	prev := kernels.Active()
	defer kernels.Force(prev)
	if _, err := kernels.Force(kernels.AVX512BF16); err != nil {
		t.Skip("needs a CPU with AVX512_BF16: ", err)
	}
	file := filepath.Join(t.TempDir(), "kernels.json")
	xeon := &fakeMeasure{bf16: 82, f32: 160}
	opts := Options{CacheFile: file, Key: &testKey, Measure: xeon.measure}
	r, err := Apply(opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != "measured" || xeon.calls != 1 || kernels.PathFor(kernels.MatMulBF16) != kernels.AVX512 ||
		kernels.PathFor(kernels.MatMulInt8) != kernels.AVX512BF16 || kernels.Active() != kernels.AVX512BF16 {
		t.Errorf("first start: source %s, %d measurements, bf16 %s int8 %s", r.Source, xeon.calls,
			kernels.PathFor(kernels.MatMulBF16), kernels.PathFor(kernels.MatMulInt8))
	}
	if kernels.Describe() != "avx512bf16, matmul-bf16 avx512, attention-bf16 avx512" {
		t.Errorf("Describe() = %q", kernels.Describe())
	}
	// --attention-kernel overrides the measured choice, and says so.
	ra, err := Apply(Options{CacheFile: file, Key: &testKey, Measure: xeon.measure, Attention: "bf16"})
	if err != nil || kernels.PathFor(kernels.Attention) != kernels.AVX512BF16 || kernels.PathFor(kernels.MatMulBF16) != kernels.AVX512 {
		t.Fatalf("attention bf16: %v, attention %s", err, kernels.PathFor(kernels.Attention))
	}
	if c := ra.Choices[kernels.Attention]; c.Path != kernels.AVX512BF16 || !strings.Contains(c.Why, "--attention-kernel") {
		t.Errorf("attention bf16: choice %+v", c)
	}
	if _, err := Apply(Options{CacheFile: file, Key: &testKey, Measure: xeon.measure, Attention: "fp8"}); err == nil {
		t.Error("attention fp8 accepted")
	}
	r, err = Apply(opts)
	if err != nil || r.Source != "cache" || xeon.calls != 1 || kernels.PathFor(kernels.MatMulBF16) != kernels.AVX512 {
		t.Errorf("second start: %+v, %v, %d measurements", r, err, xeon.calls)
	}
	// A new build (or microcode) measures again and rewrites the file.
	k := testKey
	k.Build = "v1.2.4"
	zen5 := &fakeMeasure{bf16: 160, f32: 80}
	r, err = Apply(Options{CacheFile: file, Key: &k, Measure: zen5.measure})
	if err != nil || r.Source != "measured" || zen5.calls != 1 || kernels.PathFor(kernels.MatMulBF16) != kernels.AVX512BF16 || r.Note != "" {
		t.Errorf("new build (measured, without a warning): %+v, %v", r, err)
	}
	if r.Calibration.Key.Build != "v1.2.4" {
		t.Errorf("calibration %+v", r.Calibration)
	}
	if c, err := Load(file, k); err != nil || c.rate(kernels.MatMulBF16, kernels.AVX512BF16) != 160 {
		t.Errorf("the cache was not rewritten: %v", err)
	}
	// --calibrate measures even with a valid cache.
	r, err = Apply(Options{CacheFile: file, Key: &k, Measure: zen5.measure, Recalibrate: true})
	if err != nil || r.Source != "measured" || zen5.calls != 2 {
		t.Errorf("recalibrate: %+v, %v", r, err)
	}
	// An unreadable cache is measured over, with a note.
	if err := os.WriteFile(file, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err = Apply(Options{CacheFile: file, Key: &k, Measure: zen5.measure})
	if err != nil || r.Source != "measured" || !strings.Contains(r.Note, "measured again") {
		t.Errorf("corrupt cache: %+v, %v", r, err)
	}
}

// The real measurement on this CPU: every candidate gets a positive rate
// within the budget (give or take the probes' set-up).
func TestMeasure(t *testing.T) {
	cands := map[kernels.Op][]kernels.Path{}
	n := 0
	for op := range kernels.NumOps {
		cands[op] = Candidates(op, kernels.CPU().Best())
		if len(cands[op]) > 1 {
			n += len(cands[op])
		}
	}
	rs := Measure(20*time.Millisecond, cands)
	if len(rs) != n {
		t.Fatalf("%d rates for %d candidates: %+v", len(rs), n, rs)
	}
	for _, r := range rs {
		if !(r.Rate > 0) {
			t.Errorf("%+v", r)
		}
		t.Logf("%s on %s: %.1f G/s per thread (under load: relative only)", r.Op, r.Path, r.Rate)
	}
}

func TestMachineKey(t *testing.T) {
	a, b := MachineKey("v1"), MachineKey("v2")
	if a.Features == "" || a.Build == b.Build || a.CPU != b.CPU {
		t.Errorf("keys %+v / %+v", a, b)
	}
	f, err := DefaultCacheFile(a)
	if err != nil {
		t.Skip(err)
	}
	if g, _ := DefaultCacheFile(b); g != f || !strings.HasPrefix(filepath.Base(f), "kernels-") {
		t.Errorf("the build must not change the file name (it invalidates the content): %s vs %s", f, g)
	}
	c := a
	c.CPU = "Other CPU"
	if g, _ := DefaultCacheFile(c); g == f {
		t.Errorf("another CPU shares the file %s", f)
	}
}
