package gemm

import (
	"errors"
	"fmt"
	"unsafe"
)

// Shape is what a packed weight is besides its buffers (Parts): enough for
// Restore to rebuild it from buffers stored elsewhere, such as a file of
// prepared weights mapped by a later load.
type Shape struct {
	N, K    int
	Kind    string // "bf16", "f32" or "int8"
	FewRows bool   `json:",omitempty"`
	// Lut is the coded copy's table (codedPairs.lut); empty without one.
	Lut []byte `json:",omitempty"`
}

// Part is one of a packed weight's buffers, by name.
type Part struct {
	Name  string
	Bytes []byte
}

var kindNames = [...]string{kindBF16: "bf16", kindF32: "f32", kindInt8: "int8"}

// Parts is w's shape and its buffers as bytes, as Restore takes them back.
// The bytes are w's own: they must not be written.
func (w *Weight) Parts() (Shape, []Part) {
	s := Shape{N: w.N, K: w.K, Kind: kindNames[w.kind], FewRows: w.fewRows}
	var parts []Part
	switch w.kind {
	case kindBF16:
		parts = append(parts, Part{"pairs", asBytes(w.pairs)})
	case kindF32:
		parts = append(parts, Part{"f32", asBytes(w.f32)})
	case kindInt8:
		parts = append(parts, Part{"quads", asBytes(w.quads)}, Part{"scale", asBytes(w.scale)}, Part{"corr", asBytes(w.corr)})
	}
	if c := w.coded; c != nil {
		s.Lut = c.lut[:]
		parts = append(parts, Part{"coded.blocks", asBytes(c.blocks)}, Part{"coded.flags", c.flags})
	}
	return s, parts
}

// Restore rebuilds a weight from its shape and buffers (Parts), which it
// uses in place: they must stay mapped, unwritten, as long as the weight is
// used, and start on 4-byte boundaries. A buffer missing or of the wrong
// size for the shape is an error.
func Restore(s Shape, parts map[string][]byte) (*Weight, error) {
	if s.N < 1 || s.K < 1 {
		return nil, fmt.Errorf("restore weight: shape %d×%d", s.N, s.K)
	}
	w := &Weight{N: s.N, K: s.K, panels: ceilDiv(s.N, panelWidth), fewRows: s.FewRows}
	var errs []error
	take := func(name string, elems int) []byte {
		b, err := part(parts, name, 4*elems)
		errs = append(errs, err)
		return b
	}
	switch s.Kind {
	case "bf16":
		w.kind, w.steps = kindBF16, ceilDiv(s.K, 2)
		w.pairs = fromBytes[uint32](take("pairs", w.panels*w.steps*panelWidth))
	case "f32":
		w.kind, w.steps = kindF32, s.K
		w.f32 = fromBytes[float32](take("f32", w.panels*w.steps*panelWidth))
	case "int8":
		w.kind, w.steps = kindInt8, ceilDiv(s.K, 4)
		w.quads = fromBytes[uint32](take("quads", w.panels*w.steps*panelWidth))
		w.scale = fromBytes[float32](take("scale", w.panels*panelWidth))
		w.corr = fromBytes[int32](take("corr", w.panels*panelWidth))
	default:
		return nil, fmt.Errorf("restore weight: kind %q", s.Kind)
	}
	if len(s.Lut) > 0 {
		if !w.Codable() || len(s.Lut) != len(codedPairs{}.lut) {
			return nil, fmt.Errorf("restore %d×%d %s weight: a coded copy with a %d-byte table", s.N, s.K, s.Kind, len(s.Lut))
		}
		tsteps := w.steps / amxSteps
		blocks := w.panels * tsteps
		c := &codedPairs{panels: w.panels, tsteps: tsteps}
		copy(c.lut[:], s.Lut)
		c.blocks = fromBytes[uint32](take("coded.blocks", blocks*codedBlock/4))
		flags, err := part(parts, "coded.flags", 2*blocks)
		c.flags = flags
		errs = append(errs, err)
		w.coded = c
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("restore %d×%d %s weight: %w", s.N, s.K, s.Kind, err)
	}
	return w, nil
}

// part is buffer name of parts, which must hold size bytes and start on a
// 4-byte boundary.
func part(parts map[string][]byte, name string, size int) ([]byte, error) {
	b, ok := parts[name]
	switch {
	case !ok:
		return nil, fmt.Errorf("no %s", name)
	case len(b) != size:
		return nil, fmt.Errorf("%s has %d bytes, want %d", name, len(b), size)
	case uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4 != 0:
		return nil, fmt.Errorf("%s is not 4-byte aligned", name)
	}
	return b, nil
}

// ScreenParts is s's int8 weight (Parts) and its factors, as RestoreScreen
// takes them back.
func (s *Screen) ScreenParts() (floor float32, shape Shape, parts []Part) {
	shape, parts = s.q.Parts()
	return s.floor, shape, append(parts, Part{"byNorm1", asBytes(s.byNorm1)}, Part{"byNorm2", asBytes(s.byNorm2)})
}

// RestoreScreen rebuilds a screen from ScreenParts, in place as Restore.
func RestoreScreen(floor float32, shape Shape, parts map[string][]byte) (*Screen, error) {
	if shape.Kind != "int8" {
		return nil, fmt.Errorf("restore screen: a %s weight", shape.Kind)
	}
	q, err := Restore(shape, parts)
	if err != nil {
		return nil, fmt.Errorf("restore screen: %w", err)
	}
	s := &Screen{q: q, floor: floor}
	for _, f := range []struct {
		name string
		dst  *[]float32
	}{{"byNorm1", &s.byNorm1}, {"byNorm2", &s.byNorm2}} {
		b, err := part(parts, f.name, 4*shape.N)
		if err != nil {
			return nil, fmt.Errorf("restore screen: %w", err)
		}
		*f.dst = fromBytes[float32](b)
	}
	return s, nil
}

func asBytes[T uint32 | float32 | int32](s []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
}

func fromBytes[T uint32 | float32 | int32](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}
