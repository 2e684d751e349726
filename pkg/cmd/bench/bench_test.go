package bench

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/engine"
)

// A preset that cannot fit is refused before its synthetic checkpoint is
// generated (which would write the whole model to disk first).
func TestStartRefusesBeforeGenerating(t *testing.T) {
	var errOut bytes.Buffer
	c := &Common{IO: cmdutil.IOStreams{Out: &errOut, ErrOut: &errOut}, Preset: "qwen3-235b-a22b", DType: "f32", KVDType: "f32", ThreadFlags: cmdutil.ThreadFlags{Threads: 1}, NoCeilings: true}
	// 235B parameters at f32 are ~940 GB: more than this machine has.
	_, err := c.start(context.Background(), 4096, 1, 0)
	var fe *engine.FitError
	if !errors.As(err, &fe) {
		t.Fatalf("start: %v", err)
	}
	if strings.Contains(errOut.String(), "preparing model") {
		t.Errorf("the model was prepared before the refusal:\n%s", errOut.String())
	}
}
