package align

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
)

// WriteTables writes one table per case and a summary line.
func WriteTables(w io.Writer, results []Result) error {
	passed := 0
	for i := range results {
		r := &results[i]
		verdict := "FAIL"
		if r.Pass {
			verdict = "PASS"
			passed++
		}
		title := r.Case
		if r.Model != "" {
			title = r.Model + " / " + r.Case
		}
		detail := "kernels " + r.Path + ", tolerances " + r.Tolerances
		if r.DType != "" && r.DType != "bf16" {
			detail += ", weights " + r.DType
		}
		if r.KVDType != "" {
			detail += ", kv cache " + r.KVDType
		}
		fmt.Fprintf(w, "== %s (%s; %s): %s\n", title, r.Kind, detail, verdict)
		if len(r.Rows) > 0 {
			t := tablewriter.NewWriter(w)
			t.Header("tensor", "shape", "max abs", "max rel", "cosine", "outside", "result", "first diverging")
			for _, row := range r.Rows {
				cells := []string{row.Tensor, shapeString(row.Shape), num(row.MaxAbs), num(row.MaxRel),
					strconv.FormatFloat(row.Cosine, 'f', 7, 64), strconv.Itoa(row.Outside), string(row.Status), row.FirstDiverging}
				if row.Exact {
					cells[2], cells[3], cells[4] = "-", "-", "-"
				}
				if err := t.Append(cells); err != nil {
					return err
				}
			}
			if err := t.Render(); err != nil {
				return err
			}
		}
		for _, row := range r.Rows {
			if row.Note != "" {
				fmt.Fprintf(w, "  %s: %s\n", row.Tensor, row.Note)
			}
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		if r.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", r.Error)
		}
		fmt.Fprintln(w)
	}
	_, err := fmt.Fprintf(w, "%d cases: %d passed, %d failed\n", len(results), passed, len(results)-passed)
	return err
}

// WriteJSON writes the results as one JSON document.
func WriteJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Results []Result `json:"results"`
	}{results})
}

// Passed reports whether every result passed.
func Passed(results []Result) bool {
	for _, r := range results {
		if !r.Pass {
			return false
		}
	}
	return true
}

func shapeString(s []int) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }
