package cpu

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Threads is the default number of compute threads and the CPUs they are
// pinned to, decided from what this process may actually use: its affinity
// mask, its cgroup's CPU quota, and the physical cores in that mask. CPUID's
// core count plays no part (a hypervisor may claim 254 cores on a 2-vCPU guest).
type Threads struct {
	// N is the default thread count: one per physical core of the allowed
	// CPUs, at most the quota (rounded down), at least 1.
	N int `json:"n"`
	// CPUs are the N CPUs to pin workers to, one per physical core: the
	// lowest-numbered allowed CPU of each core.
	CPUs []int `json:"cpus"`
	// Allowed is the affinity mask: every CPU this process may run on.
	Allowed []int `json:"allowed_cpus"`
	// Cores is the number of physical cores among Allowed.
	Cores int `json:"physical_cores"`
	// Quota is the cgroup CPU bandwidth limit in CPUs (0 = none) and
	// QuotaFile the file that set it (the tightest along the cgroup's path).
	Quota     float64 `json:"cgroup_quota_cpus"`
	QuotaFile string  `json:"cgroup_quota_file,omitempty"`
	// Why says where N came from, for logs and reports.
	Why string `json:"why"`
	// Notes are what could not be read (the answer then assumes no limit there).
	Notes []string `json:"notes,omitempty"`

	order []int // allowed CPUs, one per core first, then their SMT siblings
}

// DefaultThreads decides the default compute thread count for every command.
func DefaultThreads(s Source) Threads {
	root := s.Root
	if root == "" {
		root = "/"
	}
	var t Threads
	allowed, err := s.allowedCPUs(root)
	if err != nil {
		t.Notes = append(t.Notes, fmt.Sprintf("affinity: %v", err))
	}
	t.Allowed = allowed
	cores, siblings := coreLeaders(root, allowed)
	t.Cores = len(cores)
	t.order = append(cores, siblings...)

	t.Quota, t.QuotaFile, err = cgroupQuota(root)
	if err != nil {
		t.Notes = append(t.Notes, fmt.Sprintf("cgroup quota: %v", err))
	}
	t.N = t.Cores
	if t.Quota > 0 {
		t.N = min(t.N, max(1, int(math.Floor(t.Quota))))
	}
	t.N = max(t.N, 1)
	t.CPUs = t.PinCPUs(t.N)

	quota := "none"
	if t.Quota > 0 {
		quota = fmt.Sprintf("%s CPUs (%s)", strconv.FormatFloat(t.Quota, 'f', -1, 64), filepath.Base(t.QuotaFile))
	}
	t.Why = fmt.Sprintf("%d (affinity %d CPUs, cgroup quota %s, %d physical cores)", t.N, len(t.Allowed), quota, t.Cores)
	return t
}

// Resolve is t for a request of n threads: t itself when n < 1 (the
// default), else n threads pinned by PinCPUs, with Why saying so.
func (t Threads) Resolve(n int) Threads {
	if n < 1 || n == t.N {
		return t
	}
	r := t
	r.N, r.CPUs = n, t.PinCPUs(n)
	r.Why = fmt.Sprintf("%d (requested; the default would be %s)", n, t.Why)
	return r
}

// PinCPUs lists the CPUs n workers are pinned to: one per physical core
// first, then the cores' SMT siblings, then around again when n exceeds the
// allowed CPUs (an explicit --threads larger than the machine).
func (t Threads) PinCPUs(n int) []int {
	if len(t.order) == 0 || n < 1 {
		return nil
	}
	out := make([]int, n)
	for i := range out {
		out[i] = t.order[i%len(t.order)]
	}
	return out
}

// allowedCPUs is the affinity mask: Source.Affinity when set, else every
// CPU of the topology under root (a described machine has no mask of its own).
func (s Source) allowedCPUs(root string) ([]int, error) {
	if s.Affinity != nil {
		cpus, err := s.Affinity()
		if err == nil && len(cpus) > 0 {
			cpus = slices.Clone(cpus)
			slices.Sort(cpus)
			return slices.Compact(cpus), nil
		}
		if err == nil {
			err = fmt.Errorf("empty mask")
		}
		return firstCPUs(runtime.NumCPU()), err
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "sys/devices/system/cpu/cpu[0-9]*"))
	var cpus []int
	for _, d := range dirs {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "cpu"))
		if err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "topology")); err == nil {
			cpus = append(cpus, n)
		}
	}
	if len(cpus) == 0 {
		return firstCPUs(runtime.NumCPU()), nil
	}
	slices.Sort(cpus)
	return cpus, nil
}

func firstCPUs(n int) []int {
	cpus := make([]int, n)
	for i := range cpus {
		cpus[i] = i
	}
	return cpus
}

// cpuSetSize is CPU_SETSIZE, the CPUs a unix.CPUSet holds.
const cpuSetSize = 1024

// SchedAffinity is this process's affinity mask (sched_getaffinity).
func SchedAffinity() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for i := 0; len(cpus) < set.Count() && i < cpuSetSize; i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}

// coreLeaders splits allowed CPUs into one per physical core (the first
// allowed CPU of each core, in CPU order) and the rest (SMT siblings). A core
// is its thread_siblings_list, else its (physical_package_id, core_id); a CPU
// without topology files counts as a core of its own.
func coreLeaders(root string, allowed []int) (cores, siblings []int) {
	seen := map[string]bool{}
	for _, c := range allowed {
		dir := filepath.Join(root, fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology", c))
		key := ""
		if b, err := os.ReadFile(filepath.Join(dir, "thread_siblings_list")); err == nil {
			if set, err := ParseCPUList(string(b)); err == nil && len(set) > 0 {
				key = fmt.Sprint(set)
			}
		}
		if key == "" {
			pkg, err1 := readInt(filepath.Join(dir, "physical_package_id"))
			core, err2 := readInt(filepath.Join(dir, "core_id"))
			if err1 == nil && err2 == nil {
				key = fmt.Sprintf("%d/%d", pkg, core)
			} else {
				key = fmt.Sprintf("cpu%d", c)
			}
		}
		if seen[key] {
			siblings = append(siblings, c)
			continue
		}
		seen[key] = true
		cores = append(cores, c)
	}
	return cores, siblings
}

// maxCPUs bounds CPU numbers (Linux's NR_CPUS is at most 8192).
const maxCPUs = 1 << 15

// ParseCPUList parses the kernel's CPU list format ("0-3,8,10-11").
func ParseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("cpu list %q: bad range %q", s, part)
			}
		}
		if a < 0 || b >= maxCPUs {
			return nil, fmt.Errorf("cpu list %q: CPU number out of range in %q", s, part)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// FormatCPUList writes cpus in the kernel's list format, ranges for runs
// of consecutive CPUs in the order given ("0-3,8"); "none" for no CPUs.
func FormatCPUList(cpus []int) string {
	if len(cpus) == 0 {
		return "none"
	}
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			fmt.Fprintf(&b, "-%d", cpus[j])
		}
		i = j + 1
	}
	return b.String()
}

// cgroupQuota is the tightest CPU bandwidth limit on this process's cgroup
// and its ancestors, in CPUs (0 = none): cgroup v2 cpu.max, v1
// cpu.cfs_quota_us / cpu.cfs_period_us. The cgroup comes from
// /proc/self/cgroup and its directory from /proc/self/mountinfo, so a
// container (cgroup namespace or not) and a hybrid v1/v2 host both work.
func cgroupQuota(root string) (cpus float64, file string, err error) {
	groups, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", nil // a kernel without cgroups sets no quota
	} else if err != nil {
		return 0, "", err
	}
	mounts, err := readMounts(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return 0, "", err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(groups)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		v2 := parts[0] == "0" && parts[1] == ""
		if !v2 && !slices.Contains(strings.Split(parts[1], ","), "cpu") {
			continue
		}
		for _, m := range mounts {
			if v2 && m.fstype != "cgroup2" || !v2 && (m.fstype != "cgroup" || !slices.Contains(m.superOpts, "cpu")) {
				continue
			}
			q, f := quotaAlong(filepath.Join(root, m.point), cgroupRel(m.root, parts[2]), v2)
			if q > 0 && (cpus == 0 || q < cpus) {
				cpus, file = q, f
			}
		}
	}
	return cpus, file, nil
}

// cgroupRel is the cgroup path below a mount of hierarchy root mroot. Inside
// a cgroup namespace both are "/"; without one the mount root is a prefix.
func cgroupRel(mroot, path string) string {
	if rel, ok := strings.CutPrefix(path, mroot); ok && mroot != "/" {
		return rel
	}
	if mroot == "/" {
		return path
	}
	return "/" // the process's cgroup is not under this mount's root: read the mount's own limit
}

// quotaAlong reads the limit of every cgroup from mount/rel up to mount and
// returns the smallest and the file it came from.
func quotaAlong(mount, rel string, v2 bool) (float64, string) {
	var best float64
	var file string
	dir := filepath.Join(mount, filepath.Clean("/"+rel))
	for {
		var q float64
		var f string
		if v2 {
			f = filepath.Join(dir, "cpu.max")
			q = readCPUMax(f)
		} else {
			f = filepath.Join(dir, "cpu.cfs_quota_us")
			q = readCFS(f, filepath.Join(dir, "cpu.cfs_period_us"))
		}
		if q > 0 && (best == 0 || q < best) {
			best, file = q, f
		}
		if dir == mount || len(dir) <= len(mount) {
			return best, file
		}
		dir = filepath.Dir(dir)
	}
}

// readCPUMax parses cgroup v2 "quota period" ("max period" = no limit).
func readCPUMax(path string) float64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] == "max" {
		return 0
	}
	q, err1 := strconv.ParseFloat(f[0], 64)
	p, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0
	}
	return q / p
}

// readCFS parses cgroup v1's quota (-1 = no limit) over its period.
func readCFS(quotaPath, periodPath string) float64 {
	q, err1 := readInt(quotaPath)
	p, err2 := readInt(periodPath)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0
	}
	return float64(q) / float64(p)
}

type mount struct {
	root, point, fstype string
	superOpts           []string
}

// readMounts parses /proc/self/mountinfo (proc(5)): fields up to " - " are
// ID, parent, device, root, mount point, options, optional tags; then the
// file system type, source and super options.
func readMounts(path string) ([]mount, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []mount
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		left, right, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		lf, rf := strings.Fields(left), strings.Fields(right)
		if len(lf) < 5 || len(rf) < 3 {
			continue
		}
		out = append(out, mount{root: unescapeMount(lf[3]), point: unescapeMount(lf[4]), fstype: rf[0],
			superOpts: strings.Split(rf[2], ",")})
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
