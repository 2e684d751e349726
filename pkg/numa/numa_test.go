package numa

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ellm-dev/ellm/pkg/cpu/cputest"
)

// dualSocket writes a /sys tree for 2 nodes × cores × 2 SMT threads,
// numbered as Linux numbers them: node 0 has CPUs 0..cores-1 and their
// siblings 2·cores.., node 1 the next ones.
func dualSocket(t *testing.T, cores int, freeGiB [2]int) string {
	t.Helper()
	files := map[string]string{}
	write := func(rel, content string) { files[rel] = content }
	for node := range 2 {
		first, sib := node*cores, 2*cores+node*cores
		write(fmt.Sprintf("sys/devices/system/node/node%d/cpulist", node), fmt.Sprintf("%d-%d,%d-%d\n", first, first+cores-1, sib, sib+cores-1))
		write(fmt.Sprintf("sys/devices/system/node/node%d/meminfo", node),
			fmt.Sprintf("Node %d MemTotal:       %d kB\nNode %d MemFree:        %d kB\nNode %d MemUsed:  5 kB\n", node, 64<<20, node, freeGiB[node]<<20, node))
		for c := range cores {
			for _, cpu := range []int{first + c, sib + c} {
				write(fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu), fmt.Sprint(node))
				write(fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/core_id", cpu), fmt.Sprint(c))
			}
		}
	}
	return cputest.WriteTree(t, "", files)
}

func seq(lo, hi int) []int {
	var s []int
	for i := lo; i < hi; i++ {
		s = append(s, i)
	}
	return s
}

func TestReadNodes(t *testing.T) {
	nodes, err := ReadNodes(dualSocket(t, 4, [2]int{10, 20}))
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 {
		t.Fatalf("%d nodes", len(nodes))
	}
	n1 := nodes[1]
	if n1.ID != 1 || n1.MemTotal != 64<<30 || n1.MemFree != 20<<30 {
		t.Errorf("node 1: %+v", n1)
	}
	want := [][]int{{4, 12}, {5, 13}, {6, 14}, {7, 15}}
	if fmt.Sprint(n1.Cores) != fmt.Sprint(want) {
		t.Errorf("node 1 cores %v, want %v (SMT siblings grouped)", n1.Cores, want)
	}
	if nodes, err := ReadNodes(t.TempDir()); err != nil || nodes != nil {
		t.Errorf("no node directories: %v %v", nodes, err)
	}
}

func TestPlace(t *testing.T) {
	nodes, err := ReadNodes(dualSocket(t, 4, [2]int{100, 100}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		allowed    []int
		threads    int
		cpus       []int
		perNode    []int
		interleave []int
	}{
		{"one worker per core", seq(0, 16), 0, []int{0, 1, 2, 3, 4, 5, 6, 7}, []int{4, 4}, []int{0, 1}},
		{"fewer threads: still both sockets", seq(0, 16), 6, []int{0, 1, 2, 4, 5, 6}, []int{3, 3}, []int{0, 1}},
		{"more threads than cores: siblings last", seq(0, 16), 12, []int{0, 1, 2, 3, 8, 9, 4, 5, 6, 7, 12, 13}, []int{6, 6}, []int{0, 1}},
		{"taskset to node 1: one node, no interleave", []int{4, 5, 6, 7, 12, 13, 14, 15}, 0, []int{4, 5, 6, 7}, []int{4}, nil},
		{"uneven allowance: proportional", []int{0, 1, 2, 3, 4, 5}, 3, []int{0, 1, 4}, []int{2, 1}, []int{0, 1}},
		{"odd thread count", seq(0, 16), 3, []int{0, 1, 4}, []int{2, 1}, []int{0, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Place(nodes, c.allowed, c.threads, 40<<30)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.CPUs, c.cpus) {
				t.Errorf("cpus %v, want %v", p.CPUs, c.cpus)
			}
			var per []int
			first := 0
			for _, np := range p.Nodes {
				per = append(per, np.Workers)
				if np.FirstWorker != first || !slices.Equal(np.CPUs, p.CPUs[first:first+np.Workers]) {
					t.Errorf("node %d: workers from %d, cpus %v, in a plan %v", np.Node, np.FirstWorker, np.CPUs, p.CPUs)
				}
				first += np.Workers
				if want := int64(40<<30) / int64(len(p.Nodes)); np.Share != want {
					t.Errorf("node %d share %d, want %d", np.Node, np.Share, want)
				}
			}
			if !slices.Equal(per, c.perNode) || !slices.Equal(p.Interleave, c.interleave) {
				t.Errorf("workers per node %v interleave %v, want %v %v", per, p.Interleave, c.perNode, c.interleave)
			}
			if len(p.Warnings) != 0 {
				t.Errorf("warnings %v", p.Warnings)
			}
		})
	}
}

func TestPlaceWarnsAndRefuses(t *testing.T) {
	nodes, err := ReadNodes(dualSocket(t, 2, [2]int{8, 30}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Place(nodes, seq(0, 8), 20, 40<<30)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.CPUs) != 8 || len(p.Warnings) != 2 || !strings.Contains(p.Warnings[0], "workers share CPUs") ||
		!strings.Contains(p.Warnings[1], "node 0 holds") {
		t.Errorf("cpus %v warnings %q", p.CPUs, p.Warnings)
	}
	if _, err := Place(nodes, []int{99}, 0, 0); err == nil {
		t.Error("allowed CPUs on no node: planned")
	}
}

// On this machine (one node, or more): mbind really sets the interleave
// policy on the pages, as get_mempolicy reads back.
func TestInterleaveSetsPolicy(t *testing.T) {
	page := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 8*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	for i := 0; i < len(mem); i += page {
		mem[i] = 1 // faulted in first: Interleave must move (or keep) them
	}
	// A slice that starts and ends mid-page: only whole pages are bound.
	if err := Interleave(mem[10:len(mem)-10], []int{0}); err != nil {
		t.Fatal(err)
	}
	mode, nodes, err := policyAt(unsafe.Pointer(&mem[3*page]))
	if err != nil {
		t.Fatal(err)
	}
	if mode != mpolInterleave || !slices.Equal(nodes, []int{0}) {
		t.Errorf("policy of an inner page: mode %d nodes %v, want interleave over [0]", mode, nodes)
	}
	if mode, _, _ := policyAt(unsafe.Pointer(&mem[0])); mode == mpolInterleave {
		t.Error("the partial first page was bound too")
	}
	if err := Interleave(mem, []int{maxNodes}); err == nil {
		t.Error("node out of range accepted")
	}
	if mem[3*page] != 1 {
		t.Error("contents changed")
	}
}

func TestInterleavedReadsBack(t *testing.T) {
	page := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 4*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if nodes, err := Interleaved(mem); err != nil || nodes != nil {
		t.Fatalf("fresh mapping: interleaved over %v (%v)", nodes, err)
	}
	if err := Interleave(mem, []int{0}); err != nil {
		t.Fatal(err)
	}
	if nodes, err := Interleaved(mem[5:]); err != nil || !slices.Equal(nodes, []int{0}) {
		t.Errorf("after Interleave: %v (%v)", nodes, err)
	}
}
