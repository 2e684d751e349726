package tokenizer

import (
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// benchText builds a deterministic mixed text of about size bytes: the
// corpus strings (prose, code, JSON, CJK, emoji, special tokens) shuffled,
// interleaved with made-up words so that the BPE cache also misses. Corpus
// strings longer than maxLine are left out.
func benchText(tb testing.TB, size, maxLine int) string {
	var cases []stringCase
	for _, c := range corpusStrings(tb) {
		if len(c.Text) <= maxLine {
			cases = append(cases, c)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabets := [][]rune{
		[]rune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"),
		[]rune("абвгдеёжзийклмнопрстуфхцчшщъыьэюя"),
		[]rune("的一是不了人我在有他这为之大来以个中上们到说时地也子就道"),
		[]rune("0123456789"),
	}
	var sb strings.Builder
	for sb.Len() < size {
		c := cases[rng.IntN(len(cases))]
		sb.WriteString(c.Text)
		sb.WriteByte(' ')
		if rng.IntN(4) == 0 {
			a := alphabets[rng.IntN(len(alphabets))]
			for n := 2 + rng.IntN(10); n > 0; n-- {
				sb.WriteRune(a[rng.IntN(len(a))])
			}
			sb.WriteString(" ")
		}
	}
	return sb.String()
}

const benchSize = 4 << 20

// benchTexts are the encode inputs: "mixed" is the whole corpus, where the
// runs of 1000–4000 identical characters (which no cache holds) are ~45 % of
// the bytes; "natural" leaves those three strings out.
var benchTexts = []struct {
	name    string
	maxLine int
}{{"mixed", 1 << 30}, {"natural", 999}}

// cpuMeter reports throughput per CPU-second of this process besides the
// wall-clock MB/s: on a machine shared with other jobs wall time mostly
// measures the neighbours.
type cpuMeter struct {
	b     *testing.B
	bytes int
	start time.Duration
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startCPU sets the bytes per op and resets the timers.
func startCPU(b *testing.B, bytes int) *cpuMeter {
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	b.ResetTimer()
	return &cpuMeter{b: b, bytes: bytes, start: cpuTime()}
}

func (m *cpuMeter) stop() {
	if d := cpuTime() - m.start; d > 0 {
		m.b.ReportMetric(float64(m.bytes)*float64(m.b.N)/d.Seconds()/1e6, "MB/cpu-s")
	}
}

func BenchmarkEncode(b *testing.B) {
	tok := qwen(b)
	for _, bt := range benchTexts {
		b.Run(bt.name, func(b *testing.B) {
			text := benchText(b, benchSize, bt.maxLine)
			ids := tok.Encode(text)
			m := startCPU(b, len(text))
			for range b.N {
				ids = tok.AppendEncode(ids[:0], text)
			}
			m.stop()
			b.ReportMetric(float64(len(text))/float64(len(ids)), "bytes/token")
		})
	}
}

func BenchmarkEncodeOrdinary(b *testing.B) {
	tok := qwen(b)
	for _, bt := range benchTexts {
		b.Run(bt.name, func(b *testing.B) {
			text := benchText(b, benchSize, bt.maxLine)
			ids := tok.EncodeOrdinary(text)
			m := startCPU(b, len(text))
			for range b.N {
				ids = tok.AppendEncodeOrdinary(ids[:0], text)
			}
			m.stop()
		})
	}
}

// BenchmarkSplit measures the Qwen3 pre-tokenizer alone.
func BenchmarkSplit(b *testing.B) {
	tok := qwen(b)
	text := nfcString(benchText(b, benchSize, 1<<30))
	m := startCPU(b, len(text))
	for range b.N {
		pieces := 0
		for i := 0; i < len(text); pieces++ {
			i = tok.split.next(text, i)
		}
		if pieces == 0 {
			b.Fatal("no pieces")
		}
	}
	m.stop()
}

func BenchmarkDecode(b *testing.B) {
	tok := qwen(b)
	text := benchText(b, benchSize, 1<<30)
	ids := tok.Encode(text)
	m := startCPU(b, len(text))
	for range b.N {
		tok.Decode(ids)
	}
	m.stop()
}

func BenchmarkStreamDecode(b *testing.B) {
	tok := qwen(b)
	text := benchText(b, benchSize, 1<<30)
	ids := tok.Encode(text)
	m := startCPU(b, len(text))
	for range b.N {
		d := NewDecoder(tok)
		n := 0
		for _, id := range ids {
			n += len(d.Add(id))
		}
		n += len(d.Flush())
		if n < len(text)/2 {
			b.Fatalf("decoded %d bytes of %d", n, len(text))
		}
	}
	m.stop()
}

func BenchmarkLoad(b *testing.B) {
	dir := sharedtest.Path(b, "qwen3-tokenizer")
	b.ReportAllocs()
	start := cpuTime()
	for range b.N {
		if _, err := Load(dir); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
