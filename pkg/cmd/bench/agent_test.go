package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

func runBench(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	f := &cmdutil.Factory{IO: cmdutil.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut}}
	cmd := NewCmdBench(f, nil)
	cmd.SetArgs(args)
	cmd.SetOut(&errOut)
	cmd.SetErr(&errOut)
	err := cmd.Execute()
	return out.String(), err
}

func TestAgentRejectsBadSizes(t *testing.T) {
	for _, flag := range []string{"--turns=0", "--batch-size=0", "--system-tokens=-1", "--reply-tokens=0"} {
		if _, err := runBench(t, "agent", flag); err == nil || !strings.Contains(err.Error(), strings.Split(flag, "=")[0]) {
			t.Errorf("%s: err %v, want one naming the flag", flag, err)
		}
	}
}

func TestAgentJSON(t *testing.T) {
	dir := sharedtest.Path(t, "models", "tiny-qwen3-a")
	out, err := runBench(t, "agent", "--model-path", dir, "--no-ceilings", "--threads", "1", "--batch-size", "1",
		"--turns", "2", "--system-tokens", "80", "--memory-tokens", "40", "--turn-tokens", "10", "--reply-tokens", "3",
		"--memory-reply-tokens", "2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Kind  string `json:"kind"`
		Model struct {
			LoadSeconds float64 `json:"load_seconds"`
		} `json:"model"`
		Results []struct {
			Turn     int    `json:"turn"`
			Kind     string `json:"kind"`
			Cached   int    `json:"cached_tokens"`
			Restored int    `json:"restored_tokens"`
			Reusable int    `json:"reusable_tokens"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if rep.Kind != "agent" || len(rep.Results) != 4 || !(rep.Model.LoadSeconds > 0) {
		t.Fatalf("report %+v: want 4 results and the engine's start-up time", rep)
	}
	// One slot: turn 2's main request comes back from the prefix store.
	if r := rep.Results[2]; r.Kind != "main" || r.Cached != r.Reusable || r.Restored == 0 {
		t.Errorf("turn 2 main %+v: want everything reusable cached, from the prefix store", r)
	}
	// --prefix-cache-bytes 0: nothing survives the memory request.
	out, err = runBench(t, "agent", "--model-path", dir, "--no-ceilings", "--threads", "1", "--batch-size", "1",
		"--turns", "2", "--system-tokens", "80", "--memory-tokens", "40", "--turn-tokens", "10", "--reply-tokens", "3",
		"--memory-reply-tokens", "2", "--prefix-cache-bytes", "0", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if r := rep.Results[2]; r.Cached > 3 || r.Restored != 0 {
		t.Errorf("no prefix store, turn 2 main %+v: want only the template tokens cached", r)
	}
}
