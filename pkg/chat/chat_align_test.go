package chat

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ellm-dev/ellm/pkg/sharedtest"
	"github.com/ellm-dev/ellm/pkg/toolcall"
)

// alignCase is one line of ../shared/align/tokenizer/chat-*.jsonl, rendered
// there by Python jinja2 configured as transformers does.
type alignCase struct {
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	EnableThinking      json.RawMessage `json:"enable_thinking"`
	Rendered            *string         `json:"rendered"`
	Error               *string         `json:"error"`
}

func (c alignCase) input() Input {
	in := Input{Messages: c.Messages, Tools: c.Tools, AddGenerationPrompt: c.AddGenerationPrompt}
	// null means the reference did not pass enable_thinking at all.
	if len(c.EnableThinking) > 0 && string(c.EnableThinking) != "null" {
		in.Kwargs = json.RawMessage(`{"enable_thinking": ` + string(c.EnableThinking) + `}`)
	}
	return in
}

func TestAlignChats(t *testing.T) {
	dir := sharedtest.Path(t, "align", "tokenizer")
	var manifest struct {
		Chats []struct{ File, Template string }
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest.Chats) == 0 {
		t.Fatal("manifest lists no chats")
	}
	for _, chat := range manifest.Chats {
		t.Run(chat.File, func(t *testing.T) {
			tmpl, err := Load(filepath.Dir(filepath.Join(dir, chat.Template)))
			if err != nil {
				t.Fatal(err)
			}
			cases := readCases(t, filepath.Join(dir, chat.File))
			exact := 0
			for i, c := range cases {
				got, err := tmpl.Render(c.input())
				switch {
				case c.Error != nil:
					var te *Error
					if !errors.As(err, &te) {
						t.Errorf("line %d: want a template error (%s), got %q, %v", i+1, *c.Error, got, err)
						continue
					}
				case err != nil:
					t.Errorf("line %d: %v", i+1, err)
					continue
				case c.Rendered == nil:
					t.Errorf("line %d: neither rendered nor error", i+1)
					continue
				case got != *c.Rendered:
					t.Errorf("line %d: render differs\n got: %q\nwant: %q", i+1, got, *c.Rendered)
					continue
				}
				exact++
			}
			t.Logf("%s: %d/%d exact", chat.File, exact, len(cases))
		})
	}
}

func readCases(t *testing.T, path string) []alignCase {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []alignCase
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var c alignCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s line %d: %v", path, len(cases)+1, err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("%s: no cases", path)
	}
	return cases
}

func TestLoadShared(t *testing.T) {
	tests := []struct {
		dir    string
		format toolcall.Format
	}{
		{"qwen3-tokenizer", toolcall.FormatJSON},
		{"qwen3-coder-template", toolcall.FormatXML},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			tmpl, err := Load(sharedtest.Path(t, tt.dir))
			if err != nil {
				t.Fatal(err)
			}
			if got := tmpl.ToolCallFormat(); got != tt.format {
				t.Errorf("ToolCallFormat = %v, want %v", got, tt.format)
			}
			if tmpl.special.EOS != "<|im_end|>" || tmpl.special.BOS != "" {
				t.Errorf("special tokens = %+v", tmpl.special)
			}
		})
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("Load of an empty directory: want an error")
	}
}

// BenchmarkRenderQwen3 renders a 12-message conversation with tools: the
// cost a server pays per request (twice when it continues a session).
func BenchmarkRenderQwen3(b *testing.B) {
	tmpl, err := Load(sharedtest.Path(b, "qwen3-tokenizer"))
	if err != nil {
		b.Fatal(err)
	}
	var msgs []string
	for i := range 6 {
		msgs = append(msgs, fmt.Sprintf(`{"role": "user", "content": "question %d about something fairly long"}`, i),
			fmt.Sprintf(`{"role": "assistant", "content": "<think>\nthinking %d\n</think>\n\nanswer %d"}`, i, i))
	}
	in := Input{
		Messages:            json.RawMessage("[" + strings.Join(msgs, ",") + "]"),
		Tools:               json.RawMessage(`[{"type": "function", "function": {"name": "get_weather", "description": "Get the weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]`),
		AddGenerationPrompt: true,
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tmpl.Render(in); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRenderConcurrent renders the reference conversations from several
// goroutines at once with one Template, as the server does (run with -race).
func TestRenderConcurrent(t *testing.T) {
	dir := sharedtest.Path(t, "align", "tokenizer")
	tmpl, err := Load(sharedtest.Path(t, "qwen3-tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	cases := readCases(t, filepath.Join(dir, "chat-qwen3.jsonl"))
	var wg sync.WaitGroup
	errs := make(chan error, 4*len(cases))
	for range 4 {
		wg.Go(func() {
			for _, c := range cases {
				got, err := tmpl.Render(c.input())
				if err != nil || c.Rendered == nil || got != *c.Rendered {
					errs <- fmt.Errorf("render %q: %v", got, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
