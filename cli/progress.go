package cli

import (
	"io"
	"os"
	"sync"

	"github.com/armor-apt/armor/gen"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal; long work shows progress only there.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// newProgress returns a build progress callback drawing a bar per phase on a terminal,
// and nil (no output) otherwise.
func newProgress(w io.Writer, what string) func(gen.Progress) {
	if !isTerminal(w) {
		return nil
	}
	var mu sync.Mutex
	var bar *progressbar.ProgressBar
	phase := ""
	return func(p gen.Progress) {
		mu.Lock()
		defer mu.Unlock()
		if p.Phase != phase || bar == nil {
			if bar != nil {
				bar.Finish()
			}
			phase = p.Phase
			bar = progressbar.NewOptions(p.Total,
				progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription(what+": "+p.Phase),
				progressbar.OptionShowCount(),
				progressbar.OptionClearOnFinish(),
				progressbar.OptionThrottle(100_000_000),
			)
		}
		bar.Set(p.Done)
	}
}
