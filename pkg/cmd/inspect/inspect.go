// Package inspect implements `ellm inspect-weights`: a checkpoint's tensors,
// their totals by role, and a check against the architecture its config.json
// describes.
package inspect

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/safetensors"
)

// Options are the inputs of `ellm inspect-weights`.
type Options struct {
	IO        cmdutil.IOStreams
	ModelPath string
	Filter    string
	JSON      bool
}

// NewCmdInspectWeights returns the cobra command; runF replaces the behaviour in tests.
func NewCmdInspectWeights(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "inspect-weights",
		Short: "List a checkpoint's tensors and check them against the architecture",
		Long: `List every tensor of a safetensors checkpoint (name, dtype, shape, bytes,
shard), total them by kind (embedding, attention, dense MLP, experts, router,
norms, lm_head), and check them against the tensors the architecture in
config.json needs: missing, unexpected, wrong shape or unsupported dtype.
The exit status is 1 when the check finds a problem.

--filter narrows the listing only; the totals and the check always cover
the whole checkpoint.`,
		Example: `  ellm inspect-weights --model-path ./Qwen3-0.6B
  ellm inspect-weights --model-path ./Qwen3-30B-A3B --filter 'layers\.0\.mlp\.(gate|experts\.0\.)'
  ellm inspect-weights --model-path ./model.safetensors --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return inspectRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.ModelPath, "model-path", "", "model directory, .safetensors file or model.safetensors.index.json")
	cmd.Flags().StringVar(&opts.Filter, "filter", "", "list only tensors whose name matches this regular expression")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the report as JSON")
	return cmd
}

// supportedDTypes are the weight dtypes the model loader binds.
var supportedDTypes = map[safetensors.DType]bool{safetensors.BF16: true, safetensors.F32: true}

// Tensor is one listed tensor.
type Tensor struct {
	Name  string            `json:"name"`
	DType safetensors.DType `json:"dtype"`
	Shape []int             `json:"shape"`
	Bytes int64             `json:"bytes"`
	Shard string            `json:"shard"`
	Kind  string            `json:"kind"`
}

// KindTotal sums the tensors of one kind.
type KindTotal struct {
	Kind    string `json:"kind"`
	Tensors int    `json:"tensors"`
	Params  int64  `json:"params"`
	Bytes   int64  `json:"bytes"`
}

// Problem is one disagreement between the checkpoint and the architecture.
type Problem struct {
	Tensor  string `json:"tensor"`
	Problem string `json:"problem"`
}

// Report is the JSON form of the output.
type Report struct {
	ModelPath    string      `json:"model_path"`
	Architecture string      `json:"architecture,omitempty"`
	Model        string      `json:"model,omitempty"`
	Shards       []string    `json:"shards"`
	Tensors      []Tensor    `json:"tensors"`
	Summary      []KindTotal `json:"summary"`
	Total        KindTotal   `json:"total"`
	// Checked is false when there is no config.json to check against.
	Checked  bool      `json:"checked"`
	Problems []Problem `json:"problems"`
	Notes    []string  `json:"notes,omitempty"`
	OK       bool      `json:"ok"`
}

func inspectRun(opts *Options) error {
	if opts.ModelPath == "" {
		return errors.New("--model-path is required")
	}
	var filter *regexp.Regexp
	if opts.Filter != "" {
		re, err := regexp.Compile(opts.Filter)
		if err != nil {
			return fmt.Errorf("--filter: %w", err)
		}
		filter = re
	}
	r, err := buildReport(opts.ModelPath, filter)
	if err != nil {
		return err
	}
	return cmdutil.WriteReport(opts.IO.Out, r, opts.JSON, printReport, r.OK)
}

// configDir is where config.json lives for a model path that may be a file.
func configDir(path string) string {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return path
	}
	return filepath.Dir(path)
}

func buildReport(path string, filter *regexp.Regexp) (*Report, error) {
	ck, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", path, err)
	}
	defer ck.Close()
	r := &Report{ModelPath: path, Problems: []Problem{}, Tensors: []Tensor{}}
	for _, f := range ck.Files() {
		r.Shards = append(r.Shards, filepath.Base(f.Path))
	}

	var specs []modelcfg.TensorSpec
	ignoredLMHead := false
	dir := configDir(path)
	if _, statErr := os.Stat(filepath.Join(dir, "config.json")); statErr == nil {
		cfg, err := modelcfg.Load(dir)
		if err != nil {
			return nil, fmt.Errorf("inspect %s: %w", path, err)
		}
		r.Checked, r.Architecture, r.Model = true, cfg.Architecture(), cfg.Name()
		specs = cfg.Tensors()
		if cfg.TieWordEmbeddings {
			if _, ok := ck.Tensor("lm_head.weight"); ok {
				ignoredLMHead = true
				r.Notes = append(r.Notes, "lm_head.weight is present but tie_word_embeddings is true: it is ignored")
			}
		}
	} else {
		r.Notes = append(r.Notes, "no config.json beside the weights: the architecture check is skipped")
	}

	// List in model order (the architecture's), then tensors it does not know, by name.
	kinds := map[string]modelcfg.Kind{}
	var order []string
	expected := map[string]*modelcfg.TensorSpec{}
	for i := range specs {
		s := &specs[i]
		expected[s.Name] = s
		kinds[s.Name] = s.Kind
		if _, ok := ck.Tensor(s.Name); ok {
			order = append(order, s.Name)
		} else {
			r.Problems = append(r.Problems, Problem{s.Name, fmt.Sprintf("missing (%s %v)", s.Kind, s.Shape)})
		}
	}
	for _, name := range ck.Names() {
		if _, ok := expected[name]; !ok {
			order = append(order, name)
			kinds[name] = modelcfg.KindOf(name)
			if r.Checked && !(name == "lm_head.weight" && ignoredLMHead) {
				r.Problems = append(r.Problems, Problem{name, "unexpected: the architecture has no such tensor"})
			}
		}
	}

	totals := map[modelcfg.Kind]*KindTotal{}
	for _, name := range order {
		t, _ := ck.Tensor(name)
		kind := kinds[name]
		if s, ok := expected[name]; ok && !sameShape(t.Shape, s.Shape) {
			r.Problems = append(r.Problems, Problem{name, fmt.Sprintf("shape %v, the architecture needs %v", t.Shape, s.Shape)})
		}
		if r.Checked && !supportedDTypes[t.DType] {
			r.Problems = append(r.Problems, Problem{name, fmt.Sprintf("dtype %s is not supported (want BF16 or F32)", t.DType)})
		}
		kt := totals[kind]
		if kt == nil {
			kt = &KindTotal{Kind: kind.String()}
			totals[kind] = kt
		}
		kt.Tensors++
		kt.Params += t.NumElements()
		kt.Bytes += t.NumBytes()
		if filter == nil || filter.MatchString(name) {
			r.Tensors = append(r.Tensors, Tensor{Name: name, DType: t.DType, Shape: t.Shape, Bytes: t.NumBytes(), Shard: filepath.Base(t.File), Kind: kind.String()})
		}
	}
	r.Total.Kind = "total"
	for _, k := range modelcfg.Kinds() {
		if kt := totals[k]; kt != nil {
			r.Summary = append(r.Summary, *kt)
			r.Total.Tensors += kt.Tensors
			r.Total.Params += kt.Params
			r.Total.Bytes += kt.Bytes
		}
	}
	sort.SliceStable(r.Problems, func(i, j int) bool { return r.Problems[i].Tensor < r.Problems[j].Tensor })
	r.OK = len(r.Problems) == 0
	return r, nil
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// commas formats n with thousands separators (9,798,016).
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return "-" + commas(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func shapeString(s []int) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func newTable(w io.Writer, right []int, header ...any) *tablewriter.Table {
	align := make([]tw.Align, len(header))
	for i := range align {
		align[i] = tw.AlignLeft
	}
	for _, i := range right {
		align[i] = tw.AlignRight
	}
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleLight)})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: align}),
	)
	t.Header(header...)
	return t
}

func printReport(w io.Writer, r *Report) error {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	if r.Checked {
		p("%s: %s (%s), %d shard(s)\n", r.ModelPath, r.Model, r.Architecture, len(r.Shards))
	} else {
		p("%s: %d shard(s)\n", r.ModelPath, len(r.Shards))
	}
	t := newTable(w, []int{3}, "Tensor", "DType", "Shape", "Bytes", "Shard")
	for _, tn := range r.Tensors {
		if err := t.Append(tn.Name, string(tn.DType), shapeString(tn.Shape), commas(tn.Bytes), tn.Shard); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}

	p("\n")
	t = newTable(w, []int{1, 2, 3}, "Kind", "Tensors", "Params", "Bytes")
	for _, kt := range append(r.Summary, r.Total) {
		if err := t.Append(kt.Kind, strconv.Itoa(kt.Tensors), commas(kt.Params), commas(kt.Bytes)); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	for _, n := range r.Notes {
		p("note: %s\n", n)
	}
	switch {
	case !r.Checked:
	case r.OK:
		p("OK: %d tensors, %s parameters, all as %s needs\n", r.Total.Tensors, commas(r.Total.Params), r.Architecture)
	default:
		p("\n%d problem(s):\n", len(r.Problems))
		for _, pr := range r.Problems {
			p("  %s: %s\n", pr.Tensor, pr.Problem)
		}
		p("FAIL: the checkpoint does not match %s\n", r.Architecture)
	}
	return nil
}
