package tokenizer

import "unicode/utf8"

// GPT-2's byte-level alphabet: every byte is spelled as one printable rune so
// that vocabulary entries are valid text. Printable Latin-1 bytes stand for
// themselves; the rest are shifted to U+0100 and up, in byte order.
var (
	byteToRune [256]rune
	runeToByte = make(map[rune]byte, 256)
)

func init() {
	n := rune(0)
	for b := 0; b < 256; b++ {
		if ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = 256 + n
			n++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// byteLevelDecode returns the bytes a vocabulary spelling stands for. As in the
// Hugging Face ByteLevel decoder, a spelling with any rune outside the byte
// alphabet stands for its own UTF-8 bytes.
func byteLevelDecode(tok string) []byte {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := runeToByte[r]
		if !ok {
			return []byte(tok)
		}
		out = append(out, b)
	}
	return out
}

// byteLevelEncode spells raw bytes in the byte alphabet.
func byteLevelEncode(b []byte) string {
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = utf8.AppendRune(out, byteToRune[c])
	}
	return string(out)
}
