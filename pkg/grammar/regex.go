package grammar

import (
	"fmt"
	"regexp/syntax"
	"unicode"
)

// A string's pattern (or format) runs as an NFA over its characters: Go's
// regexp/syntax parses and compiles it, the automaton keeps the set of
// program counters alive. The set is a fixed 128-bit value so that frames
// stay small and comparable.

// maxRegexInsts bounds a pattern's compiled program (the width of reSet).
const maxRegexInsts = 128

type reSet [2]uint64

func (s reSet) has(pc uint32) bool { return s[pc/64]&(1<<(pc%64)) != 0 }
func (s *reSet) add(pc uint32)     { s[pc/64] |= 1 << (pc % 64) }
func (s reSet) empty() bool        { return s[0]|s[1] == 0 }
func (s reSet) and(t reSet) reSet  { return reSet{s[0] & t[0], s[1] & t[1]} }

// fixpoint adds to s every state for which holds(in, s) is true, until
// none is added.
func (r *regex) fixpoint(s *reSet, holds func(in *syntax.Inst, s *reSet) bool) {
	for changed := true; changed; {
		changed = false
		for pc := range uint32(len(r.prog.Inst)) {
			if !s.has(pc) && holds(&r.prog.Inst[pc], s) {
				s.add(pc)
				changed = true
			}
		}
	}
}

func (r *regex) findLive() {
	// empty are the states that reach a match at the end of the text
	// without reading a character: after $, only they can still match.
	var empty reSet
	r.fixpoint(&empty, func(in *syntax.Inst, s *reSet) bool {
		switch in.Op {
		case syntax.InstMatch:
			return true
		case syntax.InstAlt, syntax.InstAltMatch:
			return s.has(in.Out) || s.has(in.Arg)
		case syntax.InstNop, syntax.InstCapture:
			return s.has(in.Out)
		case syntax.InstEmptyWidth:
			return syntax.EmptyOp(in.Arg)&syntax.EmptyBeginText == 0 && s.has(in.Out)
		}
		return false
	})
	r.fixpoint(&r.live, func(in *syntax.Inst, s *reSet) bool {
		switch in.Op {
		case syntax.InstMatch:
			return true
		case syntax.InstAlt, syntax.InstAltMatch:
			return s.has(in.Out) || s.has(in.Arg)
		case syntax.InstEmptyWidth:
			switch op := syntax.EmptyOp(in.Arg); {
			case op&syntax.EmptyBeginText != 0:
				return false // never true after a character
			case op&syntax.EmptyEndText != 0:
				return empty.has(in.Out)
			}
			return s.has(in.Out) // line anchors hold next to a newline
		case syntax.InstFail:
			return false
		}
		return s.has(in.Out)
	})
}

type regex struct {
	prog  *syntax.Prog
	start reSet
	// live are the states from which a match is still reachable after at
	// least one character: an unanchored pattern's leading .* stays
	// alive forever otherwise, and ^ can no longer match.
	live reSet
	// dist is, per state, the fewest characters that lead to a match.
	dist []int32
}

// compileRegex compiles a JSON Schema pattern. Patterns are unanchored as
// JSON Schema says (a match anywhere in the string); ^ and $ anchor them.
// With whole, the text must match as a whole (vLLM's guided_regex).
func compileRegex(pattern string, whole bool) (*regex, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %v", pattern, err)
	}
	if err := checkRegex(re); err != nil {
		return nil, fmt.Errorf("pattern %q: %v", pattern, err)
	}
	re = stripCaptures(re)
	if !whole {
		any := &syntax.Regexp{Op: syntax.OpStar, Sub: []*syntax.Regexp{{Op: syntax.OpAnyChar}}}
		re = &syntax.Regexp{Op: syntax.OpConcat, Sub: []*syntax.Regexp{any, re, any}}
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %v", pattern, err)
	}
	if len(prog.Inst) > maxRegexInsts {
		return nil, fmt.Errorf("pattern %q compiles to %d states: at most %d are supported", pattern, len(prog.Inst), maxRegexInsts)
	}
	r := &regex{prog: prog}
	r.findLive()
	r.findDist()
	r.closure(&r.start, uint32(prog.Start), syntax.EmptyBeginText|syntax.EmptyBeginLine)
	r.start = r.start.and(r.live)
	if r.start.empty() {
		return nil, fmt.Errorf("pattern %q matches no text", pattern)
	}
	return r, nil
}

// checkRegex rejects what the automaton does not run: word boundaries.
func checkRegex(re *syntax.Regexp) error {
	switch re.Op {
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return fmt.Errorf(`\b and \B are not supported`)
	}
	for _, s := range re.Sub {
		if err := checkRegex(s); err != nil {
			return err
		}
	}
	return nil
}

func stripCaptures(re *syntax.Regexp) *syntax.Regexp {
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	for i, s := range re.Sub {
		re.Sub[i] = stripCaptures(s)
	}
	return re
}

// closure adds pc and what it reaches without reading a character, taking
// the empty-width assertions in flags as true. Other assertions stay in the
// set, unresolved, for accepts.
func (r *regex) closure(s *reSet, pc uint32, flags syntax.EmptyOp) {
	if s.has(pc) {
		return
	}
	s.add(pc)
	in := &r.prog.Inst[pc]
	switch in.Op {
	case syntax.InstAlt, syntax.InstAltMatch:
		r.closure(s, in.Out, flags)
		r.closure(s, in.Arg, flags)
	case syntax.InstNop, syntax.InstCapture:
		r.closure(s, in.Out, flags)
	case syntax.InstEmptyWidth:
		if syntax.EmptyOp(in.Arg)&^flags == 0 {
			r.closure(s, in.Out, flags)
		}
	}
}

func (r *regex) begin() reSet { return r.start }

// step advances s past character c. Line anchors ((?m)^ and $) hold
// next to a newline.
func (r *regex) step(s reSet, c rune) reSet {
	if c == '\n' {
		var before reSet
		for pc := range uint32(len(r.prog.Inst)) {
			if s.has(pc) {
				r.closure(&before, pc, syntax.EmptyEndLine)
			}
		}
		s = before
	}
	var after syntax.EmptyOp
	if c == '\n' {
		after = syntax.EmptyBeginLine
	}
	var next reSet
	for pc := range uint32(len(r.prog.Inst)) {
		if !s.has(pc) {
			continue
		}
		in := &r.prog.Inst[pc]
		switch in.Op {
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			if in.MatchRune(c) {
				r.closure(&next, in.Out, after)
			}
		}
	}
	return next.and(r.live)
}

// readByte advances g in the NFA from state s: g's UTF-8 state and rn are
// already past the byte. At a character's last byte r steps past it;
// before, some character the bytes so far can still become must be able
// to follow (byte-level tokens split characters).
func (r *regex) readByte(s reSet, g *frame) bool {
	if g.u8 == 0 {
		g.re = r.step(s, rune(g.rn))
		return !g.re.empty()
	}
	g.re = s
	// The characters this prefix can still become, by the range of the
	// next byte.
	rest := 6 * (g.u8 - 1)
	lo := (rune(g.rn)<<6 | rune(g.u8lo&0x3F)) << rest
	hi := (rune(g.rn)<<6|rune(g.u8hi&0x3F))<<rest | (1<<rest - 1)
	return r.mayStep(s, lo, hi)
}

func (r *regex) findDist() {
	const inf = 1 << 30
	r.dist = make([]int32, len(r.prog.Inst))
	for i := range r.dist {
		r.dist[i] = inf
	}
	for changed := true; changed; {
		changed = false
		for pc := range r.prog.Inst {
			in := &r.prog.Inst[pc]
			d := int32(inf)
			switch in.Op {
			case syntax.InstMatch:
				d = 0
			case syntax.InstAlt, syntax.InstAltMatch:
				d = min(r.dist[in.Out], r.dist[in.Arg])
			case syntax.InstNop, syntax.InstCapture:
				d = r.dist[in.Out]
			case syntax.InstEmptyWidth:
				if syntax.EmptyOp(in.Arg)&syntax.EmptyBeginText == 0 {
					d = r.dist[in.Out]
				}
			case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
				d = min(r.dist[in.Out]+1, inf)
			}
			if d < r.dist[pc] {
				r.dist[pc], changed = d, true
			}
		}
	}
}

// minDist is the fewest characters after which s can match.
func (r *regex) minDist(s reSet) int32 {
	d := int32(1 << 30)
	for pc := range uint32(len(r.prog.Inst)) {
		if s.has(pc) {
			d = min(d, r.dist[pc])
		}
	}
	return d
}

// mayStep reports whether some character in [lo, hi] can follow s: a
// character split across tokens is checked by its first bytes.
func (r *regex) mayStep(s reSet, lo, hi rune) bool {
	for pc := range uint32(len(r.prog.Inst)) {
		if !s.has(pc) {
			continue
		}
		in := &r.prog.Inst[pc]
		switch in.Op {
		case syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			return true
		case syntax.InstRune1:
			if in.Rune[0] >= lo && in.Rune[0] <= hi {
				return true
			}
		case syntax.InstRune:
			if len(in.Rune) == 1 { // a literal; with (?i), its case folds
				for c := in.Rune[0]; ; {
					if c >= lo && c <= hi {
						return true
					}
					if syntax.Flags(in.Arg)&syntax.FoldCase == 0 {
						break
					}
					if c = unicode.SimpleFold(c); c == in.Rune[0] {
						break
					}
				}
				continue
			}
			for i := 0; i+1 < len(in.Rune); i += 2 {
				if in.Rune[i] <= hi && in.Rune[i+1] >= lo {
					return true
				}
			}
		}
	}
	return false
}

// accepts reports whether the text read so far matches.
func (r *regex) accepts(s reSet) bool {
	var end reSet
	for pc := range uint32(len(r.prog.Inst)) {
		if s.has(pc) {
			r.closure(&end, pc, syntax.EmptyEndText|syntax.EmptyEndLine)
		}
	}
	for pc := range uint32(len(r.prog.Inst)) {
		if end.has(pc) && r.prog.Inst[pc].Op == syntax.InstMatch {
			return true
		}
	}
	return false
}

// formats are the string formats enforced, as patterns.
var formats = map[string]string{
	"date-time": `^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`,
	"date":      `^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$`,
	"time":      `^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?$`,
	"uuid":      `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`,
	"email":     `^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$`,
	"ipv4":      `^(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}$`,
	"uri":       `^[A-Za-z][A-Za-z0-9+.-]*:[^ \t\n\r"\\<>]+$`,
	"hostname":  `^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$`,
}
