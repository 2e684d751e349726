package model

import (
	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/kernels/threads"
)

// rowOp is a per-row step of a layer, outside the products and attention.
type rowOp uint8

const (
	rowQKV     rowOp = iota // qkvRow
	rowAddNorm              // residual += y; xn = RMSNorm(residual) with rowTask.norm
	rowNorm                 // xn = RMSNorm(residual) with rowTask.norm
)

// parallelRows is the pass size from which a per-row step runs on the pool:
// below it (decode steps) the work is smaller than a pool barrier. A
// variable so that tests can compare the pool's split with one thread.
var parallelRows = 16

// rowTask is the pool task of rows: the workers claim chunks of rowChunk
// rows (threads.Claims), and every row is computed by the same code wherever
// it lands, so the split changes no result. With halves fixed up front, the
// worker that finished the product before first often parked and started
// late, and the other waited for it at the end of every add+norm and q/k
// row step of a long prefill.
type rowTask struct {
	r    *Runner
	op   rowOp
	l, m int
	lw   *layer
	norm []float32
	// stage, if set, is the weight of the product that reads xn next: each
	// worker prepares its rows for it (gemm.Context.Stage) right after
	// norming them, while they are in its cache.
	stage  *gemm.Weight
	claims threads.Claims
	errs   []error // per worker
}

// rowChunk is the rows a worker claims at a time: in a 2048-token prefill of
// Qwen3-0.6B a thread spends ~1 µs on an add+norm row and ~3 µs on a q/k
// row, so a chunk is 15–50 µs against a claim's few dozen ns.
const rowChunk = 16

// rows runs op over rows [0, m) of the current pass.
func (r *Runner) rows(op rowOp, l int, lw *layer, m int) error {
	t := &r.rowTask
	t.op, t.l, t.lw, t.m = op, l, lw, m
	t.claims.Reset()
	if m < parallelRows {
		t.Run(0, 1)
	} else {
		r.pool.Run(t)
	}
	t.lw, t.norm, t.stage = nil, nil, nil
	for _, err := range t.errs {
		if err != nil {
			clear(t.errs)
			return err
		}
	}
	return nil
}

func (t *rowTask) Run(worker, _ int) {
	for {
		lo, hi, ok := t.claims.Next(t.m, rowChunk)
		if !ok {
			return
		}
		if err := t.do(lo, hi); err != nil {
			t.errs[worker] = err
			return
		}
	}
}

// do runs the task's step over rows [lo, hi).
func (t *rowTask) do(lo, hi int) error {
	r := t.r
	switch t.op {
	case rowQKV:
		for i := lo; i < hi; i++ {
			if err := r.qkvRow(t.l, t.lw, i); err != nil {
				return err
			}
		}
	case rowAddNorm, rowNorm:
		H := r.m.Config.HiddenSize
		span := func(b []float32) []float32 { return b[lo*H : hi*H] }
		var err error
		if t.op == rowNorm {
			err = r.ops.RMSNorm(span(r.xn), span(r.x), t.norm, r.eps)
		} else {
			err = r.ops.AddRMSNorm(span(r.xn), span(r.x), span(r.y), t.norm, r.eps)
		}
		if err != nil {
			return err
		}
		if t.stage != nil {
			r.mm.Stage(r.xn[:t.m*H], t.m, t.stage, lo, hi)
		}
	}
	return nil
}

// staging reports whether a pass of m rows stages the inputs of the
// products that follow a norm (q/k/v, gate/up) in the norm's task: when the
// norms run on the pool, which is when the products have several row tiles
// and would otherwise prepare them in a pool run of their own.
func (r *Runner) staging(m int) bool {
	return stageActivations && m >= parallelRows && !r.fusedAttention(m)
}

// stageActivations is a variable so that benchmarks can compare staged
// passes with the products preparing their own activations.
var stageActivations = true
