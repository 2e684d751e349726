package model

import "time"

// Step is a part of a forward pass that StepTimes accounts for.
type Step int

const (
	StepEmbed     Step = iota // embedding gather and layer 0's input norm
	StepQKV                   // q/k/v product: activations prepared and multiplied
	StepQKVRows               // q/k norm, RoPE, K/V into the cache
	StepAttention             // attention (decode batches: with the q/k/v product, one task)
	StepO                     // o_proj
	StepAddNorm               // residual adds and the RMSNorms fused with them
	StepGateUp                // gate/up product with the SwiGLU epilogue (dense layers)
	StepDown                  // down_proj (dense layers)
	StepMoE                   // sparse MoE block: router, experts, gather/scatter
	StepLMHead                // final rows' logits
	NumSteps
)

var stepNames = [NumSteps]string{"embed", "qkv", "qkv rows", "attention", "o_proj", "add+norm", "gate/up", "down", "moe", "lm_head"}

func (s Step) String() string { return stepNames[s] }

// StepTimes accumulates, per step of the forward passes run while it is set
// (Runner.TimeSteps), the wall time and the workers' idle time: the thread
// time (pool size × wall) not spent computing, i.e. workers waiting at a
// step's barriers for the slowest one, and every worker but the caller
// during the serial code between pool runs. CPU profiles cannot see the
// idle time of a parked worker; this can.
type StepTimes struct {
	Wall, Idle [NumSteps]time.Duration
	// Sleeps counts the pool's threads blocking (threads.Pool.Sleeps)
	// within each step.
	Sleeps [NumSteps]int64
	Passes int

	last       time.Time
	wall, busy time.Duration // the pool's Usage at last
	sleeps     int64
}

// TimeSteps makes the runner account its passes' steps into t (nil: stop).
// It turns the pool's accounting on or off with it, which costs two clock
// reads per worker per pool run: for profiling, not for serving.
func (r *Runner) TimeSteps(t *StepTimes) {
	r.steps = t
	r.pool.SetAccounting(t != nil)
}

// lapStart begins the accounting of a pass.
func (r *Runner) lapStart() {
	if t := r.steps; t != nil {
		t.Passes++
		t.last = time.Now()
		t.wall, t.busy = r.pool.Usage()
		t.sleeps = r.pool.Sleeps()
	}
}

// lap charges the time since the previous lap to step s.
func (r *Runner) lap(s Step) {
	t := r.steps
	if t == nil {
		return
	}
	now := time.Now()
	wall, busy := r.pool.Usage()
	d := now.Sub(t.last)
	n := time.Duration(r.pool.Size())
	// Outside pool runs only the caller works: it is busy, the others idle.
	t.Wall[s] += d
	t.Idle[s] += n*d - (busy - t.busy) - (d - (wall - t.wall))
	sleeps := r.pool.Sleeps()
	t.Sleeps[s] += sleeps - t.sleeps
	t.last, t.wall, t.busy, t.sleeps = now, wall, busy, sleeps
}
