package sample

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func ptr[T any](v T) *T { return &v }

// logitsOf returns logits whose softmax is probs.
func logitsOf(probs ...float64) []float32 {
	l := make([]float32, len(probs))
	for i, p := range probs {
		l[i] = float32(math.Log(p))
	}
	return l
}

// histogram draws n tokens with params p from logits.
func histogram(t *testing.T, p Params, logits []float32, n int) []int {
	t.Helper()
	s := New(len(logits))
	s.Reset(p, nil, nil, 1)
	h := make([]int, len(logits))
	row := make([]float32, len(logits))
	for range n {
		copy(row, logits)
		id, err := s.Sample(row)
		if err != nil {
			t.Fatal(err)
		}
		h[id]++
	}
	return h
}

// chiSquare is Pearson's statistic of counts h against probabilities want
// (entries with want 0 must have no counts).
func chiSquare(t *testing.T, h []int, want []float64) float64 {
	t.Helper()
	n := 0
	for _, c := range h {
		n += c
	}
	var x2 float64
	for i, p := range want {
		if p == 0 {
			if h[i] != 0 {
				t.Fatalf("token %d drawn %d times, want never (hist %v)", i, h[i], h)
			}
			continue
		}
		e := p * float64(n)
		x2 += (float64(h[i]) - e) * (float64(h[i]) - e) / e
	}
	return x2
}

func normalize(w []float64) []float64 {
	var s float64
	for _, x := range w {
		s += x
	}
	out := make([]float64, len(w))
	for i, x := range w {
		out[i] = x / s
	}
	return out
}

func TestDistributions(t *testing.T) {
	base := []float64{0.4, 0.25, 0.15, 0.1, 0.06, 0.04}
	tempered := func(temp float64) []float64 {
		w := make([]float64, len(base))
		for i, p := range base {
			w[i] = math.Pow(p, 1/temp)
		}
		return normalize(w)
	}
	tests := []struct {
		name string
		p    Params
		want []float64
	}{
		{"temperature 1", Params{Temperature: 1}, base},
		{"temperature 0.5", Params{Temperature: 0.5}, tempered(0.5)},
		{"temperature 2", Params{Temperature: 2}, tempered(2)},
		{"top-k 3", Params{Temperature: 1, TopK: 3}, normalize([]float64{0.4, 0.25, 0.15, 0, 0, 0})},
		{"top-p 0.64 keeps two", Params{Temperature: 1, TopP: 0.64}, normalize([]float64{0.4, 0.25, 0, 0, 0, 0})},
		{"top-p 0.66 keeps three", Params{Temperature: 1, TopP: 0.66}, normalize([]float64{0.4, 0.25, 0.15, 0, 0, 0})},
		{"top-k 2 then top-p over the renormalised pair", Params{Temperature: 1, TopK: 2, TopP: 0.6}, []float64{1, 0, 0, 0, 0, 0}},
		{"min-p 0.3", Params{Temperature: 1, MinP: 0.3}, normalize([]float64{0.4, 0.25, 0.15, 0, 0, 0})},
		{"min-p after temperature", Params{Temperature: 0.5, MinP: 0.3}, normalize([]float64{0.16, 0.0625, 0, 0, 0, 0})},
	}
	const n = 20000
	// 99.9th percentile of chi-square with 5 degrees of freedom: a correct
	// sampler fails this with a fixed seed only by bad luck we can see.
	const limit = 20.5
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := histogram(t, tt.p, logitsOf(base...), n)
			if x2 := chiSquare(t, h, tt.want); x2 > limit {
				t.Errorf("chi-square %.1f > %.1f: hist %v, want probs %v", x2, limit, h, tt.want)
			}
		})
	}
}

func TestGreedy(t *testing.T) {
	tests := []struct {
		name   string
		logits []float32
		want   int32
	}{
		{"max", []float32{0, 3, 1, 2}, 1},
		{"first on ties", []float32{1, 5, 2, 5}, 1},
		{"negative", []float32{-3, -1, -2}, 1},
		{"last", []float32{-3, -1, -2, 7}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(len(tt.logits))
			// Truncation parameters have no effect on greedy decoding.
			s.Reset(Params{TopK: 1, TopP: 0.1}, nil, nil, 0)
			got, err := s.Sample(slices.Clone(tt.logits))
			if err != nil || got != tt.want {
				t.Errorf("Sample = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestLogitBias(t *testing.T) {
	logits := []float32{0, 3, 1, 2}
	s := New(len(logits))
	// +5 makes token 0 the greedy choice; -100 bans token 1 in effect; ids
	// outside the vocabulary are ignored, not a panic.
	s.Reset(Params{LogitBias: []TokenBias{{0, 5}, {1, -100}, {-1, 50}, {4, 50}}}, nil, nil, 0)
	row := slices.Clone(logits)
	got, err := s.Sample(row)
	if err != nil || got != 0 || row[0] != 5 || row[1] != -97 || row[3] != 2 {
		t.Fatalf("Sample = %d, %v; processed %v", got, err, row)
	}
	// A masked token stays masked whatever its bias.
	s.Reset(Params{LogitBias: []TokenBias{{0, 100}}}, nil, &oddOnly{}, 0)
	if got, err := s.Sample(slices.Clone(logits)); err != nil || got != 1 {
		t.Errorf("masked token 0 with bias: Sample = %d, %v; want 1", got, err)
	}
}

func TestPenalties(t *testing.T) {
	tests := []struct {
		name     string
		p        Params
		prompt   []int32
		accepted []int32
		logits   []float32
		want     []float32
	}{
		{
			name:   "repetition divides positive, multiplies negative, prompt and output",
			p:      Params{RepetitionPenalty: 2},
			prompt: []int32{0, 1, 1}, accepted: []int32{3},
			logits: []float32{4, -1, 5, 2},
			want:   []float32{2, -2, 5, 1},
		},
		{
			name:   "presence and frequency over output only",
			p:      Params{PresencePenalty: 0.5, FrequencyPenalty: 0.25},
			prompt: []int32{0}, accepted: []int32{2, 2, 3},
			logits: []float32{1, 1, 1, 1},
			want:   []float32{1, 1, 1 - 0.5 - 0.5, 1 - 0.5 - 0.25},
		},
		{
			name:   "repetition 1 is off",
			p:      Params{RepetitionPenalty: 1},
			prompt: []int32{0, 1}, accepted: []int32{2},
			logits: []float32{4, -1, 5, 2},
			want:   []float32{4, -1, 5, 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(len(tt.logits))
			s.Reset(tt.p, tt.prompt, nil, 0)
			for _, id := range tt.accepted {
				if err := s.Accept(id); err != nil {
					t.Fatal(err)
				}
			}
			row := slices.Clone(tt.logits)
			if _, err := s.Sample(row); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(row, tt.want) {
				t.Errorf("processed logits %v, want %v", row, tt.want)
			}
		})
	}
}

func TestPenaltyChangesGreedyChoice(t *testing.T) {
	s := New(3)
	s.Reset(Params{RepetitionPenalty: 1.5}, []int32{0}, nil, 0)
	if got, _ := s.Sample([]float32{3, 2.5, 0}); got != 1 {
		t.Errorf("with token 0 penalised: got %d, want 1", got)
	}
	// Reset forgets the previous request's tokens.
	s.Reset(Params{RepetitionPenalty: 1.5}, nil, nil, 0)
	if got, _ := s.Sample([]float32{3, 2.5, 0}); got != 0 {
		t.Errorf("after Reset: got %d, want 0", got)
	}
}

func TestSeedDeterminism(t *testing.T) {
	logits := make([]float32, 1000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 2)
	}
	run := func(seed uint64) []int32 {
		s := New(len(logits))
		s.Reset(Params{Temperature: 0.9, TopP: 0.95, Seed: &seed}, nil, nil, 12345)
		var out []int32
		row := make([]float32, len(logits))
		for range 50 {
			copy(row, logits)
			id, err := s.Sample(row)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, id)
		}
		return out
	}
	a, b, c := run(7), run(7), run(8)
	if !slices.Equal(a, b) {
		t.Errorf("same seed gave different tokens:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 7 and 8 gave the same 50 tokens: %v", a)
	}
}

// oddOnly allows odd tokens and records what it accepted.
type oddOnly struct{ accepted []int32 }

func (o *oddOnly) Mask(allowed []uint64) {
	for i := range allowed {
		allowed[i] &= 0xAAAAAAAAAAAAAAAA
	}
}

func (o *oddOnly) Accept(id int32) error {
	if id%2 == 0 {
		return errors.New("even token")
	}
	o.accepted = append(o.accepted, id)
	return nil
}

type none struct{}

func (none) Mask(allowed []uint64) { clear(allowed) }
func (none) Accept(int32) error    { return nil }

func TestConstraint(t *testing.T) {
	const vocab = 130 // not a multiple of 64: the last word is partial
	logits := make([]float32, vocab)
	for i := range logits {
		logits[i] = float32(vocab - i) // even token 0 is the greedy choice
	}
	for _, p := range []Params{{}, {Temperature: 1}, {Temperature: 1, TopK: 5}, {Temperature: 1.5, TopP: 0.9, MinP: 0.01}} {
		c := &oddOnly{}
		s := New(vocab)
		s.Reset(p, nil, c, 3)
		for range 200 {
			row := slices.Clone(logits)
			id, err := s.Sample(row)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Accept(id); err != nil {
				t.Fatalf("%+v: sampled a masked token: %v", p, err)
			}
		}
		if len(c.accepted) != 200 {
			t.Errorf("constraint saw %d accepts, want 200", len(c.accepted))
		}
	}
	s := New(vocab)
	s.Reset(Params{Temperature: 1}, nil, none{}, 0)
	if _, err := s.Sample(slices.Clone(logits)); !errors.Is(err, ErrNoToken) {
		t.Errorf("empty mask: err %v, want ErrNoToken", err)
	}
}

func TestLogprobs(t *testing.T) {
	probs := []float64{0.1, 0.5, 0.2, 0.2}
	s := New(4)
	s.Reset(Params{}, nil, nil, 0)
	logits := logitsOf(probs...)
	for i := range logits {
		logits[i] += 3 // log-softmax is shift invariant
	}
	id, err := s.Sample(logits)
	if err != nil {
		t.Fatal(err)
	}
	if id != 1 {
		t.Fatalf("greedy %d, want 1", id)
	}
	for i, p := range probs {
		if got := s.Logprob(int32(i)); math.Abs(float64(got)-math.Log(p)) > 1e-5 {
			t.Errorf("Logprob(%d) = %v, want %v", i, got, math.Log(p))
		}
	}
	top := s.TopLogprobs(make([]TokenLogprob, 3))
	wantIDs := []int32{1, 2, 3} // 2 and 3 tie: lowest id first
	for i, tl := range top {
		if tl.Token != wantIDs[i] || math.Abs(float64(tl.Logprob)-math.Log(probs[wantIDs[i]])) > 1e-5 {
			t.Errorf("top[%d] = %+v, want token %d logprob %v", i, tl, wantIDs[i], math.Log(probs[wantIDs[i]]))
		}
	}
	if got := s.TopLogprobs(make([]TokenLogprob, 10)); len(got) != 4 {
		t.Errorf("asking for 10 of 4 tokens gave %d", len(got))
	}
}

func TestTopLogprobsPaths(t *testing.T) {
	// n ≤ 64 takes a single insertion pass, larger n quickselect: same order.
	r := rand.New(rand.NewPCG(9, 9))
	logits := make([]float32, 500)
	for i := range logits {
		logits[i] = float32(math.Round(r.NormFloat64()*16) / 4) // ties
	}
	s := New(len(logits))
	s.Reset(Params{}, nil, nil, 0)
	if _, err := s.Sample(logits); err != nil {
		t.Fatal(err)
	}
	small := slices.Clone(s.TopLogprobs(make([]TokenLogprob, 20)))
	large := s.TopLogprobs(make([]TokenLogprob, 200))
	if !slices.Equal(small, large[:20]) {
		t.Errorf("top 20 %v\ndiffer from the top 20 of 200 %v", small, large[:20])
	}
	for i := 1; i < len(large); i++ {
		if a, b := large[i-1], large[i]; a.Logprob < b.Logprob || (a.Logprob == b.Logprob && a.Token > b.Token) {
			t.Fatalf("not in order at %d: %v %v", i, a, b)
		}
	}
}

// TestTruncationMatchesFullSort checks the partial selection against a
// plain sort of every candidate on a realistic vocabulary.
func TestTruncationMatchesFullSort(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const vocab = 20000
	for trial := range 20 {
		logits := make([]float32, vocab)
		scale := 0.5 + float64(trial)
		for i := range logits {
			logits[i] = float32(math.Round(r.NormFloat64()*scale*8) / 8) // many ties
		}
		topP := float32(0.5 + 0.45*r.Float64())
		probs := func() []cand {
			c := make([]cand, vocab)
			for i, l := range logits {
				c[i] = cand{int32(i), float32(math.Exp(float64(l)))}
			}
			return c
		}
		got := slices.Clone(nucleus(probs(), topP))

		want := probs()
		slices.SortFunc(want, cmpCand)
		var total, acc float64
		for _, x := range want {
			total += float64(x.v)
		}
		n := 0
		for n < len(want) {
			acc += float64(want[n].v)
			n++
			if acc >= float64(topP)*total {
				break
			}
		}
		// The sorted prefix, or (flat distributions) every token at or
		// above the boundary value: the same set up to ties at the boundary.
		if len(got) < n {
			t.Fatalf("trial %d: nucleus of %d candidates, full sort needs %d", trial, len(got), n)
		}
		slices.SortFunc(got, cmpCand)
		if !slices.Equal(got[:n], want[:n]) {
			t.Fatalf("trial %d: nucleus differs from the full sort's prefix", trial)
		}
		for _, x := range got[n:] {
			if x.v != want[n-1].v {
				t.Fatalf("trial %d: nucleus has %+v beyond the boundary %v", trial, x, want[n-1].v)
			}
		}
		k := 1 + r.IntN(vocab)
		c2 := probs()
		if got := c2[:selectTop(c2, k)]; !slices.Equal(got, want[:k]) {
			t.Fatalf("trial %d: selectTop(%d) differs from full sort", trial, k)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		p  Params
		ok bool
	}{
		{Params{}, true},
		{Params{Temperature: 0.7, TopP: 0.8, TopK: 20, MinP: 0.05, RepetitionPenalty: 1.1, PresencePenalty: -1, Seed: ptr[uint64](1)}, true},
		{Params{Temperature: -1}, false},
		{Params{TopP: 1.5}, false},
		{Params{MinP: -0.1}, false},
		{Params{RepetitionPenalty: -2}, false},
		{Params{Temperature: float32(math.NaN())}, false},
		{Params{LogitBias: []TokenBias{{3, -100}, {1, 100}}}, true},
		{Params{LogitBias: []TokenBias{{3, float32(math.Inf(1))}}}, false},
	}
	for _, tt := range tests {
		if err := tt.p.Validate(); (err == nil) != tt.ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", tt.p, err, tt.ok)
		}
	}
}

func TestSampleAllocatesNothing(t *testing.T) {
	const vocab = 151936
	r := rand.New(rand.NewPCG(5, 6))
	logits := make([]float32, vocab)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	row := make([]float32, vocab)
	top := make([]TokenLogprob, 5)
	for _, p := range []Params{{}, {Temperature: 0.7, TopP: 0.8, TopK: 20, RepetitionPenalty: 1.05, PresencePenalty: 0.5}, {Temperature: 1, TopP: 0.95, MinP: 0.01}} {
		s := New(vocab)
		s.Reset(p, []int32{1, 2, 3}, &oddOnly{accepted: make([]int32, 0, 1000)}, 0)
		allocs := testing.AllocsPerRun(20, func() {
			copy(row, logits)
			id, err := s.Sample(row)
			if err != nil {
				t.Fatal(err)
			}
			s.TopLogprobs(top)
			_ = s.Accept(id)
		})
		if allocs != 0 {
			t.Errorf("%+v: %v allocations per token", p, allocs)
		}
	}
}

func BenchmarkSample(b *testing.B) {
	const vocab = 151936
	r := rand.New(rand.NewPCG(5, 6))
	logits := make([]float32, vocab)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	for _, bc := range []struct {
		name string
		p    Params
	}{
		{"greedy", Params{}},
		{"qwen3-thinking", Params{Temperature: 0.6, TopP: 0.95, TopK: 20}},
		{"top-p-only", Params{Temperature: 1, TopP: 0.9}},
		{"temperature-only", Params{Temperature: 1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := New(vocab)
			s.Reset(bc.p, nil, nil, 1)
			row := make([]float32, vocab)
			b.ReportAllocs()
			for b.Loop() {
				copy(row, logits)
				if _, err := s.Sample(row); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A draw screened from intervals around its logits (Threshold, then the
// logits of the tokens that pass and −Inf for the rest) chooses what the
// draw from all the logits chooses, step after step, with ties, penalties,
// bias and a constraint; and the screen keeps few tokens when the
// intervals are narrow.
func TestScreenedDrawsMatch(t *testing.T) {
	const vocab = 1000
	rng := rand.New(rand.NewPCG(21, 22))
	bias := []TokenBias{{Token: 3, Bias: 4}, {Token: 998, Bias: -2}}
	for _, tt := range []struct {
		p    Params
		cons func() Constraint
		k    int
	}{
		{Params{}, nil, 1},
		{Params{RepetitionPenalty: 1.3, PresencePenalty: 0.5, LogitBias: bias}, nil, 1},
		{Params{Temperature: 0.8, TopK: 20, TopP: 0.95}, nil, 20},
		{Params{Temperature: 1, TopK: 1}, nil, 1},
		{Params{Temperature: 1.2, TopK: 64, MinP: 0.05, FrequencyPenalty: 0.3, RepetitionPenalty: 0.9}, nil, 64},
		{Params{Temperature: 0.7, TopK: 5}, func() Constraint { return &oddOnly{} }, 5},
		{Params{}, func() Constraint { return &oddOnly{} }, 1},
	} {
		var ca, cb Constraint
		if tt.cons != nil {
			ca, cb = tt.cons(), tt.cons()
		}
		a, b := New(vocab), New(vocab)
		prompt := []int32{5, 7, 9, 3}
		a.Reset(tt.p, prompt, ca, 77)
		b.Reset(tt.p, prompt, cb, 77)
		if k := b.ScreenK(); k != tt.k {
			t.Fatalf("%+v: ScreenK = %d, want %d", tt.p, k, tt.k)
		}
		kept := 0
		for step := range 100 {
			logits, lo, hi := make([]float32, vocab), make([]float32, vocab), make([]float32, vocab)
			for i := range logits {
				logits[i] = float32(math.Round(rng.NormFloat64()*8) / 2) // ties
				w := float32(rng.Float64() * 0.5)
				if rng.IntN(10) == 0 {
					w = 0
				}
				lo[i], hi[i] = logits[i]-w*float32(rng.Float64()), logits[i]+w*float32(rng.Float64())
			}
			want, errA := a.Sample(slices.Clone(logits))
			tau := b.Threshold(lo, hi)
			row := make([]float32, vocab)
			for i := range row {
				row[i] = float32(math.Inf(-1))
				if hi[i] >= tau && !math.IsInf(float64(hi[i]), -1) {
					row[i] = logits[i]
					kept++
				}
			}
			got, errB := b.Sample(row)
			if got != want || (errA == nil) != (errB == nil) {
				t.Fatalf("%+v step %d: screened draw %d (%v), full draw %d (%v)", tt.p, step, got, errB, want, errA)
			}
			if err := a.Accept(want); err != nil {
				t.Fatal(err)
			}
			if err := b.Accept(got); err != nil {
				t.Fatal(err)
			}
		}
		if kept > 100*vocab/4 {
			t.Errorf("%+v: the screen kept %d of %d tokens", tt.p, kept, 100*vocab)
		}
	}
	for _, p := range []Params{{Temperature: 1}, {Temperature: 1, TopK: 65}, {Temperature: 1, TopP: 0.9}} {
		s := New(vocab)
		s.Reset(p, nil, nil, 0)
		if k := s.ScreenK(); k != 0 {
			t.Errorf("%+v: ScreenK = %d, want 0 (the draw needs every logit)", p, k)
		}
	}
	// A constraint that allows nothing: no token passes, and Sample reports it.
	s := New(vocab)
	s.Reset(Params{}, nil, none{}, 0)
	lo, hi := make([]float32, vocab), make([]float32, vocab)
	if tau := s.Threshold(lo, hi); !math.IsInf(float64(tau), -1) || !math.IsInf(float64(hi[0]), -1) {
		t.Fatalf("empty mask: threshold %g, hi[0] %g, want −Inf", tau, hi[0])
	}
	row := make([]float32, vocab)
	for i := range row {
		row[i] = float32(math.Inf(-1))
	}
	if _, err := s.Sample(row); !errors.Is(err, ErrNoToken) {
		t.Errorf("empty mask: err %v, want ErrNoToken", err)
	}
}
