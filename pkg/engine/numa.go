package engine

import (
	"fmt"

	"github.com/ellm-dev/ellm/kernels/threads"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/model"
	"github.com/ellm-dev/ellm/pkg/numa"
)

// Topology is the machine's NUMA nodes and the CPUs this process may use.
type Topology func() (nodes []numa.Node, allowed []int, err error)

// SystemTopology reads this machine's.
func SystemTopology() ([]numa.Node, []int, error) {
	nodes, err := numa.ReadNodes("/")
	return nodes, threads.AllowedCPUs(), err
}

// placeNUMA plans the workers and memory over the NUMA nodes the allowed
// CPUs span and interleaves the packed weights and the KV cache over them.
// It returns nil (nothing to do) on one node or with NUMA "off", and the
// warnings of a best-effort placement: mbind may be forbidden (a container's
// seccomp profile without CAP_SYS_NICE), which costs speed, not correctness.
func placeNUMA(opts Options, m *model.Model, cache *kvcache.Cache) (*numa.Plan, []string, error) {
	switch opts.NUMA {
	case "off":
		return nil, nil, nil
	case "", "auto":
	default:
		return nil, nil, fmt.Errorf("numa %q: want auto or off", opts.NUMA)
	}
	topo := opts.Topology
	if topo == nil {
		topo = SystemTopology
	}
	nodes, allowed, err := topo()
	if err != nil || len(nodes) < 2 {
		return nil, nil, nil // one node (or no NUMA support): first touch is local
	}
	plan, err := numa.Place(nodes, allowed, opts.Threads, m.WeightBytes()+cache.Bytes())
	if err != nil || len(plan.Interleave) == 0 {
		return nil, nil, nil // the allowed CPUs are on one node
	}
	warns := plan.Warnings
	bufs := append(m.WeightMemory(), cache.Memory())
	for _, b := range bufs {
		if err := numa.Interleave(b, plan.Interleave); err != nil {
			warns = append(warns, fmt.Sprintf("%v: weights and KV cache stay where first touched (in a container, grant CAP_SYS_NICE)", err))
			break
		}
	}
	return plan, warns, nil
}
