package reasoning_test

import (
	"fmt"

	"github.com/ellm-dev/ellm/pkg/reasoning"
)

func ExampleSplit() {
	r, c := reasoning.Split("<think>\n2+2 is 4\n</think>\n\n4", false)
	fmt.Printf("reasoning %q, content %q\n", r, c)
	// Output: reasoning "\n2+2 is 4\n", content "\n\n4"
}

func ExampleStream() {
	s := reasoning.NewStream(false)
	for _, chunk := range []string{"<thi", "nk>hm", "m</th", "ink>ok"} {
		r, c := s.Add(chunk)
		fmt.Printf("%q %q\n", r, c)
	}
	r, c := s.Flush()
	fmt.Printf("%q %q\n", r, c)
	// Output:
	// "" ""
	// "hm" ""
	// "m" ""
	// "" "ok"
	// "" ""
}
