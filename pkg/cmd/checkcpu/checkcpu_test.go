package checkcpu

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/tune"
	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/cpu"
	"github.com/ellm-dev/ellm/pkg/cpu/cputest"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// machine describes a fake machine: features, and memory available in GiB.
func machine(t *testing.T, f kernels.Features, availGiB int, thp string) func() cpu.Source {
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
	for i := 0; i < 4; i++ {
		write(fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/physical_package_id", i), "0")
		write(fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/core_id", i), fmt.Sprint(i/2))
	}
	write("sys/devices/system/node/node0/cpulist", "0-3")
	kb := availGiB << 20
	write("proc/meminfo", fmt.Sprintf("MemTotal: %d kB\nMemAvailable: %d kB\n", 2*kb, kb))
	write("sys/kernel/mm/transparent_hugepage/enabled", thp)
	return func() cpu.Source {
		return cpu.Source{Identity: cpu.Identity{Vendor: "GenuineIntel", Model: "Test CPU"}, Features: f, Root: root}
	}
}

// twoNodes is machine split into two NUMA nodes of one core (two SMT
// threads) each, with freeGiB free on each.
func twoNodes(t *testing.T, freeGiB int) func() cpu.Source {
	src := machine(t, sapphire, 64, "madvise")
	root := src().Root
	cputest.WriteTree(t, root, map[string]string{
		"sys/devices/system/node/node0/cpulist": "0-1",
		"sys/devices/system/node/node1/cpulist": "2-3",
		"sys/devices/system/node/node0/meminfo": fmt.Sprintf("Node 0 MemFree: %d kB\n", freeGiB<<20),
		"sys/devices/system/node/node1/meminfo": fmt.Sprintf("Node 1 MemFree: %d kB\n", freeGiB<<20),
	})
	return src
}

// cgroupMachine is machine with a cgroup v2 memory limit of limitGiB.
func cgroupMachine(t *testing.T, availGiB, limitGiB int) func() cpu.Source {
	src := machine(t, sapphire, availGiB, "madvise")
	root := src().Root
	cputest.WriteTree(t, root, map[string]string{
		"proc/self/cgroup":                 "0::/pod\n",
		"proc/self/mountinfo":              "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
		"sys/fs/cgroup/pod/memory.max":     fmt.Sprint(int64(limitGiB) << 30),
		"sys/fs/cgroup/pod/memory.current": "0",
	})
	return src
}

var (
	sapphire = kernels.Features{AVX2: true, FMA: true, F16C: true, AVX512F: true, AVX512BW: true, AVX512VL: true, AVX512DQ: true, AVX512BF16: true, AVX512VNNI: true, AVX512FP16: true}
	haswell  = kernels.Features{AVX2: true, FMA: true, F16C: true}
)

func run(t *testing.T, opts *Options) (string, error) {
	t.Helper()
	var out bytes.Buffer
	opts.IO = cmdutil.IOStreams{Out: &out, ErrOut: &out}
	if opts.ActivePath == nil {
		opts.ActivePath = func() kernels.Path { return kernels.AVX512BF16 }
	}
	if opts.KernelsEnvError == nil {
		opts.KernelsEnvError = func() error { return nil }
	}
	if opts.Assembly == nil {
		opts.Assembly = func() bool { return true }
	}
	if opts.ChooseKernels == nil {
		opts.ChooseKernels = func(bool) (*tune.Result, error) { return &tune.Result{Source: "one path"}, nil }
	}
	if opts.DType == "" {
		opts.DType = "bf16"
	}
	if opts.KVDType == "" {
		opts.KVDType = "bf16"
	}
	if opts.SequenceLength == 0 {
		opts.SequenceLength = 4096
	}
	if opts.BatchSize == 0 {
		opts.BatchSize = 1
	}
	err := checkcpuRun(opts)
	return out.String(), err
}

func exitCode(err error) int {
	var ee *cmdutil.ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestCheckCPU(t *testing.T) {
	tests := []struct {
		name     string
		opts     Options
		wantExit int
		want     []string // substrings of the text output
	}{
		{"cpu only", Options{Machine: machine(t, sapphire, 16, "always [madvise] never")}, 0,
			[]string{"Test CPU", "2 physical cores, 4 threads", "AVX512_BF16", "Kernel path: avx512bf16", "OK: kernels take avx512bf16"}},
		{"no avx-512", Options{Machine: machine(t, haswell, 16, "[always] madvise never")}, 0,
			[]string{"Kernel path: avx2", "Missing      AVX512F", "warning: no AVX512BW, AVX512F, AVX512VL, AVX512_BF16, AVX512_VNNI: kernels fall back from avx512bf16 to avx2"}},
		{"no simd at all", Options{Machine: machine(t, kernels.Features{}, 16, "never")}, 0,
			[]string{"Kernel path: generic", "pure Go path", "transparent hugepages are off"}},
		{"a build without assembly", Options{Machine: machine(t, haswell, 16, "madvise"), Assembly: func() bool { return false },
			ActivePath: func() kernels.Path { return kernels.Generic }}, 0,
			[]string{"Kernel path: generic", "│ GEMM bf16 (prefill)                      │ generic │ pure Go f32",
				"warning: this build has no assembly kernels (-tags purego, or an architecture without them): every operation runs pure Go, where this CPU could take avx2"}},
		{"0.6b fits", Options{Machine: machine(t, sapphire, 16, "madvise"), Preset: "qwen3-0.6b", SequenceLength: 8192, BatchSize: 4}, 0,
			[]string{"Qwen3-0.6B", "0.596B total", "OK: Qwen3-0.6B (bf16) needs"}},
		{"30b bf16 does not fit", Options{Machine: machine(t, sapphire, 32, "madvise"), Preset: "qwen3-30b-a3b", SequenceLength: 32768, BatchSize: 4}, 1,
			[]string{"NOT DEPLOYABLE: needs", "3.353B active"}},
		{"30b int8 fits in 64", Options{Machine: machine(t, sapphire, 64, "madvise"), Preset: "Qwen3-30B-A3B", DType: "int8", SequenceLength: 8192, BatchSize: 2}, 0,
			[]string{"OK: Qwen3-30B-A3B (int8)"}},
		{"int8 without vnni", Options{Machine: machine(t, haswell, 64, "madvise"), Preset: "qwen3-0.6b", DType: "int8"}, 0,
			[]string{"int8 without AVX512_VNNI"}},
		{"sequence too long", Options{Machine: machine(t, sapphire, 64, "madvise"), Preset: "qwen3-0.6b", SequenceLength: 50000}, 1,
			[]string{"--sequence-length 50000 exceeds the model's context of 40960 positions"}},
		{"sequence too long, allowed", Options{Machine: machine(t, sapphire, 64, "madvise"), Preset: "qwen3-0.6b", SequenceLength: 50000, AllowLongContext: true, ChunkSize: 4096}, 0,
			[]string{"warning: --sequence-length 50000 exceeds the model's context of 40960 positions (allowed by --allow-long-context", "OK: Qwen3-0.6B"}},
		{"60M positions refused with the largest that fits", Options{Machine: machine(t, sapphire, 22, "madvise"), Preset: "qwen3-0.6b", SequenceLength: 60_000_000, AllowLongContext: true}, 1,
			[]string{"NOT DEPLOYABLE: needs", "the largest --sequence-length that fits with --batch-size 1 is", "112 KiB per position per slot"}},
		{"two NUMA nodes: the plan", Options{Machine: twoNodes(t, 30), Preset: "qwen3-8b", SequenceLength: 8192}, 0,
			[]string{"NUMA plan (--numa auto): 2 workers pinned node by node", "node 0: workers 0-0 on CPUs 0; holds", "node 1: workers 1-1 on CPUs 2; holds",
				"interleaved page by page over nodes [0 1]"}},
		{"two NUMA nodes, too little free on each", Options{Machine: twoNodes(t, 4), Preset: "qwen3-8b", SequenceLength: 8192}, 0,
			[]string{"warning: node 0 holds", "pages spill to other nodes"}},
		{"cgroup limit binds", Options{Machine: cgroupMachine(t, 64, 8), Preset: "qwen3-8b", SequenceLength: 8192}, 1,
			[]string{"NOT DEPLOYABLE: needs", "cgroup /pod limit 8589934592 bytes"}},
		{"bad ELLM_KERNELS", Options{Machine: machine(t, haswell, 64, "madvise"), KernelsEnvError: func() error { return errors.New("ELLM_KERNELS=avx512: this CPU supports at most avx2") }}, 1,
			[]string{"NOT DEPLOYABLE: ELLM_KERNELS=avx512"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, &tc.opts)
			if got := exitCode(err); got != tc.wantExit {
				t.Fatalf("exit %d (%v), want %d\n%s", got, err, tc.wantExit, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestCheckCPUErrors(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Preset: "qwen3-0.6b", ModelPath: "x"}, "not both"},
		{Options{Preset: "gpt-2"}, `unknown preset "gpt-2"`},
		{Options{Preset: "qwen3-0.6b", DType: "fp4"}, `weight dtype "fp4"`},
		{Options{Preset: "qwen3-0.6b", KVDType: "int4"}, `dtype "int4"`},
		{Options{ModelPath: "/nonexistent"}, "/nonexistent"},
	} {
		tc.opts.Machine = machine(t, sapphire, 16, "madvise")
		_, err := run(t, &tc.opts)
		if err == nil || exitCode(err) != -1 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one containing %q", tc.opts, err, tc.want)
		}
	}
}

func TestCheckCPUJSON(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3moe-a")
	out, err := run(t, &Options{Machine: machine(t, haswell, 8, "madvise"), ModelPath: dir, JSON: true, DType: "int8", KVDType: "f32", SequenceLength: 1024, BatchSize: 2})
	if err != nil {
		t.Fatal(err, out)
	}
	var r struct {
		CPU struct {
			Features map[string]bool `json:"features"`
			Threads  int             `json:"threads"`
		} `json:"cpu"`
		KernelPath string `json:"kernel_path"`
		Deployment struct {
			Params       int64 `json:"params"`
			KVCacheBytes int64 `json:"kv_cache_bytes"`
			TotalBytes   int64 `json:"total_bytes"`
		} `json:"deployment"`
		Deployable bool     `json:"deployable"`
		Warnings   []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err, out)
	}
	// 2 layers × 2 kv heads × 16 × 1024 positions × 2 slots × (K, V) × 4 bytes.
	if r.Deployment.KVCacheBytes != 2*2*16*1024*2*2*4 || r.Deployment.Params != 19_572_096 {
		t.Errorf("deployment %+v", r.Deployment)
	}
	if !r.Deployable || r.KernelPath != "avx2" || r.CPU.Features["AVX512F"] || !r.CPU.Features["AVX2"] || r.CPU.Threads != 4 {
		t.Errorf("report %+v", r)
	}
}

// On the real machine, --json must tell the truth about the features the
// kernel reports in /proc/cpuinfo.
func TestCheckCPURealMachine(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("x86 only")
	}
	flags, err := cpu.CPUInfoFlags("/proc/cpuinfo")
	if err != nil {
		t.Skip(err)
	}
	out, err := run(t, &Options{Machine: cpu.System, ActivePath: kernels.Active, KernelsEnvError: kernels.EnvError, JSON: true})
	if err != nil && exitCode(err) != 1 {
		t.Fatal(err)
	}
	var r struct {
		CPU struct {
			Features map[string]bool `json:"features"`
		} `json:"cpu"`
		KernelPath string `json:"kernel_path"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	for _, f := range cpu.FeatureList(kernels.Features{}) {
		if r.CPU.Features[f.Name] != flags[f.Flag] {
			t.Errorf("%s = %v, /proc/cpuinfo %s = %v", f.Name, r.CPU.Features[f.Name], f.Flag, flags[f.Flag])
		}
	}
	if r.KernelPath != kernels.Active().String() {
		t.Errorf("kernel path %s, active %s", r.KernelPath, kernels.Active())
	}
}

func TestNewCmdFlags(t *testing.T) {
	var got *Options
	f := &cmdutil.Factory{IO: cmdutil.IOStreams{Out: &bytes.Buffer{}}}
	cmd := NewCmdCheckCPU(f, func(o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--preset", "qwen3-8b", "--sequence-length", "8192", "--batch-size", "3", "--dtype", "int8", "--kv-dtype", "f32", "--json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Preset != "qwen3-8b" || got.SequenceLength != 8192 || got.BatchSize != 3 || got.DType != "int8" || got.KVDType != "f32" || !got.JSON {
		t.Errorf("options %+v", got)
	}
	if got.Machine == nil || got.ActivePath == nil {
		t.Error("defaults for machine detection not set")
	}
}

// The compute threads come from the machine's topology (4 CPUs, 2 cores
// here), whatever CPUID claims, in the text and the JSON alike.
func TestComputeThreads(t *testing.T) {
	m := machine(t, sapphire, 64, "[madvise]")
	liar := func() cpu.Source {
		s := m()
		s.Identity.PhysicalCores, s.Identity.LogicalCores = 254, 254
		return s
	}
	const want = "Threads      2 (affinity 4 CPUs, cgroup quota none, 2 physical cores), pinned to CPUs 0,2"
	out, err := run(t, &Options{Machine: liar})
	if err != nil || !strings.Contains(out, want) {
		t.Errorf("err %v, output lacks %q:\n%s", err, want, out)
	}
	out, err = run(t, &Options{Machine: liar, JSON: true})
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Threads struct {
			N    int    `json:"n"`
			CPUs []int  `json:"cpus"`
			Why  string `json:"why"`
		} `json:"compute_threads"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Threads.N != 2 || fmt.Sprint(r.Threads.CPUs) != "[0 2]" || !strings.HasPrefix(want[13:], r.Threads.Why) {
		t.Errorf("compute_threads %+v", r.Threads)
	}
}

// The matrix products' paths come from the calibration: check-cpu shows the
// choice, where it came from and the measured rates, in text and JSON.
func TestKernelChoice(t *testing.T) {
	measured := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	calibrated := func(recalibrate bool) (*tune.Result, error) {
		source := "cache"
		if recalibrate {
			source = "measured"
		}
		return &tune.Result{Source: source, CacheFile: "/cache/ellm/kernels-x.json",
			Calibration: &tune.Calibration{Measured: measured, Took: 98 * time.Millisecond,
				Rates: []tune.Rate{{Op: "matmul-bf16", Path: "avx512bf16", Rate: 82}, {Op: "matmul-bf16", Path: "avx512", Rate: 160}}},
			Choices: []tune.Choice{
				{Op: kernels.MatMulBF16, Path: kernels.AVX512, Why: "measured avx512bf16 82.0 vs avx512 160.0 GFLOP/s per thread"},
				{Op: kernels.MatMulInt8, Path: kernels.AVX512BF16, Why: "no other path to measure it against"},
			}}, nil
	}
	var asked []bool
	choose := func(re bool) (*tune.Result, error) { asked = append(asked, re); return calibrated(re) }
	out, err := run(t, &Options{Machine: machine(t, sapphire, 64, "[madvise]"), ChooseKernels: choose})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"│ GEMM bf16 (prefill)", "│ avx512     │ AVX-512 FMA: bf16 weights widened to f32 exactly",
		"│ GEMM int8 (prefill)                      │ avx512bf16 │ VPDPBUSD",
		"Chosen from the calibration measured 2026-12-03T08:00:00Z (/cache/ellm/kernels-x.json):",
		"  matmul-bf16    avx512      measured avx512bf16 82.0 vs avx512 160.0 GFLOP/s per thread",
		"  matmul-int8    avx512bf16  no other path to measure it against",
		"Kernel path: avx512bf16, matmul-bf16 avx512\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = run(t, &Options{Machine: machine(t, sapphire, 64, "[madvise]"), ChooseKernels: choose, JSON: true, Calibrate: true})
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Kernels []cpu.KernelChoice `json:"kernels"`
		Choice  struct {
			Source  string `json:"source"`
			Choices []struct{ Op, Path, Why string }
			Calib   struct {
				Rates []tune.Rate `json:"rates"`
			} `json:"calibration"`
		} `json:"kernel_choice"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Choice.Source != "measured" || len(r.Choice.Choices) != 2 || r.Choice.Choices[0].Op != "matmul-bf16" ||
		r.Choice.Choices[0].Path != "avx512" || len(r.Choice.Calib.Rates) != 2 || r.Kernels[0].Path != "avx512" {
		t.Errorf("JSON %+v", r)
	}
	if fmt.Sprint(asked) != "[false true]" {
		t.Errorf("--calibrate was passed as %v", asked)
	}
	// A bad ELLM_KERNELS is a reason not to deploy, and nothing is measured.
	asked = nil
	_, err = run(t, &Options{Machine: machine(t, sapphire, 64, "[madvise]"), ChooseKernels: choose,
		KernelsEnvError: func() error { return errors.New("ELLM_KERNELS: unknown kernel path") }})
	if exitCode(err) != 1 || asked != nil {
		t.Errorf("bad ELLM_KERNELS: %v, measured %v", err, asked)
	}
}

// The kernel descriptions wrap within their cell: the report stays readable
// in a terminal rather than running to 300-character lines.
func TestReportWraps(t *testing.T) {
	out, err := run(t, &Options{Machine: machine(t, sapphire, 64, "[madvise]"), Preset: "qwen3-0.6b"})
	if err != nil {
		t.Fatal(err)
	}
	const most = 140
	for _, line := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(line); n > most && strings.HasPrefix(line, "│") {
			t.Errorf("a table line of %d characters (at most %d):\n%s", n, most, line)
		}
	}
}
