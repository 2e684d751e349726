package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

const personSchema = `{"type":"object","properties":{
	"name":{"type":"string"},
	"age":{"type":"integer"},
	"height":{"type":"number"},
	"tags":{"type":"array","items":{"type":"string","enum":["a","ab","b"]}},
	"role":{"anyOf":[{"type":"null"},{"const":"admin"},{"type":"object","properties":{"level":{"type":"integer"}},"required":["level"],"additionalProperties":false}]},
	"ok":{"type":"boolean"}},
	"required":["name","age"],"additionalProperties":false}`

func mustCompile(t testing.TB, schema string) *Grammar {
	t.Helper()
	g, err := CompileSchema(json.RawMessage(schema), Spaced)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func matches(g *Grammar, text string) (prefix, whole bool) {
	m := g.Matcher()
	if !m.Feed([]byte(text)) {
		return false, false
	}
	return true, m.Complete()
}

func TestSchemas(t *testing.T) {
	for _, tc := range []struct {
		schema string
		text   string
		prefix bool // a prefix of an accepted document
		whole  bool // an accepted document
	}{
		{personSchema, `{"name": "Ann", "age": 30}`, true, true},
		{personSchema, `{"name": "A\"n\u00e9 ü 世", "age": -0}`, true, true},
		{personSchema, `{"name": "Ann", "age": 30, "height": 1.5e+3, "tags": ["ab", "a"], "role": {"level": 2}, "ok": true}`, true, true},
		{personSchema, `{"name": "Ann", "age": 30, "role": null}`, true, true},
		{personSchema, `{"name": "Ann", "age": 30, "role": "admin"}`, true, true},
		{personSchema, `{"name": "Ann"`, true, false},
		{personSchema, `{"name":"Ann"`, false, false},              // layout is fixed
		{personSchema, ` {"name": "Ann"`, false, false},            // no leading space
		{personSchema, `{"age": 30, "name": "Ann"}`, false, false}, // schema order
		{personSchema, `{"name": "Ann"}`, false, false},            // age required
		{personSchema, `{"name": "Ann", "name": "Bob"`, false, false},
		{personSchema, `{"name": "Ann", "age": 30, "ok": true, "tags": []}`, false, false}, // order again
		{personSchema, `{"nam": 1`, false, false},
		{personSchema, `{"name": "Ann", "age": 3.5}`, false, false}, // integer
		{personSchema, `{"name": "Ann", "age": 01}`, false, false},
		{personSchema, `{"name": "Ann", "age": 30, "extra": 1}`, false, false},
		{personSchema, `{"name": "Ann", "age": 30, "tags": ["c"]}`, false, false},
		{personSchema, `{"name": "Ann", "age": 30, "role": {}}`, false, false},
		{personSchema, "{\"name\": \"a\nb\"", false, false}, // control character
		{personSchema, "{\"name\": \"\xff\"", false, false}, // invalid UTF-8
		{personSchema, "{\"name\": \"\xed\xa0\x80\"", false, false},
		{personSchema, `{"name": "Ann", "age": 30}x`, false, false},
		{`{"type":"number"}`, `-12.5E-3`, true, true},
		{`{"type":"number"}`, `12.`, true, false},
		{`{"type":"number"}`, `9999999999999999999.99999999999999999E+99`, true, true}, // the largest: finite
		{`{"type":"number"}`, `1E100`, false, false},
		{`{"type":["string","null"]}`, `null`, true, true},
		{`{"enum":[1,12,"x",true,{"a":[1,2]}]}`, `12`, true, true},
		{`{"enum":[1,12,"x",true,{"a":[1,2]}]}`, `1`, true, true},
		{`{"enum":[1,12,"x",true,{"a":[1,2]}]}`, `13`, false, false},
		{`{"enum":[1,12,"x",true,{"a":[1,2]}]}`, `{"a": [1, 2]}`, true, true},
		{`{}`, `{"a": [1, {"b": null}], "c": "d"}`, true, true},
		{`{}`, `[1, 2, ]`, false, false},
		{`{}`, `[1,2]`, false, false},
		{`{"type":"object","additionalProperties":{"type":"integer"}}`, `{"x": 1, "y": 2}`, true, true},
		{`{"type":"object","additionalProperties":{"type":"integer"}}`, `{"x": "1"}`, false, false},
		{`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}}`, `{"a": "s", "x": 1}`, true, true},
		{`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}}`, `{"x": 1, "a": "s"}`, false, false}, // declared key after an additional one
		{`{"type":"array","items":{"type":"integer"}}`, `[]`, true, true},
		{`{"type":"array","items":{"type":"integer"}}`, `[ ]`, false, false},
		{`{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3}`, `[1, 2, 3]`, true, true},
		{`{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3}`, `[1]`, false, false},
		{`{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3}`, `[1, 2, 3, `, false, false},
		{`{"type":"string","maxLength":3}`, `"a世c"`, true, true},
		{`{"type":"string","maxLength":3}`, `"abcd`, false, false},
		{`{"type":"string","minLength":2}`, `"a"`, false, false},
		{`{"type":"string","pattern":"^[a-z]+-[0-9]{2}$"}`, `"ab-12"`, true, true},
		{`{"type":"string","pattern":"^[a-z]+-[0-9]{2}$"}`, `"ab-123`, false, false},
		{`{"type":"string","pattern":"^[a-z]+-[0-9]{2}$"}`, `"ab-1"`, false, false},
		{`{"type":"string","pattern":"b+"}`, `"xxbbyy"`, true, true},
		{`{"type":"string","pattern":"b+"}`, `"xxyy"`, false, false},
		{`{"type":"string","format":"date-time"}`, `"2024-02-29T12:30:00Z"`, true, true},
		{`{"type":"string","format":"date-time"}`, `"2024-13`, false, false},
		{`{"type":"string","format":"uuid"}`, `"123e4567-e89b-12d3-a456-426614174000"`, true, true},
		{`{"type":"string","format":"uuid"}`, `"123e4567-`, true, false},
		{`{"type":"string","format":"email"}`, `"ann@example.com"`, true, true},
		{`{"type":"string","format":"email"}`, `"ann@example"`, false, false},
		{`{"type":"integer","minimum":1,"maximum":250}`, `250`, true, true},
		{`{"type":"integer","minimum":1,"maximum":250}`, `251`, false, false},
		{`{"type":"integer","minimum":1,"maximum":250}`, `0`, false, false},
		{`{"type":"integer","minimum":1,"maximum":250}`, `-`, false, false},
		{`{"type":"integer","minimum":-5,"maximum":-2}`, `-3`, true, true},
		{`{"type":"integer","minimum":-5,"maximum":-2}`, `-6`, false, false},
		{`{"type":"integer","exclusiveMinimum":0}`, `0`, false, false},
		{`{"type":"number","minimum":0}`, `-1`, false, false},
		{`{"type":"number","minimum":0}`, `0.25`, true, true},
		{`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
			`{"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}, {"v": 4}]}`, true, true},
		{`{"type":"object","properties":{"a":{"type":"string","nullable":true}},"additionalProperties":false}`, `{"a": null}`, true, true},
		{`{"allOf":[{"type":"boolean"}],"description":"x"}`, `true`, true, true},
	} {
		g := mustCompile(t, tc.schema)
		prefix, whole := matches(g, tc.text)
		if prefix != tc.prefix || whole != tc.whole {
			t.Errorf("%s on %q: prefix %v whole %v, want %v %v", tc.schema[:min(len(tc.schema), 50)], tc.text, prefix, whole, tc.prefix, tc.whole)
		}
	}
}

func TestCompactStyle(t *testing.T) {
	g, err := CompileSchema(json.RawMessage(personSchema), Compact)
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]bool{
		`{"name":"Ann","age":30,"tags":["a","b"]}`: true,
		`{"name": "Ann","age":30}`:                 false,
	} {
		if _, whole := matches(g, text); whole != want {
			t.Errorf("%q: whole %v, want %v", text, whole, want)
		}
	}
}

func TestSchemaErrors(t *testing.T) {
	for s, want := range map[string]string{
		`{"$ref":"#/x"}`: "no",
		`{"$ref":"#"}`:   "itself",
		`{"anyOf":[{"$ref":"#"},{"type":"null"}]}`: "itself",
		`{"type":"strung"}`:                        "unknown type",
		`{"type":"object","required":["x"]}`:       "not a property",
		`{"anyOf":[]}`:                             "non-empty",
		`{"enum":[]}`:                              "non-empty",
		`false`:                                    "nothing",
		`[1]`:                                      "an array",
		`5`:                                        "a number",
		`{"type":"object","properties":{"a\"b":{}}}`: "escaping",
		`{"type":"object","properties":5}`:           "must be an object",
		`not json`:                                   "not JSON",
		`{"type":"string","uniqueItems":true}`:       `"uniqueItems"`,
		`{"type":"array","uniqueItems":true}`:        `"uniqueItems"`,
		`{"type":"string","multipleOf":2}`:           `"multipleOf"`,
		`{"not":{}}`:                                 `"not"`,
		`{"type":"string","minimum":1}`:              `"minimum" does not apply`,
		`{"type":"string","pattern":"(?<=a)b"}`:      "pattern",
		`{"type":"string","pattern":"\\bword"}`:      `\b`,
		`{"type":"string","format":"color"}`:         `"color"`,
		`{"type":"integer","minimum":5,"maximum":1}`: "above",
		`{"type":"string","maxLength":-1}`:           "non-negative",
	} {
		_, err := CompileSchema(json.RawMessage(s), Spaced)
		var se *SchemaError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want a SchemaError with %q", s, err, want)
		}
	}
}

func TestToolCalls(t *testing.T) {
	tools := []Tool{
		{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1}},"required":["location"],"additionalProperties":false}`)},
		{Name: "get_time", Parameters: nil},
		{Name: "plot", Parameters: json.RawMessage(`{"type":"object","properties":{"points":{"type":"array","items":{"type":"number"}},"opts":{"type":"object","properties":{"log":{"type":"boolean"}}}},"required":["points"]}`)},
	}
	for _, tc := range []struct {
		format   CallFormat
		parallel bool
		text     string
		prefix   bool
		whole    bool
	}{
		{JSONCalls, false, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris, France\", \"unit\": \"celsius\"}}\n</tool_call>", true, true},
		{JSONCalls, false, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", true, true},
		{JSONCalls, false, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}", false, false},
		{JSONCalls, false, "<tool_call>\n{\"name\": \"nope", false, false},
		{JSONCalls, false, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n<tool_call>", false, false},
		{JSONCalls, true, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"plot\", \"arguments\": {\"points\": [1.5, 2]}}\n</tool_call>", true, true},
		{XMLCalls, false, "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\nFrance\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>", true, true},
		{XMLCalls, false, "<tool_call>\n<function=get_weather>\n<parameter=unit>\ncelsius\n</parameter>\n", false, false}, // location is required
		{XMLCalls, false, "<tool_call>\n<function=get_weather>\n<parameter=location>\nA</parameter>", false, false},       // no end tag inside a value
		{XMLCalls, false, "<tool_call>\n<function=get_weather>\n<parameter=location>\nA\n</parameter>\n<parameter=days>\n0", false, false},
		{XMLCalls, false, "<tool_call>\n<function=plot>\n<parameter=points>\n[1, 2.5]\n</parameter>\n<parameter=opts>\n{\"log\": true}\n</parameter>\n</function>\n</tool_call>", true, true},
		{XMLCalls, false, "<tool_call>\n<function=get_time>\n</function>\n</tool_call>", true, true},
		{XMLCalls, true, "<tool_call>\n<function=get_time>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n</function>\n</tool_call>", true, true},
	} {
		g, err := ToolCalls(tc.format, tools, tc.parallel)
		if err != nil {
			t.Fatal(err)
		}
		prefix, whole := matches(g, tc.text)
		if prefix != tc.prefix || whole != tc.whole {
			t.Errorf("format %d parallel %v on %q: prefix %v whole %v, want %v %v", tc.format, tc.parallel, tc.text, prefix, whole, tc.prefix, tc.whole)
		}
	}
}

func TestCheckTools(t *testing.T) {
	for _, tc := range []struct {
		tools []Tool
		want  string
	}{
		{[]Tool{{Name: "a", Parameters: json.RawMessage(`5`)}}, `tool "a"`},
		{[]Tool{{Name: "a"}, {Name: "b", Parameters: json.RawMessage(`{"$ref":"#"}`)}}, `tool "b" (tools[1])`},
		{[]Tool{{Name: "a"}, {Name: "a"}}, "second tool"},
		{[]Tool{{Name: "a", Parameters: json.RawMessage(`{"type":"string"}`)}}, "object"},
		{[]Tool{{Name: "a", Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string","foo":1}}}`)}}, `"foo"`},
	} {
		err := CheckTools(tc.tools)
		var te *ToolError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want a ToolError with %q", tc.tools, err, tc.want)
		}
	}
	if err := CheckTools([]Tool{{Name: "a"}, {Name: "b", Parameters: json.RawMessage(`{"type":"object"}`)}}); err != nil {
		t.Error(err)
	}
}

// testVocab is a small vocabulary of JSON-ish pieces, single bytes and
// multi-byte characters split across tokens.
func testVocab() ([][]byte, *Vocab) {
	var toks [][]byte
	for c := range 256 {
		toks = append(toks, []byte{byte(c)})
	}
	for _, s := range []string{`{"`, `":`, `",`, `"}`, `name`, `age`, ` "`, `true`, `null`, `12`, `3.`, `e+`, "世", "\xe4\xb8", `\u00`, `"a"`, `ab`, `<end>`, `<special>`, "\n  ", "<tool_call>"} {
		toks = append(toks, []byte(s))
	}
	end := int32(len(toks) - 4)
	special := int32(len(toks) - 3)
	v := NewVocab(len(toks), func(id int32) []byte { return toks[id] }, func(id int32) bool { return id == special }, []int32{end})
	return toks, v
}

// longerAllowed reports whether the mask allows a token that b is a proper
// prefix of: where the text ahead is forced, only the longest token within
// it is kept.
func longerAllowed(toks [][]byte, mask []uint64, b []byte) bool {
	for id, u := range toks {
		if mask[id/64]&(1<<(id%64)) != 0 && len(u) > len(b) && bytes.HasPrefix(u, b) {
			return true
		}
	}
	return false
}

// TestMaskMatchesBruteForce checks the trie walk against feeding every
// token on its own, along an accepted document: the mask allows exactly
// the tokens the automaton accepts, less the shorter ones within forced
// text.
func TestMaskMatchesBruteForce(t *testing.T) {
	toks, v := testVocab()
	g := mustCompile(t, personSchema)
	doc := `{"name": "世 ab\"\u00e9", "age": 12, "height": 3.5e+1, "tags": ["a"], "role": null}`
	c := g.Constraint(v)
	m := g.Matcher()
	mask := make([]uint64, (len(toks)+63)/64+1)
	for i := 0; i <= len(doc); i++ {
		for j := range mask {
			mask[j] = ^uint64(0)
		}
		c.Mask(mask)
		for id := range int32(len(toks)) {
			got := mask[id/64]&(1<<(id%64)) != 0
			var want bool
			switch {
			case id == v.end[0]:
				want = m.Complete()
			case v.tokens[id] == nil:
				want = false
			default:
				probe := &Matcher{alts: m.alts}
				want = probe.Feed(toks[id])
			}
			if got && !want || want && !got && !longerAllowed(toks, mask, toks[id]) {
				t.Fatalf("after %q: token %q allowed %v, want %v", doc[:i], toks[id], got, want)
			}
		}
		if mask[len(mask)-1] != 0 {
			t.Fatal("bits beyond the vocabulary left set")
		}
		if i == len(doc) {
			break
		}
		if err := c.Accept(int32(doc[i])); err != nil {
			t.Fatalf("accept %q after %q: %v", doc[i], doc[:i], err)
		}
		m.Feed([]byte{doc[i]})
	}
	if err := c.Accept(v.end[0]); err != nil {
		t.Fatal(err)
	}
}

// validate checks a decoded JSON value (numbers as json.Number) against a
// decoded schema: an independent reading of the keywords the compiler
// enforces, with Go's regexp for patterns.
func validate(schema, v any) bool { return validator{schema}.valid(schema, v) }

type validator struct{ root any }

func (vd validator) valid(schema, v any) bool {
	s, ok := schema.(map[string]any)
	if !ok {
		return schema == true
	}
	if n, _ := s["nullable"].(bool); n && v == nil {
		return true
	}
	if r, ok := s["$ref"].(string); ok {
		target := vd.root
		for _, tok := range strings.Split(r, "/")[1:] {
			target = target.(map[string]any)[tok]
		}
		return vd.valid(target, v)
	}
	if a, ok := s["allOf"].([]any); ok {
		for _, sub := range a {
			if !vd.valid(sub, v) {
				return false
			}
		}
		return true
	}
	if c, ok := s["const"]; ok {
		return reflect.DeepEqual(c, v)
	}
	if e, ok := s["enum"]; ok {
		for _, x := range e.([]any) {
			if reflect.DeepEqual(x, v) {
				return true
			}
		}
		return false
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if a, ok := s[k]; ok {
			for _, sub := range a.([]any) {
				if vd.valid(sub, v) {
					return true
				}
			}
			return false
		}
	}
	types := []any{s["type"]}
	if list, ok := s["type"].([]any); ok {
		types = list
	}
	for _, t := range types {
		if vd.validType(t, s, v) {
			return true
		}
	}
	return false
}

func num(s map[string]any, k string) (float64, bool) {
	n, ok := s[k].(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

func (vd validator) validType(t any, s map[string]any, v any) bool {
	switch t {
	case nil:
		if _, ok := s["properties"]; !ok {
			return true
		}
		return vd.validType("object", s, v)
	case "string":
		str, ok := v.(string)
		if !ok {
			return false
		}
		n := float64(utf8.RuneCountInString(str))
		if m, ok := num(s, "maxLength"); ok && n > m {
			return false
		}
		if m, ok := num(s, "minLength"); ok && n < m {
			return false
		}
		pattern, _ := s["pattern"].(string)
		if f, ok := s["format"].(string); ok {
			pattern = formats[f]
		}
		return pattern == "" || regexp.MustCompile(pattern).MatchString(str)
	case "number", "integer":
		n, ok := v.(json.Number)
		if !ok || t == "integer" && strings.ContainsAny(string(n), ".eE") {
			return false
		}
		f, _ := n.Float64()
		if m, ok := num(s, "minimum"); ok && f < m {
			return false
		}
		if m, ok := num(s, "maximum"); ok && f > m {
			return false
		}
		if m, ok := num(s, "exclusiveMinimum"); ok && f <= m {
			return false
		}
		if m, ok := num(s, "exclusiveMaximum"); ok && f >= m {
			return false
		}
		return true
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "array":
		a, ok := v.([]any)
		if !ok {
			return false
		}
		if m, ok := num(s, "maxItems"); ok && float64(len(a)) > m {
			return false
		}
		if m, ok := num(s, "minItems"); ok && float64(len(a)) < m {
			return false
		}
		for _, x := range a {
			if it, ok := s["items"]; ok && !vd.valid(it, x) {
				return false
			}
		}
		return true
	case "object":
		o, ok := v.(map[string]any)
		if !ok {
			return false
		}
		props, _ := s["properties"].(map[string]any)
		for k, x := range o {
			if p, ok := props[k]; ok {
				if !vd.valid(p, x) {
					return false
				}
			} else if a, ok := s["additionalProperties"]; ok && !vd.valid(a, x) {
				return false
			}
		}
		req, _ := s["required"].([]any)
		for _, r := range req {
			if _, ok := o[r.(string)]; !ok {
				return false
			}
		}
		return true
	}
	return false
}

func decodeNumbers(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data")
	}
	return v, nil
}

var fuzzSchemas = []string{personSchema, `{}`, `{"type":["number","null"]}`, `{"type":"array","items":{"enum":[1,12,"x"]},"maxItems":3}`,
	`{"type":"object","additionalProperties":{"type":"integer","minimum":-20,"maximum":300},"properties":{"a":{"type":"string","maxLength":5}}}`,
	`{"type":"object","properties":{"id":{"type":"string","format":"uuid"},"p":{"type":"string","pattern":"^a+b?$"},"when":{"type":"string","format":"date"}},"required":["p"]}`,
	`{"$defs":{"t":{"type":"object","properties":{"v":{"type":"integer"},"k":{"type":"array","items":{"$ref":"#/$defs/t"},"minItems":1}}}},"$ref":"#/$defs/t"}`}

// FuzzGrammar feeds arbitrary bytes: the automaton never panics, and
// whatever it accepts as a whole document is JSON valid for the schema.
func FuzzGrammar(f *testing.F) {
	for i, s := range []string{`{"name":"Ann","age":30}`, `{"a":[1,{"b":null}]}`, `null`, `[12,1,"x"]`, `{"a":"x","b":-1}`, "{\"name\":\"\\u00e9\",\"age\":0,\"role\":{\"level\":1}}"} {
		f.Add(uint8(i), []byte(s))
	}
	grams := make([]*Grammar, len(fuzzSchemas))
	schemas := make([]any, len(fuzzSchemas))
	for i, s := range fuzzSchemas {
		grams[i] = mustCompile(f, s)
		schemas[i], _ = decodeNumbers([]byte(s))
	}
	f.Fuzz(func(t *testing.T, which uint8, text []byte) {
		i := int(which) % len(grams)
		m := grams[i].Matcher()
		if !m.Feed(text) || !m.Complete() {
			return
		}
		v, err := decodeNumbers(text)
		if err != nil {
			t.Fatalf("accepted %q, which is not JSON: %v", text, err)
		}
		if !validate(schemas[i], v) {
			t.Fatalf("accepted %q, which the schema %s rejects", text, fuzzSchemas[i])
		}
	})
}

// TestRandomWalksValidate generates documents by choosing random allowed
// tokens until the end token is allowed: every one must validate.
func TestRandomWalksValidate(t *testing.T) {
	toks, v := testVocab()
	rng := rand.New(rand.NewPCG(1, 2))
	for i, s := range fuzzSchemas {
		g := mustCompile(t, s)
		schema, _ := decodeNumbers([]byte(s))
		whole := 0
		for range 30 {
			c := g.Constraint(v)
			var out []byte
			mask := make([]uint64, (len(toks)+63)/64)
			for len(out) < 400 {
				allowed := allowedTokens(c, mask, len(toks))
				if len(allowed) == 0 {
					t.Fatalf("schema %d: dead end after %q", i, out)
				}
				id := allowed[rng.IntN(len(allowed))]
				if id == v.end[0] || (len(out) > 200 && c.m.Complete()) {
					break
				}
				if err := c.Accept(id); err != nil {
					t.Fatal(err)
				}
				out = append(out, toks[id]...)
			}
			if !c.Complete() {
				continue // cut short
			}
			whole++
			val, err := decodeNumbers(out)
			if err != nil || !validate(schema, val) {
				t.Fatalf("schema %d: generated %q: %v", i, out, err)
			}
		}
		if whole < 5 {
			t.Errorf("schema %d: only %d of 30 random walks ended in a whole document", i, whole)
		}
	}
}

// TestConcurrentConstraints runs generations of one grammar at once: they
// share its mask cache (run with -race).
func TestConcurrentConstraints(t *testing.T) {
	toks, v := testVocab()
	g := mustCompile(t, personSchema)
	schema, _ := decodeNumbers([]byte(personSchema))
	mg := maskedGrammar{g: g, schema: schema}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for range 10 {
				choices := make([]byte, 2000)
				for j := range choices {
					choices[j] = byte(rng.UintN(256))
				}
				runMasked(t, toks, v, mg, choices)
			}
		}()
	}
	wg.Wait()
	if g.cachedMasks() == 0 {
		t.Error("no mask cached")
	}
}

// allowedTokens lists the ids among the first n that c's mask allows, using
// mask (sized for n) as scratch.
func allowedTokens(c *Constraint, mask []uint64, n int) []int32 {
	for j := range mask {
		mask[j] = ^uint64(0)
	}
	c.Mask(mask)
	var allowed []int32
	for id := range int32(n) {
		if mask[id/64]&(1<<(id%64)) != 0 {
			allowed = append(allowed, id)
		}
	}
	return allowed
}
