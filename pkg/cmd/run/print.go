package run

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// printer streams an answer: reasoning dimmed on a terminal and between
// <think> tags otherwise (plain text), content as is.
type printer struct {
	out                io.Writer
	terminal           bool
	inReasoning        bool
	content, reasoning strings.Builder
}

func (p *printer) add(reasoning, content string) {
	if reasoning != "" {
		if !p.inReasoning {
			if p.terminal {
				fmt.Fprint(p.out, "\x1b[2m")
			} else {
				fmt.Fprint(p.out, "<think>")
			}
			p.inReasoning = true
		}
		fmt.Fprint(p.out, reasoning)
		p.reasoning.WriteString(reasoning)
	}
	if content != "" {
		p.endReasoning()
		fmt.Fprint(p.out, content)
		p.content.WriteString(content)
	}
}

func (p *printer) endReasoning() {
	if !p.inReasoning {
		return
	}
	if p.terminal {
		fmt.Fprint(p.out, "\x1b[0m")
	} else {
		fmt.Fprint(p.out, "</think>\n")
	}
	p.inReasoning = false
}

// finish ends the answer's line.
func (p *printer) finish() {
	p.endReasoning()
	fmt.Fprintln(p.out)
}

// turnInfo is what --verbose prints after an answer.
type turnInfo struct {
	prompt, cached, completion int
	ttft, total                time.Duration
	finish                     string
}

func (t turnInfo) print(w io.Writer) {
	tps := 0.0
	if gen := t.total - t.ttft; t.completion > 1 && gen > 0 {
		tps = float64(t.completion-1) / gen.Seconds()
	}
	fmt.Fprintf(w, "[prompt %d tokens: %d cached, %d prefilled; TTFT %v; %d tokens, %.1f tokens/s; %s]\n",
		t.prompt, t.cached, t.prompt-t.cached, t.ttft.Round(time.Millisecond), t.completion, tps, t.finish)
}
