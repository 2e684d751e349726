package grammar_test

import (
	"fmt"

	"github.com/ellm-dev/ellm/pkg/grammar"
)

func ExampleCompileSchema() {
	g, err := grammar.CompileSchema([]byte(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false}`), grammar.Spaced)
	if err != nil {
		panic(err)
	}
	for _, text := range []string{`{"ok": true}`, `{"ok": tr`, `{"ok": 1}`} {
		m := g.Matcher()
		prefix := m.Feed([]byte(text))
		fmt.Printf("%-14q prefix %-5v complete %v\n", text, prefix, prefix && m.Complete())
	}
	// Output:
	// "{\"ok\": true}" prefix true  complete true
	// "{\"ok\": tr"  prefix true  complete false
	// "{\"ok\": 1}"  prefix false complete false
}
