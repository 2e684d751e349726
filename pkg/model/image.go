package model

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/kernels/threads"
	"github.com/ellm-dev/ellm/pkg/safetensors"
)

// A weights image is a file holding a load's packed weights (gemm.Weight.
// Parts: the panels, their coded copy, lm_head's screen) as the kernels
// read them, written once after a load packed them and mapped by the next
// loads of the same checkpoint, instead of packing again. On a host whose
// new memory is slow to fault in (a cloud VM: about 1.8 CPU-seconds a GB
// measured on the AMD EPYC VM), the packing's first touch is most of a
// start-up, while the image's pages stay in the page cache between
// processes and map in milliseconds. The key (imageKey) covers everything
// the packed bytes depend on; a file that does not match it, or does not
// parse, is packed over.
//
// Layout: imageMagic, the header's length (8 bytes, little endian), the
// header (imageHeader, JSON), then the parts at the offsets it gives: 2 MiB
// aligned for parts of 2 MiB or more, so that the page cache's huge folios
// can map them, 64 bytes for the rest.

const (
	imageMagic   = "ellm-img"
	imageVersion = 1
	imageAlign   = 2 << 20
)

type imageHeader struct {
	Version int
	Key     string
	Weights []imageWeight
	Screen  *imageScreen `json:",omitempty"`
	// Coded is the choice ChooseCoded made when the image was written
	// (nil: there was none), which the loads that map it keep.
	Coded *CodedChoice `json:",omitempty"`
}

type imageWeight struct {
	Name  string
	Shape gemm.Shape
	Parts []imagePart
}

type imageScreen struct {
	Floor float32
	Shape gemm.Shape
	Parts []imagePart
}

type imagePart struct {
	Name         string
	Offset, Size int64
}

// image is where a model's weights image is, and whether the load mapped it.
type image struct {
	path, key string
	data      []byte // the mapping, if the load mapped the image
	coded     *CodedChoice
	note      string
}

// ImageState is what became of a model's weights image.
type ImageState struct {
	// Path is the image's file ("" without LoadOptions.ImageDir).
	Path string
	// Mapped: the weights are the image's, not packed by this load.
	Mapped bool
	// Note says why an image that was there could not be mapped, or that
	// the one mapped could not be locked in memory.
	Note string
}

// Image is what became of the model's weights image.
func (m *Model) Image() ImageState {
	if m.image == nil {
		return ImageState{}
	}
	return ImageState{Path: m.image.path, Mapped: m.image.data != nil, Note: m.image.note}
}

// openImage maps the image of the checkpoint in opts.ImageDir into the
// queued packing jobs' weights and m's screen, if there is one that fits;
// it reports whether it did. An image that does not fit is noted and left
// for SaveImage to replace.
func (m *Model) openImage(b *binder, opts LoadOptions) bool {
	key, name, err := imageKey(m.ck, m.DType, opts)
	if err != nil {
		m.image = &image{note: err.Error()}
		return false
	}
	m.image = &image{path: filepath.Join(opts.ImageDir, name), key: key}
	data, h, err := mapImage(m.image.path, key)
	if err == nil && h != nil {
		var screen *gemm.Screen
		if screen, err = b.restoreImage(data, h); err == nil {
			m.image.data, m.image.coded, m.lmScreen = data, h.Coded, screen
			// The packed weights are anonymous memory, which the kernel
			// never drops; a file mapping's clean pages it may drop under
			// memory pressure and read back from disk, mid-token.
			if err := unix.Mlock(data); err != nil {
				m.image.note = fmt.Sprintf("%s is mapped but not locked in memory (%v): under memory pressure the kernel may drop its pages "+
					"and read them again from disk; give the process CAP_IPC_LOCK or a larger ulimit -l, or pack at start-up with --weights-cache off", m.image.path, err)
			}
			return true
		}
		_ = unix.Munmap(data)
		err = fmt.Errorf("%s: %w", m.image.path, err)
	}
	if err != nil {
		m.image.note = err.Error()
	}
	return false
}

// imageKey is what the packed weights depend on: the format, the machine
// and build (LoadOptions.ImageKey), the kernel path of the bf16 products
// and the load options that shape the packing, and the checkpoint's files
// (path, size and modification time: a changed file is packed again).
// name is the file's name under the image directory: the checkpoint's part
// of the key, the dtype and a hash of the rest, so that a checkpoint keeps
// one image per dtype (imageReplace).
func imageKey(ck *safetensors.Checkpoint, dtype string, opts LoadOptions) (key, name string, err error) {
	var files strings.Builder
	for _, f := range ck.Files() {
		p := f.Path
		st, err := os.Stat(p)
		if err != nil {
			return "", "", err
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", "", err
		}
		fmt.Fprintf(&files, "%s %d %d\n", abs, st.Size(), st.ModTime().UnixNano())
	}
	key = fmt.Sprintf("version %d\nmachine %s\nbf16 path %s\ndtype %s coded %v screened %v\n%s", imageVersion, opts.ImageKey,
		kernels.PathFor(kernels.MatMulBF16), dtype, opts.codes(), opts.ScreensLogits(), files.String())
	return key, fmt.Sprintf("%s-%s-%s.img", shortHash(files.String()), dtype, shortHash(key)), nil
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// mapImage maps the image at path if its key is key, and returns its header
// an image that is missing is (nil, nil, nil).
func mapImage(path, key string) ([]byte, *imageHeader, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.Size() < int64(len(imageMagic))+8 {
		return nil, nil, fmt.Errorf("%s: %d bytes, too short for an image", path, st.Size())
	}
	// The pages are in the page cache if a load wrote or read them lately:
	// MAP_POPULATE maps them all now, as the packing's first touch did.
	data, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, nil, fmt.Errorf("map %s: %w", path, err)
	}
	h, err := parseImage(data, key)
	if err != nil {
		_ = unix.Munmap(data)
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, h, nil
}

// parseImage checks an image's magic, header and key, and that every part
// lies within it, 4-byte aligned.
func parseImage(data []byte, key string) (*imageHeader, error) {
	if string(data[:len(imageMagic)]) != imageMagic {
		return nil, errors.New("not a weights image")
	}
	n := binary.LittleEndian.Uint64(data[len(imageMagic):])
	start := uint64(len(imageMagic) + 8)
	if n > uint64(len(data))-start {
		return nil, fmt.Errorf("header of %d bytes in a %d-byte file", n, len(data))
	}
	var h imageHeader
	if err := json.Unmarshal(data[start:start+n], &h); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if h.Version != imageVersion || h.Key != key {
		return nil, errors.New("written for another build, machine, checkpoint or options")
	}
	check := func(parts []imagePart) error {
		for _, p := range parts {
			if p.Offset < int64(start+n) || p.Size < 0 || p.Offset > int64(len(data))-p.Size || p.Offset%4 != 0 {
				return fmt.Errorf("part %s at [%d, +%d) outside the file's %d bytes", p.Name, p.Offset, p.Size, len(data))
			}
		}
		return nil
	}
	for _, w := range h.Weights {
		if err := check(w.Parts); err != nil {
			return nil, fmt.Errorf("%s: %w", w.Name, err)
		}
	}
	if h.Screen != nil {
		if err := check(h.Screen.Parts); err != nil {
			return nil, fmt.Errorf("screen: %w", err)
		}
	}
	return &h, nil
}

func partBytes(data []byte, parts []imagePart) map[string][]byte {
	m := make(map[string][]byte, len(parts))
	for _, p := range parts {
		m[p.Name] = data[p.Offset : p.Offset+p.Size : p.Offset+p.Size]
	}
	return m
}

// restoreImage gives every queued packing job its weight from the image h
// (data mapped) and returns the screen, or an error if the image does not
// hold the jobs' weights.
func (b *binder) restoreImage(data []byte, h *imageHeader) (*gemm.Screen, error) {
	if len(h.Weights) != len(b.jobs) {
		return nil, fmt.Errorf("%d weights, the checkpoint binds %d", len(h.Weights), len(b.jobs))
	}
	restored := make([]*gemm.Weight, len(b.jobs))
	for i, j := range b.jobs {
		iw := h.Weights[i]
		if iw.Name != j.name || iw.Shape.N != j.n || iw.Shape.K != j.k {
			return nil, fmt.Errorf("weight %d is %s %d×%d, the checkpoint's is %s %d×%d", i, iw.Name, iw.Shape.N, iw.Shape.K, j.name, j.n, j.k)
		}
		w, err := gemm.Restore(iw.Shape, partBytes(data, iw.Parts))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", iw.Name, err)
		}
		restored[i] = w
	}
	var screen *gemm.Screen
	if s := h.Screen; s != nil {
		var err error
		if screen, err = gemm.RestoreScreen(s.Floor, s.Shape, partBytes(data, s.Parts)); err != nil {
			return nil, err
		}
	}
	for i, j := range b.jobs {
		*j.dst = restored[i]
		b.bytes += int64(restored[i].Bytes())
	}
	b.jobs = nil
	return screen, nil
}

// SaveImage writes the model's packed weights to its image file
// (LoadOptions.ImageDir), replacing the checkpoint's image of another key,
// unless the load mapped it or had no image directory; call it once the
// coded copies are settled (ChooseCoded). It leaves a tenth of the file
// system free: a larger image is not written (an error says so). The file
// is written beside its name and renamed when complete, so that a load
// never maps half an image.
func (m *Model) SaveImage() (size int64, err error) {
	if m.image == nil || m.image.data != nil || m.image.path == "" {
		return 0, nil
	}
	h := imageHeader{Version: imageVersion, Key: m.image.key, Coded: m.image.coded}
	var blobs [][]byte
	var offsets []*int64
	add := func(parts []gemm.Part) []imagePart {
		out := make([]imagePart, len(parts))
		for i, p := range parts {
			out[i] = imagePart{Name: p.Name, Size: int64(len(p.Bytes))}
			blobs = append(blobs, p.Bytes)
		}
		for i := range out {
			offsets = append(offsets, &out[i].Offset)
		}
		return out
	}
	for _, pw := range m.packed {
		shape, parts := (*pw.w).Parts()
		h.Weights = append(h.Weights, imageWeight{Name: pw.name, Shape: shape, Parts: add(parts)})
	}
	if m.lmScreen != nil {
		floor, shape, parts := m.lmScreen.ScreenParts()
		h.Screen = &imageScreen{Floor: floor, Shape: shape, Parts: add(parts)}
	}
	// The header's length does not depend on the offsets' digits if they
	// are laid out from a bound on it: the parts start past the header
	// written with the largest offsets first, then it is written again.
	for _, o := range offsets {
		*o = 1 << 62
	}
	head, err := json.Marshal(h)
	if err != nil {
		return 0, err
	}
	off := int64(len(imageMagic) + 8 + len(head))
	for i, o := range offsets {
		align := int64(64)
		if len(blobs[i]) >= imageAlign {
			align = imageAlign
		}
		off = (off + align - 1) / align * align
		*o = off
		off += int64(len(blobs[i]))
	}
	if head, err = json.Marshal(h); err != nil {
		return 0, err
	}
	size = off
	dir := filepath.Dir(m.image.path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("weights image: %w", err)
	}
	var fsst unix.Statfs_t
	if err := unix.Statfs(dir, &fsst); err == nil {
		free, total := int64(fsst.Bavail)*fsst.Bsize, int64(fsst.Blocks)*fsst.Bsize
		if free-size < total/10 {
			return 0, fmt.Errorf("weights image of %.1f GB not written: %s would have less than a tenth of its file system free", float64(size)/1e9, dir)
		}
	}
	if err := writeImage(m.image.path, head, blobs, offsets, size); err != nil {
		return 0, fmt.Errorf("weights image: %w", err)
	}
	imageReplace(m.image.path)
	return size, nil
}

// writeImage writes the image beside path and renames it there once it is
// on disk.
func writeImage(path string, head []byte, blobs [][]byte, offsets []*int64, size int64) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), partialImage)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	var prefix bytes.Buffer
	prefix.WriteString(imageMagic)
	_ = binary.Write(&prefix, binary.LittleEndian, uint64(len(head)))
	prefix.Write(head)
	spans := []fileSpan{{prefix.Bytes(), 0}}
	for i, b := range blobs {
		spans = append(spans, fileSpan{b, *offsets[i]})
	}
	if err = writeSpans(f, spans, size); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// fileSpan is bytes b at offset off of a file.
type fileSpan struct {
	b   []byte
	off int64
}

// writeSpans writes the file of size bytes that holds spans (in order of
// offset, not overlapping) and zeros elsewhere, in whole pieces of 32 MiB
// (2 MiB aligned) on every CPU: written whole, every 2 MiB of the file can
// be one huge folio of the page cache, which the loads that map it read as
// fast as the packing's own memory (its pages are new memory of the page
// cache, whose faults are most of the write's time on a VM).
func writeSpans(f *os.File, spans []fileSpan, size int64) error {
	const piece = 32 << 20
	pieces := int((size + piece - 1) / piece)
	bufs := make(chan []byte, runtime.GOMAXPROCS(0))
	for range cap(bufs) {
		bufs <- nil
	}
	errs := make([]error, pieces)
	threads.Each(pieces, func(i int) {
		buf := <-bufs
		defer func() { bufs <- buf }()
		if buf == nil {
			buf = make([]byte, piece)
		}
		lo, hi := int64(i)*piece, min(int64(i+1)*piece, size)
		out := buf[:hi-lo]
		clear(out)
		// the first span that ends past lo
		j := sort.Search(len(spans), func(j int) bool { return spans[j].off+int64(len(spans[j].b)) > lo })
		for ; j < len(spans) && spans[j].off < hi; j++ {
			sp := spans[j]
			from := max(lo, sp.off)
			to := min(hi, sp.off+int64(len(sp.b)))
			copy(out[from-lo:to-lo], sp.b[from-sp.off:to-sp.off])
		}
		_, errs[i] = f.WriteAt(out, lo)
	})
	return errors.Join(errs...)
}

// imageReplace removes the other images of path's checkpoint and dtype
// (another build, machine or options): a checkpoint keeps one. It also
// removes what writes that did not finish left in the directory (a process
// killed while writing) an hour or more ago.
func imageReplace(path string) {
	dir, base := filepath.Split(path)
	prefix := base[:strings.LastIndexByte(base, '-')+1]
	others, _ := filepath.Glob(filepath.Join(dir, prefix+"*.img"))
	for _, o := range others {
		if o != path {
			_ = os.Remove(o)
		}
	}
	partial, _ := filepath.Glob(filepath.Join(dir, partialImage))
	for _, p := range partial {
		if st, err := os.Stat(p); err == nil && time.Since(st.ModTime()) > time.Hour {
			_ = os.Remove(p)
		}
	}
}

// partialImage is the name pattern of an image being written.
const partialImage = ".writing-*.img"
