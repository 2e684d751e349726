package model

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// WeightMemory is every packed linear weight's buffer, for placing their
// pages (pkg/numa). The embedding table stays in the mapped checkpoint.
func (m *Model) WeightMemory() [][]byte {
	var out [][]byte
	for _, w := range m.linearWeights() {
		out = append(out, w.Memory()...)
	}
	if m.lmScreen != nil {
		out = append(out, m.lmScreen.Memory()...)
	}
	return out
}

// DropScreen gives up the int8 copy of lm_head that screens the logits
// (LoadOptions.NoLogitScreen) and hands its memory back: for a model whose
// runner's ChooseScreen kept no row, as the pure-Go kernels' did at one row
// of Qwen3-0.6B (86–100 ms screened, 48–56 in full), so that the copy would only
// hold memory (158 MB there, 778 MB for Qwen3-32B's lm_head). Runners then
// compute every logit. An image the load is writing still gets the copy
// (SaveImage), since each start chooses again. Call it while no runner of
// the model runs.
func (m *Model) DropScreen() {
	if m.lmScreen == nil {
		return
	}
	m.dropped, m.lmScreen = m.lmScreen, nil
	m.weightBytes -= m.screenBytes
	m.screenBytes = 0
	m.releaseDropped()
}

// releaseDropped hands back the memory of the screen DropScreen gave up:
// its pages in the image's mapping now, its heap buffers once no image has
// yet to be written from them (a collection then, as ChooseScreen forces
// one just before: only where the copy was on the heap).
func (m *Model) releaseDropped() {
	onHeap := false
	for _, b := range m.dropped.Memory() {
		if m.image != nil && m.image.holds(b) {
			dropPages(b)
		} else {
			onHeap = true
		}
	}
	if m.image == nil || m.image.arena == nil {
		m.dropped = nil
		if onHeap {
			debug.FreeOSMemory()
		}
	}
}

// linearWeights is every packed linear weight: the layers' in order, then
// lm_head.
func (m *Model) linearWeights() []*gemm.Weight {
	var out []*gemm.Weight
	add := func(ws ...*gemm.Weight) {
		for _, w := range ws {
			if w != nil {
				out = append(out, w)
			}
		}
	}
	for i := range m.layers {
		l := &m.layers[i]
		add(l.qkv, l.o, l.gate, l.up, l.down, l.router)
		for _, e := range l.experts {
			add(e.gate, e.up, e.down)
		}
	}
	add(m.lmHead)
	return out
}

// CodedChoice is what ChooseCoded measured and decided.
type CodedChoice struct {
	// Kept says the coded copies stay; else they were dropped and decode
	// steps read the pairs.
	Kept bool
	// PlainGBps and CodedGBps are the bf16 bytes a second the products of
	// one, two and four rows streamed over the weights timed, read from the pairs
	// and from the coded copies (the fastest of the rounds) with the
	// kernels that prefetch into Prefetch, the faster level; OtherGBps is
	// the other level's rate (0: the path has one).
	PlainGBps, CodedGBps, OtherGBps float64
	Prefetch                        gemm.CodedPrefetch
}

func (c CodedChoice) String() string {
	coded := fmt.Sprintf("%.1f GB/s of bf16", c.CodedGBps)
	if c.OtherGBps > 0 {
		coded = fmt.Sprintf("%.1f GB/s of bf16 prefetched into %v, %.1f into %v", c.CodedGBps, c.Prefetch, c.OtherGBps, c.Prefetch.Other())
	}
	if c.Kept {
		return fmt.Sprintf("coded (measured %s, against the pairs' %.1f)", coded, c.PlainGBps)
	}
	return fmt.Sprintf("pairs (measured %.1f GB/s against the coded copy's %s, short of the %.0f %% it must gain; copy dropped)",
		c.PlainGBps, coded, 100*(codedMargin-1))
}

// minTimedBytes is the least of the weights' bf16 bytes ChooseCoded times
// (or all of them): more than the last-level cache of the servers ellm runs
// on, so that the products stream from memory as a decode step's do.
const minTimedBytes = 1 << 30

// codedSample is the weights a load codes before ChooseCoded has measured
// whether the copies pay: the layers' linear weights in order, up to limit
// (minTimedBytes) bytes of their bf16 (or all of them), and lm_head, whose kernels
// the load picks by whether it is coded (SetFewRows). The rest are coded
// only if the copies stay: coding is most of a bf16 load's time, and on a
// machine where the pairs stream as fast it would be spent for nothing.
func (m *Model) codedSample(limit int64) []*gemm.Weight {
	var out []*gemm.Weight
	var bytes int64
	for _, w := range m.linearWeights() {
		if w.Codable() && (bytes < limit || w == m.lmHead) {
			out = append(out, w)
			bytes += 2 * int64(w.N) * int64(w.K)
		}
	}
	return out
}

// code gives each of ws a coded copy, if it has none, a weight at a time
// per CPU.
func (m *Model) code(ws []*gemm.Weight) {
	var added atomic.Int64
	threads.Each(len(ws), func(i int) { added.Add(int64(ws[i].Code())) })
	m.codedBytes += added.Load()
	m.weightBytes += added.Load()
}

// ChooseCoded keeps the coded copies of the weights (LoadOptions.
// NoCodedWeights) if decode products on pool read them clearly faster than
// the pairs (worthCoding), timed over the weights the load coded (codedSample; gemm.
// TimeCoded, three rounds), and then codes the rest; otherwise it drops
// them: the two give the same bits, and the quarter of the bytes the copy
// saves is not a quarter of the time on every machine. Where the path's
// kernels can prefetch the copy into L1 or L2, it times both and keeps the
// faster (gemm.CodedPrefetch). ok is false when there was nothing to choose
// (no coded copies). Call it before the model's runners run.
//
// A model whose weights are its image's keeps the choice the image was
// written with (its copies are there or not), as the kernel paths keep
// their calibration: measured once for this machine and build.
func (m *Model) ChooseCoded(pool *threads.Pool) (c CodedChoice, ok bool) {
	if m.image != nil && m.image.mapped {
		if m.image.coded == nil {
			return CodedChoice{}, false
		}
		m.setCodedPrefetch(m.image.coded.Prefetch)
		return *m.image.coded, true
	}
	if m.codedBytes == 0 {
		return CodedChoice{}, false
	}
	r := gemm.TimeCoded(pool, m.linearWeights(), 3)
	c.PlainGBps = r.Plain
	c.Prefetch, c.CodedGBps = r.Best()
	c.OtherGBps = r.Coded[c.Prefetch.Other()]
	c.Kept = worthCoding(c.PlainGBps, c.CodedGBps)
	m.keepCoded(c.Kept)
	m.setCodedPrefetch(c.Prefetch)
	if m.image != nil {
		m.image.coded = &c
	}
	return c, true
}

// codedMargin is how much faster than the pairs the coded copies must
// stream to be kept. They cost 1.5 bytes of memory and of the weights image
// a weight (three quarters more for the linear weights: 48 GB for a 32B
// model), and a first start that writes them; a gain inside the timing's
// spread is no gain. On the AMD EPYC VM the two came out within ±4 % load
// after load (docs/performance.md), on the Intel Xeon decode was 5–17 %
// faster with the copy.
const codedMargin = 1.05

// worthCoding reports whether the coded copies pay for themselves: decode
// products read them at codedMargin times the pairs' rate or faster.
func worthCoding(plainGBps, codedGBps float64) bool { return codedGBps >= codedMargin*plainGBps }

// setCodedPrefetch makes the products with the coded copies prefetch into p.
func (m *Model) setCodedPrefetch(p gemm.CodedPrefetch) {
	for _, w := range m.linearWeights() {
		w.SetCodedPrefetch(p)
	}
}

// keepCoded codes the weights the load left uncoded (codedSample) if keep,
// and otherwise drops every coded copy and hands their memory back.
func (m *Model) keepCoded(keep bool) {
	if keep {
		m.code(m.linearWeights())
		return
	}
	var freed int64
	for _, w := range m.linearWeights() {
		freed += int64(w.Uncode())
	}
	m.weightBytes -= freed
	m.codedBytes = 0
	debug.FreeOSMemory()
}
