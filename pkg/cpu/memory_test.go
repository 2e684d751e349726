package cpu

import (
	"testing"

	"github.com/ellm-dev/ellm/pkg/cpu/cputest"
)

const (
	mountV2 = "30 25 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
	mountV1 = "31 25 0:27 / /sys/fs/cgroup/memory rw,nosuid shared:5 - cgroup cgroup rw,memory\n"
)

const meminfo64G = "MemTotal:       67108864 kB\nMemFree:  1000 kB\nMemAvailable:   50331648 kB\n"

func TestReadMemory(t *testing.T) {
	const gib = int64(1) << 30
	for _, c := range []struct {
		name       string
		files      map[string]string
		limit      int64
		usage      int64
		usable     int64
		cgroup     string
		boundByCgp bool
	}{
		{name: "no cgroup file", files: map[string]string{}, usable: 48 * gib},
		{name: "v2 unlimited", files: map[string]string{
			"proc/self/cgroup":                    "0::/user.slice\n",
			"proc/self/mountinfo":                 mountV2,
			"sys/fs/cgroup/user.slice/memory.max": "max\n",
		}, usable: 48 * gib},
		{name: "v2 pod limit with reclaimable cache", files: map[string]string{
			"proc/self/cgroup":                               "0::/kubepods/pod1/ctr\n",
			"proc/self/mountinfo":                            mountV2,
			"sys/fs/cgroup/kubepods/pod1/ctr/memory.max":     "max\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max":         "17179869184\n", // 16 GiB on the pod binds the container
			"sys/fs/cgroup/kubepods/pod1/memory.current":     "4294967296\n",
			"sys/fs/cgroup/kubepods/pod1/memory.stat":        "anon 1073741824\ninactive_file 2147483648\nactive_file 5\n",
			"sys/fs/cgroup/kubepods/memory.max":              "34359738368\n",
			"sys/fs/cgroup/kubepods/memory.current":          "1\n",
			"sys/fs/cgroup/kubepods/pod1/ctr/memory.current": "4294967296\n",
		}, limit: 16 * gib, usage: 2 * gib, usable: 14 * gib, cgroup: "/kubepods/pod1", boundByCgp: true},
		{name: "v2 limit above MemAvailable", files: map[string]string{
			"proc/self/cgroup":                 "0::/big\n",
			"proc/self/mountinfo":              mountV2,
			"sys/fs/cgroup/big/memory.max":     "60129542144\n", // 56 GiB
			"sys/fs/cgroup/big/memory.current": "0\n",
		}, limit: 56 * gib, usable: 48 * gib, cgroup: "/big"},
		{name: "v1 limit", files: map[string]string{
			"proc/self/cgroup":    "12:memory:/docker/abc\n11:cpu,cpuacct:/docker/abc\n",
			"proc/self/mountinfo": mountV1,
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "8589934592\n",
			"sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": "1073741824\n",
			"sys/fs/cgroup/memory/docker/abc/memory.stat":           "cache 5\ntotal_inactive_file 536870912\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":            "9223372036854771712\n", // v1's "no limit"
			"sys/fs/cgroup/memory/memory.usage_in_bytes":            "1\n",
		}, limit: 8 * gib, usage: gib / 2, usable: 8*gib - gib/2, cgroup: "/docker/abc", boundByCgp: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.files["proc/meminfo"] = meminfo64G
			m, err := ReadMemory(cputest.WriteTree(t, "", c.files))
			if err != nil {
				t.Fatal(err)
			}
			if m.Total != 64*gib || m.Available != 48*gib {
				t.Errorf("total %d available %d, want 64 GiB and 48 GiB", m.Total, m.Available)
			}
			if m.CgroupLimit != c.limit || m.CgroupUsage != c.usage || m.Cgroup != c.cgroup {
				t.Errorf("cgroup %q limit %d usage %d, want %q %d %d", m.Cgroup, m.CgroupLimit, m.CgroupUsage, c.cgroup, c.limit, c.usage)
			}
			if m.Usable() != c.usable {
				t.Errorf("usable %d, want %d", m.Usable(), c.usable)
			}
			if got := m.Bound() != "MemAvailable"; got != c.boundByCgp {
				t.Errorf("bound %q", m.Bound())
			}
		})
	}
}

func TestReadMemoryNeedsMeminfo(t *testing.T) {
	if _, err := ReadMemory(t.TempDir()); err == nil {
		t.Error("no /proc/meminfo: want an error, the fit check cannot run blind")
	}
}

func TestReadMemoryThisMachine(t *testing.T) {
	m, err := ReadMemory("/")
	if err != nil {
		t.Fatal(err)
	}
	if m.Total <= 0 || m.Usable() <= 0 || m.Usable() > m.Total {
		t.Errorf("%+v: usable %d", m, m.Usable())
	}
}
