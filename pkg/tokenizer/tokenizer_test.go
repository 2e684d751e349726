package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

var (
	qwenOnce sync.Once
	qwenTok  *Tokenizer
	qwenErr  error
)

// qwen loads the real Qwen3 tokenizer once per test binary.
func qwen(tb testing.TB) *Tokenizer {
	tb.Helper()
	dir := sharedtest.Path(tb, "qwen3-tokenizer")
	qwenOnce.Do(func() { qwenTok, qwenErr = Load(dir) })
	if qwenErr != nil {
		tb.Fatal(qwenErr)
	}
	return qwenTok
}

type stringCase struct {
	Text    string  `json:"text"`
	IDs     []int32 `json:"ids"`
	Decoded string  `json:"decoded"`
}

type chatCase struct {
	Rendered *string `json:"rendered"`
	IDs      []int32 `json:"ids"`
	Error    string  `json:"error"`
}

// readJSONL decodes every line of an alignment file.
func readJSONL[T any](tb testing.TB, path string) []T {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	if len(out) == 0 {
		tb.Fatalf("%s: no cases", path)
	}
	return out
}

func corpusStrings(tb testing.TB) []stringCase {
	return readJSONL[stringCase](tb, filepath.Join(sharedtest.Path(tb, "align", "tokenizer"), "strings.jsonl"))
}

func TestAlignStrings(t *testing.T) {
	tok := qwen(t)
	cases := corpusStrings(t)
	pass := 0
	for i, c := range cases {
		got := tok.Encode(c.Text)
		ok := true
		if !slices.Equal(got, c.IDs) {
			t.Errorf("line %d: Encode(%q)\n got %v\nwant %v", i+1, c.Text, got, c.IDs)
			ok = false
		}
		if dec := tok.Decode(c.IDs); dec != c.Decoded {
			t.Errorf("line %d: Decode = %q, want %q", i+1, dec, c.Decoded)
			ok = false
		}
		// Added tokens are cut out before NFC, so only ordinary encoding
		// round-trips to NFC(s) in general ("<|im_end|>\u0338" keeps its
		// combining mark apart, where NFC(s) composes "≯").
		if dec, want := tok.Decode(tok.EncodeOrdinary(c.Text)), nfcString(c.Text); dec != want {
			t.Errorf("line %d: Decode(EncodeOrdinary(s)) = %q, want NFC(s) %q", i+1, dec, want)
			ok = false
		}
		if ok {
			pass++
		}
	}
	t.Logf("strings: %d/%d exact", pass, len(cases))
}

func TestAlignChats(t *testing.T) {
	tok := qwen(t)
	dir := sharedtest.Path(t, "align", "tokenizer")
	for _, file := range []string{"chat-qwen3.jsonl", "chat-qwen3-coder.jsonl"} {
		t.Run(file, func(t *testing.T) {
			pass, n := 0, 0
			for i, c := range readJSONL[chatCase](t, filepath.Join(dir, file)) {
				if c.Rendered == nil {
					continue // a template error case: nothing to encode
				}
				n++
				if got := tok.Encode(*c.Rendered); !slices.Equal(got, c.IDs) {
					t.Errorf("line %d: Encode(rendered)\n got %v\nwant %v", i+1, got, c.IDs)
					continue
				}
				pass++
			}
			t.Logf("%s: %d/%d renders exact", file, pass, n)
		})
	}
}

func TestEncodeOrdinary(t *testing.T) {
	tok := qwen(t)
	imEnd, ok := tok.TokenID("<|im_end|>")
	if !ok || !tok.IsSpecial(imEnd) {
		t.Fatalf("TokenID(<|im_end|>) = %d, %v; special %v", imEnd, ok, tok.IsSpecial(imEnd))
	}
	for _, s := range []string{"<|im_end|>", "a<think>b</think>", "x<|endoftext|>"} {
		ids := tok.EncodeOrdinary(s)
		for _, id := range ids {
			if _, isAdded := tok.addedContent[id]; isAdded {
				t.Errorf("EncodeOrdinary(%q) = %v contains added token %d", s, ids, id)
			}
		}
		if got := tok.Decode(ids); got != s {
			t.Errorf("Decode(EncodeOrdinary(%q)) = %q", s, got)
		}
		if slices.Equal(ids, tok.Encode(s)) {
			t.Errorf("EncodeOrdinary(%q) = Encode = %v; want the added tokens spelled out", s, ids)
		}
	}
}

func TestQwenMetadata(t *testing.T) {
	tok := qwen(t)
	if got, want := tok.VocabSize(), 151669; got != want {
		t.Errorf("VocabSize = %d, want %d", got, want)
	}
	sp := tok.Special()
	if sp.EOS != "<|im_end|>" || sp.EOSID != 151645 || sp.PAD != "<|endoftext|>" || sp.PADID != 151643 || sp.BOSID != -1 || sp.AddBOS {
		t.Errorf("Special = %+v", sp)
	}
	if got := string(tok.TokenBytes(tok.byteID[' '])); got != " " {
		t.Errorf("TokenBytes(space) = %q", got)
	}
	if id, ok := tok.TokenID("Ġthe"); !ok || string(tok.TokenBytes(id)) != " the" {
		t.Errorf("TokenID(Ġthe) = %d, %v: %q", id, ok, tok.TokenBytes(id))
	}
	think, _ := tok.TokenID("<think>")
	if tok.IsSpecial(think) {
		t.Errorf("<think> (%d) reported special", think)
	}
	if got := tok.DecodeWith([]int32{151644, 872, 151645}, DecodeOptions{SkipSpecial: true}); got != "user" {
		t.Errorf("DecodeWith(SkipSpecial) = %q", got)
	}
}

// TestConcurrentEncode shares one tokenizer (and its word cache) between
// goroutines; run it with -race.
func TestConcurrentEncode(t *testing.T) {
	tok := qwen(t)
	cases := corpusStrings(t)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for k := range 3 * len(cases) {
				c := cases[(k*7+g)%len(cases)]
				if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
					errs <- c.Text
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Errorf("concurrent Encode(%q) differs", s)
	}
}
