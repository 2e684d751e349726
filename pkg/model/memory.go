package model

import "github.com/ellm-dev/ellm/kernels/gemm"

// WeightMemory is every packed linear weight's buffer, for placing their
// pages (pkg/numa). The embedding table stays in the mapped checkpoint.
func (m *Model) WeightMemory() [][]byte {
	var out [][]byte
	add := func(ws ...*gemm.Weight) {
		for _, w := range ws {
			if w != nil {
				out = append(out, w.Memory()...)
			}
		}
	}
	add(m.lmHead)
	if m.lmScreen != nil {
		out = append(out, m.lmScreen.Memory()...)
	}
	for i := range m.layers {
		l := &m.layers[i]
		add(l.qkv, l.o, l.gate, l.up, l.down, l.router)
		for _, e := range l.experts {
			add(e.gate, e.up, e.down)
		}
	}
	return out
}
