package tokenizer

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// refBPE is BPE by its definition: find the adjacent pair of lowest rank
// (leftmost on ties), merge it, repeat. Quadratic, obviously right.
func refBPE(m *mergeTable, word string, byteID *[256]int32) []int32 {
	var ids []int32
	for i := 0; i < len(word); i++ {
		ids = append(ids, byteID[word[i]])
	}
	for {
		best, at, to := noMerge, -1, int32(0)
		for i := 0; i+1 < len(ids); i++ {
			if r, id := m.rank(ids[i], ids[i+1]); r < best {
				best, at, to = r, i, id
			}
		}
		if at < 0 {
			return ids
		}
		ids = slices.Replace(ids, at, at+2, to)
	}
}

// bpeWords are pieces that stress both merge paths: long runs that need few
// levels, long diverse words that exhaust the level budget, and the corpus.
func bpeWords(tb testing.TB) []string {
	words := []string{"a", "ab", "hello", " the", "ĠĠ", strings.Repeat("a", 4000)}
	for _, n := range []int{3, 7, 64, 255, 256, 257, 600} {
		for _, r := range []string{"a", "=", " ", "1", "你", "😀", "ab"} {
			words = append(words, strings.Repeat(r, n))
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	alphabet := []rune("etaoinshrdluETAOIN的一是不了人我在有他这абвгд😀é ")
	for range 300 {
		var sb strings.Builder
		for n := 1 + rng.IntN(300); n > 0; n-- {
			sb.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		words = append(words, sb.String())
	}
	for _, c := range corpusStrings(tb) {
		words = append(words, c.Text)
	}
	return words
}

func TestMergeMatchesReference(t *testing.T) {
	tok := qwen(t)
	if !tok.merges.ordered {
		t.Fatal("the Qwen3 merge table should be ordered (every token produced before it is consumed)")
	}
	w := new(bpeWork)
	for _, word := range bpeWords(t) {
		want := refBPE(tok.merges, word, &tok.byteID)
		if got := tok.merges.merge(nil, word, &tok.byteID); !slices.Equal(got, want) {
			t.Fatalf("merge(%q) = %v, want %v", word, got, want)
		}
		if word == "" {
			continue // mergeHeap's callers never pass an empty word
		}
		ids := make([]int32, len(word))
		for i := range ids {
			ids[i] = tok.byteID[word[i]]
		}
		if got := tok.merges.mergeHeap(w, ids); !slices.Equal(got, want) {
			t.Fatalf("mergeHeap(%q) = %v, want %v", word, got, want)
		}
	}
}

// TestMergeUnordered builds a table where a merge consumes a token with a
// lower rank than the merge producing it. On "abab" Hugging Face's order
// merges a·b, then ab·a at once (rank 0), giving [aba b]; merging every a·b
// first would give [ab ab]. The table must be detected as unordered and still
// give the reference ids.
func TestMergeUnordered(t *testing.T) {
	var byteID [256]int32
	for b := range byteID {
		byteID[b] = int32(b)
	}
	const ab, aba = 256, 257
	m := newMergeTable(2)
	m.put(ab, 'a', 0, aba)
	m.put('a', 'b', 1, ab)
	m.checkOrdered(258)
	if m.ordered {
		t.Fatal("table reported ordered")
	}
	if got, _ := m.mergeLevels(new(bpeWork), []int32{'a', 'b', 'a', 'b'}); slices.Equal(got, []int32{aba, 'b'}) {
		t.Fatal("level merging agrees with the reference here; the case tests nothing")
	}
	for _, word := range []string{"abab", "ababab", "aabba", "ba"} {
		want := refBPE(m, word, &byteID)
		if got := m.merge(nil, word, &byteID); !slices.Equal(got, want) {
			t.Errorf("merge(%q) = %v, want %v", word, got, want)
		}
	}
}

// FuzzEncode checks on the real tokenizer that encoding loses nothing (the
// token bytes are exactly the normalized text), that every piece is the
// reference BPE, and that Encode differs from EncodeOrdinary only by added
// tokens.
func FuzzEncode(f *testing.F) {
	for _, s := range splitEdgeCases {
		f.Add(s)
	}
	f.Add("<|im_start|>user\nhé<|im_end|>\u0338 <think>x</think>")
	f.Add("x" + strings.Repeat("\u0301", 40) + " <|im_end|>" + strings.Repeat("\u0323\u0301", 20))
	tok := qwen(f)
	f.Fuzz(func(t *testing.T, s string) {
		norm := nfcString(s)
		ids := tok.EncodeOrdinary(s)
		var raw []byte
		for _, id := range ids {
			if id < 0 || int(id) >= tok.VocabSize() || tok.IsSpecial(id) {
				t.Fatalf("EncodeOrdinary(%q) has id %d", s, id)
			}
			raw = append(raw, tok.TokenBytes(id)...)
		}
		if !bytes.Equal(raw, []byte(norm)) {
			t.Fatalf("token bytes of EncodeOrdinary(%q) = %q, want NFC %q", s, raw, norm)
		}
		var want []int32
		for i := 0; i < len(norm); {
			j := tok.split.next(norm, i)
			want = append(want, refBPE(tok.merges, norm[i:j], &tok.byteID)...)
			i = j
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("EncodeOrdinary(%q) = %v, reference %v", s, ids, want)
		}
		if utf8.ValidString(s) {
			if got := tok.Decode(ids); got != norm {
				t.Fatalf("Decode(EncodeOrdinary(%q)) = %q, want %q", s, got, norm)
			}
			if got := nfcString(tok.Decode(tok.Encode(s))); got != norm {
				t.Fatalf("NFC(Decode(Encode(%q))) = %q, want %q", s, got, norm)
			}
		}
	})
}
