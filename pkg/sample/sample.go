// Package sample turns a row of logits into the next token: constraint mask,
// penalties, temperature, top-k, top-p, min-p, then a seeded draw.
//
// A Sampler belongs to one engine slot and is reused by every request that
// slot serves: its buffers are sized to the vocabulary once, so choosing a
// token allocates nothing.
//
// Processing order (Hugging Face's logits-processor order, which vLLM matches
// for these parameters):
//
//  1. Constraint: tokens the constraint forbids get -inf; then the logit
//     bias is added (vLLM applies logit_bias before the penalties too).
//  2. Repetition penalty over every token seen in prompt or output: a positive
//     logit is divided by it, a negative one multiplied.
//  3. Presence and frequency penalties over output tokens:
//     logit -= presence·[count>0] + frequency·count.
//  4. Temperature 0 is greedy: the highest logit, the lowest id on ties.
//     Otherwise logits are divided by the temperature, and
//  5. top-k, then top-p (the smallest set of most likely tokens whose
//     probability reaches p), then min-p (tokens at least min_p times as
//     likely as the most likely one) keep a candidate set, from which
//  6. one token is drawn with the request's own RNG.
//
// Logprobs are the log-softmax of the logits after steps 1–3 (mask and
// penalties) and before temperature and truncation: the distribution of the
// model as the request's penalties shape it, which stays meaningful under
// greedy decoding (vLLM's "processed_logprobs" mode minus temperature).
package sample

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/ops"
)

// Params are a request's sampling parameters. The zero value is greedy
// decoding without penalties.
type Params struct {
	// Temperature divides the logits; 0 means greedy.
	Temperature float32
	// TopP keeps the most likely tokens whose probabilities sum to TopP; 0 or 1 = off.
	TopP float32
	// MinP keeps tokens at least MinP times as likely as the most likely one; 0 = off.
	MinP float32
	// TopK keeps the K most likely tokens; 0 or less = off.
	TopK int
	// RepetitionPenalty (>0, 1 = off) penalises tokens seen in prompt or output.
	RepetitionPenalty float32
	// PresencePenalty and FrequencyPenalty penalise output tokens (0 = off).
	PresencePenalty, FrequencyPenalty float32
	// Seed makes the draws reproducible; nil draws a fresh seed.
	Seed *uint64
	// LogitBias is added to its tokens' logits (OpenAI's logit_bias); ids
	// outside the vocabulary are ignored.
	LogitBias []TokenBias
}

// TokenBias is a bias added to one token's logit.
type TokenBias struct {
	Token int32
	Bias  float32
}

// Validate reports parameters no sampler can honour.
func (p Params) Validate() error {
	switch {
	case p.Temperature < 0 || isNaN(p.Temperature):
		return fmt.Errorf("temperature %v: must be >= 0", p.Temperature)
	case p.TopP < 0 || p.TopP > 1 || isNaN(p.TopP):
		return fmt.Errorf("top_p %v: must be in [0, 1]", p.TopP)
	case p.MinP < 0 || p.MinP > 1 || isNaN(p.MinP):
		return fmt.Errorf("min_p %v: must be in [0, 1]", p.MinP)
	case p.RepetitionPenalty < 0 || isNaN(p.RepetitionPenalty):
		return fmt.Errorf("repetition_penalty %v: must be > 0", p.RepetitionPenalty)
	case isNaN(p.PresencePenalty) || isNaN(p.FrequencyPenalty):
		return errors.New("presence/frequency penalty is NaN")
	}
	for _, b := range p.LogitBias {
		if isNaN(b.Bias) || math.IsInf(float64(b.Bias), 0) {
			return fmt.Errorf("logit bias %v of token %d: must be finite", b.Bias, b.Token)
		}
	}
	return nil
}

func isNaN(f float32) bool { return f != f }

// Constraint restricts which tokens may come next (pkg/grammar implements it).
type Constraint interface {
	// Mask receives one bit per vocabulary id, all set on entry, and clears
	// the bits of the tokens not allowed next.
	Mask(allowed []uint64)
	// Accept advances past the chosen token.
	Accept(token int32) error
}

// Preparer is a Constraint that can work out its next mask ahead of Mask
// (pkg/grammar's does): the engine calls Prepare on another thread while
// the model computes the logits, and Mask then only applies it. Prepared
// reports, cheaply, whether the mask is known already (Prepare would do
// nothing): those are not handed to another thread.
type Preparer interface {
	Prepared() bool
	Prepare()
}

// TokenLogprob is a token with its log-probability.
type TokenLogprob struct {
	Token   int32
	Logprob float32
}

// ErrNoToken is returned when the constraint allows no token at all.
var ErrNoToken = errors.New("sample: the constraint allows no token")

// Sampler is the per-slot sampling state. It is not safe for concurrent use.
type Sampler struct {
	ops    *ops.Kernels // argmax, bound by New
	vocab  int
	params Params
	rng    rand.PCG
	cons   Constraint

	// seen marks tokens of prompt and output (repetition penalty); seenIDs
	// lists them so that a reset touches only what was set.
	seen    []uint64
	seenIDs []int32
	// counts holds output occurrences (presence/frequency); outIDs lists the
	// distinct output tokens.
	counts []int32
	outIDs []int32

	allowed []uint64
	masked  bool // allowed is the next draw's already (Threshold)
	cand    []cand
	// Single-pass top-k buffers, for small k.
	topIdx []int32
	topVal []float32

	// The processed logits of the last Sample and their log-softmax normaliser.
	logits  []float32
	best    int32 // first index of the largest processed logit
	maxL    float32
	logNorm float32
	normed  bool // logNorm is computed on demand: greedy decoding never needs it
}

type cand struct {
	id int32
	v  float32 // logit, then probability
}

// smallTopK is the largest k selected by one insertion pass over the logits
// (cost ≈ vocab compares); larger k use quickselect.
const smallTopK = 64

// New returns a sampler for a vocabulary of vocab logits.
func New(vocab int) *Sampler {
	words := (vocab + 63) / 64
	return &Sampler{
		ops:     ops.For(kernels.Active()),
		vocab:   vocab,
		seen:    make([]uint64, words),
		seenIDs: make([]int32, 0, 1024),
		counts:  make([]int32, vocab),
		outIDs:  make([]int32, 0, 1024),
		allowed: make([]uint64, words),
		cand:    make([]cand, vocab),
		topIdx:  make([]int32, smallTopK),
		topVal:  make([]float32, smallTopK),
	}
}

// Bytes is the memory the sampler holds.
func (s *Sampler) Bytes() int64 {
	return int64(8*(len(s.seen)+len(s.allowed)) + 4*(cap(s.seenIDs)+len(s.counts)+cap(s.outIDs)+len(s.topIdx)+len(s.topVal)) + 8*len(s.cand))
}

// Reset starts a request: its parameters, its prompt (for the repetition
// penalty) and its constraint (nil = none). seed is used when p.Seed is nil.
func (s *Sampler) Reset(p Params, prompt []int32, c Constraint, seed uint64) {
	for _, id := range s.seenIDs {
		s.seen[id>>6] &^= 1 << (uint(id) & 63)
	}
	for _, id := range s.outIDs {
		s.counts[id] = 0
	}
	s.seenIDs, s.outIDs = s.seenIDs[:0], s.outIDs[:0]
	s.params, s.cons = p, c
	if p.Seed != nil {
		seed = *p.Seed
	}
	// The second PCG word is fixed so that a seed names one stream.
	s.rng.Seed(seed, 0x9e3779b97f4a7c15)
	if p.RepetitionPenalty != 0 && p.RepetitionPenalty != 1 {
		for _, id := range prompt {
			s.markSeen(id)
		}
	}
	s.logits, s.masked = nil, false
}

func (s *Sampler) markSeen(id int32) {
	if id < 0 || int(id) >= s.vocab {
		return
	}
	w, b := id>>6, uint64(1)<<(uint(id)&63)
	if s.seen[w]&b == 0 {
		s.seen[w] |= b
		s.seenIDs = append(s.seenIDs, id)
	}
}

// NeedsPrepare reports whether the constraint's next mask has work left
// that Prepare could do ahead of Sample.
func (s *Sampler) NeedsPrepare() bool {
	p, ok := s.cons.(Preparer)
	return ok && !p.Prepared()
}

// Prepare works out the constraint's next mask now, when it can (Preparer);
// Sample would otherwise do it. It touches nothing else of the sampler, so
// it may run on another goroutine while the sampler's owner does not use it.
func (s *Sampler) Prepare() {
	if p, ok := s.cons.(Preparer); ok {
		p.Prepare()
	}
}

// Accept records the chosen token: for the penalties and the constraint.
func (s *Sampler) Accept(id int32) error {
	if s.params.RepetitionPenalty != 0 && s.params.RepetitionPenalty != 1 {
		s.markSeen(id)
	}
	if id >= 0 && int(id) < s.vocab {
		if s.counts[id] == 0 {
			s.outIDs = append(s.outIDs, id)
		}
		s.counts[id]++
	}
	if s.cons != nil {
		if err := s.cons.Accept(id); err != nil {
			return fmt.Errorf("constraint: %w", err)
		}
	}
	return nil
}

// Sample chooses the next token from logits, which it modifies in place
// (mask and penalties); the modified row backs Logprob and TopLogprobs until
// the next Sample. It does not Accept the token.
func (s *Sampler) Sample(logits []float32) (int32, error) {
	if len(logits) != s.vocab {
		return 0, fmt.Errorf("sample: %d logits, sampler has a vocabulary of %d", len(logits), s.vocab)
	}
	if err := s.process(logits); err != nil {
		return 0, err
	}
	p := s.params
	if p.Temperature == 0 {
		return s.best, nil
	}
	return s.draw(logits), nil
}

// process applies the mask and the penalties, and records the log-softmax
// normaliser.
func (s *Sampler) process(logits []float32) error {
	if !s.masked {
		s.mask()
	}
	s.masked = false
	s.adjust(logits)
	best := s.ops.Argmax(logits)
	if best < 0 || math.IsInf(float64(logits[best]), -1) {
		return ErrNoToken
	}
	s.logits, s.best, s.maxL, s.normed = logits, int32(best), logits[best], false
	return nil
}

// mask works out the constraint's allowed tokens for the next draw.
func (s *Sampler) mask() {
	if s.cons != nil {
		for i := range s.allowed {
			s.allowed[i] = ^uint64(0)
		}
		s.cons.Mask(s.allowed)
	}
}

// adjust applies the mask (worked out by mask), the logit bias and the
// penalties to a row of logits. Each changes a logit by a function that
// does not decrease with it, so it maps the ends of an interval that holds
// a logit to the ends of one that holds the adjusted logit (Threshold).
func (s *Sampler) adjust(logits []float32) {
	negInf := float32(math.Inf(-1))
	if s.cons != nil {
		for w, word := range s.allowed {
			base := w * 64
			for m := ^word; m != 0; m &= m - 1 {
				if i := base + bits.TrailingZeros64(m); i < len(logits) {
					logits[i] = negInf
				}
			}
		}
	}
	for _, b := range s.params.LogitBias {
		if uint(b.Token) < uint(len(logits)) {
			logits[b.Token] += b.Bias
		}
	}
	if rp := s.params.RepetitionPenalty; rp != 0 && rp != 1 {
		for _, id := range s.seenIDs {
			if l := logits[id]; l > 0 {
				logits[id] = l / rp
			} else {
				logits[id] = l * rp
			}
		}
	}
	if pp, fp := s.params.PresencePenalty, s.params.FrequencyPenalty; pp != 0 || fp != 0 {
		for _, id := range s.outIDs {
			logits[id] -= pp + float32(fp*float32(s.counts[id])) // unfused on every CPU
		}
	}
}

// ScreenK is how many of the largest adjusted logits the next draw depends
// on: 1 for greedy decoding, TopK when set (up to 64); 0 when it depends on
// all of them. Logprobs depend on all of them too: the caller knows whether
// it wants them.
func (s *Sampler) ScreenK() int {
	switch p := s.params; {
	case p.Temperature == 0:
		return 1
	case p.TopK > 0 && p.TopK <= smallTopK:
		return p.TopK
	}
	return 0
}

// Threshold screens the next draw (ScreenK > 0) from intervals that hold
// its logits, lo[t] ≤ logit t ≤ hi[t]: it applies the mask, the bias and
// the penalties to both ends, and returns the ScreenK-th largest adjusted
// lower end. A token whose adjusted upper end is below it, or −Inf, is
// below the ScreenK-th largest adjusted logit (or not allowed), so Sample
// chooses the same token from logits in which every such token's is −Inf.
// The mask is worked out once, for this call and the next Sample.
func (s *Sampler) Threshold(lo, hi []float32) float32 {
	k := s.ScreenK()
	if k == 0 || len(lo) != s.vocab || len(hi) != s.vocab {
		panic(fmt.Sprintf("sample: Threshold of %d and %d bounds, vocabulary %d, k = %d", len(lo), len(hi), s.vocab, k))
	}
	s.mask()
	s.masked = true
	s.adjust(lo)
	s.adjust(hi)
	if k == 1 {
		return lo[max(s.ops.Argmax(lo), 0)]
	}
	idx, vals := s.topIdx[:k], s.topVal[:k]
	ops.TopK(idx, vals, lo)
	return vals[k-1]
}

// draw samples from the temperature-scaled, truncated distribution.
func (s *Sampler) draw(logits []float32) int32 {
	p := s.params
	invT := 1 / p.Temperature
	// Sorting ~150k candidates per token would dominate a decode step, so
	// only as many as the filters need are selected and sorted. Top-k works
	// on the logits (the exponentials are then only taken of k tokens), with
	// a single pass when k is small (Qwen3 recommends 20).
	c := s.cand[:0]
	if k := p.TopK; k > 0 && k <= len(s.topIdx) {
		idx, vals := s.topIdx[:k], s.topVal[:k]
		ops.TopK(idx, vals, logits)
		for i, id := range idx {
			if !math.IsInf(float64(vals[i]), -1) {
				c = append(c, cand{id, vals[i]})
			}
		}
	} else {
		for i, l := range logits {
			if !math.IsInf(float64(l), -1) {
				c = append(c, cand{int32(i), l})
			}
		}
		if k > 0 && k < len(c) {
			c = c[:selectTop(c, k)]
		}
	}
	// Probabilities relative to the best token, unnormalised: the other
	// filters and the draw only compare and sum them.
	for i := range c {
		c[i].v = ops.Exp32((c[i].v - s.maxL) * invT)
	}
	if p.TopP > 0 && p.TopP < 1 {
		c = nucleus(c, p.TopP)
	}
	if p.MinP > 0 {
		// The best token has relative probability 1.
		n := 0
		for _, x := range c {
			if x.v >= p.MinP {
				c[n] = x
				n++
			}
		}
		c = c[:n]
	}
	var sum float64
	for _, x := range c {
		sum += float64(x.v)
	}
	r := float64(s.rng.Uint64()>>11) / (1 << 53) * sum
	for _, x := range c {
		r -= float64(x.v)
		if r < 0 {
			return x.id
		}
	}
	return c[len(c)-1].id
}

// nucleus returns the smallest set of most likely candidates whose mass
// reaches topP of the total. Usually a few hundred tokens hold that mass: they
// are selected and sorted, and the set is the shortest sorted prefix. When
// the distribution is flat, sorting most of the vocabulary per token would
// dominate a decode step, so the probability threshold is found by bisection
// instead; the set is then every candidate at or above it (all tokens tied
// at the threshold, in no particular order).
func nucleus(c []cand, topP float32) []cand {
	var total float64
	for _, x := range c {
		total += float64(x.v)
	}
	target := float64(topP) * total
	m := selectTop(c, min(len(c), 256))
	var acc float64
	for i := range m {
		acc += float64(c[i].v)
		if acc >= target {
			return c[:i+1]
		}
	}
	if m == len(c) {
		return c
	}
	// The mass at or above lo always reaches the target; above hi it does not.
	lo, hi := float32(0), c[0].v
	for range 40 {
		mid := lo + float32((hi-lo)/2) // unfused on every CPU
		if mid <= lo || mid >= hi {
			break
		}
		var mass float64
		for _, x := range c {
			if x.v >= mid {
				mass += float64(x.v)
			}
		}
		if mass >= target {
			lo = mid
		} else {
			hi = mid
		}
	}
	n := 0
	for _, x := range c {
		if x.v >= lo {
			c[n] = x
			n++
		}
	}
	return c[:n]
}

// selectTop moves the k largest candidates (by value, then lowest id) to the
// front of c in descending order and returns k.
func selectTop(c []cand, k int) int {
	if k < len(c) {
		quickselect(c, k)
	}
	slices.SortFunc(c[:k], cmpCand)
	return k
}

func cmpCand(a, b cand) int {
	switch {
	case a.v > b.v:
		return -1
	case a.v < b.v:
		return 1
	}
	return int(a.id - b.id)
}

// quickselect partitions c so that its first k elements are the k best.
func quickselect(c []cand, k int) {
	lo, hi := 0, len(c)
	for hi-lo > 1 {
		// Median of three keeps adversarial (sorted) logits linear on average.
		pivot := median3(c[lo], c[lo+(hi-lo)/2], c[hi-1])
		// Three-way partition: better | equal | worse.
		lt, i, gt := lo, lo, hi
		for i < gt {
			switch r := cmpCand(c[i], pivot); {
			case r < 0:
				c[lt], c[i] = c[i], c[lt]
				lt++
				i++
			case r > 0:
				gt--
				c[i], c[gt] = c[gt], c[i]
			default:
				i++
			}
		}
		switch {
		case k <= lt:
			hi = lt
		case k >= gt:
			lo = gt
		default:
			return
		}
	}
}

func median3(a, b, d cand) cand {
	if cmpCand(a, b) > 0 {
		a, b = b, a
	}
	// now a <= b
	if cmpCand(b, d) <= 0 {
		return b
	}
	if cmpCand(a, d) > 0 {
		return a
	}
	return d
}

// Logprob is the log-probability of id under the processed logits of the
// last Sample.
func (s *Sampler) Logprob(id int32) float32 {
	if s.logits == nil || id < 0 || int(id) >= len(s.logits) {
		return float32(math.Inf(-1))
	}
	return s.logits[id] - s.maxL - s.norm()
}

// norm is log Σ exp(l − max) over the processed logits.
func (s *Sampler) norm() float32 {
	if !s.normed {
		var sum float32
		for _, l := range s.logits {
			sum += ops.Exp32(l - s.maxL)
		}
		s.logNorm, s.normed = float32(math.Log(float64(sum))), true
	}
	return s.logNorm
}

// TopLogprobs fills dst with the len(dst) most likely tokens of the last
// Sample, best first (lowest id on ties), and returns it. It uses the
// candidate buffer, so call it after Sample, not during.
func (s *Sampler) TopLogprobs(dst []TokenLogprob) []TokenLogprob {
	if s.logits == nil || len(dst) == 0 {
		return dst[:0]
	}
	norm := s.norm()
	n := min(len(dst), len(s.logits))
	if n <= len(s.topIdx) {
		idx, vals := s.topIdx[:n], s.topVal[:n]
		ops.TopK(idx, vals, s.logits)
		for i, id := range idx {
			dst[i] = TokenLogprob{id, vals[i] - s.maxL - norm}
		}
		return dst[:n]
	}
	c := s.cand[:len(s.logits)]
	for i, l := range s.logits {
		c[i] = cand{int32(i), l}
	}
	selectTop(c, n)
	for i := range n {
		dst[i] = TokenLogprob{c[i].id, c[i].v - s.maxL - norm}
	}
	return dst[:n]
}
