package cpu

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Memory is what this process may commit: the machine's memory and, when
// the process runs in a cgroup with a memory limit (a container, a systemd
// unit with MemoryMax), that limit and what the cgroup already uses.
type Memory struct {
	Total     int64 `json:"total_bytes"`     // MemTotal
	Available int64 `json:"available_bytes"` // MemAvailable
	// CgroupLimit is the tightest memory limit of this process's cgroup and
	// its ancestors (memory.max, or memory.limit_in_bytes under cgroup v1);
	// 0 when there is none.
	CgroupLimit int64 `json:"cgroup_limit_bytes,omitempty"`
	// CgroupUsage is that cgroup's working set: its usage minus the
	// inactive page cache the kernel reclaims before it hits the limit
	// (what the kubelet counts against a pod's limit).
	CgroupUsage int64  `json:"cgroup_usage_bytes,omitempty"`
	Cgroup      string `json:"cgroup,omitempty"` // the cgroup whose limit binds
}

// Usable is the memory a new allocation may take: MemAvailable, or less
// when the cgroup limit leaves less room. 0 means unknown.
func (m Memory) Usable() int64 {
	if m.CgroupLimit > 0 {
		room := max(m.CgroupLimit-m.CgroupUsage, 0)
		if m.Available <= 0 || room < m.Available {
			return room
		}
	}
	return m.Available
}

// Bound says which figure Usable comes from.
func (m Memory) Bound() string {
	if m.CgroupLimit > 0 && (m.Available <= 0 || m.CgroupLimit-m.CgroupUsage < m.Available) {
		return fmt.Sprintf("cgroup %s limit %d bytes, %d in use", m.Cgroup, m.CgroupLimit, m.CgroupUsage)
	}
	return "MemAvailable"
}

// ReadMemory reads /proc/meminfo and the process's memory cgroup under root
// ("/" for this machine; tests pass a fake tree). A missing cgroup is not an
// error: the machine's figures stand.
func ReadMemory(root string) (Memory, error) {
	if root == "" {
		root = "/"
	}
	mem, err := readMeminfo(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		return Memory{}, fmt.Errorf("memory: %w", err)
	}
	m := Memory{Total: mem["MemTotal"], Available: mem["MemAvailable"]}
	if m.Available == 0 {
		m.Available = mem["MemFree"] + mem["Cached"]
	}
	m.CgroupLimit, m.CgroupUsage, m.Cgroup, err = readCgroupMemory(root, m.Total)
	return m, err
}

// readCgroupMemory finds the tightest memory limit from the process's
// cgroup up to its hierarchy's root (cgroup v2 and v1 alike, located through
// /proc/self/cgroup and /proc/self/mountinfo as for the CPU quota).
func readCgroupMemory(root string, total int64) (limit, usage int64, name string, err error) {
	hs, err := cgroupHierarchies(root, "memory")
	if err != nil {
		return 0, 0, "", fmt.Errorf("memory cgroup: %w", err)
	}
	for _, h := range hs {
		limitFile, usageFile, inactive := "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"
		if h.v2 {
			limitFile, usageFile, inactive = "memory.max", "memory.current", "inactive_file"
		}
		upFrom(h.mount, h.rel, func(dir string) {
			lim, ok := readLimit(filepath.Join(dir, limitFile))
			// cgroup v1 reports "no limit" as a huge number: anything at or
			// above the machine's memory does not bind.
			if !ok || total > 0 && lim >= total || limit > 0 && lim >= limit || err != nil {
				return
			}
			cur, e := readInt64(filepath.Join(dir, usageFile))
			if e != nil {
				err = fmt.Errorf("memory cgroup %s: %w", dir, e)
				return
			}
			rel, _ := filepath.Rel(h.mount, dir)
			limit, usage, name = lim, max(cur-readStat(filepath.Join(dir, "memory.stat"), inactive), 0), path.Clean("/"+rel)
		})
	}
	if err != nil {
		return 0, 0, "", err
	}
	return limit, usage, name, nil
}

// readLimit reads a limit file: ok is false for "max", or a missing file (the
// root cgroup has none).
func readLimit(p string) (int64, bool) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

// readStat is one "key value" line of a memory.stat file, 0 if absent.
func readStat(p, key string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

func readInt64(p string) (int64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
