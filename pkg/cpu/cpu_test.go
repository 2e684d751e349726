package cpu

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/gemm"
)

// fakeRoot builds /sys and /proc for a machine with the given topology.
func fakeRoot(t *testing.T, sockets, coresPerSocket, threadsPerCore, nodes int, meminfo, thp string) string {
	t.Helper()
	root := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cpu := 0
	for s := 0; s < sockets; s++ {
		for c := 0; c < coresPerSocket; c++ {
			for th := 0; th < threadsPerCore; th++ {
				d := fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/", cpu)
				write(d+"physical_package_id", fmt.Sprintf("%d\n", s))
				write(d+"core_id", fmt.Sprintf("%d\n", c))
				cpu++
			}
		}
	}
	// An offline CPU has no topology and is not counted.
	if err := os.MkdirAll(filepath.Join(root, fmt.Sprintf("sys/devices/system/cpu/cpu%d", cpu)), 0o755); err != nil {
		t.Fatal(err)
	}
	for n := 0; n < nodes; n++ {
		write(fmt.Sprintf("sys/devices/system/node/node%d/cpulist", n), "0\n")
	}
	if meminfo != "" {
		write("proc/meminfo", meminfo)
	}
	if thp != "" {
		write("sys/kernel/mm/transparent_hugepage/enabled", thp)
	}
	return root
}

var haswell = kernels.Features{AVX2: true, FMA: true, F16C: true}

func TestDetectFakeMachine(t *testing.T) {
	root := fakeRoot(t, 2, 4, 2, 2, "MemTotal:       65536000 kB\nMemFree:  100 kB\nMemAvailable:   32768000 kB\nHugePages_Total:       0\n", "[always] madvise never\n")
	info := Detect(Source{Features: haswell, Root: root, Identity: Identity{Vendor: "GenuineIntel", PhysicalCores: 99}})
	if info.Threads != 16 || info.PhysicalCores != 8 || info.Sockets != 2 || info.NUMANodes != 2 {
		t.Errorf("threads %d cores %d sockets %d nodes %d, want 16 8 2 2", info.Threads, info.PhysicalCores, info.Sockets, info.NUMANodes)
	}
	if info.MemTotal != 65536000*1024 || info.MemAvailable != 32768000*1024 {
		t.Errorf("memory %d / %d", info.MemTotal, info.MemAvailable)
	}
	if info.HugePages != "always" {
		t.Errorf("hugepages %q", info.HugePages)
	}
	if info.Features["AVX512F"] || !info.Features["AVX2"] {
		t.Errorf("features %v", info.Features)
	}
	if len(info.Notes) != 0 {
		t.Errorf("unexpected notes %v", info.Notes)
	}
}

func TestDetectMissingFiles(t *testing.T) {
	info := Detect(Source{Features: haswell, Root: t.TempDir(), Identity: Identity{PhysicalCores: 4, LogicalCores: 8}})
	if info.PhysicalCores != 4 || info.Threads != 8 || info.NUMANodes != 1 || info.Sockets != 1 {
		t.Errorf("fallbacks: cores %d threads %d nodes %d sockets %d", info.PhysicalCores, info.Threads, info.NUMANodes, info.Sockets)
	}
	if info.MemAvailable != 0 || len(info.Notes) < 2 {
		t.Errorf("missing /proc should leave memory unknown and say so: %d, %v", info.MemAvailable, info.Notes)
	}
}

func TestKernelPaths(t *testing.T) {
	sapphire := kernels.Features{AVX2: true, FMA: true, AVX512F: true, AVX512BW: true, AVX512VL: true, AVX512DQ: true, AVX512BF16: true, AVX512VNNI: true}
	skylake := kernels.Features{AVX2: true, FMA: true, AVX512F: true, AVX512BW: true, AVX512VL: true, AVX512DQ: true}
	amx, notGranted := sapphire, sapphire
	amx.AMXTile, amx.AMXBF16, amx.AMXInt8, amx.AMXGranted = true, true, true, true
	notGranted.AMXTile, notGranted.AMXBF16, notGranted.AMXInt8 = true, true, true
	tests := []struct {
		name      string
		f         kernels.Features
		active    kernels.Path
		want      kernels.Path
		fallbacks int
		rest      string // the path of attention and elementwise, if not want's
	}{
		{"sapphire rapids", sapphire, kernels.AVX512BF16, kernels.AVX512BF16, 0, ""},
		{"amx", amx, kernels.AMX, kernels.AMX, 0, "avx512bf16"},
		{"amx not granted", notGranted, kernels.AMX, kernels.AVX512BF16, 1, ""},
		{"forced down", sapphire, kernels.AVX2, kernels.AVX2, 0, ""},
		{"skylake", skylake, kernels.AVX512BF16, kernels.AVX512, 1, ""},
		{"haswell", haswell, kernels.AVX512BF16, kernels.AVX2, 1, ""},
		{"no avx2", kernels.Features{}, kernels.AVX512BF16, kernels.Generic, 2, ""},
		{"arm64", kernels.Features{ASIMD: true, ASIMDDP: true}, kernels.NEON, kernels.NEON, 0, ""},
		{"arm64 without dotprod", kernels.Features{ASIMD: true}, kernels.NEON, kernels.NEON, 1, ""},
		{"arm64, an x86 path asked for", kernels.Features{ASIMD: true}, kernels.AVX512BF16, kernels.NEON, 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ks := KernelPaths(tc.f, tc.active, nil, false)
			if len(ks) != 6 {
				t.Fatalf("%d op classes", len(ks))
			}
			for i, k := range ks {
				want := tc.want.String()
				if i >= 3 && tc.rest != "" {
					want = tc.rest
				}
				if k.Path != want {
					t.Errorf("%s: path %s, want %s", k.Op, k.Path, want)
				}
			}
			if lm := strings.Contains(ks[2].Detail, "lm_head on VDPBF16PS"); lm != (tc.want == kernels.AMX) {
				t.Errorf("decode row %q: the lm_head is off the tiles on amx only", ks[2].Detail)
			}
			coded := KernelPaths(tc.f, tc.active, nil, true)[2].Detail
			// The coded kernels are assembly: a purego build has none.
			readsCoded := (tc.want == kernels.AMX || tc.want == kernels.AVX512BF16 || tc.want == kernels.AVX512) && gemm.ReadsCoded(kernels.AVX512)
			// Coded, amx's lm_head stays on the tiles with the rest (only the pairs stream faster off them).
			lmOff := tc.want == kernels.AMX && !readsCoded
			if c := strings.Contains(coded, "coded in 12 bits"); c != readsCoded || strings.Contains(coded, "lm_head") != lmOff {
				t.Errorf("decode row with coded weights %q: coded on amx and avx512 paths only (with their assembly), and the lm_head on the tiles with the rest", coded)
			}
			if fb := Fallbacks(tc.f); len(fb) != tc.fallbacks {
				t.Errorf("Fallbacks = %v, want %d lines", fb, tc.fallbacks)
			}
		})
	}
	// The matrix products take the paths chosen for them, lowered to what the CPU runs.
	ks := KernelPaths(sapphire, kernels.AVX512BF16, map[kernels.Op]kernels.Path{kernels.MatMulBF16: kernels.AVX512, kernels.Attention: kernels.AVX512}, true)
	if ks[0].Path != "avx512" || ks[2].Path != "avx512" || ks[1].Path != "avx512bf16" || ks[3].Path != "avx512" || ks[4].Path != "avx512bf16" ||
		!strings.Contains(ks[0].Detail, "widened to f32") || !strings.Contains(ks[3].Detail, "widened") {
		t.Errorf("bf16 products and attention chosen on avx512: %+v", ks)
	}
	// int8 on avx2 and avx512 names VPDPBUSD only where the CPU has it
	// (AVX-VNNI, AVX512_VNNI: Cascade Lake and Ice Lake lack only AVX512_BF16).
	alderLake, iceLake := haswell, skylake
	alderLake.AVXVNNI, iceLake.AVX512VNNI = true, true
	for _, tc := range []struct {
		f    kernels.Features
		p    kernels.Path
		vnni bool
	}{{haswell, kernels.AVX2, false}, {alderLake, kernels.AVX2, true}, {skylake, kernels.AVX512, false}, {iceLake, kernels.AVX512, true}} {
		if ks := KernelPaths(tc.f, tc.p, nil, false); ks[1].Path != tc.p.String() || strings.Contains(ks[1].Detail, "VPDPBUSD") != tc.vnni {
			t.Errorf("int8 on %s, VNNI %v: %+v", tc.p, tc.vnni, ks[1])
		}
	}
	if ks := KernelPaths(sapphire, kernels.AVX512BF16, nil, true); !strings.Contains(ks[3].Detail, "VDPBF16PS") {
		t.Errorf("attention over a bf16 cache on avx512bf16: %+v", ks[3])
	}
	ks = KernelPaths(skylake, kernels.AVX512BF16, map[kernels.Op]kernels.Path{kernels.MatMulInt8: kernels.AVX512BF16}, true)
	if ks[1].Path != "avx512" {
		t.Errorf("int8 on a CPU without VNNI: %+v", ks[1])
	}
	if fb := Fallbacks(skylake); !strings.Contains(fb[0], "AVX512_BF16, AVX512_VNNI") || !strings.Contains(fb[0], "to avx512") {
		t.Errorf("skylake fallback %q", fb[0])
	}
}

// This machine's detection must agree with the kernel's /proc/cpuinfo flags.
func TestSystemMatchesProcCPUInfo(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("x86 features")
	}
	flags, err := CPUInfoFlags("/proc/cpuinfo")
	if err != nil {
		t.Skip(err)
	}
	info := Detect(System())
	for _, f := range FeatureList(info.KernelFeatures()) {
		if f.Present != flags[f.Flag] {
			t.Errorf("%s: detected %v, /proc/cpuinfo flag %s present %v", f.Name, f.Present, f.Flag, flags[f.Flag])
		}
	}
	if info.Threads != runtime.NumCPU() && info.Threads < runtime.NumCPU() {
		t.Errorf("threads %d < NumCPU %d", info.Threads, runtime.NumCPU())
	}
	if info.MemTotal <= 0 || info.MemAvailable <= 0 || info.MemAvailable > info.MemTotal {
		t.Errorf("memory total %d available %d", info.MemTotal, info.MemAvailable)
	}
}

// On arm64 the report lists Advanced SIMD and its dot products: no x86
// feature is "missing" there.
func TestFeatureListArm64(t *testing.T) {
	fs := FeatureList(kernels.Features{ASIMD: true})
	if len(fs) != 2 || fs[0].Name != "ASIMD" || !fs[0].Present || fs[1].Name != "ASIMDDP" || fs[1].Present {
		t.Errorf("FeatureList(arm64) = %v", fs)
	}
}
