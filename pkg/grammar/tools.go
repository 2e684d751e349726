package grammar

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Tool is a function a model may call: its name and its parameters' JSON
// schema (empty: any object).
type Tool struct {
	Name       string
	Parameters json.RawMessage
}

// ToolError is a tool whose definition the compiler rejects.
type ToolError struct {
	Index int
	Name  string
	Err   error
}

func (e *ToolError) Error() string {
	return fmt.Sprintf("tool %q (tools[%d]): %v", e.Name, e.Index, e.Err)
}

func (e *ToolError) Unwrap() error { return e.Err }

// CallFormat is the text of a tool call, as a chat template teaches it.
type CallFormat int

const (
	// JSONCalls is Qwen3's <tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>.
	JSONCalls CallFormat = iota
	// XMLCalls is Qwen3-Coder's <tool_call>\n<function=NAME>\n<parameter=P>\nvalue\n</parameter>\n…</function>\n</tool_call>.
	XMLCalls
)

// MaxParallelCalls bounds the calls of one reply when parallel calls are
// allowed.
const MaxParallelCalls = 16

// CheckTools validates every tool: a name, not repeated, and parameters
// that compile (as an object schema).
func CheckTools(tools []Tool) error {
	seen := map[string]bool{}
	for i, t := range tools {
		if t.Name == "" {
			return &ToolError{i, t.Name, fmt.Errorf("no name")}
		}
		if seen[t.Name] {
			return &ToolError{i, t.Name, fmt.Errorf("a second tool of that name")}
		}
		seen[t.Name] = true
		if _, err := toolParams(t, Spaced); err != nil {
			return &ToolError{i, t.Name, err}
		}
	}
	return nil
}

// toolParams compiles a tool's parameters, which must describe an object.
func toolParams(t Tool, style *Style) (*node, error) {
	p := t.Parameters
	if len(strings.TrimSpace(string(p))) == 0 || string(p) == "null" {
		return style.anyObject, nil
	}
	n, err := compileSchemaNode(p, style, nil)
	if err != nil {
		return nil, err
	}
	switch n.kind {
	case kAny:
		return style.anyObject, nil
	case kObject:
		return n, nil
	}
	return nil, &SchemaError{"#", "parameters must describe an object"}
}

// ToolCalls is the grammar of a reply made of calls of the given tools in
// format: exactly one call, or with parallel one to MaxParallelCalls calls
// separated by a newline (as the templates render several calls). Calls
// are laid out as the template renders them.
func ToolCalls(format CallFormat, tools []Tool, parallel bool) (*Grammar, error) {
	if len(tools) == 0 {
		return nil, fmt.Errorf("no tools to call")
	}
	if err := CheckTools(tools); err != nil {
		return nil, err
	}
	pick := &node{kind: kLiteral}
	for i, t := range tools {
		params, _ := toolParams(t, Spaced) // checked above
		var head string
		var body *node
		var err error
		switch format {
		case JSONCalls:
			var b strings.Builder
			render(&b, t.Name, Spaced)
			head = b.String() + `, "arguments": `
			body = seq(params, lit("}\n</tool_call>"))
		case XMLCalls:
			head = "<function=" + t.Name + ">\n"
			body, err = xmlBody(params)
		}
		if err != nil {
			return nil, &ToolError{i, t.Name, err}
		}
		pick.lits = append(pick.lits, head)
		pick.next = append(pick.next, body)
	}
	sortLiterals(pick)
	open := "<tool_call>\n{\"name\": "
	if format == XMLCalls {
		open = "<tool_call>\n"
	}
	call := seq(lit(open), pick)
	if !parallel {
		return newGrammar(call), nil
	}
	return newGrammar(&node{kind: kRepeat, items: call, minItems: 1, maxItems: MaxParallelCalls, sepLit: lit("\n")}), nil
}

func lit(text string) *node { return &node{kind: kLiteral, lits: []string{text}} }

func seq(parts ...*node) *node { return &node{kind: kSeq, parts: parts} }

// sortLiterals sorts a literal's texts (narrow needs them sorted), keeping
// each one's continuation beside it.
func sortLiterals(n *node) {
	idx := make([]int, len(n.lits))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(n.lits[a], n.lits[b]) })
	lits, next := make([]string, len(idx)), make([]*node, len(idx))
	for i, j := range idx {
		lits[i], next[i] = n.lits[j], n.next[j]
	}
	n.lits, n.next = lits, next
}

const (
	xmlParamEnd = "</parameter>"
	xmlValueEnd = "\n" + xmlParamEnd + "\n"
)

// xmlBody is a function's parameters in Qwen3-Coder's format, in the
// schema's order (optional ones may be left out), then </function>.
// Additional properties are not generated.
func xmlBody(obj *node) (*node, error) {
	var parts []*node
	for i, k := range obj.keys {
		v, err := xmlValue(obj.props[i])
		if err != nil {
			return nil, fmt.Errorf("parameter %q: %w", k, err)
		}
		p := seq(lit("<parameter="+k+">\n"), v)
		if obj.reqAfter[i] != int32(i) { // optional
			p = &node{kind: kUnion, alts: []*node{p, lit("")}}
		}
		parts = append(parts, p)
	}
	parts = append(parts, lit("</function>\n</tool_call>"))
	return seq(parts...), nil
}

// xmlValue is a parameter value as the template renders it, then the
// parameter's end tag: strings as raw text, numbers and booleans as JSON
// text, objects and arrays as JSON.
func xmlValue(n *node) (*node, error) {
	switch n.kind {
	case kAny: // no type: text, as the parser reads it
		return seq(&node{kind: kText, term: xmlParamEnd, maxLen: -1}, lit("\n")), nil
	case kString:
		if n.re == nil {
			return seq(&node{kind: kText, term: xmlParamEnd, minLen: n.minLen, maxLen: n.maxLen}, lit("\n")), nil
		}
		raw := *n
		raw.raw, raw.term = true, "\n"
		return seq(&raw, lit(xmlValueEnd)), nil
	case kLiteral:
		l := &node{kind: kLiteral}
		for _, text := range n.lits {
			var s string
			if strings.HasPrefix(text, `"`) && json.Unmarshal([]byte(text), &s) == nil {
				if strings.Contains(s, xmlParamEnd) {
					return nil, fmt.Errorf("enum value %q cannot be written in a parameter", s)
				}
				text = s
			}
			l.lits = append(l.lits, text)
		}
		slices.Sort(l.lits)
		l.lits = slices.Compact(l.lits)
		return seq(l, lit(xmlValueEnd)), nil
	case kUnion:
		u := &node{kind: kUnion}
		for _, a := range n.alts {
			v, err := xmlValue(a)
			if err != nil {
				return nil, err
			}
			u.alts = append(u.alts, v)
		}
		return u, nil
	}
	return seq(n, lit(xmlValueEnd)), nil
}
