package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/pkg/cmdutil"
)

// --cpuprofile writes a profile of the decoding: a gzip-compressed pprof
// protobuf, as go tool pprof reads it.
func TestDecodeCPUProfile(t *testing.T) {
	var out bytes.Buffer
	path := filepath.Join(t.TempDir(), "cpu.prof")
	opts := &DecodeOptions{
		Common: Common{IO: cmdutil.IOStreams{Out: &out, ErrOut: &out}, DType: "bf16", KVDType: "bf16",
			ThreadFlags: cmdutil.ThreadFlags{Threads: 1}, Repeat: 1, Seed: 1, NUMA: "off", NoCeilings: true},
		Depths: "0", Batches: "1", Tokens: 4, CPUProfile: path,
	}
	cmd := &cobra.Command{}
	cmd.SetContext(context.Background())
	if err := decodeRun(cmd, opts); err != nil {
		t.Fatalf("decode: %v\n%s", err, out.String())
	}
	prof, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(prof) < 2 || prof[0] != 0x1f || prof[1] != 0x8b {
		t.Fatalf("%s is not a gzip-compressed profile (%d bytes)", path, len(prof))
	}
}

// A profile that cannot be written fails the command before it measures.
func TestDecodeCPUProfileUnwritable(t *testing.T) {
	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "missing", "cpu.prof")); err == nil {
		t.Fatal("startCPUProfile into a missing directory succeeded")
	}
}
