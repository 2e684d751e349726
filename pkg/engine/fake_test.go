package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/model"
)

// fakeBackend is a "model" whose next-token logits are a hash of the tokens
// its cache holds for the slot, so any wrong KV reuse changes the output.
// It checks that every segment starts where the slot's computed positions end.
type fakeBackend struct {
	vocab, seqLen int
	delay         time.Duration // per forward

	mu       sync.Mutex
	kv       [][]int32 // per slot: tokens at computed positions (-1 = none)
	rows     [][]float32
	forwards [][]model.Segment // copies, for assertions
	copies   [][4]int          // copyPositions calls: dst, src, from, n
	loaded   int               // positions loaded from host buffers
}

func newFake(slots, seqLen, vocab int) *fakeBackend {
	f := &fakeBackend{vocab: vocab, seqLen: seqLen}
	for range slots {
		s := make([]int32, seqLen)
		for i := range s {
			s[i] = -1
		}
		f.kv = append(f.kv, s)
	}
	return f
}

// fakeLogits are the logits after prefix.
func fakeLogits(prefix []int32, vocab int) []float32 {
	h := fnv.New64a()
	var b [4]byte
	for _, t := range prefix {
		binary.LittleEndian.PutUint32(b[:], uint32(t))
		h.Write(b[:])
	}
	seed := h.Sum64()
	row := make([]float32, vocab)
	for v := range row {
		x := seed ^ uint64(v)*0x9e3779b97f4a7c15
		x ^= x >> 31
		x *= 0xbf58476d1ce4e5b9
		x ^= x >> 29
		row[v] = float32(x%10000) / 1000
	}
	return row
}

func (f *fakeBackend) forward(segs []model.Segment) error {
	if f.delay > 0 {
		time.Sleep(f.delay)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rows = f.rows[:0]
	rec := make([]model.Segment, len(segs))
	for i, s := range segs {
		rec[i] = model.Segment{Slot: s.Slot, Start: s.Start, Tokens: slices.Clone(s.Tokens), Logits: s.Logits}
		kv := f.kv[s.Slot]
		for p := range s.Start {
			if kv[p] < 0 {
				return fmt.Errorf("fake: slot %d position %d used before it was computed", s.Slot, p)
			}
		}
		copy(kv[s.Start:], s.Tokens)
		for p := s.Start + len(s.Tokens); p < len(kv); p++ {
			kv[p] = -1 // later positions are stale: a real cache would hold garbage
		}
		if s.Logits == model.LogitsLast {
			f.rows = append(f.rows, fakeLogits(kv[:s.Start+len(s.Tokens)], f.vocab))
		}
	}
	f.forwards = append(f.forwards, rec)
	return nil
}

func (f *fakeBackend) logits(i int) []float32 { return f.rows[i] }

func (f *fakeBackend) exportSlot(w io.Writer, slot, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, uint32(n))
	binary.Write(&buf, binary.LittleEndian, f.kv[slot][:n])
	sum := fnv.New32a()
	sum.Write(buf.Bytes())
	binary.Write(&buf, binary.LittleEndian, sum.Sum32())
	_, err := w.Write(buf.Bytes())
	return err
}

func (f *fakeBackend) importSlot(r io.Reader, slot int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n uint32
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
		return 0, err
	}
	if int(n) > f.seqLen {
		return 0, kvcache.ErrMismatch
	}
	toks := make([]int32, n)
	if err := binary.Read(r, binary.LittleEndian, toks); err != nil {
		return 0, err
	}
	var got uint32
	if err := binary.Read(r, binary.LittleEndian, &got); err != nil {
		return 0, err
	}
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, n)
	binary.Write(&buf, binary.LittleEndian, toks)
	sum := fnv.New32a()
	sum.Write(buf.Bytes())
	if sum.Sum32() != got {
		return 0, errors.New("fake: checksum mismatch")
	}
	kv := f.kv[slot]
	copy(kv, toks)
	for p := int(n); p < len(kv); p++ {
		kv[p] = -1
	}
	return int(n), nil
}

// The fake's KV of a position is its token id: 4 bytes.
func (f *fakeBackend) positionBytes() int { return 4 }

func (f *fakeBackend) checkRange(slot, from, n int) error {
	if slot < 0 || slot >= len(f.kv) || from < 0 || n < 0 || from+n > f.seqLen {
		return fmt.Errorf("fake: slot %d positions [%d, %d+%d) out of range", slot, from, from, n)
	}
	return nil
}

func (f *fakeBackend) checkBuffer(buf []byte, capacity, at, slot, from, n int) error {
	if err := f.checkRange(slot, from, n); err != nil || at < 0 || at+n > capacity || len(buf) < 4*capacity {
		return errors.Join(err, errors.New("fake: buffer range"))
	}
	return nil
}

func (f *fakeBackend) copyPositions(dst, src, from, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := errors.Join(f.checkRange(dst, from, n), f.checkRange(src, from, n)); err != nil {
		return err
	}
	for p := from; p < from+n; p++ {
		if f.kv[src][p] < 0 {
			return fmt.Errorf("fake: copy of slot %d position %d, never computed", src, p)
		}
	}
	copy(f.kv[dst][from:from+n], f.kv[src][from:from+n])
	f.copies = append(f.copies, [4]int{dst, src, from, n})
	return nil
}

func (f *fakeBackend) savePositions(buf []byte, capacity, at, slot, from, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkBuffer(buf, capacity, at, slot, from, n); err != nil {
		return err
	}
	for i := range n {
		if f.kv[slot][from+i] < 0 {
			return fmt.Errorf("fake: save of slot %d position %d, never computed", slot, from+i)
		}
		binary.LittleEndian.PutUint32(buf[4*(at+i):], uint32(f.kv[slot][from+i]))
	}
	return nil
}

func (f *fakeBackend) loadPositions(buf []byte, capacity, at, slot, from, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkBuffer(buf, capacity, at, slot, from, n); err != nil {
		return err
	}
	for i := range n {
		f.kv[slot][from+i] = int32(binary.LittleEndian.Uint32(buf[4*(at+i):]))
	}
	f.loaded += n
	return nil
}

// prefilled counts the prompt tokens of forwards after the first skip.
func (f *fakeBackend) segments() [][]model.Segment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.forwards)
}

// greedyRef is what greedy decoding of the fake model produces for prompt.
func greedyRef(prompt []int32, n, vocab int, stops []int32) []int32 {
	seq := slices.Clone(prompt)
	var out []int32
	for range n {
		row := fakeLogits(seq, vocab)
		best := int32(0)
		for i, v := range row {
			if v > row[best] {
				best = int32(i)
			}
		}
		seq = append(seq, best)
		if slices.Contains(stops, best) {
			break
		}
		out = append(out, best)
	}
	return out
}

type fakeOpts struct {
	slots, seqLen, vocab int
	delay                time.Duration
	opts                 Options
}

func newFakeEngine(t *testing.T, fo fakeOpts) (*Engine, *fakeBackend) {
	t.Helper()
	if fo.vocab == 0 {
		fo.vocab = 97
	}
	if fo.seqLen == 0 {
		fo.seqLen = 128
	}
	if fo.slots == 0 {
		fo.slots = 2
	}
	be := newFake(fo.slots, fo.seqLen, fo.vocab)
	be.delay = fo.delay
	o := fo.opts
	o.BatchSize, o.SequenceLength = fo.slots, fo.seqLen
	o = withDefaults(o)
	e, err := newEngine(o, Info{Slots: fo.slots, SequenceLength: fo.seqLen}, be, fo.vocab, nil, "fake-model-identity-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, be
}

// background runs req on its own goroutine and returns once its first token
// is out (or it failed); wait waits for its end.
func background(e *Engine, req Request) (wait func()) {
	started, done := make(chan struct{}), make(chan struct{})
	once := sync.OnceFunc(func() { close(started) })
	go func() {
		defer close(done)
		defer once()
		e.Generate(context.Background(), req, func(Event) error { once(); return nil })
	}()
	<-started
	return func() { <-done }
}

// held is the positions a finished request r leaves with KV: all its
// tokens but the last sampled one, which gets its KV with the turn that
// continues it.
func held(r Result) int { return len(r.Tokens) - 1 }

// collect runs a request and returns the streamed tokens.
func collect(t testing.TB, e *Engine, req Request) ([]int32, Result) {
	t.Helper()
	var got []int32
	res, err := e.Generate(context.Background(), req, func(ev Event) error {
		got = append(got, ev.Token)
		return nil
	})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return got, res
}

func seqTokens(start, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32((start + i*7) % 90)
	}
	return out
}
