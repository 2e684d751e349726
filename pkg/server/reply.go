package server

import (
	"github.com/ellm-dev/ellm/pkg/server/openai"
	"github.com/ellm-dev/ellm/pkg/toolcall"
)

// toolCalls are streamed tool-call pieces in OpenAI's form: the first piece
// of a call has its id and type.
func toolCalls(pieces []toolcall.CallDelta) []openai.ToolCall {
	var out []openai.ToolCall
	for _, c := range pieces {
		i := c.Index
		tc := openai.ToolCall{Index: &i, ID: c.ID, Function: openai.FunctionCall{Name: c.Name, Arguments: c.Arguments}}
		if c.ID != "" {
			tc.Type = "function"
		}
		out = append(out, tc)
	}
	return out
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
