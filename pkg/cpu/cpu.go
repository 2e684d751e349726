// Package cpu describes the machine ellm runs on: CPU identity, cores,
// sockets and NUMA nodes, caches, the instruction-set features the kernels
// care about, memory and transparent hugepages, and which kernel path each
// class of operation takes.
//
// Everything is read through a Source, so tests describe machines we do not
// have: a kernels.Features value for the ISA and a fake root directory for
// /proc and /sys.
package cpu

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/klauspost/cpuid/v2"
	xcpu "golang.org/x/sys/cpu"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/gemm"
)

// Identity is what CPUID says about the processor.
type Identity struct {
	Vendor        string `json:"vendor"`
	Model         string `json:"model"`
	Family        int    `json:"family"`
	ModelID       int    `json:"model_id"`
	Stepping      int    `json:"stepping"`
	PhysicalCores int    `json:"-"` // per CPUID; /sys wins when present
	LogicalCores  int    `json:"-"`
	Caches        Caches `json:"caches"`
}

// Caches are cache sizes in bytes (0 = unknown), as CPUID reports them
// (L1/L2 per core, L3 per die or CCX).
type Caches struct {
	L1D int64 `json:"l1d"`
	L1I int64 `json:"l1i"`
	L2  int64 `json:"l2"`
	L3  int64 `json:"l3"`
}

// Source is where Detect looks.
type Source struct {
	Identity Identity
	Features kernels.Features
	// Root is prepended to /proc and /sys paths ("" or "/" for the real ones).
	Root string
	// Affinity returns the CPUs this process may run on (SchedAffinity);
	// nil means every CPU of the topology under Root.
	Affinity func() ([]int, error)
	// Notes are remarks from detection (e.g. CPUID and the OS disagree).
	Notes []string
}

// System is the Source of this machine: CPUID through klauspost/cpuid, the
// features kernels.CPU() selects with, and the real /proc and /sys.
func System() Source {
	c := cpuid.CPU
	id := Identity{
		Vendor: c.VendorString, Model: strings.TrimSpace(c.BrandName), Family: c.Family, ModelID: c.Model,
		Stepping: c.Stepping, PhysicalCores: c.PhysicalCores, LogicalCores: c.LogicalCores,
		Caches: Caches{L1D: cacheSize(c.Cache.L1D), L1I: cacheSize(c.Cache.L1I), L2: cacheSize(c.Cache.L2), L3: cacheSize(c.Cache.L3)},
	}
	f := kernels.CPU()
	return Source{Identity: id, Features: f, Root: "/", Affinity: SchedAffinity, Notes: crossCheck(f)}
}

func cacheSize(n int) int64 {
	if n < 0 {
		return 0
	}
	return int64(n)
}

// crossCheck compares klauspost/cpuid with golang.org/x/sys/cpu, which also
// asks the OS whether it saves the registers: a disagreement means a feature
// the CPU has but the kernel does not enable (or a detection bug).
func crossCheck(f kernels.Features) []string {
	if !xcpu.X86.HasAVX && !f.AVX2 {
		return nil // not x86, or a machine where neither sees vector extensions
	}
	pairs := []struct {
		name  string
		cpuid bool
		xsys  bool
	}{
		{"AVX2", f.AVX2, xcpu.X86.HasAVX2}, {"FMA", f.FMA, xcpu.X86.HasFMA}, {"F16C", f.F16C, xcpu.X86.HasF16C},
		{"AVX512F", f.AVX512F, xcpu.X86.HasAVX512F}, {"AVX512BW", f.AVX512BW, xcpu.X86.HasAVX512BW},
		{"AVX512VL", f.AVX512VL, xcpu.X86.HasAVX512VL}, {"AVX512DQ", f.AVX512DQ, xcpu.X86.HasAVX512DQ},
		{"AVX512_BF16", f.AVX512BF16, xcpu.X86.HasAVX512BF16}, {"AVX512_VNNI", f.AVX512VNNI, xcpu.X86.HasAVX512VNNI},
		{"AVX_VNNI", f.AVXVNNI, xcpu.X86.HasAVXVNNI},
		{"AMX_TILE", f.AMXTile, xcpu.X86.HasAMXTile}, {"AMX_BF16", f.AMXBF16, xcpu.X86.HasAMXBF16}, {"AMX_INT8", f.AMXInt8, xcpu.X86.HasAMXInt8},
	}
	var notes []string
	for _, p := range pairs {
		if p.cpuid != p.xsys {
			notes = append(notes, fmt.Sprintf("%s: klauspost/cpuid says %v, golang.org/x/sys/cpu says %v", p.name, p.cpuid, p.xsys))
		}
	}
	return notes
}

// Feature is one ISA feature in report order.
type Feature struct {
	Name    string // as ellm reports it, e.g. AVX512_BF16
	Flag    string // the /proc/cpuinfo flag, e.g. avx512_bf16
	Present bool
}

// FeatureList lists the features that matter to ellm, in report order: on
// arm64 Advanced SIMD and its dot products (its kernels use nothing else).
func FeatureList(f kernels.Features) []Feature {
	if f.ASIMD {
		return []Feature{{"ASIMD", "asimd", true}, {"ASIMDDP", "asimddp", f.ASIMDDP}}
	}
	return []Feature{
		{"AVX2", "avx2", f.AVX2}, {"FMA", "fma", f.FMA}, {"F16C", "f16c", f.F16C},
		{"AVX512F", "avx512f", f.AVX512F}, {"AVX512BW", "avx512bw", f.AVX512BW},
		{"AVX512VL", "avx512vl", f.AVX512VL}, {"AVX512DQ", "avx512dq", f.AVX512DQ},
		{"AVX512_BF16", "avx512_bf16", f.AVX512BF16}, {"AVX512_FP16", "avx512_fp16", f.AVX512FP16},
		{"AVX512_VNNI", "avx512_vnni", f.AVX512VNNI}, {"AVX_VNNI", "avx_vnni", f.AVXVNNI},
		{"AMX_TILE", "amx_tile", f.AMXTile}, {"AMX_BF16", "amx_bf16", f.AMXBF16}, {"AMX_INT8", "amx_int8", f.AMXInt8},
	}
}

// Info is a description of the machine.
type Info struct {
	Identity
	PhysicalCores int             `json:"physical_cores"`
	Threads       int             `json:"threads"`
	Sockets       int             `json:"sockets"`
	NUMANodes     int             `json:"numa_nodes"`
	Features      map[string]bool `json:"features"`
	MemTotal      int64           `json:"mem_total_bytes"`
	MemAvailable  int64           `json:"mem_available_bytes"`
	// HugePages is the transparent hugepage mode: always, madvise or never ("" if unknown).
	HugePages string   `json:"transparent_hugepages"`
	Notes     []string `json:"notes,omitempty"`

	features kernels.Features
}

// KernelFeatures is the feature set Info was detected with.
func (i *Info) KernelFeatures() kernels.Features { return i.features }

// Detect describes the machine that s sees. Missing /proc or /sys files are
// not errors: the fields stay zero and a note says what could not be read.
func Detect(s Source) *Info {
	info := &Info{Identity: s.Identity, features: s.Features, Features: map[string]bool{}, Notes: append([]string(nil), s.Notes...)}
	for _, f := range FeatureList(s.Features) {
		info.Features[f.Name] = f.Present
	}
	note := func(format string, args ...any) { info.Notes = append(info.Notes, fmt.Sprintf(format, args...)) }
	root := s.Root
	if root == "" {
		root = "/"
	}

	topo, err := readTopology(root)
	if err != nil {
		note("topology: %v", err)
	}
	info.Threads, info.PhysicalCores, info.Sockets = topo.threads, topo.cores, topo.sockets
	if info.Threads == 0 {
		info.Threads = s.Identity.LogicalCores
	}
	if info.PhysicalCores == 0 {
		info.PhysicalCores = s.Identity.PhysicalCores
	}
	if info.Sockets == 0 && info.Threads > 0 {
		info.Sockets = 1
	}
	nodes, _ := filepath.Glob(filepath.Join(root, "sys/devices/system/node/node[0-9]*"))
	info.NUMANodes = len(nodes)
	if info.NUMANodes == 0 {
		info.NUMANodes = 1 // a kernel without NUMA support is one node
	}

	mem, err := readMeminfo(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		note("memory: %v", err)
	}
	info.MemTotal, info.MemAvailable = mem["MemTotal"], mem["MemAvailable"]
	if info.MemAvailable == 0 {
		info.MemAvailable = mem["MemFree"] + mem["Cached"]
	}

	thp, err := os.ReadFile(filepath.Join(root, "sys/kernel/mm/transparent_hugepage/enabled"))
	if err != nil {
		note("transparent hugepages: %v", err)
	} else {
		info.HugePages = selected(string(thp))
	}
	return info
}

type topology struct{ threads, cores, sockets int }

// readTopology counts logical CPUs, distinct (package, core) pairs and packages.
func readTopology(root string) (topology, error) {
	dirs, err := filepath.Glob(filepath.Join(root, "sys/devices/system/cpu/cpu[0-9]*"))
	if err != nil || len(dirs) == 0 {
		return topology{}, fmt.Errorf("no CPUs under %s", filepath.Join(root, "sys/devices/system/cpu"))
	}
	cores := map[[2]int]bool{}
	pkgs := map[int]bool{}
	var t topology
	for _, d := range dirs {
		pkg, err1 := readInt(filepath.Join(d, "topology/physical_package_id"))
		core, err2 := readInt(filepath.Join(d, "topology/core_id"))
		if err1 != nil || err2 != nil {
			continue // offline CPUs have no topology directory
		}
		t.threads++
		pkgs[pkg] = true
		cores[[2]int{pkg, core}] = true
	}
	t.cores, t.sockets = len(cores), len(pkgs)
	return t, nil
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// readMeminfo returns /proc/meminfo's values in bytes.
func readMeminfo(path string) (map[string]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return map[string]int64{}, err
	}
	m := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if len(fields) > 1 && fields[1] == "kB" {
			v *= 1024
		}
		m[key] = v
	}
	return m, nil
}

var bracketed = regexp.MustCompile(`\[(\w+)\]`)

// selected returns the bracketed choice of a sysfs mode file ("always [madvise] never").
func selected(s string) string {
	if m := bracketed.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return strings.TrimSpace(s)
}

// CPUInfoFlags reads the flags line of the first processor in a /proc/cpuinfo file.
func CPUInfoFlags(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(key) == "flags" {
			flags := map[string]bool{}
			for _, f := range strings.Fields(val) {
				flags[f] = true
			}
			return flags, nil
		}
	}
	return nil, fmt.Errorf("%s: no flags line", path)
}

// KernelChoice is the path one class of operation takes.
type KernelChoice struct {
	Op     string `json:"op"`
	Path   string `json:"path"`
	Detail string `json:"detail"`
}

// KernelPaths says what each operation class runs on a CPU with features f
// when the kernels take path active (kernels.Active(), or f.Best() for a
// described machine) and the matrix products the paths chosen for them
// (kernels.PathFor; nil: active), with the bf16 weights' coded copies if
// coded (model.LoadOptions.NoCodedWeights). A path above what f supports
// is lowered to f.Best().
func KernelPaths(f kernels.Features, active kernels.Path, chosen map[kernels.Op]kernels.Path, coded bool) []KernelChoice {
	lower := func(p kernels.Path) kernels.Path {
		if !f.Supports(p) {
			return f.Best()
		}
		return p
	}
	active = lower(active)
	pathOf := func(op kernels.Op) kernels.Path {
		if p, ok := chosen[op]; ok {
			return lower(p)
		}
		return active
	}
	bf, i8, at := pathOf(kernels.MatMulBF16), pathOf(kernels.MatMulInt8), pathOf(kernels.Attention)
	// Only the products have AMX kernels: the rest of the amx path is
	// avx512bf16's.
	noAMX := func(p kernels.Path) kernels.Path {
		if p == kernels.AMX {
			return kernels.AVX512BF16
		}
		return p
	}
	at, attn := noAMX(at), noAMX(active)
	f32Attn := attn // an f32 or int8 cache runs f32 attention: avx512bf16's is avx512's
	if f32Attn == kernels.AVX512BF16 {
		f32Attn = kernels.AVX512
	}
	gemv := describePath(bf).gemm
	switch bf {
	case kernels.Generic:
		gemv += "; bound by its arithmetic, far below the memory's bandwidth"
	case kernels.NEON:
		gemv += "; its speed not yet measured on an arm64 machine"
	default:
		gemv += "; bound by memory bandwidth"
	}
	switch {
	case coded && gemm.ReadsCoded(bf): // gemm.Weight.Code
		gemv += "; reads the weights coded in 12 bits (lossless: low bytes as stored, the sign and exponent's top bits " +
			"as 4-bit codes), restored " + restoredWhere(bf) + ", if that streams faster than the pairs when the model loads"
	case bf == kernels.AMX: // gemm.Weight.SetFewRows
		gemv += "; the lm_head on " + describePath(kernels.AVX512BF16).gemm + ", which streams weights faster than tiles"
	}
	return []KernelChoice{
		{"GEMM bf16 (prefill)", bf.String(), describePath(bf).gemm},
		{"GEMM int8 (prefill)", i8.String(), int8Text(f, i8)},
		{"GEMV bf16 (decode)", bf.String(), gemv},
		{"attention, bf16 KV cache", at.String(), describePath(at).attn},
		{"attention, f32/int8 KV cache", attn.String(), describePath(f32Attn).attn},
		{"elementwise (norms, RoPE, SiLU, softmax)", attn.String(), describePath(attn).elem},
	}
}

type pathText struct{ gemm, int8, attn, elem string }

// int8Text is describePath's int8 kernels, which on the avx512, avx2 and
// neon paths depend on the CPU: gemm takes zmm VPDPBUSD where it has
// AVX512_VNNI, ymm where it has AVX-VNNI, SDOT where it has dotprod.
func int8Text(f kernels.Features, p kernels.Path) string {
	switch {
	case p == kernels.AVX512 && f.AVX512VNNI:
		return describePath(kernels.AVX512BF16).int8
	case p == kernels.AVX2 && f.AVXVNNI:
		return "VPDPBUSD on ymm (AVX-VNNI): u8 activations × s8 weights, per-row f32 scales"
	case p == kernels.NEON && f.ASIMDDP:
		return "NEON SDOT (dotprod): s8 activations × s8 weights, the same bits as VNNI"
	}
	return describePath(p).int8
}

// restoredWhere is where path p's coded products restore a coded weight
// (kernels/gemm/gen_asm.go): avx512bf16's register kernels straight into the
// registers that multiply it (prefetching the copy into L1 or L2, whichever
// the load measures faster: gemm.CodedPrefetch), the tiles and the f32
// kernels through a buffer in L1.
func restoredWhere(p kernels.Path) string {
	if p == kernels.AVX512BF16 {
		return "in registers two K rows of four panels at a time (prefetched into L1 or L2, whichever streams faster)"
	}
	return "into L1 16 pairs of four panels at a time"
}

func describePath(p kernels.Path) pathText {
	switch p {
	case kernels.AMX: // the products; KernelPaths shows the rest as avx512bf16
		return pathText{
			gemm: "AMX TDPBF16PS tiles: activations rounded to bf16, f32 accumulation 32 products at a time",
			int8: "AMX TDPBUSD tiles: u8 activations × s8 weights, exact int32 sums (the same bits as VNNI)",
		}
	case kernels.AVX512BF16:
		return pathText{
			gemm: "VDPBF16PS: activations rounded to bf16, f32 accumulation",
			int8: "VPDPBUSD (AVX512_VNNI): u8 activations × s8 weights, per-row f32 scales",
			attn: "VDPBF16PS: q as two bf16 parts, probabilities rounded to bf16, K/V read in place; f32 softmax and sums",
			elem: "AVX-512 f32",
		}
	case kernels.AVX512:
		return pathText{
			gemm: "AVX-512 FMA: bf16 weights widened to f32 exactly",
			int8: "AVX2 integer kernels (VPMADDUBSW): the same bits as VNNI",
			attn: "AVX-512 f32 with bf16 K/V widened",
			elem: "AVX-512 f32",
		}
	case kernels.NEON:
		return pathText{
			gemm: "NEON FMLA: bf16 weights widened to f32 exactly, the same bits as AVX2 and AVX-512",
			int8: "pure Go integer dot products (no dotprod extension)",
			attn: "NEON FMLA scores and values, the AVX2 tile's bits; one query at a time",
			elem: "NEON f32, the Go loops' bits",
		}
	case kernels.AVX2:
		return pathText{
			gemm: "AVX2 FMA: bf16 weights widened to f32 exactly",
			int8: "AVX2 integer kernels (VPMADDUBSW)",
			attn: "AVX2 f32 with bf16 K/V widened",
			elem: "AVX2 f32",
		}
	}
	return pathText{
		gemm: "pure Go f32: bf16 weights widened exactly, a few rows × channels summed in registers",
		int8: "pure Go integer dot products",
		attn: "pure Go f32",
		elem: "pure Go f32",
	}
}

// Fallbacks explains, for a CPU with features f, which faster paths it
// cannot take and why (empty when it runs the fastest path ellm has).
func Fallbacks(f kernels.Features) []string {
	if f.Best() == kernels.NEON {
		if !f.ASIMDDP {
			return []string{"no ASIMDDP (dotprod): the int8 products run pure Go"}
		}
		return nil
	}
	var missing []string
	need := func(ok bool, name string) {
		if !ok {
			missing = append(missing, name)
		}
	}
	need(f.AVX512F, "AVX512F")
	need(f.AVX512BW, "AVX512BW")
	need(f.AVX512VL, "AVX512VL")
	need(f.AVX512BF16, "AVX512_BF16")
	need(f.AVX512VNNI, "AVX512_VNNI")
	if len(missing) == 0 {
		if f.HasAMX() && !f.AMXGranted {
			return []string{"AMX present but not granted by the OS (Linux 5.16 or later grants it): products take " + f.Best().String()}
		}
		return nil
	}
	sort.Strings(missing)
	out := []string{fmt.Sprintf("no %s: kernels fall back from %s to %s", strings.Join(missing, ", "), kernels.AVX512BF16, f.Best())}
	if f.Best() == kernels.Generic {
		out = append(out, "no AVX2+FMA: the pure Go path is an order of magnitude slower")
	}
	return out
}
