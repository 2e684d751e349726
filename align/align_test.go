package align

import (
	"bytes"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// TestSharedReferences runs every case of the shared reference set on every
// kernel path this CPU has (`make test-align` runs the default path through
// the command): each path must meet the tolerances of its own numerics.
func TestSharedReferences(t *testing.T) {
	for _, p := range kernels.Available() {
		for _, ref := range []string{"tiny-qwen3-a", "tiny-qwen3moe-a"} {
			t.Run(p.String()+"/"+ref, func(t *testing.T) { checkReference(t, ref, p) })
		}
	}
	t.Run("tokenizer", func(t *testing.T) { checkReference(t, "tokenizer", kernels.Active()) })
}

func checkReference(t *testing.T, ref string, p kernels.Path) {
	results, err := Run(Options{Kind: "all", Ref: sharedtest.Path(t, "align", ref), Path: p})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteTables(&buf, results); err != nil {
		t.Fatal(err)
	}
	if !Passed(results) || testing.Verbose() {
		t.Log("\n" + buf.String())
	}
	if !Passed(results) {
		t.Error("alignment failed")
	}
}
