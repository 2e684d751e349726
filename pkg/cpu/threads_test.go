package cpu

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeFiles creates files (path relative to root → content).
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// smtRoot is /sys for cores×2 CPUs numbered as Linux does on x86: CPU c and
// c+cores are the two hyperthreads of core c.
func smtRoot(t *testing.T, cores int) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{}
	for c := range 2 * cores {
		d := fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/", c)
		core := c % cores
		files[d+"physical_package_id"] = "0\n"
		files[d+"core_id"] = fmt.Sprintf("%d\n", core)
		files[d+"thread_siblings_list"] = fmt.Sprintf("%d,%d\n", core, core+cores)
	}
	writeFiles(t, root, files)
	return root
}

func mask(cpus ...int) func() ([]int, error) {
	return func() ([]int, error) { return cpus, nil }
}

func TestDefaultThreadsTopology(t *testing.T) {
	root := smtRoot(t, 4)
	tests := []struct {
		name     string
		affinity []int
		n        int
		cpus     []int
	}{
		{"whole machine: one thread per core, no siblings", []int{0, 1, 2, 3, 4, 5, 6, 7}, 4, []int{0, 1, 2, 3}},
		{"two hyperthreads of one core", []int{1, 5}, 1, []int{1}},
		{"siblings only", []int{4, 5, 6}, 3, []int{4, 5, 6}},
		{"mixed", []int{2, 6, 3}, 2, []int{2, 3}},
		{"taskset -c 0", []int{0}, 1, []int{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			th := DefaultThreads(Source{Root: root, Affinity: mask(tc.affinity...)})
			if th.N != tc.n || !slices.Equal(th.CPUs, tc.cpus) {
				t.Errorf("N %d CPUs %v, want %d %v (%s)", th.N, th.CPUs, tc.n, tc.cpus, th.Why)
			}
			if len(th.Allowed) != len(tc.affinity) {
				t.Errorf("allowed %v, want %v", th.Allowed, tc.affinity)
			}
			want := fmt.Sprintf("%d (affinity %d CPUs, cgroup quota none, %d physical cores)", tc.n, len(tc.affinity), tc.n)
			if th.Why != want {
				t.Errorf("why %q, want %q", th.Why, want)
			}
		})
	}
}

// Without thread_siblings_list the (package, core_id) pair names a core, and
// without any topology each CPU is a core.
func TestDefaultThreadsCoreIDFallback(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{}
	for c := range 4 { // two packages × one core × two threads, siblings adjacent
		d := fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/", c)
		files[d+"physical_package_id"] = fmt.Sprint(c / 2)
		files[d+"core_id"] = "0"
	}
	writeFiles(t, root, files)
	th := DefaultThreads(Source{Root: root, Affinity: mask(0, 1, 2, 3)})
	if th.N != 2 || !slices.Equal(th.CPUs, []int{0, 2}) {
		t.Errorf("core_id fallback: N %d CPUs %v, want 2 [0 2]", th.N, th.CPUs)
	}
	th = DefaultThreads(Source{Root: t.TempDir(), Affinity: mask(3, 1, 2)})
	if th.N != 3 || !slices.Equal(th.CPUs, []int{1, 2, 3}) || th.Cores != 3 {
		t.Errorf("no topology: N %d CPUs %v cores %d, want 3 [1 2 3] 3", th.N, th.CPUs, th.Cores)
	}
}

func TestPinCPUs(t *testing.T) {
	th := DefaultThreads(Source{Root: smtRoot(t, 2), Affinity: mask(0, 1, 2, 3)})
	for n, want := range map[int][]int{1: {0}, 2: {0, 1}, 3: {0, 1, 2}, 4: {0, 1, 2, 3}, 6: {0, 1, 2, 3, 0, 1}} {
		if got := th.PinCPUs(n); !slices.Equal(got, want) {
			t.Errorf("PinCPUs(%d) = %v, want %v (cores first, then siblings, then around)", n, got, want)
		}
	}
}

// cgroupRoot adds /proc/self/cgroup and /proc/self/mountinfo and the
// cgroup files to a machine with 8 cores.
func cgroupRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := smtRoot(t, 8)
	writeFiles(t, root, files)
	return root
}

func TestDefaultThreadsCgroup(t *testing.T) {
	const v2mount = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
	tests := []struct {
		name  string
		files map[string]string
		n     int
		quota float64
		file  string
	}{
		{"v2 in a cgroup namespace", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"proc/self/mountinfo":      v2mount,
			"sys/fs/cgroup/cpu.max":    "250000 100000\n",
			"sys/fs/cgroup/cpu.weight": "100\n",
		}, 2, 2.5, "sys/fs/cgroup/cpu.max"},
		{"v2 without namespace: the process's own cgroup", map[string]string{
			"proc/self/cgroup":                                "0::/system.slice/ellm.service\n",
			"proc/self/mountinfo":                             v2mount,
			"sys/fs/cgroup/system.slice/cpu.max":              "max 100000\n",
			"sys/fs/cgroup/system.slice/ellm.service/cpu.max": "150000 100000\n",
		}, 1, 1.5, "sys/fs/cgroup/system.slice/ellm.service/cpu.max"},
		{"v2: an ancestor's limit is tighter", map[string]string{
			"proc/self/cgroup":                       "0::/kubepods/pod1/c1\n",
			"proc/self/mountinfo":                    v2mount,
			"sys/fs/cgroup/kubepods/pod1/cpu.max":    "300000 100000\n",
			"sys/fs/cgroup/kubepods/pod1/c1/cpu.max": "max 100000\n",
		}, 3, 3, "sys/fs/cgroup/kubepods/pod1/cpu.max"},
		{"v2: quota below one CPU still runs one thread", map[string]string{
			"proc/self/cgroup":      "0::/\n",
			"proc/self/mountinfo":   v2mount,
			"sys/fs/cgroup/cpu.max": "50000 100000\n",
		}, 1, 0.5, "sys/fs/cgroup/cpu.max"},
		{"v2: quota above the cores", map[string]string{
			"proc/self/cgroup":      "0::/\n",
			"proc/self/mountinfo":   v2mount,
			"sys/fs/cgroup/cpu.max": "6400000 100000\n",
		}, 8, 64, "sys/fs/cgroup/cpu.max"},
		{"v1 cpu,cpuacct in a docker container (mount root is the cgroup)", map[string]string{
			"proc/self/cgroup": "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n",
			"proc/self/mountinfo": "25 20 0:22 / /sys/fs/cgroup ro - tmpfs tmpfs ro\n" +
				"29 25 0:26 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid master:9 - cgroup cgroup rw,cpu,cpuacct\n",
			"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":  "400000\n",
			"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
		}, 4, 4, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us"},
		{"hybrid v1/v2 host without limits (-1, no cpu.max)", map[string]string{
			"proc/self/cgroup": "4:memory:/x\n1:cpu:/\n0::/\n",
			"proc/self/mountinfo": "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n" +
				"41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us":  "-1\n",
			"sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
		}, 8, 0, ""},
		{"mount point with a space", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"proc/self/mountinfo":      "30 23 0:26 / /sys/fs/my\\040cgroup rw - cgroup2 cgroup2 rw\n",
			"sys/fs/my cgroup/cpu.max": "200000 100000\n",
		}, 2, 2, "sys/fs/my cgroup/cpu.max"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := cgroupRoot(t, tc.files)
			th := DefaultThreads(Source{Root: root, Affinity: mask(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)})
			if th.N != tc.n || th.Quota != tc.quota || th.Cores != 8 {
				t.Errorf("N %d quota %v cores %d, want %d %v 8 (%s; notes %v)", th.N, th.Quota, th.Cores, tc.n, tc.quota, th.Why, th.Notes)
			}
			wantFile := ""
			if tc.file != "" {
				wantFile = filepath.Join(root, tc.file)
			}
			if th.QuotaFile != wantFile {
				t.Errorf("quota file %q, want %q", th.QuotaFile, wantFile)
			}
			if len(th.CPUs) != th.N {
				t.Errorf("pinned to %v for %d threads", th.CPUs, th.N)
			}
			if tc.quota > 0 && !strings.Contains(th.Why, "cgroup quota ") || tc.quota == 0 && !strings.Contains(th.Why, "cgroup quota none") {
				t.Errorf("why %q does not name the quota", th.Why)
			}
			if len(th.Notes) != 0 {
				t.Errorf("notes %v", th.Notes)
			}
		})
	}
}

// A CPUID that claims 254 cores (as the hypervisor of a 2-vCPU cloud guest
// does) must not change the answer.
func TestDefaultThreadsIgnoresCPUID(t *testing.T) {
	root := smtRoot(t, 1)
	honest := DefaultThreads(Source{Root: root, Affinity: mask(0, 1)})
	liar := DefaultThreads(Source{Root: root, Affinity: mask(0, 1), Identity: Identity{PhysicalCores: 254, LogicalCores: 254}})
	if honest.N != 1 || liar.N != honest.N || liar.Why != honest.Why || !slices.Equal(liar.CPUs, honest.CPUs) {
		t.Errorf("honest %+v, lying CPUID %+v", honest, liar)
	}
	// The real machine's CPUID, replaced by a liar, gives the same answer too.
	sys := System()
	real := DefaultThreads(sys)
	sys.Identity.PhysicalCores, sys.Identity.LogicalCores = 254, 254
	if lied := DefaultThreads(sys); lied.N != real.N || lied.Why != real.Why {
		t.Errorf("this machine: %s, with CPUID claiming 254 cores: %s", real.Why, lied.Why)
	}
}

func TestDefaultThreadsMissingFiles(t *testing.T) {
	th := DefaultThreads(Source{Root: t.TempDir(), Affinity: func() ([]int, error) { return nil, fmt.Errorf("no") }})
	if th.N < 1 || len(th.CPUs) != th.N || len(th.Notes) != 1 || th.Quota != 0 {
		t.Errorf("N %d CPUs %v quota %v notes %v: want at least one thread, no quota (no cgroups), a note for the affinity", th.N, th.CPUs, th.Quota, th.Notes)
	}
	// A cgroup file without its mount table is a note, not a failure.
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"proc/self/cgroup": "0::/\n"})
	if th := DefaultThreads(Source{Root: root, Affinity: mask(0)}); th.N != 1 || len(th.Notes) != 1 || !strings.HasPrefix(th.Notes[0], "cgroup quota:") {
		t.Errorf("N %d notes %v", th.N, th.Notes)
	}
}

// The real machine: at most the CPUs sched_getaffinity allows.
func TestDefaultThreadsSystem(t *testing.T) {
	allowed, err := SchedAffinity()
	if err != nil {
		t.Skip(err)
	}
	th := DefaultThreads(System())
	if th.N < 1 || th.N > len(allowed) || !slices.Equal(th.Allowed, allowed) {
		t.Errorf("%s: allowed %v, sched_getaffinity %v", th.Why, th.Allowed, allowed)
	}
	for _, c := range th.CPUs {
		if !slices.Contains(allowed, c) {
			t.Errorf("pinned to CPU %d outside the mask %v", c, allowed)
		}
	}
	t.Logf("this machine: %s, pinned to %v", th.Why, th.CPUs)
}

// envTasksetChild makes the test binary print DefaultThreads(System()) as
// JSON instead of running tests: the parent runs it under taskset.
const envTasksetChild = "ELLM_CPU_TEST_PRINT_THREADS"

func TestMain(m *testing.M) {
	if os.Getenv(envTasksetChild) == "1" {
		if err := json.NewEncoder(os.Stdout).Encode(DefaultThreads(System())); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Under taskset -c 0 the process may use one CPU, whatever the machine has.
func TestDefaultThreadsUnderTaskset(t *testing.T) {
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		t.Skipf("no taskset on PATH (%v): the affinity mask is covered by the injected tests", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(taskset, "-c", "0", exe)
	cmd.Env = append(os.Environ(), envTasksetChild+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("taskset -c 0 %s: %v", exe, err)
	}
	var th Threads
	if err := json.Unmarshal(out, &th); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if th.N != 1 || !slices.Equal(th.Allowed, []int{0}) || !slices.Equal(th.CPUs, []int{0}) {
		t.Errorf("under taskset -c 0: %+v", th)
	}
	if !strings.HasPrefix(th.Why, "1 (affinity 1 CPUs,") {
		t.Errorf("why %q", th.Why)
	}
}

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string][]int{"0": {0}, "0-3\n": {0, 1, 2, 3}, "0,4": {0, 4}, "1-2,8,10-11": {1, 2, 8, 10, 11}, "": nil} {
		got, err := ParseCPUList(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"a", "3-1", "1-", "-2", "1,,x", "0-99999999"} {
		if got, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) = %v, want an error", bad, got)
		}
	}
}

func TestFormatCPUList(t *testing.T) {
	for want, cpus := range map[string][]int{"none": nil, "0": {0}, "0-3,8": {0, 1, 2, 3, 8}, "4,0-1": {4, 0, 1}, "1,3,5": {1, 3, 5}} {
		if got := FormatCPUList(cpus); got != want {
			t.Errorf("FormatCPUList(%v) = %q, want %q", cpus, got, want)
		}
	}
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0", "0-3", "1-2,8,10-11", "3-1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseCPUList(s)
		if err != nil || len(cpus) == 0 {
			return
		}
		again, err := ParseCPUList(FormatCPUList(cpus))
		if err != nil || !slices.Equal(again, cpus) {
			t.Errorf("%q → %v, reformatted → %v, %v", s, cpus, again, err)
		}
	})
}
