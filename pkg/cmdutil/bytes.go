package cmdutil

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// ByteLimit is a byte-limit flag (--prefix-cache-bytes,
// --prefix-cache-disk-bytes, --session-store-max-bytes). Every such flag
// takes the same values:
//
//   - a size: bytes, or a number with a unit, decimal (K, KB, M, MB, G, GB,
//     T, TB) or binary (Ki, KiB, Mi, MiB, Gi, GiB, Ti, TiB), any case:
//     "512MiB", "20GB", "1.5Gi", "1073741824";
//   - "auto", the default: a share of the memory or disk free at start-up,
//     which the flag's help names;
//   - "off" (nothing kept) or "unbounded" (no limit), where the flag takes it.
//
// The numbers 0 and -1, which meant different things on different flags
// before the words existed, keep their old meaning on the flags that had
// them.
type ByteLimit struct {
	n      int64            // engine.Options' convention: 0 = auto, -1 = off or unbounded, > 0 = bytes
	none   string           // the word for -1 on this flag: "off" or "unbounded"; "" = neither
	legacy map[string]int64 // old numeric values → n
}

// ByteLimitVar defines a byte-limit flag on fl, bound to b, defaulting to
// auto. none is the word for -1 on this flag ("off", "unbounded" or ""),
// legacy maps the flag's old numeric values onto ByteLimit's (0 = auto,
// -1 = none).
func ByteLimitVar(fl *pflag.FlagSet, b *ByteLimit, name, none string, legacy map[string]int64, usage string) {
	*b = ByteLimit{none: none, legacy: legacy}
	fl.Var(b, name, usage)
}

// Bytes is the value in engine.Options' convention: 0 = auto, negative =
// off or unbounded (the flag's none word), else bytes.
func (b *ByteLimit) Bytes() int64 { return b.n }

// Type is what pflag's help shows for the value.
func (b *ByteLimit) Type() string { return "bytes" }

func (b *ByteLimit) String() string {
	switch {
	case b == nil || b.n == 0:
		return "auto"
	case b.n < 0:
		return b.none
	}
	return strconv.FormatInt(b.n, 10)
}

var byteUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
	"ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20, "gi": 1 << 30, "gib": 1 << 30, "ti": 1 << 40, "tib": 1 << 40,
}

// Set parses a value (see ByteLimit).
func (b *ByteLimit) Set(s string) error {
	v := strings.ToLower(strings.TrimSpace(s))
	if n, ok := b.legacy[v]; ok {
		b.n = n
		return nil
	}
	switch {
	case v == "auto":
		b.n = 0
		return nil
	case v != "" && v == b.none:
		b.n = -1
		return nil
	}
	i := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(v)
	}
	num, unit := v[:i], strings.TrimSpace(v[i:])
	mult, ok := byteUnits[unit]
	f, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || num == "" {
		return fmt.Errorf("%q is not a size (e.g. 512MiB, 20GB, 1073741824)%s", s, b.words())
	}
	bytes := math.Floor(f * mult)
	switch {
	case bytes < 1:
		return fmt.Errorf("%q: a size must be at least one byte%s", s, b.words())
	case bytes >= math.MaxInt64:
		return fmt.Errorf("%q is too large", s)
	}
	b.n = int64(bytes)
	return nil
}

// words lists the words the flag takes besides sizes, for errors.
func (b *ByteLimit) words() string {
	if b.none == "" {
		return `, or "auto"`
	}
	return fmt.Sprintf(`, "auto" or %q`, b.none)
}
