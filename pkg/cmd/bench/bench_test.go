package bench

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// A preset that cannot fit is refused before its synthetic checkpoint is
// generated (which would write the whole model to disk first).
func TestStartRefusesBeforeGenerating(t *testing.T) {
	var errOut bytes.Buffer
	c := &Common{IO: cmdutil.IOStreams{Out: &errOut, ErrOut: &errOut}, Preset: "qwen3-235b-a22b", DType: "f32", KVDType: "f32", ThreadFlags: cmdutil.ThreadFlags{Threads: 1}, NoCeilings: true}
	// 235B parameters at f32 are ~940 GB: more than this machine has.
	_, err := c.start(context.Background(), 4096, 1, 0, 0)
	var fe *engine.FitError
	if !errors.As(err, &fe) {
		t.Fatalf("start: %v", err)
	}
	if strings.Contains(errOut.String(), "preparing model") {
		t.Errorf("the model was prepared before the refusal:\n%s", errOut.String())
	}
}

// An engine that fits alone but not beside what stays resident with it
// (llama.cpp's mapped GGUF) starts, and start says so; a comparison then
// runs it apart: closed for llama.cpp's runs and started again, as the
// first, at ellm's next request.
func TestStartCrowdedRunsApart(t *testing.T) {
	var errOut bytes.Buffer
	c := &Common{IO: cmdutil.IOStreams{Out: &errOut, ErrOut: &errOut}, ModelPath: sharedtest.Path(t, "models", "tiny-qwen3-a"),
		DType: "bf16", KVDType: "bf16", ThreadFlags: cmdutil.ThreadFlags{Threads: 1}, NoCeilings: true, WeightsCache: "off"}
	roomy, err := c.start(context.Background(), 256, 1, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	roomy.engine.Close()
	if roomy.crowded {
		t.Error("crowded beside a MiB")
	}
	s, err := c.start(context.Background(), 256, 1, 0, 1<<50)
	if err != nil {
		t.Fatal(err)
	}
	if !s.crowded {
		t.Fatal("not crowded beside a PiB")
	}
	a := &apart{open: s.reopen, e: s.engine}
	defer a.close()
	req := engine.Request{Tokens: []int32{1, 2, 3}, MaxTokens: 4, StopTokens: []int32{}}
	first, err := a.Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.close(); err != nil || a.e != nil {
		t.Fatalf("close: %v, engine %v", err, a.e)
	}
	again, err := a.Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.e == nil || a.e == s.engine || !slices.Equal(first.Tokens, again.Tokens) {
		t.Errorf("started again: %v (first %p), tokens %v then %v", a.e, s.engine, first.Tokens, again.Tokens)
	}
	if err := a.close(); err != nil {
		t.Error(err)
	}
	if err := a.close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// Prefill, decode and the llama.cpp comparison measure without the prefix
// store unless asked; the agent benchmark, whose traffic the store is for,
// keeps the engine's default.
func TestPrefixStoreDefaults(t *testing.T) {
	f := &cmdutil.Factory{IO: cmdutil.IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}}
	var got int64
	keep := func(c *Common) error { got = c.PrefixCacheBytes.Bytes(); return nil }
	cmds := map[string]func() *cobra.Command{
		"prefill": func() *cobra.Command {
			return newCmdPrefill(f, func(o *PrefillOptions) error { return keep(&o.Common) })
		},
		"decode": func() *cobra.Command { return newCmdDecode(f, func(o *DecodeOptions) error { return keep(&o.Common) }) },
		"llamacpp": func() *cobra.Command {
			return newCmdLlamaCpp(f, func(o *LlamaCppOptions) error { return keep(&o.Common) })
		},
		"agent": func() *cobra.Command { return newCmdAgent(f, func(o *AgentOptions) error { return keep(&o.Common) }) },
	}
	for name, want := range map[string]int64{"prefill": -1, "decode": -1, "llamacpp": -1, "agent": 0} {
		for _, tc := range []struct {
			args []string
			want int64
		}{{nil, want}, {[]string{"--prefix-cache-bytes", "auto"}, 0}, {[]string{"--prefix-cache-bytes", "1GiB"}, 1 << 30}} {
			cmd := cmds[name]()
			cmd.SetArgs(append([]string{"--gguf", "x.gguf"}, tc.args...))
			if name != "llamacpp" {
				cmd.SetArgs(tc.args)
			}
			got = 99
			if err := cmd.Execute(); err != nil {
				t.Fatalf("%s %v: %v", name, tc.args, err)
			}
			if got != tc.want {
				t.Errorf("%s %v: prefix cache bytes %d, want %d", name, tc.args, got, tc.want)
			}
		}
	}
}
