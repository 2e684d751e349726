package server

import (
	"encoding/json"

	"github.com/ellm-dev/ellm/pkg/grammar"
	"github.com/ellm-dev/ellm/pkg/server/openai"
)

// guidedGrammar compiles vLLM's structured-output fields, guided_* or
// structured_outputs: json (a schema, or its JSON text) is response_format
// json_schema under another name, regex and choice constrain the reply's
// plain text (pkg/grammar's Regex and Choice). param names the field used.
func (s *Server) guidedGrammar(v openai.VLLMSampling) (g *grammar.Grammar, param string, err error) {
	var asks []guidedAsk
	add := func(param string, set bool, build func(param string) (*grammar.Grammar, error)) {
		if set {
			asks = append(asks, guidedAsk{param, build})
		}
	}
	refuse := func(param, why string) func(string) (*grammar.Grammar, error) {
		return func(string) (*grammar.Grammar, error) {
			return nil, invalid(param, "%s is not supported: %s", param, why)
		}
	}
	const (
		noCFG    = "ellm constrains output by JSON schema, regex or choice, not by context-free grammar"
		noLayout = "ellm's JSON layout is fixed (see --json-style)"
	)
	add("guided_json", len(v.GuidedJSON) > 0 && string(v.GuidedJSON) != "null", func(p string) (*grammar.Grammar, error) { return s.guidedJSON(p, v.GuidedJSON) })
	add("guided_regex", v.GuidedRegex != nil, func(p string) (*grammar.Grammar, error) { return s.guidedRegex(p, *v.GuidedRegex) })
	add("guided_choice", v.GuidedChoice != nil, func(p string) (*grammar.Grammar, error) { return s.guidedChoice(p, v.GuidedChoice) })
	add("guided_grammar", v.GuidedGrammar != nil, refuse("guided_grammar", noCFG))
	add("guided_whitespace_pattern", v.GuidedWhitespacePattern != nil, refuse("guided_whitespace_pattern", noLayout))
	if so := v.StructuredOutputs; so != nil {
		const p = "structured_outputs."
		add(p+"json", len(so.JSON) > 0 && string(so.JSON) != "null", func(p string) (*grammar.Grammar, error) { return s.guidedJSON(p, so.JSON) })
		add(p+"regex", so.Regex != nil, func(p string) (*grammar.Grammar, error) { return s.guidedRegex(p, *so.Regex) })
		add(p+"choice", so.Choice != nil, func(p string) (*grammar.Grammar, error) { return s.guidedChoice(p, so.Choice) })
		add(p+"json_object", so.JSONObject != nil && *so.JSONObject, func(string) (*grammar.Grammar, error) { return s.jsonObjectGrammar() })
		add(p+"grammar", so.Grammar != nil, refuse(p+"grammar", noCFG))
		add(p+"whitespace_pattern", so.WhitespacePattern != nil, refuse(p+"whitespace_pattern", noLayout))
		add(p+"structural_tag", len(so.StructuralTag) > 0 && string(so.StructuralTag) != "null", refuse(p+"structural_tag", "structural tags are not implemented"))
	}
	switch len(asks) {
	case 0:
		return nil, "", nil
	case 1:
	default:
		return nil, "", invalid(asks[1].param, "give one structured output, not both %s and %s", asks[0].param, asks[1].param)
	}
	g, err = asks[0].build(asks[0].param)
	return g, asks[0].param, err
}

// guidedJSON compiles guided_json: a schema, or its JSON text.
func (s *Server) guidedJSON(param string, schema json.RawMessage) (*grammar.Grammar, error) {
	var text string
	if json.Unmarshal(schema, &text) == nil {
		schema = json.RawMessage(text)
	}
	return s.compileSchema(param, schema)
}

// jsonObjectGrammar is any JSON object in the server's style.
func (s *Server) jsonObjectGrammar() (*grammar.Grammar, error) {
	return s.grammars.get("object\x00"+s.jsonStyle.Name, func() (*grammar.Grammar, error) { return grammar.JSONObject(s.jsonStyle), nil })
}

// guidedAsk is one structured-output field of a request: its name and how
// to build its grammar.
type guidedAsk struct {
	param string
	build func(param string) (*grammar.Grammar, error)
}

// guidedRegex compiles guided_regex: the whole reply is plain text that
// matches pattern. Every compile error is the client's (a 400 naming the
// construct).
func (s *Server) guidedRegex(param, pattern string) (*grammar.Grammar, error) {
	return s.grammars.get("regex\x00"+pattern, func() (*grammar.Grammar, error) {
		g, err := grammar.Regex(pattern)
		if err != nil {
			return nil, invalid(param, "%s: %v", param, err)
		}
		return g, nil
	})
}

// guidedChoice compiles guided_choice: the reply is exactly one of
// choices, as bare text (not a JSON string).
func (s *Server) guidedChoice(param string, choices []string) (*grammar.Grammar, error) {
	key, err := json.Marshal(choices)
	if err != nil {
		return nil, err
	}
	return s.grammars.get("choice\x00"+string(key), func() (*grammar.Grammar, error) {
		g, err := grammar.Choice(choices)
		if err != nil {
			return nil, invalid(param, "%s: %v", param, err)
		}
		return g, nil
	})
}
