package main

import (
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/kernels/internal/asmgen/emit"
)

// TestGeneratedFilesUpToDate finds every file under kernels/ that says it
// was written by this program and checks that it is what the program writes
// now (as `make check-generate` does for the whole tree), so that no
// package's copy of a shared macro or constant drifts from the one
// definition here.
func TestGeneratedFilesUpToDate(t *testing.T) {
	marker := []byte(generated)
	found := map[string]int{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(b[:min(len(b), 200)], marker) {
			return err
		}
		want, err := generate(d.Name(), packageOf(t, filepath.Dir(path)))
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return nil
		}
		if !bytes.Equal(b, want) {
			t.Errorf("%s differs from what asmgen writes: run go generate in %s", path, filepath.Dir(path))
		}
		found[d.Name()]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// ops holds the exponential, gemm, ceiling and attn the VDPBF16PS macro.
	for _, name := range []string{"exp_amd64.h", "exp_const.go"} {
		if found[name] < 1 {
			t.Errorf("no generated %s found under kernels/", name)
		}
	}
	if found["bf16_amd64.h"] < 3 {
		t.Errorf("%d generated bf16_amd64.h under kernels/, want gemm's, ceiling's and attn's", found["bf16_amd64.h"])
	}
}

// packageOf is the name of the Go package in dir.
func packageOf(t *testing.T, dir string) string {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	for name := range pkgs {
		return name
	}
	return ""
}

// TestExpHeaderMacros checks the two macros share one body and that every
// constant the body reads is defined.
func TestExpHeaderMacros(t *testing.T) {
	h := string(expHeader())
	for _, want := range []string{"#define EXP512(x, n, t, u)", "#define EXP256(x, n, t, u, k)", "VRNDSCALEPS $0, n, n", "VROUNDPS $0, n, n"} {
		if !strings.Contains(h, want) {
			t.Errorf("exp_amd64.h lacks %q", want)
		}
	}
	for _, line := range emit.ExpBody {
		for _, f := range strings.Fields(strings.ReplaceAll(line, ",", " ")) {
			if name, ok := strings.CutPrefix(f, "c_"); ok {
				name = strings.TrimSuffix(name, "<>(SB)")
				if !strings.Contains(h, "GLOBL c_"+name+"<>(SB), RODATA|NOPTR, $64") {
					t.Errorf("exp_amd64.h reads c_%s but does not define it", name)
				}
			}
		}
	}
}

// TestExp512SetsIsTheMacro checks that Exp512Sets, for one register set with
// mask K2, writes exactly the EXP512 macro's instructions, and for two sets
// each instruction once per set in turn: the interleaved form cannot drift
// from the macro the other kernels call.
func TestExp512SetsIsTheMacro(t *testing.T) {
	h := string(expHeader())
	_, def, ok := strings.Cut(h, "#define EXP512(x, n, t, u) \\\n")
	if !ok {
		t.Fatal("exp_amd64.h has no EXP512")
	}
	def, _, _ = strings.Cut(def, "\n\n")
	regs := strings.NewReplacer("x", "Z3", "n", "Z0", "t", "Z1", "u", "Z2")
	var want []string
	for _, line := range strings.Split(def, "\n") {
		line = strings.TrimSuffix(strings.TrimSpace(line), " \\")
		op, args, _ := strings.Cut(line, " ")
		a := strings.Split(args, ", ")
		for i, x := range a {
			if len(x) == 1 {
				a[i] = regs.Replace(x)
			}
		}
		want = append(want, op+" "+strings.Join(a, ", "))
	}
	var one, two emit.File
	one.Exp512Sets([][4]string{{"Z3", "Z0", "Z1", "Z2"}}, []string{"K2"})
	if got := strings.Split(strings.TrimSpace(strings.ReplaceAll(one.String(), "\t", "")), "\n"); !slices.Equal(got, want) {
		t.Fatalf("Exp512Sets of one set:\n%s\nthe macro:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	two.Exp512Sets([][4]string{{"Z3", "Z0", "Z1", "Z2"}, {"Z7", "Z4", "Z5", "Z6"}}, []string{"K2", "K3"})
	got := strings.Split(strings.TrimSpace(strings.ReplaceAll(two.String(), "\t", "")), "\n")
	if len(got) != 2*len(want) {
		t.Fatalf("Exp512Sets of two sets wrote %d lines, want %d", len(got), 2*len(want))
	}
	for i, w := range want {
		if got[2*i] != w {
			t.Errorf("line %d of the first set: %q, want %q", i, got[2*i], w)
		}
	}
}
