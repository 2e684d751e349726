package grammar

// The automaton's state is a set of alternative stacks (a schema's anyOf may
// not be decided by the first byte). A stack is a linked list of immutable
// frames, so that advancing by a byte shares everything below the top and a
// trie walk can branch without copying.

// frame is one value being read; up is what continues once it is complete.
type frame struct {
	up   *frame
	n    *node
	st   uint8
	u8   uint8 // string: UTF-8 continuation bytes still due
	u8lo byte  // string: the range of the next continuation byte
	u8hi byte
	hex  uint8  // string: hex digits still due after \u
	lo   int32  // literal / key: candidate range in n.lits or the object's keys
	hi   int32  //
	pos  int32  // literal / key: bytes matched
	prop int32  // object: the property whose value comes next, -1 = additional
	seen uint64 // object: properties seen
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
	stObjColon // after a key
	stObjValue // after :
	stObjAfter // after a value
	stObjComma // after ,
	// arrays
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
)

// maxAlternatives bounds the stacks followed at once: a pathological anyOf
// is cut rather than allowed to blow up.
const maxAlternatives = 64

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

// step appends to out the stacks that f's stack becomes after byte c.
func step(f *frame, c byte, out []*frame) []*frame {
	switch f.n.kind {
	case kDone:
		return out
	case kKey:
		return stepKey(f, c, out)
	}
	if f.st == stStart {
		if isSpace(c) {
			return append(out, f)
		}
		return start(f, c, out)
	}
	switch f.n.kind {
	case kString, kAny:
		if f.st >= stStrBody && f.st <= stStrHex {
			return stepString(f, c, out)
		}
	}
	switch {
	case f.st >= stObjOpen && f.st <= stObjComma:
		return stepObject(f, c, out)
	case f.st >= stArrOpen && f.st <= stArrComma:
		return stepArray(f, c, out)
	case f.st >= stNumMinus && f.st <= stNumExpDig:
		return stepNumber(f, c, out)
	case f.st == stLit:
		return stepLiteral(f, c, out)
	}
	return out
}

// start begins a value of f's schema with its first byte c (not a space).
func start(f *frame, c byte, out []*frame) []*frame {
	n := f.n
	if n.kind == kAny {
		switch {
		case c == '{':
			n = anyObject
		case c == '[':
			n = anyArray
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
			out = start(&frame{up: f.up, n: alt}, c, out)
		}
		return out
	case kObject:
		if c == '{' {
			return append(out, &frame{up: f.up, n: n, st: stObjOpen})
		}
	case kArray:
		if c == '[' {
			return append(out, &frame{up: f.up, n: n, st: stArrOpen})
		}
	case kString:
		if c == '"' {
			return append(out, &frame{up: f.up, n: n, st: stStrBody})
		}
	case kNumber, kInteger:
		switch {
		case c == '-':
			return append(out, &frame{up: f.up, n: n, st: stNumMinus})
		case c == '0':
			return append(out, &frame{up: f.up, n: n, st: stNumZero})
		case isDigit(c):
			return append(out, &frame{up: f.up, n: n, st: stNumInt})
		}
	case kLiteral:
		return stepLiteral(&frame{up: f.up, n: n, st: stLit, hi: int32(len(n.lits))}, c, out)
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

func stepString(f *frame, c byte, out []*frame) []*frame {
	switch f.st {
	case stStrEscape:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			return append(out, &frame{up: f.up, n: f.n, st: stStrBody})
		case 'u':
			return append(out, &frame{up: f.up, n: f.n, st: stStrHex, hex: 4})
		}
		return out
	case stStrHex:
		if !isHex(c) {
			return out
		}
		if f.hex == 1 {
			return append(out, &frame{up: f.up, n: f.n, st: stStrBody})
		}
		return append(out, &frame{up: f.up, n: f.n, st: stStrHex, hex: f.hex - 1})
	}
	switch {
	case f.u8 == 0 && c == '"':
		return append(out, f.up)
	case f.u8 == 0 && c == '\\':
		return append(out, &frame{up: f.up, n: f.n, st: stStrEscape})
	case c < 0x20:
		return out
	case f.u8 == 0 && c < 0x80:
		return append(out, f) // the common case allocates nothing
	}
	u8, lo, hi, ok := stepUTF8(f, c)
	if !ok {
		return out
	}
	return append(out, &frame{up: f.up, n: f.n, st: stStrBody, u8: u8, u8lo: lo, u8hi: hi})
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

func stepLiteral(f *frame, c byte, out []*frame) []*frame {
	if exact(f.n.lits, f.lo, f.hi, f.pos) >= 0 {
		out = step(f.up, c, out) // the literal ended before c
	}
	if lo, hi := narrow(f.n.lits, f.lo, f.hi, f.pos, c); lo < hi {
		out = append(out, &frame{up: f.up, n: f.n, st: stLit, lo: lo, hi: hi, pos: f.pos + 1})
	}
	return out
}

// literalDone reports whether a literal frame has matched a whole candidate.
func literalDone(f *frame) bool { return exact(f.n.lits, f.lo, f.hi, f.pos) >= 0 }

func stepNumber(f *frame, c byte, out []*frame) []*frame {
	next := func(st uint8) []*frame { return append(out, &frame{up: f.up, n: f.n, st: st}) }
	integer := f.n.kind == kInteger
	switch f.st {
	case stNumMinus:
		switch {
		case c == '0':
			return next(stNumZero)
		case isDigit(c):
			return next(stNumInt)
		}
		return out
	case stNumZero, stNumInt:
		switch {
		case f.st == stNumInt && isDigit(c):
			return append(out, f)
		case c == '.' && !integer:
			return next(stNumDot)
		case (c == 'e' || c == 'E') && !integer:
			return next(stNumExp)
		}
	case stNumDot:
		if isDigit(c) {
			return next(stNumFrac)
		}
		return out
	case stNumFrac:
		switch {
		case isDigit(c):
			return append(out, f)
		case c == 'e' || c == 'E':
			return next(stNumExp)
		}
	case stNumExp:
		switch {
		case c == '+' || c == '-':
			return next(stNumExpSgn)
		case isDigit(c):
			return next(stNumExpDig)
		}
		return out
	case stNumExpSgn:
		if isDigit(c) {
			return next(stNumExpDig)
		}
		return out
	case stNumExpDig:
		if isDigit(c) {
			return append(out, f)
		}
	}
	// An accepting number ends before c, which belongs to what follows.
	return step(f.up, c, out)
}

func numberDone(f *frame) bool {
	switch f.st {
	case stNumZero, stNumInt, stNumFrac, stNumExpDig:
		return true
	}
	return false
}

// moreKeys reports whether an object may take another key.
func moreKeys(n *node, seen uint64) bool {
	return n.additional != nil || seen != 1<<len(n.keys)-1
}

func stepObject(f *frame, c byte, out []*frame) []*frame {
	if isSpace(c) {
		return append(out, f)
	}
	n := f.n
	switch f.st {
	case stObjOpen, stObjComma:
		if c == '"' && moreKeys(n, f.seen) {
			return append(out, &frame{up: f, n: keyNode, st: stStrBody, hi: int32(len(n.keys))})
		}
		if c == '}' && f.st == stObjOpen && f.seen&n.required == n.required {
			return append(out, f.up)
		}
	case stObjColon:
		if c == ':' {
			return append(out, &frame{up: f.up, n: n, st: stObjValue, seen: f.seen, prop: f.prop})
		}
	case stObjValue:
		vn := n.additional
		if f.prop >= 0 {
			vn = n.props[f.prop]
		}
		after := &frame{up: f.up, n: n, st: stObjAfter, seen: f.seen}
		return start(&frame{up: after, n: vn}, c, out)
	case stObjAfter:
		if c == ',' && moreKeys(n, f.seen) {
			return append(out, &frame{up: f.up, n: n, st: stObjComma, seen: f.seen})
		}
		if c == '}' && f.seen&n.required == n.required {
			return append(out, f.up)
		}
	}
	return out
}

// unseenIn reports whether keys[lo:hi] holds a key not yet seen.
func unseenIn(seen uint64, lo, hi int32) bool {
	for i := lo; i < hi; i++ {
		if seen&(1<<i) == 0 {
			return true
		}
	}
	return false
}

// stepKey reads an object key. Known keys are matched byte by byte; with
// additional properties any string without escapes is a key too.
func stepKey(f *frame, c byte, out []*frame) []*frame {
	obj := f.up
	n := obj.n
	if f.u8 == 0 && c == '"' {
		prop := int32(-1)
		if i := exact(n.keys, f.lo, f.hi, f.pos); i >= 0 {
			if obj.seen&(1<<i) != 0 {
				return out // a duplicate key
			}
			prop = i
		} else if n.additional == nil {
			return out
		}
		seen := obj.seen
		if prop >= 0 {
			seen |= 1 << prop
		}
		return append(out, &frame{up: obj.up, n: n, st: stObjColon, seen: seen, prop: prop})
	}
	if c == '\\' || c < 0x20 {
		return out
	}
	lo, hi := narrow(n.keys, f.lo, f.hi, f.pos, c)
	if n.additional == nil {
		if lo == hi || !unseenIn(obj.seen, lo, hi) {
			return out
		}
		return append(out, &frame{up: obj, n: keyNode, st: stStrBody, lo: lo, hi: hi, pos: f.pos + 1})
	}
	u8, ulo, uhi, ok := stepUTF8(f, c)
	if !ok {
		return out
	}
	return append(out, &frame{up: obj, n: keyNode, st: stStrBody, lo: lo, hi: hi, pos: f.pos + 1, u8: u8, u8lo: ulo, u8hi: uhi})
}

// complete reports whether a stack holds a whole document.
func complete(f *frame) bool {
	for {
		switch {
		case f.n.kind == kDone:
			return true
		case f.st == stLit && literalDone(f), f.st >= stNumMinus && f.st <= stNumExpDig && numberDone(f):
			f = f.up
		default:
			return false
		}
	}
}

func stepArray(f *frame, c byte, out []*frame) []*frame {
	if isSpace(c) {
		return append(out, f)
	}
	switch f.st {
	case stArrOpen, stArrComma:
		if c == ']' && f.st == stArrOpen {
			return append(out, f.up)
		}
		return start(&frame{up: &frame{up: f.up, n: f.n, st: stArrAfter}, n: f.n.items}, c, out)
	case stArrAfter:
		switch c {
		case ',':
			return append(out, &frame{up: f.up, n: f.n, st: stArrComma})
		case ']':
			return append(out, f.up)
		}
	}
	return out
}
