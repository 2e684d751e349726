package engine

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/pkg/model"
)

// run is the scheduler: the only goroutine that touches the model, the
// slots and the queue order.
func (e *Engine) run() {
	defer close(e.done)
	e.masks = newMaskWorker()
	defer e.masks.stop()
	if mb, ok := e.be.(*modelBackend); ok {
		// This goroutine runs every forward pass: it is the pool's worker 0.
		defer mb.pool.PinCaller()()
	}
	var lastYield time.Time
	for {
		e.mu.Lock()
		e.queue = append(e.queue, e.incoming...)
		clear(e.incoming)
		e.incoming = e.incoming[:0]
		closed := e.closed
		ctl := e.ctl
		e.ctl = nil
		e.mu.Unlock()
		for _, f := range ctl {
			f()
		}
		if closed {
			e.shutdown()
			return
		}
		if len(e.queue) == 0 && len(e.active) == 0 {
			if !e.prefix.warm() {
				<-e.wake
			}
			continue
		}
		e.step()
		if now := time.Now(); now.Sub(lastYield) > yieldEvery {
			runtime.Gosched()
			lastYield = now
		}
	}
}

// yieldEvery bounds how long the scheduler runs steps without yielding its P.
// With GOMAXPROCS equal to the pool's workers, this goroutine and the spinning
// pool workers hold every P while steps follow each other, so the goroutines
// that submit requests and serve HTTP would wait for the runtime's 10 ms
// preemption: a new request could not join a batch of short steps (a small
// model) until the others had finished. One yield per millisecond costs a
// P hand-off, a few µs.
const yieldEvery = time.Millisecond

// step is one scheduler iteration: drop cancelled and expired requests,
// admit queued ones into free slots, then one forward pass that advances
// every decoding slot by a token and prefills prompts within the budget.
func (e *Engine) step() {
	now := time.Now()
	kept := e.queue[:0]
	for _, j := range e.queue {
		switch {
		case j.ctx.Err() != nil:
			e.reject(j, j.ctx.Err())
		case e.opts.QueueTimeout > 0 && now.Sub(j.enqueued) > e.opts.QueueTimeout:
			e.reject(j, fmt.Errorf("%w: no slot free within %v", ErrQueueFull, e.opts.QueueTimeout))
		default:
			kept = append(kept, j)
		}
	}
	clear(e.queue[len(kept):])
	e.queue = kept
	for i := 0; i < len(e.active); {
		if s := e.active[i]; s.job.ctx.Err() != nil {
			e.finish(s, "", s.job.ctx.Err())
			continue // finish removed it
		}
		i++
	}
	e.admit()
	if len(e.active) == 0 {
		return
	}

	// Decoding slots first: one token each.
	e.segs, e.segSlot = e.segs[:0], e.segSlot[:0]
	for _, s := range e.active {
		if s.kv == len(s.tokens)-1 && s.job.generated > 0 {
			e.segs = append(e.segs, model.Segment{Slot: s.id, Start: s.kv, Tokens: s.tokens[s.kv : s.kv+1], Logits: model.LogitsLast, Screen: s.screens()})
			e.segSlot = append(e.segSlot, s)
		}
	}
	decoding := len(e.segs)
	// The prefill budget bounds the decode stall: while slots decode, at
	// most StallTokens prompt tokens join their step.
	budget := e.prefillMx
	if decoding > 0 {
		budget = min(budget, e.opts.StallTokens)
	}
	for _, s := range e.active {
		prompt := len(s.job.req.Tokens)
		if budget == 0 || s.kv >= prompt {
			continue
		}
		n := min(prompt-s.kv, budget)
		budget -= n
		logits := model.LogitsNone
		if s.kv+n == prompt {
			logits = model.LogitsLast
		}
		e.segs = append(e.segs, model.Segment{Slot: s.id, Start: s.kv, Tokens: s.tokens[s.kv : s.kv+n], Logits: logits, Screen: s.screens()})
		e.segSlot = append(e.segSlot, s)
	}

	// The constrained rows' masks not in their grammar's cache are worked
	// out while the forward pass computes their logits.
	e.prep = e.prep[:0]
	for i, seg := range e.segs {
		if s := e.segSlot[i].sampler; seg.Logits != model.LogitsNone && s.NeedsPrepare() {
			e.prep = append(e.prep, s)
		}
	}
	e.masks.start(e.prep)
	t0 := time.Now()
	err := e.be.forward(e.segs)
	e.masks.wait()
	if err != nil {
		err = fmt.Errorf("forward: %w", err)
		e.log.Error("forward pass failed", "err", err)
		for len(e.active) > 0 {
			s := e.active[0]
			s.tokens, s.kv = s.tokens[:0], 0 // the cache contents are unknown
			e.finish(s, "", err)
		}
		return
	}
	e.refine()
	prefilled, li := 0, 0
	for i, seg := range e.segs {
		s := e.segSlot[i]
		s.kv += len(seg.Tokens)
		if i >= decoding {
			prefilled += len(seg.Tokens)
		}
		if seg.Logits == model.LogitsNone {
			continue
		}
		e.emit(s, e.be.logits(li))
		li++
	}
	d := time.Since(t0)
	e.mu.Lock()
	e.stats.Steps++
	e.stats.PrefilledTokens += int64(prefilled)
	e.stats.LastStepDuration = d
	e.updateSlotStats()
	if decoding > 0 {
		e.stats.MaxDecodeStepLatency = max(e.stats.MaxDecodeStepLatency, d)
	}
	e.mu.Unlock()
}

// screens reports whether the draw from s's next logits depends only on a
// few of the largest: a greedy or top-k draw, without logprobs.
func (s *slot) screens() bool {
	return s.sampler.ScreenK() > 0 && !s.job.req.Logprobs && s.job.req.TopLogprobs == 0
}

// refine ends a forward pass that screened its logits (every row with logits
// asked to): each row's sampler says which tokens its draw can choose from,
// and the backend computes the logits of their panels, −Inf elsewhere.
func (e *Engine) refine() {
	sc, ok := e.be.(screener)
	if !ok || !sc.screened() {
		return
	}
	clear(e.panelSeen)
	li := 0
	for i, seg := range e.segs {
		if seg.Logits == model.LogitsNone {
			continue
		}
		lo, hi := sc.interval(li)
		li++
		// A token can be drawn if its upper end reaches the threshold and
		// is not −Inf (a NaN threshold keeps none). Few do: blocks whose
		// largest upper end falls short are passed over at SIMD speed.
		reach := max(e.segSlot[i].sampler.Threshold(lo, hi), -math.MaxFloat32)
		for b := 0; b < len(hi); b += scanBlock {
			block := hi[b:min(b+scanBlock, len(hi))]
			if !(e.ops.Max(block) >= reach) {
				continue
			}
			for t, h := range block {
				if h >= reach {
					e.panelSeen[(b+t)/gemm.PanelWidth] = true
				}
			}
		}
	}
	e.panels = e.panels[:0]
	for p, seen := range e.panelSeen {
		if seen {
			e.panels = append(e.panels, int32(p))
		}
	}
	sc.refine(e.panels)
	e.mu.Lock()
	e.stats.ScreenedRows += int64(li)
	e.stats.ScreenedTokens += int64(li * len(e.panels) * gemm.PanelWidth)
	e.mu.Unlock()
}

// scanBlock is the tokens refine's search takes at once.
const scanBlock = 1024

// emit samples the next token of s's job from its logits row.
func (e *Engine) emit(s *slot, row []float32) {
	j := s.job
	tok, err := s.sampler.Sample(row)
	if err == nil {
		err = s.sampler.Accept(tok)
	}
	if err != nil {
		e.finish(s, "", fmt.Errorf("sample: %w", err))
		return
	}
	s.tokens = append(s.tokens, tok)
	j.generated++
	if j.generated == 1 {
		j.res.TTFT = time.Since(j.enqueued)
	}
	e.mu.Lock()
	e.stats.GeneratedTokens++
	e.mu.Unlock()
	if slices.Contains(j.stops, tok) {
		e.finish(s, "stop", nil)
		return
	}
	ev := Event{Token: tok, At: time.Now()}
	if j.req.Logprobs || j.req.TopLogprobs > 0 {
		ev.Logprob = s.sampler.Logprob(tok)
	}
	if k := j.req.TopLogprobs; k > 0 {
		g := j.generated - 1
		ev.Top = s.sampler.TopLogprobs(j.tops[g*k : (g+1)*k])
	}
	j.events <- ev // never blocks: the channel holds MaxTokens events
	if j.generated >= j.maxTokens {
		e.finish(s, "length", nil)
	}
}

// admit gives queued requests free slots, in arrival order (a request whose
// session is busy waits without blocking those behind it).
func (e *Engine) admit() {
	kept := e.queue[:0]
	for _, j := range e.queue {
		s := e.pickSlot(j)
		if s == nil {
			kept = append(kept, j)
			continue
		}
		e.start(j, s)
	}
	clear(e.queue[len(kept):])
	e.queue = kept
	e.mu.Lock()
	e.queued = len(e.queue) + len(e.incoming)
	e.mu.Unlock()
}

// pickSlot chooses j's slot: its session's slot; else, among the idle
// unpinned slots, the one j continues (it keeps at least as much of the
// slot's content as it discards; the longest such), else an empty slot, else
// the least recently used one — but not the one holding j's longest prefix
// while another will do: that prefix is copied instead (start), and stays
// where it is for the prompts that continue it. When every idle slot is
// pinned, the least recently used idle session is evicted. nil: j waits.
func (e *Engine) pickSlot(j *job) *slot {
	sid := j.req.SessionID
	if sid != "" {
		for _, s := range e.slots {
			if s.session == sid {
				if s.job != nil {
					return nil
				}
				return s
			}
		}
	}
	stored := sid != "" && e.store != nil && e.store.has(sid)
	var hit, longest, empty, lru, lruOther *slot
	hitN, longN := 0, 0
	for _, s := range e.slots {
		if s.job != nil || s.session != "" {
			continue
		}
		n := 0
		if !stored {
			n = commonPrefix(s.tokens[:s.kv], j.req.Tokens)
		}
		if n > 0 && 2*n >= s.kv && n > hitN {
			hit, hitN = s, n
		}
		if n > longN {
			longest, longN = s, n
		}
		if empty == nil && s.kv == 0 {
			empty = s
		}
		if lru == nil || s.used < lru.used {
			lru = s
		}
	}
	for _, s := range e.slots {
		if s.job == nil && s.session == "" && s != longest && (lruOther == nil || s.used < lruOther.used) {
			lruOther = s
		}
	}
	switch {
	case hit != nil:
		return hit
	case empty != nil:
		return empty
	case lruOther != nil:
		return lruOther
	case lru != nil:
		return lru
	}
	for _, s := range e.slots {
		if s.job == nil && (lru == nil || s.used < lru.used) {
			lru = s
		}
	}
	if lru != nil {
		e.evict(lru)
	}
	return lru
}

func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// start binds j to s: restores j's session from the store if needed, keeps
// the longest prefix of the prompt the slot already holds, and extends it
// from another slot or the prefix store when they hold more.
func (e *Engine) start(j *job, s *slot) {
	prompt := j.req.Tokens
	sid := j.req.SessionID
	continues := sid != "" && s.session == sid
	restoring := !continues && sid != "" && e.store != nil && e.store.has(sid)
	if keep := commonPrefix(s.tokens[:s.kv], prompt); !continues && (restoring || 2*keep < s.kv) {
		// The slot's content is replaced, not continued: keep it for the
		// prompts that will continue it.
		e.savePrefix(s)
	}
	s.owner = sid // the slot's content is now j's prompt
	switch {
	case sid == "":
	case continues:
		j.res.SessionHit = true
	default:
		if restoring {
			e.restore(s, sid)
			j.res.Restored = s.kv > 0
			j.res.SessionHit = j.res.Restored
		}
		s.session = sid
	}
	// At least the last prompt token is recomputed: its logits give the
	// first generated token.
	limit := len(prompt) - 1
	own := min(commonPrefix(s.tokens[:s.kv], prompt), limit)
	s.tokens = append(s.tokens[:own], prompt[own:]...)
	reuse := e.extendPrefix(j, s, own, limit)
	s.kv = reuse
	s.job = j
	seed := e.rng.Uint64()
	s.sampler.Reset(j.req.Sampling, prompt, j.req.Constraint, seed)
	j.res.CachedTokens = reuse
	j.res.Prefilled = len(prompt) - reuse
	j.res.QueueTime = time.Since(j.enqueued)
	e.active = append(e.active, s)
	e.mu.Lock()
	if reuse > 0 {
		e.stats.PrefixHits++
		e.stats.ReusedTokens += int64(reuse)
	} else {
		e.stats.PrefixMisses++
	}
	e.updateSlotStats()
	e.mu.Unlock()
}

// extendPrefix brings positions [reuse, n) of j's prompt into s when another
// slot (busy or not: its computed positions do not change while it runs) or
// the prefix store holds a longer prefix than s, up to limit. Same tokens
// give the same KV bits, so a copy stands for a prefill exactly. It returns
// the new reuse.
func (e *Engine) extendPrefix(j *job, s *slot, reuse, limit int) int {
	prompt := j.req.Tokens
	var src *slot
	srcN := reuse
	for _, o := range e.slots {
		if o == s {
			continue
		}
		if n := min(commonPrefix(o.tokens[:o.kv], prompt), limit); n > srcN {
			src, srcN = o, n
		}
	}
	storeN := 0
	if e.prefix != nil && reuse < limit {
		storeN = min(e.prefix.match(prompt), limit)
	}
	n, fromStore := reuse, false
	switch {
	case src != nil && srcN >= storeN:
		if err := e.be.copyPositions(s.id, src.id, reuse, srcN-reuse); err != nil {
			e.log.Warn("cannot copy a prefix between slots", "from", src.id, "to", s.id, "err", err)
			break
		}
		e.tick++
		src.used = e.tick // its prefix is in demand: evict it last
		j.res.CopiedTokens, n = srcN-reuse, srcN
	case storeN > reuse:
		if err := e.prefix.restore(s.id, reuse, storeN); err != nil {
			e.log.Warn("cannot restore a prefix", "slot", s.id, "err", err)
			break
		}
		j.res.StoreTokens, n, fromStore = storeN-reuse, storeN, true
	}
	e.mu.Lock()
	e.stats.CopiedTokens += int64(j.res.CopiedTokens)
	if e.prefix != nil && reuse < limit {
		if fromStore {
			e.stats.PrefixStoreHits++
			e.stats.PrefixStoreRestored += int64(j.res.StoreTokens)
		} else {
			e.stats.PrefixStoreMisses++
		}
		e.prefixStatsLocked()
	}
	e.mu.Unlock()
	return n
}

// savePrefix writes s's content to the prefix store before it is replaced.
func (e *Engine) savePrefix(s *slot) {
	if e.prefix == nil || s.kv == 0 {
		return
	}
	n, err := e.prefix.insert(s.tokens[:s.kv], s.id, s.owner)
	if e.opts.SessionTTL > 0 {
		e.prefix.touch(s.owner, s.usedAt)
	}
	if err != nil {
		e.log.Warn("cannot save a prefix", "slot", s.id, "err", err)
	}
	e.mu.Lock()
	e.stats.PrefixStoreSaved += int64(n)
	e.prefixStatsLocked()
	e.mu.Unlock()
}

// finish ends s's job and frees the slot; its tokens stay for reuse.
func (e *Engine) finish(s *slot, reason string, err error) {
	j := s.job
	j.res.PromptTokens = len(j.req.Tokens)
	j.res.CompletionTokens = j.generated
	j.res.FinishReason = reason
	j.res.Tokens = slices.Clone(s.tokens[:min(len(s.tokens), len(j.req.Tokens)+j.generated)])
	j.res.Total = time.Since(j.enqueued)
	j.err = err
	close(j.events)
	s.job = nil
	e.tick++
	s.used, s.usedAt = e.tick, e.opts.Clock()
	if i := slices.Index(e.active, s); i >= 0 {
		e.active = slices.Delete(e.active, i, i+1)
	}
	e.mu.Lock()
	e.stats.Requests++
	e.updateSlotStats()
	e.mu.Unlock()
}

// reject ends a job that never got a slot.
func (e *Engine) reject(j *job, err error) {
	j.res.PromptTokens = len(j.req.Tokens)
	j.res.Total = time.Since(j.enqueued)
	j.err = err
	close(j.events)
	e.mu.Lock()
	e.stats.Requests++
	e.mu.Unlock()
}

// updateSlotStats refreshes the slot gauges; e.mu is held.
func (e *Engine) updateSlotStats() {
	busy, used, sessions := 0, 0, 0
	for _, s := range e.slots {
		if s.job != nil {
			busy++
		}
		if s.session != "" {
			sessions++
		}
		used += s.kv
	}
	e.stats.SlotsBusy, e.stats.KVUsed, e.stats.Sessions = busy, used, sessions
}

// evict unpins s's session, writing it to the store when there is one.
func (e *Engine) evict(s *slot) {
	if s.session == "" {
		return
	}
	if e.store != nil {
		if err := e.store.save(s.session, s.tokens, s.kv, s.id, e.be, s.usedAt); err != nil {
			e.log.Warn("session store: cannot save session", "session", s.session, "err", err)
		}
	}
	s.session = ""
	e.mu.Lock()
	e.stats.SessionsEvicted++
	e.mu.Unlock()
}

// restore loads session sid into s; an unusable stored session is deleted
// and s left empty, so that the prompt is recomputed.
func (e *Engine) restore(s *slot, sid string) {
	tokens, n, err := e.store.loadKV(sid, s.id, e.be, e.opts.SequenceLength)
	e.mu.Lock()
	if err != nil {
		s.tokens, s.kv = s.tokens[:0], 0
		e.stats.SessionsRecomputed++
	} else {
		s.tokens = append(s.tokens[:0], tokens...)
		s.kv = n
		e.stats.SessionsRestored++
	}
	e.mu.Unlock()
	if err != nil {
		e.log.Warn("session store: stored session unusable, recomputing", "session", sid, "err", err)
	}
}

// shutdown fails every request, saves the sessions held in slots and
// writes the prefixes in memory to the prefix store's disk tier.
func (e *Engine) shutdown() {
	e.mu.Lock()
	e.queue = append(e.queue, e.incoming...)
	e.incoming = nil
	e.mu.Unlock()
	for _, j := range e.queue {
		e.reject(j, ErrClosed)
	}
	e.queue = nil
	for len(e.active) > 0 {
		e.finish(e.active[0], "", ErrClosed)
	}
	e.closeErr = e.saveSlotSessions()
	e.persistPrefixes()
}
