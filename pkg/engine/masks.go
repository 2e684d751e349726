package engine

import "github.com/ellm-dev/ellm/pkg/sample"

// maskWorker works out the constraints' next masks while the model
// computes the logits they apply to: the scheduler hands it the samplers
// of a step's constrained rows whose masks are not in their grammar's
// cache (a state met for the first time: a walk of the vocabulary, tens of
// µs to a few ms on Qwen3's) before the forward pass, and waits for it
// after. A cached mask (a lookup of about 1 µs, the scheduler's own) is
// never handed over. One goroutine per engine, started with the scheduler
// and ended by it; the hand-over reuses its slice and channels, so a step
// allocates nothing.
type maskWorker struct {
	todo []*sample.Sampler // written by the scheduler before go, read by the worker until done
	run  chan struct{}
	done chan struct{}
	busy bool
}

func newMaskWorker() *maskWorker {
	w := &maskWorker{run: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

func (w *maskWorker) loop() {
	for range w.run {
		for _, s := range w.todo {
			s.Prepare()
		}
		w.done <- struct{}{}
	}
}

// start has the worker prepare the samplers' masks. Scheduler goroutine
// only, as are the others.
func (w *maskWorker) start(samplers []*sample.Sampler) {
	w.todo = append(w.todo[:0], samplers...)
	if len(w.todo) == 0 {
		return
	}
	w.busy = true
	w.run <- struct{}{}
}

// wait returns once the worker is done with the samplers start gave it.
func (w *maskWorker) wait() {
	if w.busy {
		<-w.done
		w.busy = false
	}
	clear(w.todo)
	w.todo = w.todo[:0]
}

// stop ends the worker's goroutine.
func (w *maskWorker) stop() {
	w.wait()
	close(w.run)
}
