package bench

import (
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Progress is a progress bar that draws only when w is a terminal, so that
// JSON and CSV output piped to a file stay clean.
type Progress struct{ bar *progressbar.ProgressBar }

// NewProgress starts a bar of total steps on w.
func NewProgress(w io.Writer, total int, description string) *Progress {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return &Progress{}
	}
	return &Progress{bar: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(description),
		progressbar.OptionShowCount(), progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true), progressbar.OptionClearOnFinish())}
}

// Add advances the bar by n steps.
func (p *Progress) Add(n int) {
	if p != nil && p.bar != nil {
		_ = p.bar.Add(n)
	}
}

// Describe changes the label.
func (p *Progress) Describe(s string) {
	if p != nil && p.bar != nil {
		p.bar.Describe(s)
	}
}

// Done finishes the bar.
func (p *Progress) Done() {
	if p != nil && p.bar != nil {
		_ = p.bar.Finish()
	}
}
