package bench

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestSideBySideScript runs sidebyside.sh with a stand-in for ellm that
// prints its arguments: each run kind's flags and checkpoint reach `ellm
// bench llamacpp`, and a second run set on the same OUT is refused while
// the first one's script is alive, and let in once it is gone.
func TestSideBySideScript(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sidebyside.sh reads /proc/loadavg")
	}
	for _, tool := range []string{"sh", "setsid", "nice", "awk"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("sidebyside.sh needs %s", tool)
		}
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "ellm")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"args: $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "runs")
	lock := filepath.Join(out, ".sidebyside.lock")
	run := func(labels ...string) (string, error) {
		cmd := exec.Command("sh", append([]string{"sidebyside.sh", out}, labels...)...)
		// The tests around this one load the machine; the script must not wait for them.
		cmd.Env = append(os.Environ(), "ELLM="+fake, "LLAMA_BIN="+dir, "IDLE_LOAD=1000000")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		return stderr.String(), err
	}
	report := func(label string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(out, label+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	if msg, err := run("A1", "GK2"); err != nil {
		t.Fatalf("run set: %v\n%s", err, msg)
	}
	for label, want := range map[string][]string{
		"A1":  {"args: bench llamacpp --model-path hf-0.6b --gguf qwen3-0.6b-bf16.gguf", "--prefill 128,512,2048 --depths 0,4096 --repeat 3"},
		"GK2": {"--gguf qwen3-0.6b-q8_0.gguf", "--dtype int8 --prefill 512,2048"},
	} {
		got := report(label)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s.txt lacks %q:\n%s", label, w, got)
			}
		}
	}
	if _, err := os.Stat(lock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the run set left its lock behind: %v", err)
	}

	// A run set whose script is alive (this test's process stands in for it).
	if err := os.MkdirAll(lock, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lock, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	msg, err := run("D1")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(msg, "in use by run set "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second run set on a held OUT: %v, %q; want exit status 2 naming its holder", err, msg)
	}
	if _, err := os.Stat(filepath.Join(out, "D1.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused run set wrote a report: %v", err)
	}

	// A lock left by a run set that was killed before it could remove it.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lock, "pid"), []byte(strconv.Itoa(gone.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, err := run("D1"); err != nil {
		t.Fatalf("run set after a stale lock: %v\n%s", err, msg)
	}
	if got := report("D1"); !strings.Contains(got, `--prefill  --depths 0,4096`) {
		t.Errorf("D1.txt: %s", got)
	}
}
