package model

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/kernels/threads"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

// logitsOf runs a prefill and two decode steps on m, screened where m has a
// screen, and returns every step's logits.
func logitsOf(t *testing.T, m *Model) []float32 {
	t.Helper()
	r := newRunner(t, m, kvcache.BF16, 1, 32, RunnerOptions{MaxTokens: 32})
	var out []float32
	seg := Segment{Tokens: []int32{1, 2, 3, 4, 5, 6, 7}, Logits: LogitsLast}
	for range 3 {
		if err := r.Forward([]Segment{seg}); err != nil {
			t.Fatal(err)
		}
		out = append(out, r.Logits(0)...)
		seg = Segment{Start: seg.Start + len(seg.Tokens), Tokens: []int32{int32(len(out) % 50)}, Logits: LogitsLast, Screen: m.lmScreen != nil}
		if seg.Screen {
			if err := r.Forward([]Segment{seg}); err != nil {
				t.Fatal(err)
			}
			lo, hi := r.Interval(0)
			out = append(out, lo...)
			out = append(out, hi...)
			seg.Start++
			seg.Screen = false
		}
	}
	return out
}

// TestWeightsImage: a load writes its packed weights (SaveImage) and the
// next load maps them, with the same coded copies, screen and coded choice,
// and the same logits bit for bit; an image that is not one, is cut short
// or is for another key is packed over, and a checkpoint keeps one image a
// dtype.
func TestWeightsImage(t *testing.T) {
	pool := threads.New(2, false)
	defer pool.Close()
	for _, name := range []string{"tiny-qwen3-a", "tiny-qwen3moe-a"} {
		for _, dtype := range []string{"bf16", "int8"} {
			t.Run(name+"/"+dtype, func(t *testing.T) {
				dir := t.TempDir()
				path := sharedtest.Path(t, "models", name)
				opts := LoadOptions{DType: dtype, ImageDir: dir, ImageKey: "machine A"}
				load := func(o LoadOptions) *Model {
					m, err := Load(path, o)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() {
						if err := m.Close(); err != nil {
							t.Error(err)
						}
					})
					return m
				}
				packed := load(opts)
				choice, chosen := packed.ChooseCoded(pool)
				if chosen && choice.Kept {
					// Whichever level the timing chose, a mapping takes
					// the image's: make it the one weights are not born with.
					packed.image.coded.Prefetch, choice.Prefetch = gemm.PrefetchL1, gemm.PrefetchL1
				}
				if img := packed.Image(); img.Mapped || !img.Writing || img.Note != "" || filepath.Dir(img.Path) != dir {
					t.Fatalf("first load: image %+v", img)
				}
				size, err := packed.SaveImage()
				if err != nil || size <= 0 {
					t.Fatalf("SaveImage: %d bytes, %v", size, err)
				}
				if img := packed.Image(); img.Mapped || img.Writing || img.Note != "" {
					t.Fatalf("first load, image saved: %+v", img)
				}
				// The load packed into the file: the weights are its mapping.
				in := packed.image.data
				for _, w := range packed.linearWeights() {
					if _, ok := offsetIn(in, w.Memory()[0]); !ok {
						t.Fatalf("a packed weight of %d bytes is not in the image's mapping", len(w.Memory()[0]))
					}
				}
				want := logitsOf(t, packed)

				mapped := load(opts)
				img := mapped.Image()
				if !img.Mapped || img.Path != packed.Image().Path {
					t.Fatalf("second load: image %+v", img)
				}
				if c, ok := mapped.ChooseCoded(pool); ok != chosen || c != choice {
					t.Fatalf("mapped model's coded choice %+v %v, the packing load's %+v %v", c, ok, choice, chosen)
				}
				assertCodedPrefetch(t, mapped, choice.Prefetch)
				if mapped.CodedBytes() != packed.CodedBytes() || mapped.ScreenBytes() != packed.ScreenBytes() || mapped.WeightBytes() != packed.WeightBytes() {
					t.Fatalf("mapped: %d coded, %d screen, %d weight bytes; packed: %d, %d, %d", mapped.CodedBytes(), mapped.ScreenBytes(), mapped.WeightBytes(),
						packed.CodedBytes(), packed.ScreenBytes(), packed.WeightBytes())
				}
				if n, err := mapped.SaveImage(); n != 0 || err != nil {
					t.Fatalf("SaveImage of a mapped model wrote %d bytes, %v", n, err)
				}
				if got := logitsOf(t, mapped); !slices.EqualFunc(got, want, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
					t.Fatal("the mapped weights' logits differ from the packed ones'")
				}

				damage := map[string]func(f string){
					"not a weights image":       func(f string) { writeAt(t, f, 0, []byte("x")) },
					"header of":                 func(f string) { truncate(t, f, 0.9) },
					"header: invalid character": func(f string) { writeAt(t, f, headerAt(t, f), []byte("\x00")) },
				}
				for note, harm := range damage {
					harm(img.Path)
					m := load(opts)
					if got := m.Image(); got.Mapped || !strings.Contains(got.Note, note) {
						t.Fatalf("image damaged (%s): %+v", note, got)
					}
					if got := logitsOf(t, m); !slices.EqualFunc(got, want, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
						t.Fatalf("image damaged (%s): the packed weights' logits differ", note)
					}
					m.ChooseCoded(pool)
					if _, err := m.SaveImage(); err != nil {
						t.Fatal(err)
					}
					if !load(opts).Image().Mapped {
						t.Fatalf("image damaged (%s) and written again: not mapped", note)
					}
				}

				other := load(LoadOptions{DType: dtype, ImageDir: dir, ImageKey: "machine B"})
				if got := other.Image(); got.Mapped || got.Note != "" || got.Path == img.Path {
					t.Fatalf("another key: image %+v (the first: %s)", got, img.Path)
				}
				other.ChooseCoded(pool)
				if _, err := other.SaveImage(); err != nil {
					t.Fatal(err)
				}
				files, _ := filepath.Glob(filepath.Join(dir, "*"))
				if len(files) != 1 || files[0] != other.Image().Path {
					t.Fatalf("after an image for another key: files %v, want only %s", files, other.Image().Path)
				}
				// What a write killed an hour ago left goes with the next write;
				// one that may still run stays.
				old, recent := filepath.Join(dir, ".writing-1.img"), filepath.Join(dir, ".writing-2.img")
				for _, f := range []string{old, recent} {
					if err := os.WriteFile(f, []byte("partial"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Chtimes(old, time.Now(), time.Now().Add(-2*time.Hour)); err != nil {
					t.Fatal(err)
				}
				writeAt(t, other.Image().Path, 0, []byte("x"))
				again := load(LoadOptions{DType: dtype, ImageDir: dir, ImageKey: "machine B"})
				again.ChooseCoded(pool)
				if _, err := again.SaveImage(); err != nil {
					t.Fatal(err)
				}
				files, _ = filepath.Glob(filepath.Join(dir, "*"))
				if !slices.Equal(files, []string{recent, other.Image().Path}) {
					t.Fatalf("after an image for another key: files %v, want only %s", files, other.Image().Path)
				}
			})
		}
	}
}

// headerAt is where the image at path has its header.
func headerAt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return int64(binary.LittleEndian.Uint64(b[len(imageMagic):]))
}

// TestWeightsImageDropsCodedCopies: the pages of the coded copies a load
// drops (ChooseCoded's choice) are punched out of the image it packed them
// into, and the weights, there and mapped, give the same logits.
func TestWeightsImageDropsCodedCopies(t *testing.T) {
	dir, path := t.TempDir(), sharedtest.Path(t, "models", "tiny-qwen3-a")
	opts := LoadOptions{DType: "bf16", ImageDir: dir, ImageKey: "k"}
	m, err := Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	}()
	coded := m.CodedBytes()
	if coded == 0 {
		t.Skip("no coded copies: this kernel path does not read them")
	}
	if coded < 1<<20 {
		t.Fatalf("%d coded bytes: too few to see them punched out", coded)
	}
	want := logitsOf(t, m)
	m.keepCoded(false)
	held, err := m.SaveImage()
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(m.Image().Path, &st); err != nil {
		t.Fatal(err)
	}
	if disk := st.Blocks * 512; disk > held+coded/4 {
		t.Fatalf("the image takes %d bytes of disk for the %d it holds, having had %d of coded copies", disk, held, coded)
	}
	if got := logitsOf(t, m); !slices.EqualFunc(got, want, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
		t.Fatal("the weights' logits changed with the coded copies dropped and the image saved")
	}
	mapped, err := Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer mapped.Close()
	if !mapped.Image().Mapped || mapped.CodedBytes() != 0 {
		t.Fatalf("mapped %v with %d coded bytes", mapped.Image().Mapped, mapped.CodedBytes())
	}
	if got := logitsOf(t, mapped); !slices.EqualFunc(got, want, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
		t.Fatal("the mapped weights' logits differ from the packed ones'")
	}
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, frac float64) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, int64(float64(st.Size())*frac)); err != nil {
		t.Fatal(err)
	}
}

// A load that packed into a new image and ends without SaveImage (a start
// that failed after the load) leaves no file behind.
func TestUnsavedImageRemoved(t *testing.T) {
	dir := t.TempDir()
	m, err := Load(sharedtest.Path(t, "models", "tiny-qwen3-a"), LoadOptions{DType: "bf16", ImageDir: dir, ImageKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, ".writing-*")); len(files) != 1 {
		t.Fatalf("while loading: files %v, want the image being packed into", files)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 0 {
		t.Fatalf("after Close: files %v, want none", files)
	}
}

// Writing an image removes the images of checkpoints whose files are gone
// or changed since theirs were written, and keeps those of the others.
func TestStaleImagesRemoved(t *testing.T) {
	src := sharedtest.Path(t, "models", "tiny-qwen3-a")
	images := t.TempDir()
	ckpt := map[string]string{}
	for _, name := range []string{"kept", "deleted", "changed", "writer"} {
		dir := t.TempDir()
		for _, f := range []string{"config.json", "model.safetensors"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ckpt[name] = dir
	}
	save := func(name string) string {
		m, err := Load(ckpt[name], LoadOptions{DType: "bf16", NoCodedWeights: true, ImageDir: images, ImageKey: "k"})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if _, err := m.SaveImage(); err != nil {
			t.Fatal(err)
		}
		return m.Image().Path
	}
	kept, deleted, changed := save("kept"), save("deleted"), save("changed")
	if err := os.Remove(filepath.Join(ckpt["deleted"], "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(ckpt["changed"], "model.safetensors"), time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	writer := save("writer")
	files, _ := filepath.Glob(filepath.Join(images, "*.img"))
	slices.Sort(files)
	want := []string{kept, writer}
	slices.Sort(want)
	if !slices.Equal(files, want) {
		t.Fatalf("images %v, want %v (removed: %s, %s)", files, want, deleted, changed)
	}
}

// A directory that cannot take the image leaves the load as it would be
// without one: the weights on the heap, nothing left in the directory, and
// the reason in the image's note. A file system without fallocate gets a
// sparse image, written and mapped as any other.
func TestImageOnFullDisk(t *testing.T) {
	path := sharedtest.Path(t, "models", "tiny-qwen3-a")
	opts := LoadOptions{DType: "bf16", NoCodedWeights: true, ImageKey: "k"}
	want := func() []float32 {
		m, err := Load(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		return logitsOf(t, m)
	}()
	for _, tc := range []struct {
		name      string
		statfs    func(string, *unix.Statfs_t) error
		fallocate func(int, uint32, int64, int64) error
		note      string // "": an image is written
	}{
		{"no-space", statfs, func(int, uint32, int64, int64) error { return unix.ENOSPC }, "no space left on device"},
		{"tenth-free", func(dir string, st *unix.Statfs_t) error {
			err := unix.Statfs(dir, st)
			st.Bavail = st.Blocks / 10
			return err
		}, fallocate, "less than a tenth of its file system free"},
		{"no-fallocate", statfs, func(int, uint32, int64, int64) error { return unix.EOPNOTSUPP }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(s func(string, *unix.Statfs_t) error, f func(int, uint32, int64, int64) error) {
				statfs, fallocate = s, f
			}(statfs, fallocate)
			statfs, fallocate = tc.statfs, tc.fallocate
			dir := t.TempDir()
			opts := opts
			opts.ImageDir = dir
			m, err := Load(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			img := m.Image()
			if tc.note == "" {
				if !img.Writing || img.Note != "" {
					t.Fatalf("image %+v, want one being written", img)
				}
				if _, err := m.SaveImage(); err != nil {
					t.Fatal(err)
				}
			} else if img.Writing || !strings.Contains(img.Note, tc.note) {
				t.Fatalf("image %+v, want none written and a note saying %q", img, tc.note)
			}
			if got := logitsOf(t, m); !slices.Equal(got, want) {
				t.Fatal("logits differ from a load without an image")
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "*"))
			if partial, _ := filepath.Glob(filepath.Join(dir, partialImage)); len(partial) != 0 {
				t.Fatalf("files %v left of an image being written", partial)
			}
			if tc.note != "" {
				if len(files) != 0 {
					t.Fatalf("files %v, want none", files)
				}
				return
			}
			mapped, err := Load(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer mapped.Close()
			if !mapped.Image().Mapped {
				t.Fatalf("second load: image %+v, want it mapped", mapped.Image())
			}
			if got := logitsOf(t, mapped); !slices.Equal(got, want) {
				t.Fatal("logits of the mapped sparse image differ")
			}
		})
	}
}

// An image the process may not lock in memory is mapped all the same, with
// a note that says what to grant.
func TestImageNotLocked(t *testing.T) {
	defer func(f func([]byte) error) { mlock = f }(mlock)
	mlock = func([]byte) error { return unix.EPERM }
	path := sharedtest.Path(t, "models", "tiny-qwen3-a")
	opts := LoadOptions{DType: "bf16", NoCodedWeights: true, ImageDir: t.TempDir(), ImageKey: "k"}
	var logits [2][]float32
	for i := range logits {
		m, err := Load(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, err := m.SaveImage(); err != nil {
				t.Fatal(err)
			}
		}
		img := m.Image()
		if img.Mapped != (i == 1) || !strings.Contains(img.Note, "not locked in memory (operation not permitted)") || !strings.Contains(img.Note, "CAP_IPC_LOCK") {
			t.Fatalf("load %d: image %+v, want it mapped on the second and a note on both", i, img)
		}
		logits[i] = logitsOf(t, m)
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(logits[0], logits[1]) {
		t.Fatal("logits of the unlocked image differ from the packing's")
	}
}
