package toolcall

// Format is the tool-call syntax a model emits, as its chat template teaches it.
type Format int

const (
	// FormatNone: the template defines no tool calls; all text is content.
	FormatNone Format = iota
	// FormatJSON is Qwen3's <tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>.
	FormatJSON
	// FormatXML is Qwen3-Coder's
	// <tool_call>\n<function=NAME>\n<parameter=P>\nvalue\n</parameter>\n</function>\n</tool_call>.
	FormatXML
)

func (f Format) String() string {
	switch f {
	case FormatJSON:
		return "qwen3-json"
	case FormatXML:
		return "qwen3-coder-xml"
	default:
		return "none"
	}
}
