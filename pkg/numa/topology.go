// Package numa places ellm on a multi-socket machine: which CPUs the kernel
// workers are pinned to, node by node, and where the weights and the KV
// cache live. It takes the machine's nodes (read from /sys, or described by
// a test) and the CPUs the process may use as input, and applies the memory
// policy with mbind(2).
//
// See docs/deploy.md for the choice: the GEMM and attention kernels hand out
// work dynamically (a worker claims the next chunk of panels, the next
// attention item), so no worker owns a fixed share of the weights or of the
// KV cache. Binding a share to a node would not make its reads local; what
// helps is that every node's memory controllers serve an equal part of each
// weight stream (interleave), and that the workers are spread evenly over
// the nodes instead of filling the first socket.
package numa

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ellm-dev/ellm/pkg/cpu"
)

// Node is one NUMA node.
type Node struct {
	ID int `json:"id"`
	// Cores are the node's physical cores, each its logical CPUs (SMT
	// siblings) in ascending order; cores in order of their first CPU.
	Cores    [][]int `json:"cores"`
	MemTotal int64   `json:"mem_total_bytes"`
	MemFree  int64   `json:"mem_free_bytes"`
}

// ReadNodes reads the NUMA nodes under root ("/" for this machine):
// /sys/devices/system/node/nodeN/{cpulist,meminfo} and each CPU's topology.
// A kernel without NUMA support has no node directories: nil, no error.
func ReadNodes(root string) ([]Node, error) {
	if root == "" {
		root = "/"
	}
	dirs, err := filepath.Glob(filepath.Join(root, "sys/devices/system/node/node[0-9]*"))
	if err != nil {
		return nil, err
	}
	var nodes []Node
	for _, d := range dirs {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "node"))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "cpulist"))
		if err != nil {
			return nil, fmt.Errorf("numa node %d: %w", id, err)
		}
		cpus, err := cpu.ParseCPUList(string(b))
		if err != nil {
			return nil, fmt.Errorf("numa node %d: %w", id, err)
		}
		n := Node{ID: id, Cores: groupCores(root, cpus)}
		n.MemTotal, n.MemFree = nodeMeminfo(filepath.Join(d, "meminfo"))
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	return nodes, nil
}

// groupCores groups cpus by (package, core_id); a CPU without topology
// (offline, or a fake tree that omits it) is a core of its own.
func groupCores(root string, cpus []int) [][]int {
	idx := map[[2]int]int{}
	var cores [][]int
	for _, c := range cpus {
		base := filepath.Join(root, "sys/devices/system/cpu", "cpu"+strconv.Itoa(c), "topology")
		pkg, err1 := readInt(filepath.Join(base, "physical_package_id"))
		core, err2 := readInt(filepath.Join(base, "core_id"))
		if err1 != nil || err2 != nil {
			cores = append(cores, []int{c})
			continue
		}
		key := [2]int{pkg, core}
		if i, ok := idx[key]; ok {
			cores[i] = append(cores[i], c)
			continue
		}
		idx[key] = len(cores)
		cores = append(cores, []int{c})
	}
	return cores
}

func readInt(p string) (int, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// nodeMeminfo reads "Node 0 MemTotal:  123 kB" lines.
func nodeMeminfo(p string) (total, free int64) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		v, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 4 && f[4] == "kB" {
			v *= 1024
		}
		switch f[2] {
		case "MemTotal:":
			total = v
		case "MemFree:":
			free = v
		}
	}
	return total, free
}
