package align

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ellm-dev/ellm/pkg/chat"
	"github.com/ellm-dev/ellm/pkg/tokenizer"
)

// tokenizer checks encode/decode of strings.jsonl and, per chat file, the
// template render and the ids of the rendered text: all exact.
func (c *caseRun) tokenizer() error {
	tok, err := tokenizer.Load(c.m.path(c.m.TokenizerPath))
	if err != nil {
		return err
	}
	type stringLine struct {
		Text    string  `json:"text"`
		IDs     []int32 `json:"ids"`
		Decoded string  `json:"decoded"`
	}
	lines, err := readJSONL[stringLine](c.m.path(c.m.Strings))
	if err != nil {
		return err
	}
	ids := exactRow("strings: encode", len(lines))
	dec := exactRow("strings: decode", len(lines))
	for i, l := range lines {
		got := tok.Encode(l.Text)
		if !slices.Equal(got, l.IDs) {
			ids.miss(fmt.Sprintf("line %d: %v ≠ %v", i+1, clip(got), clip(l.IDs)))
		}
		if d := tok.Decode(l.IDs); d != l.Decoded {
			dec.miss(fmt.Sprintf("line %d: %q ≠ %q", i+1, d, l.Decoded))
		}
	}
	c.add(ids.row())
	c.add(dec.row())

	type chatLine struct {
		Messages            json.RawMessage `json:"messages"`
		Tools               json.RawMessage `json:"tools"`
		AddGenerationPrompt bool            `json:"add_generation_prompt"`
		EnableThinking      json.RawMessage `json:"enable_thinking"`
		Rendered            *string         `json:"rendered"`
		IDs                 []int32         `json:"ids"`
		Error               string          `json:"error"`
	}
	for _, cf := range c.m.Chats {
		tmpl, err := chat.Load(filepath.Dir(c.m.path(cf.Template)))
		if err != nil {
			return err
		}
		lines, err := readJSONL[chatLine](c.m.path(cf.File))
		if err != nil {
			return err
		}
		render := exactRow(cf.File+": render", len(lines))
		cids := exactRow(cf.File+": ids", len(lines))
		for i, l := range lines {
			in := chat.Input{Messages: l.Messages, Tools: l.Tools, AddGenerationPrompt: l.AddGenerationPrompt}
			if t := strings.TrimSpace(string(l.EnableThinking)); t != "" && t != "null" {
				in.Kwargs = json.RawMessage(`{"enable_thinking": ` + t + `}`)
			}
			got, err := tmpl.Render(in)
			switch {
			case l.Error != "" || l.Rendered == nil:
				if err == nil {
					render.miss(fmt.Sprintf("line %d: rendered, but the reference template rejects it (%s)", i+1, l.Error))
				}
				continue
			case err != nil:
				render.miss(fmt.Sprintf("line %d: %v", i+1, err))
				continue
			case got != *l.Rendered:
				render.miss(fmt.Sprintf("line %d: render differs at byte %d", i+1, firstDiff(got, *l.Rendered)))
			}
			if e := tok.Encode(*l.Rendered); !slices.Equal(e, l.IDs) {
				cids.miss(fmt.Sprintf("line %d: ids differ", i+1))
			}
		}
		c.add(render.row())
		c.add(cids.row())
	}
	return nil
}

// exact counts exact-match failures of n items.
type exact struct {
	name  string
	n     int
	bad   int
	first []string
}

func exactRow(name string, n int) *exact { return &exact{name: name, n: n} }

func (e *exact) miss(why string) {
	e.bad++
	if len(e.first) < 3 {
		e.first = append(e.first, why)
	}
}

func (e *exact) row() Row {
	r := Row{Tensor: e.name, Shape: []int{e.n}, Outside: e.bad, Status: Pass, Exact: true,
		Note: fmt.Sprintf("%d/%d exact", e.n-e.bad, e.n)}
	if e.bad > 0 {
		r.Status = Fail
		r.Note += "; " + strings.Join(e.first, "; ")
	}
	return r
}

func readJSONL[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

func firstDiff(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func clip(ids []int32) []int32 { return ids[:min(len(ids), 12)] }
