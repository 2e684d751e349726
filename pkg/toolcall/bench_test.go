package toolcall

import (
	"encoding/json"
	"strings"
	"testing"
)

// BenchmarkStreamLongCall streams a Qwen3-Coder call with a 20 KB parameter
// (a file being written) in 4-byte pieces, as a model would token by token.
func BenchmarkStreamLongCall(b *testing.B) {
	text := "<tool_call>\n<function=write_file>\n<parameter=content>\n" +
		strings.Repeat("func f() { return x < y }\n", 800) + "</parameter>\n</function>\n</tool_call>"
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		s := parser(FormatXML).NewStream()
		for i := 0; i < len(text); i += 4 {
			s.Add(text[i:min(i+4, len(text))])
		}
		if d := s.Flush(); len(d) != 0 {
			b.Fatal("call emitted late")
		}
	}
}

// BenchmarkStreamLongJSONCall is the Qwen3 form of the same call: the code
// travels inside a JSON string, braces and all.
func BenchmarkStreamLongJSONCall(b *testing.B) {
	code, _ := json.Marshal(strings.Repeat("func f() { return x < y }\n", 800))
	text := "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"content\": " + string(code) + "}}\n</tool_call>"
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		s := parser(FormatJSON).NewStream()
		for i := 0; i < len(text); i += 4 {
			s.Add(text[i:min(i+4, len(text))])
		}
		if d := s.Flush(); len(d) != 0 {
			b.Fatal("call emitted late")
		}
	}
}
