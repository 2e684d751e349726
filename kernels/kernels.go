// Package kernels chooses, once per process, which instruction-set path the
// compute kernels in its subpackages take.
//
// Kernels dispatch one way: whatever runs them binds the functions of its
// path once, when it is built (gemm.NewContext, attn.New, ops.For in the
// model's runner and the sampler), into a struct of function values, so a
// call runs its path's code without reading the path or switching on it.
// Force and Choose change the paths that later constructions bind.
//
// The choice is made from the CPU's features (klauspost/cpuid) and can be
// narrowed with the ELLM_KERNELS environment variable or Force, so that tests
// and users can pin a path: a faster path is always tested against the one
// below it, and a user who suspects a kernel can fall back without rebuilding.
package kernels

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/klauspost/cpuid/v2"
)

// Path is an instruction-set path. Each x86 path (AVX2 … AMX) needs the
// features of the ones below it; NEON is arm64's, beside Generic alone.
type Path int

const (
	// Generic is pure Go: always available, the reference every other path is tested against.
	Generic Path = iota
	// AVX2 uses 256-bit AVX2 + FMA with bf16 weights widened to f32.
	AVX2
	// AVX512 uses AVX-512 F/BW/VL with bf16 weights widened to f32 (f32 activations).
	AVX512
	// AVX512BF16 adds VDPBF16PS (bf16 activations × bf16 weights, f32 accumulation)
	// and VPDPBUSD for int8.
	AVX512BF16
	// AMX runs the bf16 and int8 products on AMX tiles (TDPBF16PS, TDPBUSD),
	// everything else as AVX512BF16. Its bf16 activations are rounded as on
	// AVX512BF16, but a tile instruction sums 32 products at a time with its
	// own rounding: not the same bits as VDPBF16PS. Its int8 sums are exact,
	// the same bits as every path.
	AMX
	// NEON is arm64's Advanced SIMD: bf16 weights widened to f32 and
	// multiplied with FMLA, the arithmetic of the AVX2 and AVX512 paths (one
	// fused multiply-add per output and K step, in order), so an arm64
	// server's products are the same bits as an x86 one's.
	NEON
	// NumPaths counts the paths.
	NumPaths
)

// EnvVar names the environment variable that forces a path.
const EnvVar = "ELLM_KERNELS"

var pathNames = [...]string{Generic: "generic", AVX2: "avx2", AVX512: "avx512", AVX512BF16: "avx512bf16", AMX: "amx", NEON: "neon"}

func (p Path) String() string {
	if p < 0 || p >= NumPaths {
		return fmt.Sprintf("Path(%d)", int(p))
	}
	return pathNames[p]
}

// ParsePath parses a path name as ELLM_KERNELS and --kernels spell it.
func ParsePath(s string) (Path, error) {
	for i, n := range pathNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return Path(i), nil
		}
	}
	return Generic, fmt.Errorf("unknown kernel path %q (want one of %s)", s, strings.Join(pathNames[:], ", "))
}

// Features is the subset of CPU features the kernels care about.
// It is a plain struct so that tests can describe CPUs we do not have.
type Features struct {
	AVX2, FMA, F16C                       bool
	AVX512F, AVX512BW, AVX512VL, AVX512DQ bool
	AVX512BF16, AVX512VNNI, AVX512FP16    bool
	AVXVNNI                               bool
	AMXTile, AMXBF16, AMXInt8             bool
	// ASIMD is arm64's Advanced SIMD (every arm64 CPU Go runs on has it),
	// ASIMDDP its dot products (SDOT: ARMv8.2's dotprod extension).
	ASIMD, ASIMDDP bool
	// AMXGranted: the OS lets this process use the AMX tiles (Linux asks
	// each process to request them).
	AMXGranted bool
}

// DetectFeatures reads the features of the CPU this process runs on, and
// where it has AMX asks the OS for the tiles (which Linux grants per process).
func DetectFeatures() Features {
	c := cpuid.CPU
	return Features{
		AVX2: c.Supports(cpuid.AVX2), FMA: c.Supports(cpuid.FMA3), F16C: c.Supports(cpuid.F16C),
		AVX512F: c.Supports(cpuid.AVX512F), AVX512BW: c.Supports(cpuid.AVX512BW),
		AVX512VL: c.Supports(cpuid.AVX512VL), AVX512DQ: c.Supports(cpuid.AVX512DQ),
		AVX512BF16: c.Supports(cpuid.AVX512BF16), AVX512VNNI: c.Supports(cpuid.AVX512VNNI),
		AVX512FP16: c.Supports(cpuid.AVX512FP16), AVXVNNI: c.Supports(cpuid.AVXVNNI),
		AMXTile: c.Supports(cpuid.AMXTILE), AMXBF16: c.Supports(cpuid.AMXBF16), AMXInt8: c.Supports(cpuid.AMXINT8),
		AMXGranted: c.Supports(cpuid.AMXTILE) && requestAMX(),
		ASIMD:      c.Supports(cpuid.ASIMD), ASIMDDP: c.Supports(cpuid.ASIMDDP),
	}
}

// HasAMX reports whether the CPU has the AMX tiles the AMX path uses
// (AMX-TILE, AMX-BF16 and AMX-INT8), granted by the OS or not.
func (f Features) HasAMX() bool { return f.AMXTile && f.AMXBF16 && f.AMXInt8 }

// Best is the fastest path a CPU with features f can run.
func (f Features) Best() Path {
	avx512bf16 := f.AVX512F && f.AVX512BW && f.AVX512VL && f.AVX512BF16 && f.AVX512VNNI
	switch {
	case avx512bf16 && f.HasAMX() && f.AMXGranted:
		return AMX
	case avx512bf16:
		return AVX512BF16
	case f.AVX512F && f.AVX512BW && f.AVX512VL:
		return AVX512
	case f.AVX2 && f.FMA:
		return AVX2
	case f.ASIMD:
		return NEON
	}
	return Generic
}

// Supports reports whether a CPU with features f can run path p: Generic
// and the x86 paths up to its best, or NEON on arm64.
func (f Features) Supports(p Path) bool {
	b := f.Best()
	if b == NEON || p == NEON {
		return p == Generic || p == b
	}
	return p >= Generic && p <= b
}

// RoundsToBF16 reports whether p's bf16 products round the activations to
// bf16 (VDPBF16PS, AMX tiles); the other paths multiply them in f32.
func (p Path) RoundsToBF16() bool { return p == AVX512BF16 || p == AMX }

// Op is a class of operation whose path is chosen on its own, at start-up,
// from a measurement (kernels/tune): which path is fastest for it differs
// between CPUs (VDPBF16PS runs at twice the f32 FMA rate on AMD Zen 5, at
// half of it on the Intel Xeon measured). Every other kernel takes Active.
type Op int

const (
	// MatMulBF16 is every product with bf16 weights. Prefill GEMM and decode
	// GEMV share it: a row's result must not depend on how many rows are
	// computed together, so they cannot take different paths.
	MatMulBF16 Op = iota
	// MatMulInt8 is every product with int8 weights (the same bits on every path).
	MatMulInt8
	// Attention is attention over a bf16 KV cache: avx512bf16 runs it in
	// bf16 (VDPBF16PS, q and the probabilities rounded to bf16), a lower path
	// in f32 FMA (kernels/attn, Mode). Prefill and decode share it (row
	// invariance).
	Attention
	// NumOps counts the operation classes.
	NumOps
)

var opNames = [...]string{MatMulBF16: "matmul-bf16", MatMulInt8: "matmul-int8", Attention: "attention-bf16"}

func (o Op) String() string {
	if o < 0 || o >= NumOps {
		return fmt.Sprintf("Op(%d)", int(o))
	}
	return opNames[o]
}

var (
	cpu    = DetectFeatures()
	active atomic.Int32         // the Path kernels built from now on bind
	chosen [NumOps]atomic.Int32 // an Op's own path (Choose), or -1 to follow active
	envErr error
	forced bool       // ELLM_KERNELS named a usable path
	mu     sync.Mutex // serialises Force and Choose
)

func init() {
	var p Path
	p, forced, envErr = startPath(cpu, assembly, os.Getenv(EnvVar))
	active.Store(int32(p))
	for i := range chosen {
		chosen[i].Store(-1)
	}
}

// startPath is the path the kernels start on: env's (ELLM_KERNELS), if a CPU
// with features f runs it, else the best path f runs, or in a build without
// assembly (asm false) the generic one: there every path runs the same Go
// kernels, the bf16 path's emulation of VDPBF16PS aside, which env can still
// ask for.
func startPath(f Features, asm bool, env string) (p Path, forced bool, err error) {
	p = f.Best()
	if !asm {
		p = Generic
	}
	if env == "" {
		return p, false, nil
	}
	e, err := ParsePath(env)
	switch {
	case err != nil:
		return p, false, fmt.Errorf("%s: %w", EnvVar, err)
	case !f.Supports(e):
		return p, false, fmt.Errorf("%s=%s: this CPU supports at most %s", EnvVar, e, f.Best())
	}
	return e, true, nil
}

// Active is the path the kernels take: what builds kernels reads it then
// and binds that path's functions (it is not read per call). It changes only
// through Force, which is for start-up and tests.
func Active() Path { return Path(active.Load()) }

// EnvError reports an unusable ELLM_KERNELS value (the best path is used instead),
// so that commands can refuse to start rather than silently run another path.
func EnvError() error { return envErr }

// Assembly reports whether this build has assembly kernels (amd64 or arm64
// without the purego tag). Without them every path runs pure Go, and the
// kernels take the generic path unless ELLM_KERNELS names another.
func Assembly() bool { return assembly }

// CPU is the feature set detected at start-up.
func CPU() Features { return cpu }

// Forced reports whether ELLM_KERNELS chose the path of every operation.
func Forced() bool { return forced }

// Force selects path p for every operation for the rest of the process (or
// until the next Force), undoing Choose, and returns the previous Active
// path: contexts, attentions, runners and samplers built afterwards bind
// p's kernels (those built before keep theirs), which is how tests run
// every path. It fails if this CPU cannot run p.
func Force(p Path) (Path, error) {
	mu.Lock()
	defer mu.Unlock()
	if !cpu.Supports(p) {
		return Active(), fmt.Errorf("kernel path %s: this CPU supports at most %s", p, cpu.Best())
	}
	for i := range chosen {
		chosen[i].Store(-1)
	}
	return Path(active.Swap(int32(p))), nil
}

// Choose sets the path of one operation class, at start-up (kernels/tune
// does, from a measurement); kernels created afterwards take it. It fails if
// this CPU cannot run p or ELLM_KERNELS forces one path for everything.
func Choose(op Op, p Path) error {
	mu.Lock()
	defer mu.Unlock()
	switch {
	case op < 0 || op >= NumOps:
		return fmt.Errorf("kernels: no operation %d", int(op))
	case forced:
		return fmt.Errorf("kernels: %s=%s forces one path for every operation", EnvVar, Active())
	case !cpu.Supports(p):
		return fmt.Errorf("kernel path %s for %s: this CPU supports at most %s", p, op, cpu.Best())
	}
	chosen[op].Store(int32(p))
	return nil
}

// PathFor is the path op takes: the one chosen for it, else Active.
func PathFor(op Op) Path {
	if p := chosen[op].Load(); p >= 0 {
		return Path(p)
	}
	return Active()
}

// Describe names the paths in use: Active alone when every operation takes
// it, else Active and the operations that differ ("avx512bf16, matmul-bf16
// avx512"). Results can differ between two descriptions (the session store
// keys its files by it).
func Describe() string { return DescribePaths(Active(), PathFor) }

// DescribePaths is Describe for active and the operations' paths given by pathFor.
func DescribePaths(active Path, pathFor func(Op) Path) string {
	s := active.String()
	for op := range NumOps {
		if p := pathFor(op); p != active {
			s += fmt.Sprintf(", %s %s", op, p)
		}
	}
	return s
}

// Available lists the paths this CPU can run, slowest first.
func Available() []Path {
	var ps []Path
	for p := range NumPaths {
		if cpu.Supports(p) {
			ps = append(ps, p)
		}
	}
	return ps
}
