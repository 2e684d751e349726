package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"time"

	"github.com/ellm-dev/ellm/pkg/numa"
)

// ScreenChoice is what Runner.ChooseScreen measured and decided.
type ScreenChoice struct {
	// Rows is the most logits rows a pass screens now (0: none).
	Rows int
	// Timed holds the row counts timed, in increasing order; the last is
	// the first the screen lost at, unless it won at every count or a
	// timing was refused. Empty with Refused 0: Rows was set
	// (RunnerOptions.ScreenRows), not measured.
	Timed []ScreenTiming
	// Refused is the row count whose timing the screen refused (0: none),
	// which ended the choice.
	Refused int
}

// ScreenTiming is one row count's fastest round, screened (the int8
// product of two rows a logits row, the intervals, one panel refined) and
// in full (lm_head's own product).
type ScreenTiming struct {
	Rows           int
	Screened, Full time.Duration
}

func (c ScreenChoice) String() string {
	rows := "rows"
	if c.Rows == 1 {
		rows = "row"
	}
	if len(c.Timed) == 0 && c.Refused == 0 {
		return fmt.Sprintf("up to %d %s a pass (set)", c.Rows, rows)
	}
	var why []string
	if len(c.Timed) > 0 {
		last := c.Timed[len(c.Timed)-1]
		why = append(why, fmt.Sprintf("measured at %d: %.1f ms screened, %.1f in full", last.Rows,
			float64(last.Screened)/float64(time.Millisecond), float64(last.Full)/float64(time.Millisecond)))
	}
	if c.Refused > 0 {
		why = append(why, fmt.Sprintf("refused at %d", c.Refused))
	}
	timed := strings.Join(why, "; ")
	if c.Rows == 0 {
		return "off (" + timed + ")"
	}
	return fmt.Sprintf("up to %d %s a pass (%s)", c.Rows, rows, timed)
}

// ChooseScreen lowers the logits rows a pass screens to the most that are
// faster screened than computed in full, timed rounds times each (the
// fastest kept) on the runner's pool, in doubling counts up to the cap
// until the screen loses. Where the CPU has no VNNI the int8 product of two
// rows a logits row is bound by its arithmetic, not by the bytes it saves:
// on an AMD EPYC Zen 3 eight rows took longer than lm_head's bf16 product
// of four (docs/performance.md, "thirty-second pass"). A screened pass
// draws the same tokens as one in full, so the choice is one of speed
// alone. The screen's buffers shrink to the rows kept. ok is false when the
// runner screens nothing. Call it before the runner's first Forward, with
// nothing else on the pool.
func (r *Runner) ChooseScreen(rounds int) (c ScreenChoice, ok bool) {
	if r.maxScreen == 0 {
		return c, false
	}
	// Final-normed hidden states: of the order of one, as RMSNorm leaves them.
	H := r.m.Config.HiddenSize
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range r.lmIn[:r.maxScreen*H] {
		r.lmIn[i] = float32(rng.NormFloat64())
	}
	c = chooseScreenRows(r.maxScreen, func(n int) (ScreenTiming, bool) { return r.timeScreen(n, rounds) })
	if c.Rows < r.maxScreen {
		r.sizeScreen(c.Rows)
		// The dropped buffers were touched at start-up: give their pages
		// back now, not at the scavenger's pace (which left the resident
		// size of a 64-slot Qwen3-0.6B server unchanged).
		debug.FreeOSMemory()
	}
	return c, true
}

// sizeScreen makes the screen's buffers hold n rows a pass, and no more
// (the cap start-up sizes them for can be far above what ChooseScreen keeps:
// at 64 slots, 76 MB of Qwen3-0.6B's intervals for two rows' use), resident
// as the rest of the scratch (NewRunner).
func (r *Runner) sizeScreen(n int) {
	H, V := r.m.Config.HiddenSize, r.m.Config.VocabSize
	r.maxScreen = n
	r.screenIn, r.screenOut = make([]float32, 2*n*H), make([]float32, 2*n*V)
	numa.Commit(r.screenIn, r.screenOut)
}

// chooseScreenRows times row counts (screenTrials up to limit) until the
// screen loses, and keeps the most it won at; a timing the screen refuses
// ends it with the rows won before.
func chooseScreenRows(limit int, timeRows func(rows int) (ScreenTiming, bool)) (c ScreenChoice) {
	for _, n := range screenTrials(limit) {
		t, ok := timeRows(n)
		if !ok {
			c.Refused = n
			return c
		}
		c.Timed = append(c.Timed, t)
		if t.Screened >= t.Full {
			break
		}
		c.Rows = n
	}
	return c
}

// timeScreen times n of lmIn's rows screened and in full, the fastest of
// rounds each; ok is false if the screen refused them.
func (r *Runner) timeScreen(n, rounds int) (t ScreenTiming, ok bool) {
	H := r.m.Config.HiddenSize
	t = ScreenTiming{Rows: n, Screened: math.MaxInt64, Full: math.MaxInt64}
	firstPanel := []int32{0}
	for range rounds {
		start := time.Now()
		if !r.screen(n) {
			return t, false
		}
		r.Refine(firstPanel)
		t.Screened = min(t.Screened, time.Since(start))
		start = time.Now()
		r.mm.MatMul(r.logits, r.lmIn[:n*H], n, r.m.lmHead)
		t.Full = min(t.Full, time.Since(start))
	}
	return t, true
}

// ScreenRows is the most logits rows a pass screens (RunnerOptions.
// ScreenRows, ChooseScreen).
func (r *Runner) ScreenRows() int { return r.maxScreen }

// screenTrials is the row counts ChooseScreen times: doubling from one,
// then the cap.
func screenTrials(limit int) []int {
	var out []int
	for n := 1; n < limit; n *= 2 {
		out = append(out, n)
	}
	return append(out, limit)
}
