//go:build !purego

package gemm

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestMacroEncoding disassembles the tile kernels whose instructions the
// generated assembly spells out as bytes, as loaded in this process, with
// GNU objdump (Go's own disassembler decodes neither EVEX nor AVX-VNNI), and
// checks that every VDPBF16PS_Z(src2, src1, dst) of the bf16 kernels is
// `vdpbf16ps %zmm<src2>,%zmm<src1>,%zmm<dst>` and every VPDPBUSD_Y of the
// AVX-VNNI ones `{vex} vpdpbusd %ymm<src2>,%ymm<src1>,%ymm<dst>`, in order.
// The arithmetic tests prove what the bytes compute; this proves they are
// the instruction the macro names, with the registers the generator chose.
func TestMacroEncoding(t *testing.T) {
	objdump, err := exec.LookPath("objdump")
	if err != nil {
		t.Skip("GNU objdump (binutils) is not installed")
	}
	want := macroUses(t, "kernels_amd64.s")
	for _, tc := range []struct {
		family  string
		kernels *[maxRows + 1][maxPanels + 1]kernel
		match   *regexp.Regexp
	}{
		{"bf16x512", &bf16x512Kernels, regexp.MustCompile(`\s(vdpbf16ps\s+\S+)`)},
		{"vnni256", &vnni256Kernels, regexp.MustCompile(`\s(\{vex\}\s+vpdpbusd\s+\S+)`)},
	} {
		checked := 0
		for r, row := range tc.kernels {
			for p, k := range row {
				if k == nil {
					continue
				}
				name := fmt.Sprintf("%sR%dP%d", tc.family, r, p)
				code, err := asmBody(k)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				got, err := disassemble(objdump, t.TempDir(), code, tc.match)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if len(want[name]) == 0 {
					t.Fatalf("%s: no macro use in kernels_amd64.s", name)
				}
				if strings.Join(got, "\n") != strings.Join(want[name], "\n") {
					t.Errorf("%s: objdump decodes\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want[name], "\n"))
				}
				checked++
			}
		}
		if checked == 0 {
			t.Fatalf("no %s kernels to check", tc.family)
		}
	}
}

// asmBody returns the machine code of an assembly function given as a Go
// func value. The value points at the compiler's ABI wrapper, which calls
// the assembly body; the runtime's function table, present even in the
// stripped binaries go test builds, names the body and gives its extent.
// The bytes are read through /proc/self/mem.
func asmBody(fn any) ([]byte, error) {
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	read := func(pc, n uintptr) ([]byte, error) {
		b := make([]byte, n)
		_, err := mem.ReadAt(b, int64(pc))
		return b, err
	}
	wrapper := reflect.ValueOf(fn).Pointer()
	name := runtime.FuncForPC(wrapper).Name()
	head, err := read(wrapper, 64)
	if err != nil {
		return nil, err
	}
	for i := 0; i+5 <= len(head); i++ {
		if head[i] != 0xe8 { // CALL rel32
			continue
		}
		target := wrapper + uintptr(i+5) + uintptr(int64(int32(binary.LittleEndian.Uint32(head[i+1:]))))
		f := runtime.FuncForPC(target)
		if target == wrapper || f == nil || f.Name() != name || f.Entry() != target {
			continue
		}
		end := target
		for runtime.FuncForPC(end) == f {
			end++
		}
		return read(target, end-target)
	}
	return nil, fmt.Errorf("no call to the body of %s in its wrapper", name)
}

// disassemble lists the instructions that match (its first group) in raw x86-64 code.
func disassemble(objdump, dir string, code []byte, match *regexp.Regexp) ([]string, error) {
	path := filepath.Join(dir, "code.bin")
	if err := os.WriteFile(path, code, 0o600); err != nil {
		return nil, err
	}
	out, err := exec.Command(objdump, "-D", "-b", "binary", "-m", "i386:x86-64", "--no-show-raw-insn", path).Output()
	if err != nil {
		return nil, fmt.Errorf("objdump: %w", err)
	}
	var got []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "(bad)") {
			return nil, fmt.Errorf("objdump cannot decode: %s", line)
		}
		if m := match.FindStringSubmatch(line); m != nil {
			got = append(got, strings.Join(strings.Fields(m[1]), " "))
		}
	}
	return got, nil
}

// macroUses lists, per TEXT symbol of an assembly file, the uses of the
// VDPBF16PS_Z and VPDPBUSD_Y macros as GNU objdump prints the instructions
// (AT&T order: src2, src1, dst).
func macroUses(t *testing.T, file string) map[string][]string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`^TEXT ·(\w+)\(SB\)`)
	use := regexp.MustCompile(`^\s+(VDPBF16PS_Z|VPDPBUSD_Y)\((\d+), (\d+), (\d+)\)`)
	spelt := map[string]string{"VDPBF16PS_Z": "vdpbf16ps %%zmm%s,%%zmm%s,%%zmm%s", "VPDPBUSD_Y": "{vex} vpdpbusd %%ymm%s,%%ymm%s,%%ymm%s"}
	uses := map[string][]string{}
	fn := ""
	for _, line := range strings.Split(string(src), "\n") {
		if m := text.FindStringSubmatch(line); m != nil {
			fn = m[1]
		}
		if m := use.FindStringSubmatch(line); m != nil {
			uses[fn] = append(uses[fn], fmt.Sprintf(spelt[m[1]], m[2], m[3], m[4]))
		}
	}
	return uses
}

var amxInstruction = regexp.MustCompile(`\s((?:ldtilecfg|tilerelease|tilezero|tileloadd|tilestored|tdpbf16ps|tdpbusd)\b.*)$`)

// TestAMXEncoding disassembles the AMX tile products with GNU objdump and
// checks that the instructions amx_amd64.h spells out as bytes are the ones
// amx_amd64.s means, with its registers: the arithmetic tests show what the
// bytes compute, this that no operand is off by one register.
func TestAMXEncoding(t *testing.T) {
	objdump, err := exec.LookPath("objdump")
	if err != nil {
		t.Skip("GNU objdump (binutils) is not installed")
	}
	common := []string{
		"ldtilecfg (%rdi)", "tilerelease",
		"tilezero %tmm0", "tilezero %tmm1", "tilezero %tmm2", "tilezero %tmm3",
		"tileloadd (%rsi,%r8,1),%tmm4", "tileloadd (%rbx,%r10,1),%tmm5", "tileloadd (%r11,%r10,1),%tmm6",
		"tileloadd (%r12,%r10,1),%tmm7", "tileloadd (%r9,%r10,1),%tmm5",
		"tilestored %tmm0,(%rdx,%r10,1)", "tilestored %tmm1,(%rdx,%r10,1)",
		"tilestored %tmm2,(%rdx,%r10,1)", "tilestored %tmm3,(%rdx,%r10,1)",
	}
	for _, tc := range []struct {
		name string
		fn   any
		dot  string
	}{{"amxDotPairs", amxDotPairs, "tdpbf16ps"}, {"amxDotQuads", amxDotQuads, "tdpbusd"}} {
		code, err := asmBody(tc.fn)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, err := disassemble(objdump, t.TempDir(), code, amxInstruction)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want := slices.Clone(common)
		for _, ops := range []string{"%tmm5,%tmm4,%tmm0", "%tmm6,%tmm4,%tmm1", "%tmm7,%tmm4,%tmm2", "%tmm5,%tmm4,%tmm3"} {
			want = append(want, tc.dot+" "+ops)
		}
		for i, g := range got {
			got[i] = strings.Join(strings.Fields(g), " ")
		}
		slices.Sort(got)
		slices.Sort(want)
		if got = slices.Compact(got); !slices.Equal(got, want) {
			t.Errorf("%s: objdump decodes the distinct tile instructions\n%s\nwant\n%s", tc.name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
