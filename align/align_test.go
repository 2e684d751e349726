package align

import (
	"bytes"
	"testing"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// TestSharedReferences runs every case of the shared reference set on the
// active kernel path (set ELLM_KERNELS to pick another): what `make
// test-align` runs through the command.
func TestSharedReferences(t *testing.T) {
	for _, ref := range []string{"tiny-qwen3-a", "tiny-qwen3moe-a", "tokenizer"} {
		t.Run(ref, func(t *testing.T) {
			results, err := Run(Options{Kind: "all", Ref: sharedtest.Path(t, "align", ref), Path: kernels.Active()})
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
		})
	}
}
