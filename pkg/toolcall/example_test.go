package toolcall_test

import (
	"encoding/json"
	"fmt"

	"github.com/ellm-dev/ellm/pkg/toolcall"
)

func ExampleParser_Parse() {
	p := toolcall.Parser{
		Format: toolcall.FormatXML,
		Tools:  json.RawMessage(`[{"type": "function", "function": {"name": "get_weather", "parameters": {"properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]`),
		NewID:  toolcall.SequentialIDs(),
	}
	content, calls := p.Parse("Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>")
	fmt.Printf("%q\n", content)
	for _, c := range calls {
		fmt.Println(c.ID, c.Name, c.Arguments)
	}
	// Output:
	// "Checking.\n"
	// call_1 get_weather {"city": "Paris", "days": 3}
}

func ExampleStream() {
	s := toolcall.Parser{Format: toolcall.FormatJSON, NewID: toolcall.SequentialIDs()}.NewStream()
	chunks := []string{"Sure.\n<tool", "_call>\n{\"name\": \"ping\", ", "\"arguments\": {\"n\": 1}}\n</tool_call>"}
	for _, chunk := range chunks {
		for _, d := range s.Add(chunk) {
			if d.Call == nil {
				fmt.Printf("content %q\n", d.Content)
			} else {
				fmt.Printf("call %d id=%q name=%q arguments=%q\n", d.Call.Index, d.Call.ID, d.Call.Name, d.Call.Arguments)
			}
		}
	}
	fmt.Println(len(s.Flush()), "more")
	// Output:
	// content "Sure.\n"
	// call 0 id="call_1" name="ping" arguments=""
	// call 0 id="" name="" arguments="{\"n\": 1}"
	// 0 more
}
