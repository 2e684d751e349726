package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/proc/{before,after} are one second of a 2-CPU VM: 60 ticks of
// busy time, 20 of them this process's and its children's, and 10 stolen.
func TestOtherLoadFromProc(t *testing.T) {
	a, err := ReadCPUSnapshot("testdata/proc/before")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ReadCPUSnapshot("testdata/proc/after")
	if err != nil {
		t.Fatal(err)
	}
	want := CPUSnapshot{CPUs: 2, Total: 9670, Busy: 1520, Steal: 100, Own: 190}
	if a != want {
		t.Errorf("before: %+v, want %+v", a, want)
	}
	l := OtherLoad(a, b)
	if math.Abs(l.Others-0.4) > 1e-9 || math.Abs(l.Steal-0.1) > 1e-9 {
		t.Errorf("load %+v, want 0.4 cores of others and 0.1 stolen", l)
	}
	if !l.Busy() {
		t.Error("0.4 cores of others must count as busy")
	}
	// Our own work alone is not load.
	own := b
	own.Own = a.Own + (b.Busy - a.Busy)
	own.Steal = a.Steal
	if l := OtherLoad(a, own); l.Others != 0 || l.Steal != 0 || l.Busy() {
		t.Errorf("only our own CPU time: %+v", l)
	}
	if l := OtherLoad(a, a); l != (CPULoad{}) {
		t.Errorf("no time passed: %+v", l)
	}
}

func TestReadCPUSnapshotErrors(t *testing.T) {
	if _, err := ReadCPUSnapshot("testdata/proc/bad"); err == nil || !strings.Contains(err.Error(), "no cpu lines") {
		t.Errorf("stat without cpu lines: %v", err)
	}
	if _, err := ReadCPUSnapshot("testdata/proc/missing"); err == nil {
		t.Error("a missing tree must fail")
	}
	dir := t.TempDir()
	stat, err := os.ReadFile("testdata/proc/before/stat")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"stat": stat, "self/stat": []byte("4242 (ellm) S 1 2 3\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ReadCPUSnapshot(dir); err == nil || !strings.Contains(err.Error(), "self/stat") {
		t.Errorf("short self/stat: %v", err)
	}
}

// The real /proc parses, and this process's own time shows up in it.
func TestReadCPUSnapshotLive(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	s, err := ReadCPUSnapshot("/proc")
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUs < 1 || s.Total == 0 || s.Busy > s.Total {
		t.Errorf("%+v", s)
	}
}
