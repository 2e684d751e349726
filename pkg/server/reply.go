package server

import (
	"github.com/ellm-dev/ellm/pkg/reasoning"
	"github.com/ellm-dev/ellm/pkg/server/openai"
	"github.com/ellm-dev/ellm/pkg/toolcall"
)

// replyParser splits generated text into reasoning, content and tool calls
// as it streams; the non-streamed response accumulates the same deltas.
type replyParser struct {
	think *reasoning.Stream
	calls *toolcall.Stream // nil when tool calls are not parsed
}

type replyDelta struct {
	reasoning, content string
	calls              []openai.ToolCall
}

func (d replyDelta) empty() bool { return d.reasoning == "" && d.content == "" && len(d.calls) == 0 }

func newReplyParser(p *chatPlan) *replyParser {
	rp := &replyParser{think: reasoning.NewStream(p.thinking)}
	if p.parse {
		rp.calls = toolcall.NewStream(p.format, p.conv.Tools)
	}
	return rp
}

func (rp *replyParser) add(text string) replyDelta {
	r, c := rp.think.Add(text)
	return rp.split(r, c, false)
}

func (rp *replyParser) flush() replyDelta {
	r, c := rp.think.Flush()
	return rp.split(r, c, true)
}

func (rp *replyParser) split(r, c string, final bool) replyDelta {
	d := replyDelta{reasoning: r}
	if rp.calls == nil {
		d.content = c
		return d
	}
	deltas := rp.calls.Add(c)
	if final {
		deltas = append(deltas, rp.calls.Flush()...)
	}
	for _, td := range deltas {
		if td.Call == nil {
			d.content += td.Content
			continue
		}
		i := td.Call.Index
		tc := openai.ToolCall{Index: &i, ID: td.Call.ID, Function: openai.FunctionCall{Name: td.Call.Name, Arguments: td.Call.Arguments}}
		if td.Call.ID != "" {
			tc.Type = "function"
		}
		d.calls = append(d.calls, tc)
	}
	return d
}

// mergeToolCalls folds streamed tool-call pieces into whole calls.
func mergeToolCalls(calls []openai.ToolCall, pieces []openai.ToolCall) []openai.ToolCall {
	for _, p := range pieces {
		if p.Index == nil || *p.Index >= len(calls) {
			p.Index = nil
			calls = append(calls, p)
			continue
		}
		calls[*p.Index].Function.Arguments += p.Function.Arguments
	}
	return calls
}
