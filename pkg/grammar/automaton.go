package grammar

import "math/bits"

// The automaton's state is a set of alternative stacks (a schema's anyOf may
// not be decided by the first byte). A stack is a linked list of immutable
// frames, so that advancing by a byte shares everything below the top and a
// trie walk can branch without copying.
//
// Layout is fixed: no whitespace between JSON tokens, separators as the
// grammar's Style renders them, object keys in the schema's order. The
// automaton therefore accepts one text per value, which is what keeps a weak
// model from spending its budget on layout.

// frame is one value being read; up is what continues once it is complete.
type frame struct {
	up   *frame
	n    *node
	st   uint8
	u8   uint8 // string: UTF-8 continuation bytes still due
	u8lo byte  // string: the range of the next continuation byte
	u8hi byte
	hex  uint8  // string: hex digits still due after \u
	lo   int32  // literal: candidate range in n.lits
	hi   int32  //
	pos  int32  // literal / key / text: bytes matched; object: next property; sequence: next part
	cnt  int32  // string / text: characters read; array / repeat: items read
	rn   int32  // string with a pattern: the character being decoded
	seen uint64 // key: candidate properties
	re   reSet  // string with a pattern: NFA states
	val  int64  // bounded integer: the magnitude read so far
}

// Frame states. Every value starts at stStart; the rest are per kind.
const (
	stStart uint8 = iota
	// strings and keys
	stStrBody
	stStrEscape
	stStrHex
	// objects
	stObjOpen  // after {
	stObjValue // after the key separator
	stObjAfter // after a value
	stObjComma // after the item separator
	// arrays and repeats
	stArrOpen
	stArrAfter
	stArrComma
	// numbers
	stNumMinus  // -
	stNumZero   // leading 0 (accepting)
	stNumInt    // integer digits (accepting)
	stNumDot    // .
	stNumFrac   // fraction digits (accepting)
	stNumExp    // e
	stNumExpSgn // e+ / e-
	stNumExpDig // exponent digits (accepting)
	// literals
	stLit
	// free text up to a terminator
	stText
	// sequences: pos is the next part
	stSeq
	// plain text matched whole by a regular expression
	stRegex
)

// maxAlternatives bounds the stacks followed at once: a pathological anyOf
// is cut rather than allowed to blow up.
const maxAlternatives = 64

// step appends to out the stacks that f's stack becomes after byte c.
func (a *arena) step(f *frame, c byte, out []*frame) []*frame {
	switch f.n.kind {
	case kDone:
		return out
	case kKey:
		return a.stepKey(f, c, out)
	}
	if f.st == stStart {
		return a.start(f, c, out)
	}
	switch f.st {
	case stStrBody, stStrEscape, stStrHex:
		return a.stepString(f, c, out)
	case stObjOpen, stObjValue, stObjAfter, stObjComma:
		return a.stepObject(f, c, out)
	case stArrOpen, stArrAfter, stArrComma:
		if f.n.kind == kRepeat {
			return a.stepRepeat(f, c, out)
		}
		return a.stepArray(f, c, out)
	case stLit:
		return a.stepLiteral(f, c, out)
	case stText:
		return a.stepText(f, c, out)
	case stSeq:
		return a.stepSeq(f, c, out)
	case stRegex:
		return a.stepRegex(f, c, out)
	}
	if f.st >= stNumMinus && f.st <= stNumExpDig {
		return a.stepNumber(f, c, out)
	}
	return out
}

// start begins a value of f's schema with its first byte c.
func (a *arena) start(f *frame, c byte, out []*frame) []*frame {
	n := f.n
	if n.kind == kAny {
		switch {
		case c == '{':
			n = n.style.anyObject
		case c == '[':
			n = n.style.anyArray
		case c == '"':
			n = stringNode
		case c == '-' || isDigit(c):
			n = numberNode
		default:
			n = literalNode
		}
	}
	switch n.kind {
	case kUnion:
		for _, alt := range n.alts {
			if len(out) >= maxAlternatives {
				break
			}
			out = a.start(a.new(frame{up: f.up, n: alt}), c, out)
		}
		return out
	case kObject:
		if c == '{' {
			return append(out, a.new(frame{up: f.up, n: n, st: stObjOpen}))
		}
	case kArray:
		if c == '[' {
			return append(out, a.new(frame{up: f.up, n: n, st: stArrOpen}))
		}
	case kRepeat:
		return a.start(a.new(frame{up: a.new(frame{up: f.up, n: n, st: stArrAfter, cnt: 1}), n: n.items}), c, out)
	case kString:
		s := a.new(frame{up: f.up, n: n, st: stStrBody})
		if n.re != nil {
			s.re = n.re.begin()
		}
		if n.raw {
			return a.stepString(s, c, out)
		}
		if c == '"' {
			return append(out, s)
		}
	case kText:
		return a.stepText(a.new(frame{up: f.up, n: n, st: stText}), c, out)
	case kNumber, kInteger:
		switch {
		case c == '-' && n.minVal < 0:
			return append(out, a.new(frame{up: f.up, n: n, st: stNumMinus, hex: 1}))
		case c == '0' && n.maxVal >= 0 && n.digitOK(false, 0):
			return append(out, a.new(frame{up: f.up, n: n, st: stNumZero, cnt: 1}))
		case isDigit(c) && c != '0' && n.maxVal > 0 && n.digitOK(false, int64(c-'0')):
			return append(out, a.new(frame{up: f.up, n: n, st: stNumInt, val: int64(c - '0'), cnt: 1}))
		}
	case kLiteral:
		return a.stepLiteral(a.new(frame{up: f.up, n: n, st: stLit, hi: int32(len(n.lits))}), c, out)
	case kSeq:
		return a.start(a.new(frame{up: a.new(frame{up: f.up, n: n, st: stSeq, pos: 1}), n: n.parts[0]}), c, out)
	case kRegex:
		return a.stepRegex(a.new(frame{up: f.up, n: n, st: stRegex, re: n.re.begin()}), c, out)
	}
	return out
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || (c|0x20) >= 'a' && (c|0x20) <= 'f' }

// stepUTF8 advances f's UTF-8 state past a byte of a string's body that is
// not a quote, backslash or control character; ok is false for invalid UTF-8.
func stepUTF8(f *frame, c byte) (u8 uint8, lo, hi byte, ok bool) {
	if f.u8 > 0 {
		if c < f.u8lo || c > f.u8hi {
			return 0, 0, 0, false
		}
		return f.u8 - 1, 0x80, 0xBF, true
	}
	switch {
	case c < 0x80:
		return 0, 0, 0, true
	case c >= 0xC2 && c <= 0xDF:
		return 1, 0x80, 0xBF, true
	case c == 0xE0:
		return 2, 0xA0, 0xBF, true
	case c == 0xED:
		return 2, 0x80, 0x9F, true
	case c >= 0xE1 && c <= 0xEF:
		return 2, 0x80, 0xBF, true
	case c == 0xF0:
		return 3, 0x90, 0xBF, true
	case c >= 0xF1 && c <= 0xF3:
		return 3, 0x80, 0xBF, true
	case c == 0xF4:
		return 3, 0x80, 0x8F, true
	}
	return 0, 0, 0, false
}

// utf8Lead is the payload of a character's first byte.
func utf8Lead(c byte) int32 {
	switch {
	case c < 0x80:
		return int32(c)
	case c < 0xE0:
		return int32(c & 0x1F)
	case c < 0xF0:
		return int32(c & 0x0F)
	}
	return int32(c & 0x07)
}

// stringEnds reports whether a string frame may end here.
func stringEnds(f *frame) bool {
	n := f.n
	return f.u8 == 0 && f.cnt >= n.minLen && (n.re == nil || n.re.accepts(f.re))
}

func (a *arena) stepString(f *frame, c byte, out []*frame) []*frame {
	n := f.n
	switch f.st {
	case stStrEscape:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			return append(out, a.new(frame{up: f.up, n: n, st: stStrBody, cnt: f.cnt}))
		case 'u':
			return append(out, a.new(frame{up: f.up, n: n, st: stStrHex, hex: 4, cnt: f.cnt}))
		}
		return out
	case stStrHex:
		if !isHex(c) {
			return out
		}
		if f.hex == 1 {
			return append(out, a.new(frame{up: f.up, n: n, st: stStrBody, cnt: f.cnt}))
		}
		return append(out, a.new(frame{up: f.up, n: n, st: stStrHex, hex: f.hex - 1, cnt: f.cnt}))
	}
	if c == n.endByte() && f.u8 == 0 {
		if !stringEnds(f) {
			return out
		}
		if n.raw {
			return a.step(f.up, c, out) // the terminator belongs to what follows
		}
		return append(out, f.up)
	}
	full := n.maxLen >= 0 && f.cnt >= n.maxLen
	switch {
	case c == '\\' && !n.raw && f.u8 == 0:
		if full || n.re != nil {
			return out // a pattern's characters are matched unescaped
		}
		return append(out, a.new(frame{up: f.up, n: n, st: stStrEscape, cnt: f.cnt + 1}))
	case c < 0x20:
		return out
	case f.u8 == 0 && c < 0x80 && n.re == nil && n.maxLen < 0 && n.minLen == 0:
		return append(out, f) // the common case allocates nothing
	}
	if f.u8 == 0 && full {
		return out
	}
	u8, lo, hi, ok := stepUTF8(f, c)
	if !ok {
		return out
	}
	g := a.new(frame{up: f.up, n: n, st: stStrBody, u8: u8, u8lo: lo, u8hi: hi, cnt: f.cnt, re: f.re, rn: nextRune(f, c)})
	if f.u8 == 0 {
		g.cnt++
	}
	if n.re != nil && (!n.re.readByte(f.re, g) || g.u8 == 0 && n.maxLen >= 0 && g.cnt+n.re.minDist(g.re) > n.maxLen) {
		return out
	}
	return append(out, g)
}

// nextRune is the character (or its leading bits) being decoded once byte
// c follows f.
func nextRune(f *frame, c byte) int32 {
	if f.u8 == 0 {
		return utf8Lead(c)
	}
	return f.rn<<6 | int32(c&0x3F)
}

// stepRegex reads plain text that must match n.re as a whole (vLLM's
// guided_regex): any valid UTF-8 the expression allows, control
// characters included.
func (a *arena) stepRegex(f *frame, c byte, out []*frame) []*frame {
	u8, lo, hi, ok := stepUTF8(f, c)
	if !ok {
		return out
	}
	g := a.new(frame{up: f.up, n: f.n, st: stRegex, u8: u8, u8lo: lo, u8hi: hi, rn: nextRune(f, c)})
	if !f.n.re.readByte(f.re, g) {
		return out
	}
	return append(out, g)
}

// stepText reads free text that may not contain n.term, ending with a
// newline and n.term (both consumed): Qwen3-Coder's parameter values, which
// its parser cuts at the first "</parameter>". rn is 1 when the last text
// byte was a newline; pos counts the bytes of n.term matched; cnt counts
// the characters of text, the final newline included (so the value has
// cnt-1).
func (a *arena) stepText(f *frame, c byte, out []*frame) []*frame {
	n := f.n
	term := n.term
	// room reports whether the text can hold k characters and still end:
	// the last may be the final newline, the others count in maxLength.
	room := func(k int32, newline bool) bool {
		return n.maxLen < 0 || k <= n.maxLen || newline && k == n.maxLen+1
	}
	if c == term[f.pos] && (f.pos > 0 || f.u8 == 0) {
		if f.rn == 0 && !room(f.cnt+f.pos+1, false) {
			return out // without a newline before it this is text, and no room is left
		}
		if int(f.pos)+1 == len(term) {
			if f.rn == 0 || f.cnt-1 < n.minLen {
				return out
			}
			return append(out, f.up)
		}
		return append(out, a.new(frame{up: f.up, n: n, st: stText, pos: f.pos + 1, cnt: f.cnt, rn: f.rn}))
	}
	if f.pos == 0 && f.u8 == 0 && f.rn == 0 && c >= 0x20 && c < 0x80 && n.maxLen < 0 && n.minLen == 0 {
		return append(out, f) // the common case allocates nothing
	}
	// A partial match of n.term was text after all. n.term does not
	// overlap itself, so a new match can only start at c.
	cnt, prev := f.cnt, *f
	if f.pos > 0 {
		cnt += f.pos
		prev = frame{}
		if !room(cnt, false) {
			return out
		}
	}
	if c == term[0] && prev.u8 == 0 {
		if prev.rn == 0 && !room(cnt+1, false) {
			return out
		}
		return append(out, a.new(frame{up: f.up, n: n, st: stText, pos: 1, cnt: cnt, rn: prev.rn}))
	}
	if c < 0x20 && c != '\n' && c != '\t' {
		return out
	}
	u8, lo, hi, ok := stepUTF8(&prev, c)
	if !ok {
		return out
	}
	if prev.u8 == 0 {
		cnt++
		if !room(cnt, c == '\n') {
			return out
		}
	}
	g := a.new(frame{up: f.up, n: n, st: stText, cnt: cnt, u8: u8, u8lo: lo, u8hi: hi})
	if c == '\n' {
		g.rn = 1
	}
	return append(out, g)
}

// narrow keeps the candidates of lits[lo:hi] (which share their first pos
// bytes) whose next byte is c.
func narrow(lits []string, lo, hi, pos int32, c byte) (int32, int32) {
	nlo, nhi := hi, hi
	for i := lo; i < hi; i++ {
		if int(pos) < len(lits[i]) && lits[i][pos] == c {
			if nlo == hi {
				nlo = i
			}
			nhi = i + 1
		} else if nlo != hi {
			break
		}
	}
	if nlo == hi {
		return 0, 0
	}
	return nlo, nhi
}

// exact is the candidate of lits[lo:hi] that is exactly pos bytes long, or -1.
func exact(lits []string, lo, hi, pos int32) int32 {
	if lo < hi && len(lits[lo]) == int(pos) {
		return lo // shorter strings sort first
	}
	return -1
}

func (a *arena) stepLiteral(f *frame, c byte, out []*frame) []*frame {
	if i := exact(f.n.lits, f.lo, f.hi, f.pos); i >= 0 {
		// The literal ended before c.
		if f.n.next != nil {
			out = a.start(a.new(frame{up: f.up, n: f.n.next[i]}), c, out)
		} else {
			out = a.step(f.up, c, out)
		}
	}
	if lo, hi := narrow(f.n.lits, f.lo, f.hi, f.pos, c); lo < hi {
		out = append(out, a.new(frame{up: f.up, n: f.n, st: stLit, lo: lo, hi: hi, pos: f.pos + 1}))
	}
	return out
}

// digitOK reports whether an integer whose magnitude so far is v (negative
// when neg) can still end within the node's bounds.
func (n *node) digitOK(neg bool, v int64) bool {
	if !n.bounded {
		return true
	}
	const maxDigits = 18
	p := int64(1)
	for range maxDigits {
		lo, hi := v*p, v*p+p-1 // the magnitudes this prefix can grow into
		if neg {
			lo, hi = -hi, -lo
		}
		if hi >= n.minVal && lo <= n.maxVal {
			return true
		}
		if v*p > (1<<62)/10 || v == 0 {
			return false
		}
		p *= 10
	}
	return false
}

// inBounds reports whether a complete integer is within the node's bounds.
func (n *node) inBounds(f *frame) bool {
	if !n.bounded || n.kind != kInteger {
		return true
	}
	v := f.val
	if f.neg() {
		v = -v
	}
	return v >= n.minVal && v <= n.maxVal
}

// neg reports whether a number frame read a minus sign (kept in hex, which
// numbers do not otherwise use).
func (f *frame) neg() bool { return f.hex == 1 }

// Digits a number (not an integer: those have bounds) may have in each
// part: a model cannot stall a generation on digits, and every number the
// grammar admits is a finite float64 (below 10^(19+99), far from the 1.8·10^308
// where a client's or a parser's float would overflow: a sampled
// 6.4E344 reached the tools as a string).
const (
	maxIntDigits  = 19
	maxFracDigits = 17
	maxExpDigits  = 2
)

func (a *arena) stepNumber(f *frame, c byte, out []*frame) []*frame {
	n := f.n
	// next moves to st, with cnt digits in the current part.
	next := func(st uint8, val int64, cnt int32) []*frame {
		return append(out, a.new(frame{up: f.up, n: n, st: st, val: val, hex: f.hex, cnt: cnt}))
	}
	integer := n.kind == kInteger
	switch f.st {
	case stNumMinus:
		switch {
		case c == '0' && n.digitOK(true, 0):
			return next(stNumZero, 0, 1)
		case isDigit(c) && c != '0' && n.digitOK(true, int64(c-'0')):
			return next(stNumInt, int64(c-'0'), 1)
		}
		return out
	case stNumZero, stNumInt:
		if f.st == stNumInt && isDigit(c) {
			if integer {
				v := f.val*10 + int64(c-'0')
				if !n.digitOK(f.neg(), v) {
					return out
				}
				return next(stNumInt, v, f.cnt+1)
			}
			if f.cnt >= maxIntDigits {
				return out
			}
			return next(stNumInt, 0, f.cnt+1)
		}
		switch {
		case c == '.' && !integer:
			return next(stNumDot, 0, 0)
		case (c == 'e' || c == 'E') && !integer:
			return next(stNumExp, 0, 0)
		}
	case stNumDot:
		if isDigit(c) {
			return next(stNumFrac, 0, 1)
		}
		return out
	case stNumFrac:
		switch {
		case isDigit(c):
			if f.cnt >= maxFracDigits {
				return out
			}
			return next(stNumFrac, 0, f.cnt+1)
		case c == 'e' || c == 'E':
			return next(stNumExp, 0, 0)
		}
	case stNumExp:
		switch {
		case c == '+' || c == '-':
			return next(stNumExpSgn, 0, 0)
		case isDigit(c):
			return next(stNumExpDig, 0, 1)
		}
		return out
	case stNumExpSgn:
		if isDigit(c) {
			return next(stNumExpDig, 0, 1)
		}
		return out
	case stNumExpDig:
		if isDigit(c) {
			if f.cnt >= maxExpDigits {
				return out
			}
			return next(stNumExpDig, 0, f.cnt+1)
		}
	}
	if !numberDone(f) {
		return out
	}
	// An accepting number ends before c, which belongs to what follows.
	return a.step(f.up, c, out)
}

func numberDone(f *frame) bool {
	switch f.st {
	case stNumZero, stNumInt, stNumFrac, stNumExpDig:
		return f.n.inBounds(f)
	}
	return false
}

// keyRange is the range of properties that may come next in an object at
// property index next: the optional ones up to and including the next
// required one.
func keyRange(n *node, next int32) (lo, hi int32) {
	if next >= int32(len(n.keys)) {
		return next, next
	}
	return next, n.reqAfter[next] + 1
}

// objectMayEnd reports whether an object at property index next has seen
// every required property.
func objectMayEnd(n *node, next int32) bool {
	return next >= int32(len(n.keys)) || n.reqAfter[next] >= int32(len(n.keys))
}

func (a *arena) stepObject(f *frame, c byte, out []*frame) []*frame {
	n := f.n
	switch f.st {
	case stObjOpen, stObjComma:
		if c == '"' {
			lo, hi := keyRange(n, f.pos)
			hi = min(hi, int32(len(n.keys)))
			var cand uint64
			for i := lo; i < hi; i++ {
				cand |= 1 << i
			}
			if cand != 0 || n.additional != nil && objectMayEnd(n, f.pos) {
				return append(out, a.new(frame{up: f, n: keyNode, st: stStrBody, seen: cand, val: int64(n.allKeys)}))
			}
		}
		if c == '}' && f.st == stObjOpen && objectMayEnd(n, f.pos) {
			return append(out, f.up)
		}
	case stObjValue:
		vn := n.additional
		if f.hi >= 0 {
			vn = n.props[f.hi]
		}
		after := a.new(frame{up: f.up, n: n, st: stObjAfter, pos: f.pos})
		return a.start(a.new(frame{up: after, n: vn}), c, out)
	case stObjAfter:
		if c == ',' && (f.pos < int32(len(n.keys)) || n.additional != nil) {
			return n.style.afterComma(a, a.new(frame{up: f.up, n: n, st: stObjComma, pos: f.pos}), out)
		}
		if c == '}' && objectMayEnd(n, f.pos) {
			return append(out, f.up)
		}
	}
	return out
}

// stepKey reads an object key. seen holds the candidates among the
// declared keys (those that may come next and match the bytes so far), val
// every declared key matching so far. With additional properties, once the
// required properties are passed, any other string without escapes is a key
// too, unless it spells a declared key.
func (a *arena) stepKey(f *frame, c byte, out []*frame) []*frame {
	obj := f.up
	n := obj.n
	free := n.additional != nil && objectMayEnd(n, obj.pos)
	if f.u8 == 0 && c == '"' {
		prop, next := int32(-1), int32(len(n.keys))
		for m := uint64(f.val); m != 0; m &= m - 1 {
			if i := int32(bits.TrailingZeros64(m)); len(n.keys[i]) == int(f.pos) {
				if f.seen&(1<<i) == 0 {
					return out // a key out of order or seen before
				}
				prop, next = i, i+1
			}
		}
		if prop < 0 && !free {
			return out
		}
		return n.style.afterColon(a, a.new(frame{up: obj.up, n: n, st: stObjValue, pos: next, hi: prop}), out)
	}
	if c == '\\' || c < 0x20 {
		return out
	}
	match := func(set uint64) uint64 {
		var r uint64
		for m := set; m != 0; m &= m - 1 {
			i := bits.TrailingZeros64(m)
			if k := n.keys[i]; int(f.pos) < len(k) && k[f.pos] == c {
				r |= 1 << i
			}
		}
		return r
	}
	if f.seen == 0 && f.val == 0 && f.u8 == 0 && c < 0x80 && free {
		return append(out, f) // a free key that spells no declared one: only its text matters
	}
	g := a.new(frame{up: obj, n: keyNode, st: stStrBody, seen: match(f.seen), val: int64(match(uint64(f.val))), pos: f.pos + 1})
	if g.seen == 0 && g.val == 0 {
		g.pos = 0 // no declared key to match any more
	}
	if !free {
		if g.seen == 0 {
			return out
		}
		return append(out, g)
	}
	var ok bool
	if g.u8, g.u8lo, g.u8hi, ok = stepUTF8(f, c); !ok {
		return out
	}
	return append(out, g)
}

func (a *arena) stepArray(f *frame, c byte, out []*frame) []*frame {
	n := f.n
	switch f.st {
	case stArrOpen, stArrComma:
		if c == ']' && f.st == stArrOpen && n.minItems == 0 {
			return append(out, f.up)
		}
		if n.maxItems == 0 {
			return out
		}
		return a.start(a.new(frame{up: a.new(frame{up: f.up, n: n, st: stArrAfter, cnt: f.cnt + 1}), n: n.items}), c, out)
	case stArrAfter:
		switch {
		case c == ',' && (n.maxItems < 0 || f.cnt < n.maxItems):
			return n.style.afterComma(a, a.new(frame{up: f.up, n: n, st: stArrComma, cnt: f.cnt}), out)
		case c == ']' && f.cnt >= n.minItems:
			return append(out, f.up)
		}
	}
	return out
}

// stepRepeat reads items separated by n.sep, at most maxItems of them (a
// negative maxItems: any number).
func (a *arena) stepRepeat(f *frame, c byte, out []*frame) []*frame {
	n := f.n
	switch f.st {
	case stArrAfter:
		if f.cnt >= n.minItems {
			out = a.step(f.up, c, out)
		}
		if n.maxItems < 0 || f.cnt < n.maxItems {
			sep := a.new(frame{up: a.new(frame{up: f.up, n: n, st: stArrComma, cnt: f.cnt}), n: n.sepLit, st: stLit, hi: 1})
			out = a.stepLiteral(sep, c, out)
		}
	case stArrComma:
		return a.start(a.new(frame{up: a.new(frame{up: f.up, n: n, st: stArrAfter, cnt: f.cnt + 1}), n: n.items}), c, out)
	}
	return out
}

// stepSeq starts the next part of a sequence, or ends it.
func (a *arena) stepSeq(f *frame, c byte, out []*frame) []*frame {
	n := f.n
	if int(f.pos) == len(n.parts) {
		return a.step(f.up, c, out)
	}
	up := f.up
	if int(f.pos)+1 < len(n.parts) {
		up = a.new(frame{up: f.up, n: n, st: stSeq, pos: f.pos + 1})
	}
	return a.start(a.new(frame{up: up, n: n.parts[f.pos]}), c, out)
}

// complete reports whether a stack holds a whole document.
func complete(f *frame) bool {
	for {
		switch {
		case f.n.kind == kDone:
			return true
		case f.st == stStart: // a regex that matches the empty text
			if f.n.kind != kRegex || !f.n.re.accepts(f.n.re.begin()) {
				return false
			}
		case f.st == stRegex:
			if f.u8 != 0 || !f.n.re.accepts(f.re) {
				return false
			}
		case f.st == stLit:
			i := exact(f.n.lits, f.lo, f.hi, f.pos)
			if i < 0 || f.n.next != nil {
				return false
			}
		case f.st >= stNumMinus && f.st <= stNumExpDig:
			if !numberDone(f) {
				return false
			}
		case f.st == stArrAfter && f.n.kind == kRepeat:
			if f.cnt < f.n.minItems {
				return false
			}
		case f.st == stSeq:
			if int(f.pos) != len(f.n.parts) {
				return false
			}
		default:
			return false
		}
		f = f.up
	}
}
