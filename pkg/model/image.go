package model

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/gemm"
	"github.com/ellm-dev/ellm/pkg/safetensors"
)

// A weights image is a file holding a load's packed weights (gemm.Weight.
// Parts: the panels, their coded copy, lm_head's screen) as the kernels
// read them, made by the first load of a checkpoint and mapped by the next
// loads of the same checkpoint, instead of packing again. On a host whose
// new memory is slow to fault in (a cloud VM: about 1.8 CPU-seconds a GB
// of heap measured on the AMD EPYC VM), the packing's first touch is most
// of a start-up, while the image's pages stay in the page cache between
// processes and map in milliseconds. The key (imageKey) covers everything
// the packed bytes depend on; a file that does not match it, or does not
// parse, is packed over.
//
// The first load packs straight into the file (imageArena): the weights'
// large buffers are its shared mapping, advised to take huge pages, so the
// packing's writes are the image's (no second copy in memory, nor a copy
// to write) and its page faults map 2 MiB folios of the page cache, which
// cost a quarter of the heap's (docs/performance.md). SaveImage then adds
// the small parts and the header, syncs and renames the file into place.
//
// Layout: imageMagic, the header's offset and length (8 bytes each, little
// endian), the parts at the offsets the header gives (2 MiB aligned for
// parts of 2 MiB or more, so that huge folios map them; 64 bytes for the
// rest), then the header (imageHeader, JSON).

const (
	imageMagic   = "ellm-img"
	imageVersion = 2
	imageAlign   = 2 << 20
	imagePrefix  = len(imageMagic) + 16
	// arenaStart is where the arena's first part may start: past the
	// prefix, on a page of its own.
	arenaStart = 4 << 10
)

type imageHeader struct {
	Version int
	Key     string
	// Files are the checkpoint's files as the key has them, by which a
	// later write finds the images whose checkpoints are gone (imageStale).
	Files   []imageFile
	Weights []imageWeight
	Screen  *imageScreen `json:",omitempty"`
	// Coded is the choice ChooseCoded made when the image was written
	// (nil: there was none), which the loads that map it keep.
	Coded *CodedChoice `json:",omitempty"`
}

type imageFile struct {
	Path          string
	Size, ModTime int64
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

// image is where a model's weights image is, and how the load came by its
// weights.
type image struct {
	path, key string
	files     []imageFile
	data      []byte      // the mapping the weights are in (nil: the heap)
	mapped    bool        // data is an earlier load's image, not packed by this one
	arena     *imageArena // the file the load packs into, until SaveImage
	coded     *CodedChoice
	note      string
}

// ImageState is what became of a model's weights image.
type ImageState struct {
	// Path is the image's file ("" without LoadOptions.ImageDir).
	Path string
	// Mapped: the weights are the image's, not packed by this load.
	Mapped bool
	// Writing: the load packed the weights into a new image, which
	// SaveImage completes.
	Writing bool
	// Note says why an image that was there could not be mapped, why no
	// image is written, or that the weights' image could not be locked in
	// memory.
	Note string
}

// holds reports whether b is in the image's mapping (or the arena's, while
// the load writes it).
func (img *image) holds(b []byte) bool {
	if img.arena != nil {
		_, ok := img.arena.offset(b)
		return ok
	}
	_, ok := offsetIn(img.data, b)
	return ok
}

// offsetIn is where b starts in mem, if b lies within it.
func offsetIn(mem, b []byte) (int64, bool) {
	if len(b) == 0 || len(mem) == 0 {
		return 0, false
	}
	base, p := uintptr(unsafe.Pointer(unsafe.SliceData(mem))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < base || p+uintptr(len(b)) > base+uintptr(len(mem)) {
		return 0, false
	}
	return int64(p - base), true
}

// Image is what became of the model's weights image.
func (m *Model) Image() ImageState {
	if m.image == nil {
		return ImageState{}
	}
	return ImageState{Path: m.image.path, Mapped: m.image.mapped, Writing: m.image.arena != nil, Note: m.image.note}
}

// openImage maps the image of the checkpoint in opts.ImageDir into the
// queued packing jobs' weights and m's screen, if there is one that fits,
// and reports whether it did. Otherwise it notes why an image that was
// there did not fit, and has b pack into a new image file (imageArena) if
// the directory can take one.
func (m *Model) openImage(b *binder, opts LoadOptions) bool {
	key, name, files, err := imageKey(m.ck, m.DType, opts)
	if err != nil {
		m.image = &image{note: err.Error()}
		return false
	}
	m.image = &image{path: filepath.Join(opts.ImageDir, name), key: key, files: files}
	data, h, err := mapImage(m.image.path, key)
	if err == nil && h != nil {
		var screen *gemm.Screen
		if screen, err = b.restoreImage(data, h); err == nil {
			m.image.data, m.image.mapped, m.image.coded, m.lmScreen = data, true, h.Coded, screen
			m.image.note = lockImage(data, m.image.path)
			return true
		}
		_ = unix.Munmap(data)
		err = fmt.Errorf("%s: %w", m.image.path, err)
	}
	var notes []string
	if err != nil {
		notes = append(notes, err.Error())
	}
	bound, err := m.imageBound(opts, len(b.jobs))
	if err == nil {
		m.image.arena, err = newImageArena(m.image.path, bound)
	}
	if err != nil {
		notes = append(notes, err.Error())
	} else {
		b.packer.Arena = m.image.arena
	}
	m.image.note = strings.Join(notes, "; ")
	return false
}

// imageBound bounds the bytes a load packs into a new image: what it
// commits for its weights (WeightBytes, which also counts what stays
// mapped, such as the embedding table), with each of a weight's buffers
// (panels, coded copy, screen) 2 MiB aligned. Packing past it takes the
// heap (gemm.Arena), which SaveImage copies into the file.
func (m *Model) imageBound(opts LoadOptions, weights int) (int64, error) {
	n, _, err := WeightBytes(m.Config, opts)
	return arenaStart + n + int64(3*weights)*imageAlign, err
}

// lockImage locks the image's pages in memory and says why it could not.
// Packed weights on the heap are anonymous memory, which the kernel never
// drops; a file mapping's clean pages it may drop under memory pressure and
// read back from disk, mid-token.
func lockImage(data []byte, path string) (note string) {
	if err := mlock(data); err != nil {
		return fmt.Sprintf("%s is mapped but not locked in memory (%v): under memory pressure the kernel may drop its pages "+
			"and read them again from disk; give the process CAP_IPC_LOCK or a larger ulimit -l, or pack at start-up with --weights-cache off", path, err)
	}
	return ""
}

// imageKey is what the packed weights depend on: the format, the machine
// and build (LoadOptions.ImageKey), the kernel path of the bf16 products
// and the load options that shape the packing, and the checkpoint's files
// (path, size and modification time: a changed file is packed again).
// name is the file's name under the image directory: the checkpoint's part
// of the key, the dtype and a hash of the rest, so that a checkpoint keeps
// one image per dtype (imageReplace).
func imageKey(ck *safetensors.Checkpoint, dtype string, opts LoadOptions) (key, name string, files []imageFile, err error) {
	var list strings.Builder
	for _, f := range ck.Files() {
		st, err := os.Stat(f.Path)
		if err != nil {
			return "", "", nil, err
		}
		abs, err := filepath.Abs(f.Path)
		if err != nil {
			return "", "", nil, err
		}
		fi := imageFile{abs, st.Size(), st.ModTime().UnixNano()}
		files = append(files, fi)
		fmt.Fprintf(&list, "%s %d %d\n", fi.Path, fi.Size, fi.ModTime)
	}
	key = fmt.Sprintf("version %d\nmachine %s\nbf16 path %s\ndtype %s coded %v screened %v\n%s", imageVersion, opts.ImageKey,
		kernels.PathFor(kernels.MatMulBF16), dtype, opts.codes(), opts.ScreensLogits(), list.String())
	return key, fmt.Sprintf("%s-%s-%s.img", shortHash(list.String()), dtype, shortHash(key)), files, nil
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
	if st.Size() < int64(imagePrefix) {
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
// lies between the prefix and the header, 4-byte aligned.
func parseImage(data []byte, key string) (*imageHeader, error) {
	if len(data) < imagePrefix || string(data[:len(imageMagic)]) != imageMagic {
		return nil, errors.New("not a weights image")
	}
	at, n := headerSpan(data)
	if at < uint64(imagePrefix) || at > uint64(len(data)) || n > uint64(len(data))-at {
		return nil, fmt.Errorf("header of %d bytes at %d in a %d-byte file", n, at, len(data))
	}
	var h imageHeader
	if err := json.Unmarshal(data[at:at+n], &h); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if h.Version != imageVersion || h.Key != key {
		return nil, errors.New("written for another build, machine, checkpoint or options")
	}
	check := func(parts []imagePart) error {
		for _, p := range parts {
			if p.Offset < int64(imagePrefix) || p.Size < 0 || p.Offset > int64(at)-p.Size || p.Offset%4 != 0 {
				return fmt.Errorf("part %s at [%d, +%d) outside the file's parts [%d, %d)", p.Name, p.Offset, p.Size, imagePrefix, at)
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

// SaveImage completes the image the load packed its weights into (the
// parts still on the heap, and the header), syncs it and renames it into
// place, replacing the checkpoint's image of another key, and returns the
// bytes it holds; call it once the coded copies are settled (ChooseCoded).
// It does nothing unless the load packed into an image (ImageState.
// Writing). The file ends after the last buffer a weight holds: the coded
// copies ChooseCoded dropped, packed last (Load), are cut off; a screen
// DropScreen gave up is written, and then its memory handed back. The
// weights are then read-only and locked in memory where the process may.
// On an error the file is removed; the weights stay where they are.
func (m *Model) SaveImage() (held int64, err error) {
	if m.image == nil || m.image.arena == nil {
		return 0, nil
	}
	a := m.image.arena
	defer func() {
		if err != nil {
			_ = os.Remove(a.f.Name())
			err = fmt.Errorf("weights image: %w", err)
		}
		_ = a.f.Close()
		m.image.arena, m.image.data = nil, a.mem
		if m.dropped != nil {
			m.releaseDropped() // written now; locking brought its pages back
		}
	}()
	h := imageHeader{Version: imageVersion, Key: m.image.key, Files: m.image.files, Coded: m.image.coded}
	type entry struct {
		part *imagePart
		b    []byte
	}
	var entries []entry
	list := func(parts []gemm.Part) []imagePart {
		out := make([]imagePart, len(parts))
		for i, p := range parts {
			out[i] = imagePart{Name: p.Name, Size: int64(len(p.Bytes))}
			entries = append(entries, entry{&out[i], p.Bytes})
		}
		return out
	}
	for _, pw := range m.packed {
		shape, parts := (*pw.w).Parts()
		h.Weights = append(h.Weights, imageWeight{Name: pw.name, Shape: shape, Parts: list(parts)})
	}
	if screen := cmp.Or(m.lmScreen, m.dropped); screen != nil {
		floor, shape, parts := screen.ScreenParts()
		h.Screen = &imageScreen{Floor: floor, Shape: shape, Parts: list(parts)}
	}
	// The parts in the arena stay where they are; the others (small ones,
	// or packed past the arena's bound) follow its last.
	end := int64(arenaStart)
	var tail []entry
	for _, e := range entries {
		held += e.part.Size
		if off, ok := a.offset(e.b); ok {
			e.part.Offset = off
			end = max(end, off+e.part.Size)
		} else {
			tail = append(tail, e)
		}
	}
	var spans []fileSpan
	for _, e := range tail {
		end = alignUp(end, 64)
		if e.part.Size >= imageAlign {
			end = alignUp(end, imageAlign)
		}
		e.part.Offset = end
		spans = append(spans, fileSpan{e.b, end})
		end += e.part.Size
	}
	head, err := json.Marshal(h)
	if err != nil {
		return 0, err
	}
	at := alignUp(end, 64)
	size := at + int64(len(head))
	held += int64(imagePrefix + len(head))
	if err := a.f.Truncate(size); err != nil {
		return 0, err
	}
	a.trim(size)
	prefix := binary.LittleEndian.AppendUint64([]byte(imageMagic), uint64(at))
	prefix = binary.LittleEndian.AppendUint64(prefix, uint64(len(head)))
	for _, sp := range append(spans, fileSpan{prefix, 0}, fileSpan{head, at}) {
		if _, err := a.f.WriteAt(sp.b, sp.off); err != nil {
			return 0, err
		}
	}
	if err := a.f.Sync(); err != nil {
		return 0, err
	}
	if err := os.Rename(a.f.Name(), m.image.path); err != nil {
		return 0, err
	}
	imageReplace(m.image.path)
	// Nothing writes the weights from now on; and their pages, now clean,
	// the kernel could otherwise drop.
	_ = unix.Mprotect(a.mem, unix.PROT_READ)
	m.image.note = lockImage(a.mem, m.image.path)
	return held, nil
}

// fileSpan is bytes b at offset off of a file.
type fileSpan struct {
	b   []byte
	off int64
}

func alignUp(n, align int64) int64 { return (n + align - 1) / align * align }

// imageArena is a new image file, beside its path, whose shared mapping the
// load packs the weights' large buffers into (gemm.Arena): handed out in
// order from arenaStart, up to a bound on what the packing needs.
type imageArena struct {
	f    *os.File
	mem  []byte // the mapping: the file's first len(mem) bytes
	mu   sync.Mutex
	used int
}

// newImageArena creates the file of bound bytes, its blocks reserved, and
// maps it. The reservation is what makes the packing's stores through the
// mapping safe: a store the file system cannot back (no space left) is a
// SIGBUS, which kills the process, where a reservation that does not fit is
// an error the load survives. A file system without fallocate gets a sparse
// file, guarded only by the free-space check: a bound that would leave less
// than a tenth of the file system free is refused on any.
func newImageArena(path string, bound int64) (a *imageArena, err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("weights image: %w", err)
	}
	var fsst unix.Statfs_t
	if err := statfs(dir, &fsst); err != nil {
		return nil, fmt.Errorf("weights image: %w", err)
	}
	if free, total := int64(fsst.Bavail)*fsst.Bsize, int64(fsst.Blocks)*fsst.Bsize; free-bound < total/10 {
		return nil, fmt.Errorf("weights image of up to %.1f GB not written: %s would have less than a tenth of its file system free", float64(bound)/1e9, dir)
	}
	f, err := os.CreateTemp(dir, partialImage)
	if err != nil {
		return nil, fmt.Errorf("weights image: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("weights image: %w", err)
		}
	}()
	switch err := fallocate(int(f.Fd()), 0, 0, bound); {
	case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS):
		if err := f.Truncate(bound); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("reserve %.1f GB in %s: %w", float64(bound)/1e9, dir, err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(bound), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	return &imageArena{f: f, mem: mem, used: arenaStart}, nil
}

// Alloc implements gemm.Arena.
func (a *imageArena) Alloc(n int) []byte {
	align := 64
	if n >= imageAlign {
		align = imageAlign
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	off := int(alignUp(int64(a.used), int64(align)))
	if off+n > len(a.mem) {
		return nil
	}
	a.used = off + n
	return a.mem[off : off+n : off+n]
}

// offset is where b lies in the file, if it is in the arena.
func (a *imageArena) offset(b []byte) (int64, bool) { return offsetIn(a.mem[:a.used], b) }

// trim shrinks the arena's mapping, in place, to the file's size: pages
// past the end of a file fault.
func (a *imageArena) trim(size int64) {
	keep := int(alignUp(size, int64(os.Getpagesize())))
	if keep < len(a.mem) {
		if mem, err := unix.Mremap(a.mem, keep, 0); err == nil {
			a.mem = mem
		}
	}
}

// close unmaps the arena and removes its file: the load ended before
// SaveImage.
func (a *imageArena) close() error {
	err := unix.Munmap(a.mem)
	a.f.Close()
	os.Remove(a.f.Name())
	return err
}

// imageReplace removes the other images of path's checkpoint and dtype
// (another build, machine or options): a checkpoint keeps one. It also
// removes the images of checkpoints whose files are gone or changed
// (imageStale), and what writes that did not finish left in the directory
// (a process killed while writing) an hour or more ago.
func imageReplace(path string) {
	dir, base := filepath.Split(path)
	prefix := base[:strings.LastIndexByte(base, '-')+1]
	others, _ := filepath.Glob(filepath.Join(dir, "*.img"))
	for _, o := range others {
		if o != path && (strings.HasPrefix(filepath.Base(o), prefix) || imageStale(o)) {
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

// imageStale reports whether the image at path was made from checkpoint
// files that are gone or have changed since: no load will map it again. A
// file it cannot read as an image is not judged.
func imageStale(path string) bool {
	h, err := readImageHeader(path)
	if err != nil || len(h.Files) == 0 {
		return false
	}
	for _, f := range h.Files {
		st, err := os.Stat(f.Path)
		if errors.Is(err, fs.ErrNotExist) || err == nil && (st.Size() != f.Size || st.ModTime().UnixNano() != f.ModTime) {
			return true
		}
	}
	return false
}

// headerSpan is where an image's prefix says its header is.
func headerSpan(prefix []byte) (at, n uint64) {
	return binary.LittleEndian.Uint64(prefix[len(imageMagic):]), binary.LittleEndian.Uint64(prefix[len(imageMagic)+8:])
}

// readImageHeader reads the header of the image at path, whatever its key.
func readImageHeader(path string) (*imageHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	prefix := make([]byte, imagePrefix)
	if _, err := f.ReadAt(prefix, 0); err != nil || string(prefix[:len(imageMagic)]) != imageMagic {
		return nil, errors.New("not a weights image")
	}
	at, n := headerSpan(prefix)
	if n > 64<<20 {
		return nil, errors.New("not a weights image")
	}
	head := make([]byte, n)
	if _, err := f.ReadAt(head, int64(at)); err != nil {
		return nil, err
	}
	var h imageHeader
	return &h, json.Unmarshal(head, &h)
}

// The system calls whose failures an image survives, which tests replace:
// newImageArena's on a full disk, lockImage's without the right to lock.
var (
	statfs    = unix.Statfs
	fallocate = unix.Fallocate
	mlock     = unix.Mlock
)

// partialImage is the name pattern of an image being written.
const partialImage = ".writing-*.img"
