// Package tune picks, at start-up, the kernel path of each operation class
// (kernels.Op) from a short measurement on this CPU, cached on disk.
//
// Which path is fastest is a property of the CPU, not of its feature flags:
// VDPBF16PS runs at twice the f32 FMA rate on AMD Zen 5 and at half of it on
// the Intel Xeon the project measured, so "AVX512_BF16 present" does not say
// whether bf16 prefill should use it or widen the weights to f32. Apply
// times each candidate path's GEMM kernels on one thread for about 100 ms in
// all (gemm.Probe), alternating them so that a change of load hits both,
// picks the faster path per operation (the higher one unless another is
// faster by Margin), and caches the rates keyed by CPU model, microcode,
// features and ellm build, so that later starts read the file instead.
// ELLM_KERNELS still forces one path for everything.
package tune

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/cpuid/v2"

	"github.com/ellm-dev/ellm/kernels"
	"github.com/ellm-dev/ellm/kernels/attn"
	"github.com/ellm-dev/ellm/kernels/gemm"
)

// Margin is how much faster (as a ratio) a lower path must measure to be
// chosen over the highest candidate: noise must not flip the choice, which
// changes results in the last bits, from one calibration to the next.
const Margin = 1.10

// Rate is one candidate's measured throughput for one operation, in
// G operations (2 per multiply-add) per CPU second on one thread.
type Rate struct {
	Op   string  `json:"op"`
	Path string  `json:"path"`
	Rate float64 `json:"gops"`
}

// Key identifies what the rates depend on; a cached calibration is used
// only under the same key.
type Key struct {
	CPU       string `json:"cpu"`
	Family    int    `json:"family"`
	Model     int    `json:"model"`
	Stepping  int    `json:"stepping"`
	Microcode string `json:"microcode"`
	Features  string `json:"features"`
	Build     string `json:"build"`
}

// Calibration is what the cache file holds.
type Calibration struct {
	Key      Key           `json:"key"`
	Rates    []Rate        `json:"rates"`
	Measured time.Time     `json:"measured"`
	Took     time.Duration `json:"took_ns"`
}

// rate looks up op's rate on path p (0 when not measured).
func (c *Calibration) rate(op kernels.Op, p kernels.Path) float64 {
	for _, r := range c.Rates {
		if r.Op == op.String() && r.Path == p.String() {
			return r.Rate
		}
	}
	return 0
}

// Choice is the path one operation takes and why.
type Choice struct {
	Op   kernels.Op   `json:"-"`
	Path kernels.Path `json:"-"`
	Why  string       `json:"why"`
}

// MarshalJSON spells the op and path by name.
func (c Choice) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Op   string `json:"op"`
		Path string `json:"path"`
		Why  string `json:"why"`
	}{c.Op.String(), c.Path.String(), c.Why})
}

// Result is what Apply decided.
type Result struct {
	Choices []Choice `json:"choices"`
	// Source is where the choice came from: "measured", "cache",
	// "ELLM_KERNELS", or "one path" (nothing to choose on this CPU).
	Source      string       `json:"source"`
	CacheFile   string       `json:"cache_file,omitempty"`
	Calibration *Calibration `json:"calibration,omitempty"`
	// Note says what went wrong with the cache (the choice stands).
	Note string `json:"note,omitempty"`
}

// Candidates are the paths op may take when the kernels' path is active,
// best first: the bf16 path and the f32 path below it on a CPU with
// AVX512_BF16, and for the products the AMX path above them where the tiles
// are usable (attention has no AMX kernels), else active alone. Int8
// products leave out the f32 path: a CPU with the bf16 path has
// AVX512_VNNI, so both paths run the same VPDPBUSD kernels.
func Candidates(op kernels.Op, active kernels.Path) []kernels.Path {
	var c []kernels.Path
	switch {
	case active == kernels.AMX && op != kernels.Attention:
		c = []kernels.Path{kernels.AMX, kernels.AVX512BF16, kernels.AVX512}
	case active.RoundsToBF16():
		c = []kernels.Path{kernels.AVX512BF16, kernels.AVX512}
	default:
		return []kernels.Path{active}
	}
	if op == kernels.MatMulInt8 {
		c = c[:len(c)-1]
	}
	return c
}

// Pick chooses among candidates (best first) from their measured rates:
// the first unless a later one is faster than it by Margin, and then the
// fastest. A candidate without a rate is never picked over the first.
func Pick(op kernels.Op, cands []kernels.Path, rate func(kernels.Path) float64) Choice {
	first := cands[0]
	if len(cands) == 1 {
		return Choice{op, first, "no other path to measure it against"}
	}
	best := first
	for _, p := range cands[1:] {
		if r := rate(p); r > rate(first)*Margin && r > rate(best) {
			best = p
		}
	}
	unit := "GFLOP/s"
	if op == kernels.MatMulInt8 {
		unit = "GOP/s"
	}
	var parts []string
	for _, p := range cands {
		parts = append(parts, fmt.Sprintf("%s %.1f", p, rate(p)))
	}
	return Choice{op, best, fmt.Sprintf("measured %s %s per thread", strings.Join(parts, " vs "), unit)}
}

// Options configure Apply; zero values take the defaults.
type Options struct {
	// Version is ellm's build version (part of the cache key).
	Version string
	// CacheFile is where the calibration is kept ("" = DefaultCacheFile).
	CacheFile string
	// Recalibrate measures even when the cache is valid (and rewrites it).
	Recalibrate bool
	// Budget is the CPU time the measurement may take in all (default 100 ms).
	Budget time.Duration
	// Attention overrides the measured choice of attention over a bf16 KV
	// cache (kernels.Attention): "" or "auto" keeps it, "f32" or "bf16"
	// (attn.Mode) sets it; bf16 needs AVX512_BF16.
	Attention string
	// Key and Measure replace this machine's key and measurement in tests.
	Key     *Key
	Measure func(budget time.Duration, cands map[kernels.Op][]kernels.Path) []Rate
}

// Apply decides each operation's path (cache, else a measurement), sets it
// with kernels.Choose and says what it did. Kernels created afterwards
// (gemm.NewContext) take the chosen paths.
func Apply(o Options) (*Result, error) {
	r, err := apply(o)
	if err != nil || o.Attention == "" || o.Attention == "auto" {
		return r, err
	}
	p, err := ChooseAttention(o.Attention)
	if err != nil {
		return nil, err
	}
	for i := range r.Choices {
		if r.Choices[i].Op == kernels.Attention {
			r.Choices[i].Path, r.Choices[i].Why = p, "set to "+o.Attention+" (--attention-kernel)"
		}
	}
	return r, nil
}

// ChooseAttention sets the attention over a bf16 KV cache to mode ("f32"
// or "bf16", attn.Mode) for the Attentions built from now on, and returns
// the path it chose for kernels.Attention: avx512bf16 for bf16, the active
// path (at most avx512) for f32.
func ChooseAttention(mode string) (kernels.Path, error) {
	m, err := attn.ParseMode(mode)
	if err != nil {
		return 0, err
	}
	p := min(kernels.Active(), kernels.AVX512)
	if m == attn.ModeBF16 {
		p = kernels.AVX512BF16
	}
	if err := kernels.Choose(kernels.Attention, p); err != nil {
		return 0, fmt.Errorf("attention kernel %s: %w", mode, err)
	}
	return p, nil
}

func apply(o Options) (*Result, error) {
	active := kernels.Active()
	r := &Result{}
	if kernels.Forced() {
		r.Source = kernels.EnvVar
		for op := range kernels.NumOps {
			r.Choices = append(r.Choices, Choice{op, active, fmt.Sprintf("%s=%s", kernels.EnvVar, active)})
		}
		return r, nil
	}
	cands := map[kernels.Op][]kernels.Path{}
	choice := false
	for op := range kernels.NumOps {
		cands[op] = Candidates(op, active)
		choice = choice || len(cands[op]) > 1
	}
	if !choice {
		r.Source = "one path"
		for op := range kernels.NumOps {
			r.Choices = append(r.Choices, Pick(op, cands[op], nil))
		}
		return r, nil
	}
	if o.Budget <= 0 {
		o.Budget = 100 * time.Millisecond
	}
	if o.Measure == nil {
		o.Measure = Measure
	}
	key := o.Key
	if key == nil {
		k := MachineKey(o.Version)
		key = &k
	}
	r.CacheFile = o.CacheFile
	if r.CacheFile == "" {
		f, err := DefaultCacheFile(*key)
		if err != nil {
			r.Note = err.Error()
		}
		r.CacheFile = f
	}
	var cal *Calibration
	if r.CacheFile != "" && !o.Recalibrate {
		c, err := Load(r.CacheFile, *key)
		switch {
		case err == nil && covers(c, cands):
			cal, r.Source = c, "cache"
		case err == nil:
			r.Note = "cached calibration lacks a candidate: measured again"
		case errors.Is(err, ErrStale):
			// Another build, microcode or CPU: what every upgrade does, not a
			// fault to warn about; Source says it was measured.
		case !errors.Is(err, os.ErrNotExist):
			r.Note = err.Error() + ": measured again"
		}
	}
	if cal == nil {
		start := time.Now()
		cal = &Calibration{Key: *key, Rates: o.Measure(o.Budget, cands), Measured: time.Now().UTC()}
		cal.Took = time.Since(start)
		r.Source = "measured"
		if r.CacheFile != "" {
			if err := Save(r.CacheFile, cal); err != nil {
				r.Note = err.Error()
			}
		}
	}
	r.Calibration = cal
	for op := range kernels.NumOps {
		c := Pick(op, cands[op], func(p kernels.Path) float64 { return cal.rate(op, p) })
		if err := kernels.Choose(op, c.Path); err != nil {
			return nil, err
		}
		r.Choices = append(r.Choices, c)
	}
	return r, nil
}

func covers(c *Calibration, cands map[kernels.Op][]kernels.Path) bool {
	for op, ps := range cands {
		for _, p := range ps {
			if len(ps) > 1 && !(c.rate(op, p) > 0) {
				return false
			}
		}
	}
	return true
}

// Measure times every candidate of every operation with more than one, in
// rounds that alternate them, and keeps each one's best rate: the budget is
// shared out over 3 rounds.
func Measure(budget time.Duration, cands map[kernels.Op][]kernels.Path) []Rate {
	type probe struct {
		op   kernels.Op
		path kernels.Path
		p    *gemm.Probe
		best float64
	}
	var probes []*probe
	for op := range kernels.NumOps {
		if len(cands[op]) < 2 || op == kernels.Attention {
			continue
		}
		for _, p := range cands[op] {
			probes = append(probes, &probe{op: op, path: p, p: gemm.NewProbe(p, op == kernels.MatMulInt8)})
		}
	}
	const rounds = 3
	slice := budget / time.Duration(max(1, rounds*len(probes)))
	for range rounds {
		for _, pr := range probes {
			pr.best = max(pr.best, pr.p.Measure(slice))
		}
	}
	rates := make([]Rate, 0, len(probes))
	for _, pr := range probes {
		pr.p.Close()
		rates = append(rates, Rate{Op: pr.op.String(), Path: pr.path.String(), Rate: pr.best})
		// Attention's two modes are the same contest as the bf16 products'
		// two paths, VDPBF16PS against f32 FMA on cache-resident bf16 data,
		// so they take those rates rather than another 100 ms of probing.
		if pr.op == kernels.MatMulBF16 && len(cands[kernels.Attention]) > 1 && slices.Contains(cands[kernels.Attention], pr.path) {
			rates = append(rates, Rate{Op: kernels.Attention.String(), Path: pr.path.String(), Rate: pr.best})
		}
	}
	return rates
}

// MachineKey is this machine's key for a build of version version.
func MachineKey(version string) Key {
	c := cpuid.CPU
	return Key{
		CPU: strings.TrimSpace(c.BrandName), Family: c.Family, Model: c.Model, Stepping: c.Stepping,
		Microcode: microcode("/proc/cpuinfo"), Features: fmt.Sprintf("%+v", kernels.CPU()), Build: build(version),
	}
}

// microcode is the first "microcode" line of /proc/cpuinfo ("" if none):
// a microcode update can change an instruction's throughput.
func microcode(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "microcode" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// build names this build: the version, the VCS revision, and for a
// development build (no version, or modified sources) the executable's size
// and time, so that rebuilding with changed kernels measures again.
func build(version string) string {
	s := version
	dev := version == "" || version == "dev" || strings.HasSuffix(version, "-dirty")
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, kv := range bi.Settings {
			switch {
			case kv.Key == "vcs.revision":
				s += " " + kv.Value
			case kv.Key == "vcs.modified" && kv.Value == "true":
				dev = true
			}
		}
	}
	if dev {
		if exe, err := os.Executable(); err == nil {
			if st, err := os.Stat(exe); err == nil {
				s += fmt.Sprintf(" exe %d@%d", st.Size(), st.ModTime().UnixNano())
			}
		}
	}
	return s
}

// DefaultCacheFile is <user cache dir>/ellm/kernels-<cpu>.json, one file
// per CPU identity, so that a home directory shared by different machines
// keeps one calibration for each.
func DefaultCacheFile(k Key) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("kernel calibration cache: %w", err)
	}
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%d|%d|%d|%s", k.CPU, k.Family, k.Model, k.Stepping, k.Features)))
	return filepath.Join(dir, "ellm", "kernels-"+hex.EncodeToString(h[:6])+".json"), nil
}

// ErrStale is returned by Load for a calibration made under another key.
var ErrStale = errors.New("calibration is stale")

// Load reads a calibration saved under key: os.ErrNotExist if there is
// none, ErrStale if the key differs (another microcode, build…), another
// error if the file is unreadable.
func Load(file string, key Key) (*Calibration, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var c Calibration
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("kernel calibration %s: %w", file, err)
	}
	if c.Key != key {
		return nil, fmt.Errorf("kernel calibration %s: %w (made for %+v)", file, ErrStale, c.Key)
	}
	return &c, nil
}

// Save writes c to file atomically (a temporary file renamed over it), so
// that processes starting together never read half a file.
func Save(file string, c *Calibration) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("kernel calibration: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".kernels-*.tmp")
	if err != nil {
		return fmt.Errorf("kernel calibration: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("kernel calibration: %w", err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("kernel calibration: %w", err)
	}
	return nil
}
