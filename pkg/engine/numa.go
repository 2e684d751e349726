package engine

import (
	"fmt"

	"github.com/ellm-dev/ellm/kernels/threads"
	"github.com/ellm-dev/ellm/pkg/cpu"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/model"
	"github.com/ellm-dev/ellm/pkg/numa"
)

// Topology is the machine's NUMA nodes.
type Topology func() ([]numa.Node, error)

// SystemTopology reads this machine's.
func SystemTopology() ([]numa.Node, error) { return numa.ReadNodes("/") }

// startPool starts the kernel pool: NewPool's default threads and pinning,
// except on several NUMA nodes (NUMA "auto"), where the workers are spread
// over the nodes and pinned node by node, and the packed weights and the KV
// cache are interleaved over them. The warnings are those of a best-effort
// placement: mbind may be forbidden (a container's seccomp profile without
// CAP_SYS_NICE), which costs speed, not correctness.
func startPool(opts Options, m *model.Model, cache *kvcache.Cache) (*threads.Pool, cpu.Threads, *numa.Plan, []string, error) {
	th := cpu.DefaultThreads(cpu.System()).Resolve(opts.Threads)
	plan, err := placeNUMA(opts, th, m.WeightBytes()+cache.Bytes())
	if err != nil {
		return nil, th, nil, nil, err
	}
	if plan == nil {
		pool, th := NewPool(opts.Threads, opts.NoPin)
		return pool, th, nil, nil, nil
	}
	warns := append(plan.Warnings, interleave(plan, append(m.WeightMemory(), cache.Memory()))...)
	if opts.NoPin {
		return threads.New(len(plan.CPUs), false), th, plan, warns, nil
	}
	th.CPUs = plan.CPUs
	th.Why += fmt.Sprintf(", spread over NUMA nodes %v", plan.Interleave)
	return threads.NewPinned(plan.CPUs), th, plan, warns, nil
}

// interleave spreads bufs over plan's nodes; a warning if it cannot.
func interleave(plan *numa.Plan, bufs [][]byte) []string {
	for _, b := range bufs {
		if err := numa.Interleave(b, plan.Interleave); err != nil {
			return []string{fmt.Sprintf("%v: weights and KV cache stay where first touched (in a container, grant CAP_SYS_NICE)", err)}
		}
	}
	return nil
}

// nodes is the NUMA nodes a placement would spread over: none with NUMA
// "off" or without NUMA support.
func nodes(opts Options) []numa.Node {
	if opts.NUMA == "off" {
		return nil
	}
	topo := opts.Topology
	if topo == nil {
		topo = SystemTopology
	}
	nodes, err := topo()
	if err != nil {
		return nil
	}
	return nodes
}

// placeNUMA plans th.N workers on th.Allowed over the NUMA nodes: nil (no
// placement) with NUMA "off", on one node, or when the allowed CPUs are on one.
func placeNUMA(opts Options, th cpu.Threads, bytes int64) (*numa.Plan, error) {
	switch opts.NUMA {
	case "off":
		return nil, nil
	case "", "auto":
	default:
		return nil, fmt.Errorf("numa %q: want auto or off", opts.NUMA)
	}
	nodes := nodes(opts)
	if len(nodes) < 2 {
		return nil, nil // one node (or no NUMA support): first touch is local
	}
	plan, err := numa.Place(nodes, th.Allowed, th.N, bytes)
	if err != nil || len(plan.Interleave) == 0 {
		return nil, nil
	}
	return plan, nil
}
