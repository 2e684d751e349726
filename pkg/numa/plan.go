package numa

import (
	"fmt"
	"slices"
)

// Plan is where the kernel workers run and where memory goes.
type Plan struct {
	Nodes []NodePlan `json:"nodes"`
	// CPUs pins worker i to CPUs[i]: node by node, one worker per physical
	// core before any SMT sibling, so contiguous worker ranges share a node.
	CPUs []int `json:"cpus"`
	// Interleave lists the nodes the weights and the KV cache are
	// interleaved over page by page; nil when the workers use one node
	// (then pages stay where they are first touched: on that node).
	Interleave []int    `json:"interleave,omitempty"`
	Warnings   []string `json:"warnings,omitempty"`
}

// NodePlan is one node's part of a plan.
type NodePlan struct {
	Node        int   `json:"node"`
	FirstWorker int   `json:"first_worker"`
	Workers     int   `json:"workers"`
	CPUs        []int `json:"cpus"`
	// Share is the bytes of weights and KV cache the node holds.
	Share   int64 `json:"share_bytes"`
	MemFree int64 `json:"mem_free_bytes"`
}

// Place plans threads workers on the allowed CPUs of nodes (threads ≤ 0:
// one per allowed physical core), with bytes of weights and KV cache to
// place. Workers are split over the nodes in proportion to the allowed
// cores each has, so that every socket's cores and memory controllers work.
func Place(nodes []Node, allowed []int, threads int, bytes int64) (*Plan, error) {
	type avail struct {
		node  Node
		cores [][]int // allowed CPUs of each core that has any
		cpus  int
	}
	var use []avail
	totalCores, totalCPUs := 0, 0
	for _, n := range nodes {
		a := avail{node: n}
		for _, core := range n.Cores {
			var in []int
			for _, c := range core {
				if slices.Contains(allowed, c) {
					in = append(in, c)
				}
			}
			if len(in) > 0 {
				a.cores = append(a.cores, in)
				a.cpus += len(in)
			}
		}
		if len(a.cores) > 0 {
			use = append(use, a)
			totalCores += len(a.cores)
			totalCPUs += a.cpus
		}
	}
	if len(use) == 0 {
		return nil, fmt.Errorf("numa: none of the allowed CPUs %v is on a node", allowed)
	}
	p := &Plan{}
	if threads <= 0 {
		threads = totalCores
	}
	if threads > totalCPUs {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%d threads on %d allowed CPUs: workers share CPUs", threads, totalCPUs))
		threads = totalCPUs
	}
	// Largest remainder over the nodes' core counts, capped by their CPUs.
	counts := make([]int, len(use))
	given := 0
	for i, a := range use {
		counts[i] = min(threads*len(a.cores)/totalCores, a.cpus)
		given += counts[i]
	}
	for given < threads {
		best := -1
		for i, a := range use {
			if counts[i] >= a.cpus {
				continue
			}
			// the node furthest below its proportional share
			if best < 0 || float64(counts[i])/float64(len(a.cores)) < float64(counts[best])/float64(len(use[best].cores)) {
				best = i
			}
		}
		counts[best]++
		given++
	}
	for i, a := range use {
		if counts[i] == 0 {
			continue
		}
		np := NodePlan{Node: a.node.ID, FirstWorker: len(p.CPUs), Workers: counts[i], MemFree: a.node.MemFree}
		// One CPU per core first, then the SMT siblings.
		for sib := 0; len(np.CPUs) < counts[i]; sib++ {
			for _, core := range a.cores {
				if sib < len(core) && len(np.CPUs) < counts[i] {
					np.CPUs = append(np.CPUs, core[sib])
				}
			}
		}
		p.CPUs = append(p.CPUs, np.CPUs...)
		p.Nodes = append(p.Nodes, np)
	}
	share := bytes
	if len(p.Nodes) > 1 {
		share = bytes / int64(len(p.Nodes))
		for _, np := range p.Nodes {
			p.Interleave = append(p.Interleave, np.Node)
		}
	}
	for i := range p.Nodes {
		np := &p.Nodes[i]
		np.Share = share
		if np.MemFree > 0 && share > np.MemFree {
			p.Warnings = append(p.Warnings, fmt.Sprintf("node %d holds %d bytes of weights and KV cache but has %d free: pages spill to other nodes",
				np.Node, share, np.MemFree))
		}
	}
	return p, nil
}
