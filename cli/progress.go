package cli

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/armor-apt/armor/gen"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal; long work shows progress only there.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// bar draws progress on a terminal: one bar per description, made on the first report
// with the total that report gives, and finished when the description changes. Reports
// may come from several goroutines.
type bar struct {
	w     io.Writer
	bytes bool // show done and total as byte sizes
	mu    sync.Mutex
	desc  string
	b     *progressbar.ProgressBar
}

func (b *bar) set(desc string, done, total int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b == nil || desc != b.desc {
		if b.b != nil {
			b.b.Finish()
		}
		b.desc = desc
		b.b = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(b.w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowBytes(b.bytes),
			progressbar.OptionShowCount(),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(100*time.Millisecond),
		)
	}
	b.b.Set64(done)
}

// newProgress returns a build progress callback drawing a bar per phase on a terminal,
// and nil (no output) otherwise.
func newProgress(w io.Writer, what string) func(gen.Progress) {
	if !isTerminal(w) {
		return nil
	}
	b := &bar{w: w}
	return func(p gen.Progress) { b.set(what+": "+p.Phase, int64(p.Done), int64(p.Total)) }
}
