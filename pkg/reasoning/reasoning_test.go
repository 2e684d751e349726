package reasoning

import (
	"math/rand/v2"
	"testing"
)

var splitTests = []struct {
	name             string
	text             string
	startsInThinking bool
	reasoning        string
	content          string
}{
	{"qwen3 thinking", "<think>\nLet me see.\n</think>\n\nParis.", false, "\nLet me see.\n", "\n\nParis."},
	{"no block", "Just an answer.", false, "", "Just an answer."},
	{"empty block (enable_thinking=false style)", "<think>\n\n</think>\n\nHi", false, "\n\n", "\n\nHi"},
	{"truncated reasoning", "<think>\nstill thinking", false, "\nstill thinking", ""},
	{"text before the block kept", "oops<think>r</think>c", false, "r", "oopsc"},
	{"end tag without start is content", "a</think>b", false, "", "a</think>b"},
	{"second block is content", "<think>a</think>b<think>c</think>d", false, "a", "b<think>c</think>d"},
	{"partial tag at end is text", "answer <thi", false, "", "answer <thi"},
	{"opened by the prompt", "reasoning here\n</think>\n\nanswer", true, "reasoning here\n", "\n\nanswer"},
	{"opened by the prompt, model repeats <think>", "<think>r</think>c", true, "r", "c"},
	{"opened by the prompt, <think> not at start kept", "x<think>r</think>c", true, "x<think>r", "c"},
	{"opened by the prompt, truncated", "all reasoning", true, "all reasoning", ""},
	{"opened by the prompt, partial start tag", "<thi", true, "<thi", ""},
	{"opened by the prompt, empty", "", true, "", ""},
	{"empty", "", false, "", ""},
	{"multibyte around tags", "<think>é→</think>日本", false, "é→", "日本"},
}

func TestSplit(t *testing.T) {
	for _, tt := range splitTests {
		t.Run(tt.name, func(t *testing.T) {
			r, c := Split(tt.text, tt.startsInThinking)
			if r != tt.reasoning || c != tt.content {
				t.Errorf("Split(%q, %v) = %q, %q; want %q, %q", tt.text, tt.startsInThinking, r, c, tt.reasoning, tt.content)
			}
		})
	}
}

// streamAll feeds text to a Stream cut at the given offsets.
func streamAll(text string, startsInThinking bool, cuts []int) (reasoning, content string) {
	s := NewStream(startsInThinking)
	prev := 0
	for _, cut := range append(cuts, len(text)) {
		r, c := s.Add(text[prev:cut])
		reasoning += r
		content += c
		prev = cut
	}
	r, c := s.Flush()
	return reasoning + r, content + c
}

func TestStreamEveryTwoWayCut(t *testing.T) {
	for _, tt := range splitTests {
		for cut := 0; cut <= len(tt.text); cut++ {
			r, c := streamAll(tt.text, tt.startsInThinking, []int{cut})
			if r != tt.reasoning || c != tt.content {
				t.Errorf("%s cut at %d: got %q, %q; want %q, %q", tt.name, cut, r, c, tt.reasoning, tt.content)
			}
		}
	}
}

func TestStreamByteByByte(t *testing.T) {
	for _, tt := range splitTests {
		var cuts []int
		for i := 1; i < len(tt.text); i++ {
			cuts = append(cuts, i)
		}
		r, c := streamAll(tt.text, tt.startsInThinking, cuts)
		if r != tt.reasoning || c != tt.content {
			t.Errorf("%s byte by byte: got %q, %q; want %q, %q", tt.name, r, c, tt.reasoning, tt.content)
		}
	}
}

func TestStreamHoldsBackOnlyPossibleTags(t *testing.T) {
	s := NewStream(false)
	if r, c := s.Add("<thi"); r != "" || c != "" {
		t.Fatalf("partial start tag leaked: %q, %q", r, c)
	}
	if r, c := s.Add("nk>abc</th"); r != "abc" || c != "" {
		t.Fatalf("got %q, %q; want reasoning abc with </th held", r, c)
	}
	if r, c := s.Add("ink>\n\nx"); r != "" || c != "\n\nx" {
		t.Fatalf("got %q, %q", r, c)
	}
	if r, c := s.Add("<think>"); r != "" || c != "<think>" {
		t.Fatalf("after the block tags are content: got %q, %q", r, c)
	}
}

func TestPromptOpensThinking(t *testing.T) {
	tests := []struct {
		prompt string
		want   bool
	}{
		{"<|im_start|>assistant\n", false},
		{"<|im_start|>assistant\n<think>\n", true},
		{"<|im_start|>assistant\n<think>\n\n</think>\n\n", false},
		{"<think>a</think>b<|im_start|>assistant\n<think>\n", true},
	}
	for _, tt := range tests {
		if got := PromptOpensThinking(tt.prompt); got != tt.want {
			t.Errorf("PromptOpensThinking(%q) = %v, want %v", tt.prompt, got, tt.want)
		}
	}
}

// randomCuts returns sorted cut offsets in [0, n], repeats allowed (empty chunks).
func randomCuts(rng *rand.Rand, n int) []int {
	cuts := make([]int, rng.IntN(n+2))
	for i := range cuts {
		cuts[i] = rng.IntN(n + 1)
	}
	for i := 1; i < len(cuts); i++ {
		for j := i; j > 0 && cuts[j] < cuts[j-1]; j-- {
			cuts[j], cuts[j-1] = cuts[j-1], cuts[j]
		}
	}
	return cuts
}

// FuzzStreamMatchesSplit: however the output is chunked, streaming yields
// exactly what Split yields on the whole text.
func FuzzStreamMatchesSplit(f *testing.F) {
	for _, tt := range splitTests {
		f.Add(tt.text, tt.startsInThinking, uint64(len(tt.text)))
	}
	f.Add("<<think>><</think>/think>", false, uint64(7))
	f.Add("<think<think></think</think>>", true, uint64(3))
	f.Fuzz(func(t *testing.T, text string, startsInThinking bool, seed uint64) {
		wantR, wantC := Split(text, startsInThinking)
		rng := rand.New(rand.NewPCG(seed, 1))
		for range 4 {
			cuts := randomCuts(rng, len(text))
			r, c := streamAll(text, startsInThinking, cuts)
			if r != wantR || c != wantC {
				t.Fatalf("cuts %v: stream %q, %q; Split %q, %q", cuts, r, c, wantR, wantC)
			}
		}
	})
}
