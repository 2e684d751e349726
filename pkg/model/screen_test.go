package model

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/pkg/kvcache"
)

// A screened Forward gives every logit an interval that holds it, and
// Refine then computes the panels asked for with the same bits as an
// unscreened Forward and −Inf elsewhere: prefill and decode rows, one
// sequence and three at once.
func TestScreenedLogitsMatch(t *testing.T) {
	for _, name := range []string{"tiny-qwen3-a", "tiny-qwen3moe-a"} {
		m := loadTiny(t, name, LoadOptions{})
		if m.lmScreen == nil {
			t.Fatalf("%s: a bf16 model without a logits screen", name)
		}
		V := m.Config.VocabSize
		full := newRunner(t, m, kvcache.BF16, 3, 32, RunnerOptions{MaxTokens: 32})
		screened := newRunner(t, m, kvcache.BF16, 3, 32, RunnerOptions{MaxTokens: 32})
		prompts := [][]int32{{1, 2, 3, 4, 5}, {9, 8, 7}, {42}}
		steps := [][]Segment{
			{{Slot: 0, Tokens: prompts[0], Logits: LogitsLast}},
			{{Slot: 0, Start: 5, Tokens: []int32{6}, Logits: LogitsLast},
				{Slot: 1, Tokens: prompts[1], Logits: LogitsLast}, {Slot: 2, Tokens: prompts[2], Logits: LogitsLast}},
			{{Slot: 0, Start: 6, Tokens: []int32{11}, Logits: LogitsLast},
				{Slot: 1, Start: 3, Tokens: []int32{12}, Logits: LogitsLast}, {Slot: 2, Start: 1, Tokens: []int32{13}, Logits: LogitsLast}},
		}
		for si, segs := range steps {
			if err := full.Forward(segs); err != nil {
				t.Fatal(err)
			}
			asked := slices.Clone(segs)
			for i := range asked {
				asked[i].Screen = true
			}
			if err := screened.Forward(asked); err != nil {
				t.Fatal(err)
			}
			if !screened.Screened() {
				t.Fatalf("%s step %d: not screened", name, si)
			}
			// The panels of each row's ten largest logits, and the last
			// (partial) panel.
			var panels []int32
			for i := range segs {
				want := full.Logits(i)
				lo, hi := screened.Interval(i)
				for tok, v := range want {
					if !(lo[tok] <= v && v <= hi[tok]) {
						t.Fatalf("%s step %d row %d: logit %d = %g outside [%g, %g]", name, si, i, tok, v, lo[tok], hi[tok])
					}
				}
				order := make([]int32, V)
				for tok := range order {
					order[tok] = int32(tok)
				}
				slices.SortFunc(order, func(a, b int32) int { return cmpDesc(want[a], want[b]) })
				for _, tok := range order[:10] {
					panels = append(panels, tok/gemm.PanelWidth)
				}
			}
			panels = append(panels, int32((V-1)/gemm.PanelWidth))
			slices.Sort(panels)
			panels = slices.Compact(panels)
			screened.Refine(panels)
			if screened.Screened() {
				t.Fatalf("%s step %d: still screened after Refine", name, si)
			}
			for i := range segs {
				want, got := full.Logits(i), screened.Logits(i)
				for tok := range V {
					in := slices.Contains(panels, int32(tok/gemm.PanelWidth))
					if in && math.Float32bits(got[tok]) != math.Float32bits(want[tok]) || !in && !math.IsInf(float64(got[tok]), -1) {
						t.Fatalf("%s step %d row %d: refined logit %d = %g, want %g (panel asked: %v)", name, si, i, tok, got[tok], want[tok], in)
					}
				}
			}
		}
	}
}

func cmpDesc(a, b float32) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// A Forward screens only when every logits row asked for it, and only
// LogitsLast rows can; a model loaded without the screen never does.
func TestScreenOnlyWhenAllAsk(t *testing.T) {
	m := loadTiny(t, "tiny-qwen3-a", LoadOptions{})
	r := newRunner(t, m, kvcache.BF16, 2, 16, RunnerOptions{MaxTokens: 16, MaxLogits: 8})
	for _, tt := range []struct {
		name string
		segs []Segment
		want bool
	}{
		{"one asks, one does not", []Segment{{Slot: 0, Tokens: []int32{1, 2}, Logits: LogitsLast, Screen: true},
			{Slot: 1, Tokens: []int32{3}, Logits: LogitsLast}}, false},
		{"all logits", []Segment{{Slot: 0, Tokens: []int32{1, 2}, Logits: LogitsAll, Screen: true}}, false},
		{"a prefill chunk without logits beside one that asks", []Segment{{Slot: 0, Tokens: []int32{1, 2}, Screen: true},
			{Slot: 1, Tokens: []int32{3}, Logits: LogitsLast, Screen: true}}, true},
	} {
		if err := r.Forward(tt.segs); err != nil {
			t.Fatal(err)
		}
		if r.Screened() != tt.want {
			t.Errorf("%s: Screened() = %v, want %v", tt.name, r.Screened(), tt.want)
		}
	}
	plain := loadTiny(t, "tiny-qwen3-a", LoadOptions{NoLogitScreen: true})
	if plain.lmScreen != nil || plain.ScreenBytes() != 0 {
		t.Fatal("NoLogitScreen loaded a screen")
	}
	r = newRunner(t, plain, kvcache.BF16, 1, 16, RunnerOptions{MaxTokens: 16})
	if err := r.Forward([]Segment{{Tokens: []int32{1, 2}, Logits: LogitsLast, Screen: true}}); err != nil {
		t.Fatal(err)
	}
	if r.Screened() {
		t.Error("a model without a screen screened")
	}
}

// RunnerOptions.ScreenRows caps the rows a pass screens: a pass with more
// logits rows than that computes them in full.
func TestScreenRowsCap(t *testing.T) {
	m := loadTiny(t, "tiny-qwen3-a", LoadOptions{})
	r := newRunner(t, m, kvcache.BF16, 4, 16, RunnerOptions{MaxTokens: 16, ScreenRows: 2})
	if r.ScreenRows() != 2 {
		t.Fatalf("ScreenRows() = %d with RunnerOptions.ScreenRows 2 and room for 4", r.ScreenRows())
	}
	for n := 1; n <= 4; n++ {
		if got, want := decode(t, r, n, true), n <= 2; got != want {
			t.Errorf("%d rows: screened %v, want %v", n, got, want)
		}
	}
}

// decode runs a decode step of n sequences, each a token at position 0,
// whose logits ask to be screened if screen, and reports whether the
// runner screened them.
func decode(t *testing.T, r *Runner, n int, screen bool) bool {
	t.Helper()
	segs := make([]Segment, n)
	for i := range segs {
		segs[i] = Segment{Slot: i, Tokens: []int32{int32(7 + i)}, Logits: LogitsLast, Screen: screen}
	}
	if err := r.Forward(segs); err != nil {
		t.Fatal(err)
	}
	return r.Screened()
}

// ChooseScreen times doubling row counts until the screen loses, keeps the
// most it won at, and leaves the runner screening that many rows and no
// more, its passes as a fresh runner's.
func TestChooseScreen(t *testing.T) {
	m := loadTiny(t, "tiny-qwen3-a", LoadOptions{})
	const slots = 4
	r := newRunner(t, m, kvcache.BF16, slots, 16, RunnerOptions{MaxTokens: 16})
	c, ok := r.ChooseScreen(2)
	if !ok {
		t.Fatal("a runner with a screen chose nothing")
	}
	trials := screenTrials(slots)
	if len(c.Timed) == 0 || len(c.Timed) > len(trials) {
		t.Fatalf("timed %+v, of trials %v", c.Timed, trials)
	}
	want := 0
	for i, tm := range c.Timed {
		if tm.Rows != trials[i] || tm.Screened <= 0 || tm.Full <= 0 {
			t.Fatalf("timing %d = %+v, want rows %d and both times positive", i, tm, trials[i])
		}
		won := tm.Screened < tm.Full
		if !won && i < len(c.Timed)-1 {
			t.Fatalf("timed on after the screen lost at %d rows: %+v", tm.Rows, c.Timed)
		}
		if won && i == len(c.Timed)-1 && len(c.Timed) < len(trials) {
			t.Fatalf("stopped at %d rows, which the screen won: %+v", tm.Rows, c.Timed)
		}
		if won {
			want = tm.Rows
		}
	}
	if c.Rows != want || r.ScreenRows() != want {
		t.Fatalf("kept %d rows (runner: %d), want %d from %+v", c.Rows, r.ScreenRows(), want, c.Timed)
	}
	if got := len(r.screenOut); got != 2*want*m.Config.VocabSize {
		t.Errorf("the intervals hold %d values after keeping %d rows, want %d", got, want, 2*want*m.Config.VocabSize)
	}
	if want > 0 && !decode(t, r, want, true) {
		t.Errorf("%d rows not screened", want)
	}
	// The screen may win at every row the runner has (it did on a CI
	// machine); then no step can ask for one row more.
	rows := min(want+1, slots)
	if rows > want && decode(t, r, rows, true) {
		t.Errorf("%d rows screened, more than the %d chosen", rows, want)
	}
	decode(t, r, rows, false)
	fresh := newRunner(t, m, kvcache.BF16, slots, 16, RunnerOptions{MaxTokens: 16})
	decode(t, fresh, rows, false)
	for i := range rows {
		got, exp := r.Logits(i), fresh.Logits(i)
		for tok := range exp {
			if math.Float32bits(got[tok]) != math.Float32bits(exp[tok]) {
				t.Fatalf("row %d logit %d = %g after the choice, %g from a fresh runner", i, tok, got[tok], exp[tok])
			}
		}
	}

	plain := loadTiny(t, "tiny-qwen3-a", LoadOptions{NoLogitScreen: true})
	if _, ok := newRunner(t, plain, kvcache.BF16, 4, 16, RunnerOptions{MaxTokens: 16}).ChooseScreen(1); ok {
		t.Error("a runner without a screen chose a cap")
	}
}

// Keeping fewer rows than the cap shrinks the screen's buffers to them
// (the report's scratch with them), and the rows kept are still screened.
func TestSizeScreenShrinksScratch(t *testing.T) {
	m := loadTiny(t, "tiny-qwen3-a", LoadOptions{})
	H, V := m.Config.HiddenSize, m.Config.VocabSize
	for _, keep := range []int{0, 1, 2} {
		r := newRunner(t, m, kvcache.BF16, 4, 16, RunnerOptions{MaxTokens: 16})
		before, capped := r.ScratchBytes(), r.ScreenRows()
		r.sizeScreen(keep)
		if got, want := before-r.ScratchBytes(), int64(4*2*(capped-keep)*(H+V)); got != want {
			t.Errorf("%d of %d rows kept: scratch %d bytes less, want %d", keep, capped, got, want)
		}
		if keep > 0 && !decode(t, r, keep, true) {
			t.Errorf("%d rows kept and not screened", keep)
		}
		if decode(t, r, keep+1, true) {
			t.Errorf("%d rows screened with %d kept", keep+1, keep)
		}
	}
}

// The choice keeps the most rows the screen won at, timing doubling
// counts up to the cap and none after the first it lost at.
func TestChooseScreenRows(t *testing.T) {
	ms := time.Millisecond
	// Screened 2 ms a row (int8, compute-bound), in full 5 ms and 1 more a row.
	timing := func(n int) (ScreenTiming, bool) {
		return ScreenTiming{Rows: n, Screened: time.Duration(2*n) * ms, Full: time.Duration(5+n) * ms}, true
	}
	for _, tt := range []struct {
		limit, rows int
		timed       []int
	}{{1, 1, []int{1}}, {4, 4, []int{1, 2, 4}}, {6, 4, []int{1, 2, 4, 6}}, {16, 4, []int{1, 2, 4, 8}}} {
		c := chooseScreenRows(tt.limit, timing)
		var timed []int
		for _, tm := range c.Timed {
			timed = append(timed, tm.Rows)
		}
		if c.Rows != tt.rows || !slices.Equal(timed, tt.timed) {
			t.Errorf("limit %d: kept %d rows, timed %v; want %d, %v", tt.limit, c.Rows, timed, tt.rows, tt.timed)
		}
	}
	lost := chooseScreenRows(4, func(n int) (ScreenTiming, bool) { return ScreenTiming{Rows: n, Screened: ms, Full: ms}, true })
	if lost.Rows != 0 || len(lost.Timed) != 1 {
		t.Errorf("a tie at one row: kept %d rows after %d timings, want 0 after 1", lost.Rows, len(lost.Timed))
	}
	for _, tt := range []struct{ refusedAt, rows, timed int }{{1, 0, 0}, {2, 1, 1}, {4, 2, 2}} {
		c := chooseScreenRows(4, func(n int) (ScreenTiming, bool) {
			return ScreenTiming{Rows: n, Screened: ms, Full: 9 * ms}, n < tt.refusedAt
		})
		if c.Rows != tt.rows || len(c.Timed) != tt.timed || c.Refused != tt.refusedAt {
			t.Errorf("refused at %d rows: %+v, want %d rows kept after %d timings", tt.refusedAt, c, tt.rows, tt.timed)
		}
	}
}

func TestScreenTrials(t *testing.T) {
	for limit, want := range map[int][]int{1: {1}, 2: {1, 2}, 3: {1, 2, 3}, 4: {1, 2, 4}, 6: {1, 2, 4, 6}, 8: {1, 2, 4, 8}} {
		if got := screenTrials(limit); !slices.Equal(got, want) {
			t.Errorf("screenTrials(%d) = %v, want %v", limit, got, want)
		}
	}
}

func TestScreenChoiceString(t *testing.T) {
	ms := time.Millisecond
	for _, tt := range []struct {
		c    ScreenChoice
		want string
	}{
		{ScreenChoice{Rows: 2, Timed: []ScreenTiming{{1, 5 * ms, 9 * ms}, {2, 6 * ms, 9 * ms}, {4, 11 * ms, 10 * ms}}},
			"up to 2 rows a pass (measured at 4: 11.0 ms screened, 10.0 in full)"},
		{ScreenChoice{Rows: 1, Timed: []ScreenTiming{{1, 5 * ms, 9 * ms}}}, "up to 1 row a pass (measured at 1: 5.0 ms screened, 9.0 in full)"},
		{ScreenChoice{Timed: []ScreenTiming{{1, 2 * ms, ms}}}, "off (measured at 1: 2.0 ms screened, 1.0 in full)"},
		{ScreenChoice{Rows: 1, Timed: []ScreenTiming{{1, 5 * ms, 9 * ms}}, Refused: 2},
			"up to 1 row a pass (measured at 1: 5.0 ms screened, 9.0 in full; refused at 2)"},
		{ScreenChoice{Refused: 1}, "off (refused at 1)"},
		{ScreenChoice{Rows: 1}, "up to 1 row a pass (set)"},
		{ScreenChoice{Rows: 3}, "up to 3 rows a pass (set)"},
	} {
		if got := tt.c.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.c, got, tt.want)
		}
	}
}

// A dropped screen is no longer counted, and runners made before or after
// compute every logit, the bits of a model loaded without one; a weights
// image being written still gets it, for the next start to choose again.
func TestDropScreen(t *testing.T) {
	plain := newRunner(t, loadTiny(t, "tiny-qwen3-a", LoadOptions{NoLogitScreen: true}), kvcache.BF16, 2, 16, RunnerOptions{MaxTokens: 16})
	decode(t, plain, 2, false)
	for _, imageDir := range []string{"", t.TempDir()} {
		m := loadTiny(t, "tiny-qwen3-a", LoadOptions{ImageDir: imageDir})
		total, screen := m.WeightBytes(), m.ScreenBytes()
		before := newRunner(t, m, kvcache.BF16, 2, 16, RunnerOptions{MaxTokens: 16})
		if screen <= 0 || !decode(t, before, 2, true) {
			t.Fatalf("image dir %q: a screen of %d bytes, not screening before the drop", imageDir, screen)
		}
		m.DropScreen()
		if m.ScreenBytes() != 0 || m.WeightBytes() != total-screen {
			t.Fatalf("image dir %q: dropped, screen %d bytes, weights %d (were %d, %d)", imageDir, m.ScreenBytes(), m.WeightBytes(), screen, total)
		}
		after := newRunner(t, m, kvcache.BF16, 2, 16, RunnerOptions{MaxTokens: 16})
		for _, r := range []*Runner{before, after} {
			if decode(t, r, 2, true) {
				t.Fatalf("image dir %q: screened after the drop", imageDir)
			}
			for i := range 2 {
				if !slices.EqualFunc(r.Logits(i), plain.Logits(i), func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
					t.Fatalf("image dir %q: row %d's logits differ from a model without a screen", imageDir, i)
				}
			}
		}
		if imageDir == "" {
			continue
		}
		if _, err := m.SaveImage(); err != nil {
			t.Fatal(err)
		}
		if m.dropped != nil {
			t.Error("the dropped screen is still held after the image was written")
		}
		mapped := loadTiny(t, "tiny-qwen3-a", LoadOptions{ImageDir: imageDir})
		if !mapped.Image().Mapped || mapped.ScreenBytes() != screen {
			t.Fatalf("the image's next load: %+v, screen %d bytes, want %d", mapped.Image(), mapped.ScreenBytes(), screen)
		}
		// The copy's pages were dropped from the process, not lost: the
		// image's screen bounds the logits as a freshly made one does.
		fresh := newRunner(t, loadTiny(t, "tiny-qwen3-a", LoadOptions{}), kvcache.BF16, 2, 16, RunnerOptions{MaxTokens: 16})
		read := newRunner(t, mapped, kvcache.BF16, 2, 16, RunnerOptions{MaxTokens: 16})
		if !decode(t, fresh, 2, true) || !decode(t, read, 2, true) {
			t.Fatal("not screened")
		}
		for i := range 2 {
			lo, hi := read.Interval(i)
			wantLo, wantHi := fresh.Interval(i)
			if !slices.Equal(lo, wantLo) || !slices.Equal(hi, wantHi) {
				t.Fatalf("row %d: the image's screen gives other intervals than a fresh one", i)
			}
		}
	}
}
