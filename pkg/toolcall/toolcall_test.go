package toolcall

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

const weatherTools = `[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
	"city": {"type": "string"}, "days": {"type": "integer"}, "temp": {"type": "number"}, "metric": {"type": "boolean"},
	"opts": {"type": "object"}, "tags": {"type": "array"}, "note": {"type": ["string", "null"]},
	"limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]}, "any": {}}}}},
	{"name": "bare", "parameters": {"properties": {"n": {"type": "int"}}}},
	{"name": "ui", "parameters": {"type": "object", "properties": {"root": {"$ref": "#/$defs/node"}, "size": {"$ref": "#/$defs/size"}},
		"$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}, "size": {"$ref": "#/$defs/int"}, "int": {"type": "integer"}}}}]`

type parseTest struct {
	name    string
	format  Format
	text    string
	content string
	calls   []Call // ids are call_1, call_2, …
}

var parseTests = []parseTest{
	{
		name: "json single", format: FormatJSON,
		text:  "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
		calls: []Call{{"call_1", "get_weather", `{"city": "Paris", "days": 3}`}},
	},
	{
		name: "json content, several calls, separators dropped", format: FormatJSON,
		text:    "Let me check.\n\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"arguments\": {\"x\":1.50,\"y\":[1e2,-0]}, \"name\": \"b\"}\n</tool_call>\n",
		content: "Let me check.\n\n",
		calls:   []Call{{"call_1", "a", `{}`}, {"call_2", "b", `{"x": 1.5, "y": [100.0, 0]}`}},
	},
	{
		name: "json text between and after calls kept", format: FormatJSON,
		text:    `<tool_call>{"name": "a"}</tool_call> and <tool_call>{"name": "b", "arguments": null}</tool_call> done`,
		content: " and  done",
		calls:   []Call{{"call_1", "a", `{}`}, {"call_2", "b", `{}`}},
	},
	{
		name: "json arguments as a string", format: FormatJSON,
		text:  `<tool_call>{"name": "a", "arguments": "{\"k\": \"é\\n\"}"}</tool_call>`,
		calls: []Call{{"call_1", "a", `{"k": "é\n"}`}},
	},
	{
		name: "json missing close tag at the end is forgiven", format: FormatJSON,
		text:  "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"q\": \"</tool_call>\"}}\n",
		calls: []Call{{"call_1", "a", `{"q": "</tool_call>"}`}},
	},
	{
		name: "json malformed body is content", format: FormatJSON,
		text:    "<tool_call>\n{\"name\": \"a\", \"arguments\": {oops}}\n</tool_call>",
		content: "<tool_call>\n{\"name\": \"a\", \"arguments\": {oops}}\n</tool_call>",
	},
	{
		name: "json no name is content", format: FormatJSON,
		text:    `<tool_call>{"arguments": {}}</tool_call>`,
		content: `<tool_call>{"arguments": {}}</tool_call>`,
	},
	{
		name: "json arguments not an object is content", format: FormatJSON,
		text:    `<tool_call>{"name": "a", "arguments": [1]}</tool_call>`,
		content: `<tool_call>{"name": "a", "arguments": [1]}</tool_call>`,
	},
	{
		name: "json truncated call is content", format: FormatJSON,
		text:    `Sure <tool_call>{"name": "a", "argu`,
		content: `Sure <tool_call>{"name": "a", "argu`,
	},
	{
		name: "json garbage after object is content, later call parsed", format: FormatJSON,
		text:    `<tool_call>{"name": "a"} x</tool_call><tool_call>{"name": "b"}</tool_call>`,
		content: `<tool_call>{"name": "a"} x</tool_call>`,
		calls:   []Call{{"call_1", "b", `{}`}},
	},
	{
		name: "partial tag at the end is content", format: FormatJSON,
		text: "answer <tool_ca", content: "answer <tool_ca",
	},
	{
		name: "whitespace only, no calls, is content", format: FormatJSON,
		text: "\n\n", content: "\n\n",
	},
	{
		name: "a non-ASCII space is content, not a separator", format: FormatJSON,
		text:    "\u3000<tool_call>{\"name\": \"a\"}</tool_call>\u00a0",
		content: "\u3000\u00a0",
		calls:   []Call{{"call_1", "a", `{}`}},
	},
	{
		name: "format none leaves tags alone", format: FormatNone,
		text:    `<tool_call>{"name": "a"}</tool_call>`,
		content: `<tool_call>{"name": "a"}</tool_call>`,
	},
	{
		name: "xml typed parameters", format: FormatXML,
		text: "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n 07 \n</parameter>\n" +
			"<parameter=temp>\n21.50\n</parameter>\n<parameter=metric>\nTrue\n</parameter>\n<parameter=opts>\n{\"a\":[1,2.0]}\n</parameter>\n" +
			"<parameter=tags>\n[\"x\"]\n</parameter>\n<parameter=note>\nnull\n</parameter>\n<parameter=limit>\nNone\n</parameter>\n" +
			"<parameter=any>\n5\n</parameter>\n<parameter=extra>\n5\n</parameter>\n</function>\n</tool_call>",
		calls: []Call{{"call_1", "get_weather", `{"city": "New York", "days": 7, "temp": 21.5, "metric": true, "opts": {"a": [1, 2.0]}, "tags": ["x"], "note": null, "limit": null, "any": "5", "extra": "5"}`}},
	},
	{
		name: "xml values that do not fit their type stay strings", format: FormatXML,
		text: "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n<parameter=temp>\n2.0\n</parameter>\n" +
			"<parameter=metric>\nyes\n</parameter>\n<parameter=opts>\n{'a': 1}\n</parameter>\n<parameter=city>\nnull\n</parameter>\n</function>\n</tool_call>",
		calls: []Call{{"call_1", "get_weather", `{"days": "three", "temp": 2, "metric": "yes", "opts": "{'a': 1}", "city": "null"}`}},
	},
	{
		name: "xml multi-line value kept verbatim but one newline each side", format: FormatXML,
		text:    "I'll write it.\n<tool_call>\n<function=write>\n<parameter=code>\n\nif a < b:\n\tprint(\"<x>\")\n\n</parameter>\n</function>\n</tool_call>",
		content: "I'll write it.\n",
		calls:   []Call{{"call_1", "write", `{"code": "\nif a < b:\n\tprint(\"<x>\")\n"}`}},
	},
	{
		name: "xml parameters typed through $ref", format: FormatXML,
		text:  "<tool_call>\n<function=ui>\n<parameter=root>\n{\"kids\": []}\n</parameter>\n<parameter=size>\n12\n</parameter>\n</function>\n</tool_call>",
		calls: []Call{{"call_1", "ui", `{"root": {"kids": []}, "size": 12}`}},
	},
	{
		name: "xml repeated parameter: first place, last value", format: FormatXML,
		text:  "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=b>\n2\n</parameter>\n<parameter=a>\n3\n</parameter>\n</function>\n</tool_call>",
		calls: []Call{{"call_1", "f", `{"a": "3", "b": "2"}`}},
	},
	{
		name: "xml bare tool definition, two calls, two functions in one block", format: FormatXML,
		text:  "<tool_call>\n<function=bare>\n<parameter=n>\n-4\n</parameter>\n</function>\n<function=bare>\n</function>\n</tool_call>\n<tool_call><function=x></function></tool_call>",
		calls: []Call{{"call_1", "bare", `{"n": -4}`}, {"call_2", "bare", `{}`}, {"call_3", "x", `{}`}},
	},
	{
		name: "xml missing close tag at the end is forgiven", format: FormatXML,
		text:  "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n",
		calls: []Call{{"call_1", "f", `{"a": "1"}`}},
	},
	{
		name: "xml unterminated parameter is content", format: FormatXML,
		text:    "<tool_call>\n<function=f>\n<parameter=a>\n1\n",
		content: "<tool_call>\n<function=f>\n<parameter=a>\n1\n",
	},
	{
		name: "xml junk between parameters is content", format: FormatXML,
		text:    "<tool_call>\n<function=f>\njunk\n</function>\n</tool_call>",
		content: "<tool_call>\n<function=f>\njunk\n</function>\n</tool_call>",
	},
	{
		name: "xml name across lines is content", format: FormatXML,
		text:    "<tool_call>\n<function=f\n>\n</function>\n</tool_call>",
		content: "<tool_call>\n<function=f\n>\n</function>\n</tool_call>",
	},
	{
		name: "xml empty names are content", format: FormatXML,
		text:    "<tool_call><function=></function></tool_call><tool_call><function=f><parameter= >1</parameter></function></tool_call>",
		content: "<tool_call><function=></function></tool_call><tool_call><function=f><parameter= >1</parameter></function></tool_call>",
	},
	{
		name: "xml json call is content", format: FormatXML,
		text:    `<tool_call>{"name": "a"}</tool_call>`,
		content: `<tool_call>{"name": "a"}</tool_call>`,
	},
}

func parser(f Format) Parser {
	return Parser{Format: f, Tools: json.RawMessage(weatherTools), NewID: SequentialIDs()}
}

func TestParse(t *testing.T) {
	for _, tt := range parseTests {
		t.Run(tt.name, func(t *testing.T) {
			content, calls := parser(tt.format).Parse(tt.text)
			if content != tt.content {
				t.Errorf("content %q, want %q", content, tt.content)
			}
			if !reflect.DeepEqual(calls, tt.calls) {
				t.Errorf("calls\n got %q\nwant %q", calls, tt.calls)
			}
			for _, c := range calls {
				if !json.Valid([]byte(c.Arguments)) {
					t.Errorf("arguments of %s are not JSON: %s", c.Name, c.Arguments)
				}
			}
		})
	}
}

// collect streams text cut at the given offsets and reassembles the deltas,
// checking the delta protocol on the way.
func collect(t testing.TB, p Parser, text string, cuts []int) (string, []Call) {
	s := p.NewStream()
	var deltas []Delta
	prev := 0
	for _, cut := range append(cuts, len(text)) {
		deltas = append(deltas, s.Add(text[prev:cut])...)
		prev = cut
	}
	deltas = append(deltas, s.Flush()...)
	var content strings.Builder
	var calls []Call
	for _, d := range deltas {
		switch {
		case d.Call == nil:
			if d.Content == "" {
				t.Fatalf("empty content delta")
			}
			content.WriteString(d.Content)
		case d.Call.ID != "":
			if d.Call.Index != len(calls) || d.Call.Name == "" {
				t.Fatalf("call start %+v after %d calls", *d.Call, len(calls))
			}
			calls = append(calls, Call{ID: d.Call.ID, Name: d.Call.Name})
		default:
			if d.Call.Index != len(calls)-1 {
				t.Fatalf("argument fragment %+v for call %d", *d.Call, len(calls)-1)
			}
			calls[d.Call.Index].Arguments += d.Call.Arguments
		}
	}
	return content.String(), calls
}

func TestStreamEveryTwoWayCut(t *testing.T) {
	for _, tt := range parseTests {
		for cut := 0; cut <= len(tt.text); cut++ {
			content, calls := collect(t, parser(tt.format), tt.text, []int{cut})
			if content != tt.content || !reflect.DeepEqual(calls, tt.calls) {
				t.Fatalf("%s cut at %d: got %q %q; want %q %q", tt.name, cut, content, calls, tt.content, tt.calls)
			}
		}
	}
}

func TestStreamByteByByte(t *testing.T) {
	for _, tt := range parseTests {
		var cuts []int
		for i := 1; i < len(tt.text); i++ {
			cuts = append(cuts, i)
		}
		content, calls := collect(t, parser(tt.format), tt.text, cuts)
		if content != tt.content || !reflect.DeepEqual(calls, tt.calls) {
			t.Errorf("%s byte by byte: got %q %q; want %q %q", tt.name, content, calls, tt.content, tt.calls)
		}
	}
}

func TestStreamEmitsEarly(t *testing.T) {
	s := parser(FormatJSON).NewStream()
	if d := s.Add("Hello <tool"); len(d) != 1 || d[0].Content != "Hello " {
		t.Fatalf("content before a possible tag should pass, the tag held: %+v", d)
	}
	if d := s.Add("_call>{\"name\": \"f\", \"arguments\": {}}"); len(d) != 0 {
		t.Fatalf("an unfinished call must be held: %+v", d)
	}
	d := s.Add("</tool_call>")
	if len(d) != 2 || d[0].Call == nil || d[0].Call.ID != "call_1" || d[0].Call.Name != "f" || d[1].Call.Arguments != "{}" {
		t.Fatalf("the call should be emitted once complete: %+v", d)
	}
	if d := s.Add("<b>bold</b>"); len(d) != 1 || d[0].Content != "<b>bold</b>" {
		t.Fatalf("other tags pass at once: %+v", d)
	}
}

func TestRandomID(t *testing.T) {
	a, b := RandomID(), RandomID()
	if a == b || !strings.HasPrefix(a, "call_") || len(a) != len("call_")+24 {
		t.Errorf("RandomID gave %q and %q", a, b)
	}
}

func TestPyFloat(t *testing.T) {
	for f, want := range map[float64]string{
		1: "1.0", -0.5: "-0.5", 1e16: "1e+16", 9999999999999998: "9999999999999998.0",
		1e-4: "0.0001", 1.5e-5: "1.5e-05", 1234567.5: "1234567.5", 0.30000000000000004: "0.30000000000000004", 1e22: "1e+22",
	} {
		if got := pyFloat(f); got != want {
			t.Errorf("pyFloat(%v) = %q, want %q", f, got, want)
		}
	}
}

func TestQuote(t *testing.T) {
	got := quote("a\"b\\c/\n\r\t\b\f\x01\u00e9\u2028\x7f\xff")
	want := `"a\"b\\c/\n\r\t\b\f\u0001é` + "\u2028\x7f\ufffd" + `"`
	if got != want {
		t.Errorf("quote = %q, want %q", got, want)
	}
}

func randomCuts(rng *rand.Rand, n int) []int {
	cuts := make([]int, rng.IntN(n+2))
	for i := range cuts {
		cuts[i] = rng.IntN(n + 1)
	}
	for i := 1; i < len(cuts); i++ {
		for j := i; j > 0 && cuts[j] < cuts[j-1]; j-- {
			cuts[j], cuts[j-1] = cuts[j-1], cuts[j]
		}
	}
	return cuts
}

// FuzzStreamMatchesParse: however the output is chunked, streaming gives
// what Parse gives; arguments are JSON objects; without calls the content is
// the text itself (nothing is dropped).
func FuzzStreamMatchesParse(f *testing.F) {
	for _, tt := range parseTests {
		f.Add(tt.text, uint8(tt.format), uint64(len(tt.text)))
	}
	f.Add("<tool_call><tool_call>{\"name\":\"a\"}</tool_call></tool_call>", uint8(FormatJSON), uint64(1))
	f.Add("<tool_call>\n<function=f>\n<parameter=a>\n</parameter></parameter>\n</function>\n</tool_call>", uint8(FormatXML), uint64(2))
	f.Fuzz(func(t *testing.T, text string, format uint8, seed uint64) {
		fm := Format(format % 3)
		wantContent, wantCalls := parser(fm).Parse(text)
		for _, c := range wantCalls {
			var obj map[string]any
			if json.Unmarshal([]byte(c.Arguments), &obj) != nil || obj == nil {
				t.Fatalf("arguments of %q are not a JSON object: %s", c.Name, c.Arguments)
			}
		}
		if len(wantCalls) == 0 && wantContent != text {
			t.Fatalf("no calls, yet content %q differs from the text", wantContent)
		}
		rng := rand.New(rand.NewPCG(seed, 2))
		for range 3 {
			cuts := randomCuts(rng, len(text))
			content, calls := collect(t, parser(fm), text, cuts)
			if content != wantContent || !reflect.DeepEqual(calls, wantCalls) {
				t.Fatalf("cuts %v: stream %q %q; Parse %q %q", cuts, content, calls, wantContent, wantCalls)
			}
		}
	})
}
