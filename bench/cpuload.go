package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CPUSnapshot is what a /proc tree says about CPU time at one moment, in
// clock ticks (/proc/stat and /proc/self/stat share the unit).
type CPUSnapshot struct {
	CPUs  int    // cpuN lines in /proc/stat
	Total uint64 // every CPU's time in every state
	Busy  uint64 // user, nice, system, irq, softirq: running someone's work
	Steal uint64 // time the hypervisor ran other guests on this VM's CPUs
	Own   uint64 // this process's user and system time, with its waited-for children's
}

// ReadCPUSnapshot reads proc/stat and proc/self/stat (proc is "/proc" but
// for tests).
func ReadCPUSnapshot(proc string) (CPUSnapshot, error) {
	var s CPUSnapshot
	stat, err := os.ReadFile(filepath.Join(proc, "stat"))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(stat), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if f[0] != "cpu" {
			s.CPUs++
			continue
		}
		// user nice system idle iowait irq softirq steal (guest time is inside user)
		if len(f) < 9 {
			return s, fmt.Errorf("%s/stat: cpu line has %d fields, want at least 8 counters", proc, len(f)-1)
		}
		var v [8]uint64
		for i := range v {
			if v[i], err = strconv.ParseUint(f[i+1], 10, 64); err != nil {
				return s, fmt.Errorf("%s/stat: %w", proc, err)
			}
			s.Total += v[i]
		}
		s.Busy = v[0] + v[1] + v[2] + v[5] + v[6]
		s.Steal = v[7]
	}
	if s.Total == 0 || s.CPUs == 0 {
		return s, fmt.Errorf("%s/stat: no cpu lines", proc)
	}
	self, err := os.ReadFile(filepath.Join(proc, "self", "stat"))
	if err != nil {
		return s, err
	}
	// The command name, in parentheses, may hold spaces: count fields after it.
	end := bytes.LastIndexByte(self, ')')
	f := strings.Fields(string(self[end+1:]))
	if end < 0 || len(f) < 15 {
		return s, fmt.Errorf("%s/self/stat: %d fields after the command name, want 15", proc, len(f))
	}
	for _, x := range f[11:15] { // utime stime cutime cstime (fields 14–17)
		n, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return s, fmt.Errorf("%s/self/stat: %w", proc, err)
		}
		s.Own += n
	}
	return s, nil
}

// CPULoad is the CPU that others used over an interval, in cores: processes
// other than this one and its children, and (Steal) other guests of the
// host, which a VM's /proc sees only as stolen time.
type CPULoad struct {
	Others float64 `json:"other_processes_cores"`
	Steal  float64 `json:"steal_cores"`
}

// OtherLoad is what others used between snapshots a and b. The benchmark's
// own threads, and llama.cpp's once it has exited, are not counted, so a
// script's previous runs do not make a machine look busy as the load average does.
func OtherLoad(a, b CPUSnapshot) CPULoad {
	total := float64(b.Total) - float64(a.Total)
	if total <= 0 {
		return CPULoad{}
	}
	cores := float64(b.CPUs) / total
	others := (float64(b.Busy) - float64(a.Busy)) - (float64(b.Own) - float64(a.Own))
	return CPULoad{Others: max(0, others) * cores, Steal: max(0, float64(b.Steal)-float64(a.Steal)) * cores}
}

// Busy reports whether l is enough to move a benchmark's figures: a quarter of a core.
func (l CPULoad) Busy() bool { return l.Others >= IdleCores || l.Steal >= IdleCores }

// IdleCores is the CPU others may use before a machine counts as busy.
const IdleCores = 0.25

// Idleness is what others did with the CPUs before and during a run.
type Idleness struct {
	Before CPULoad  `json:"before"`
	During *CPULoad `json:"during,omitempty"`
}
