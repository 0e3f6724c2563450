package gen

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/gen/tree"
	"github.com/armor-apt/armor/internal/lineage"
	"github.com/armor-apt/armor/manifest"
	"golang.org/x/sync/errgroup"
)

// steps carries a build from stage to stage. It is the build's one cleanup path: when a
// stage fails, it waits for the work the stages started and undoes what they did, newest
// first. In tests only, it also makes a named stage fail after the stage did its work
// (Options.fault), so that each failure is seen to leave the tree as it was.
type steps struct {
	undo  []func() // run newest first if the build fails
	last  []func() // run as Build returns, whatever the outcome
	fault func(step string) error
}

// done returns err, or when err is nil the fault a test injects after the step named.
func (s *steps) done(step string, err error) error {
	if err == nil && s.fault != nil {
		err = s.fault(step)
	}
	return err
}

// onFailure has a failed build call undo, before every undo registered earlier.
func (s *steps) onFailure(undo func()) { s.undo = append(s.undo, undo) }

// atEnd has Build call f as it returns, after any undoing.
func (s *steps) atEnd(f func()) { s.last = append(s.last, f) }

// unwind undoes what the stages did, newest first.
func (s *steps) unwind() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	s.undo = nil
}

// end, deferred by Build, unwinds if the build failed (*err), then runs what atEnd asked.
func (s *steps) end(err *error) {
	if *err != nil {
		s.unwind()
	}
	for i := len(s.last) - 1; i >= 0; i-- {
		s.last[i]()
	}
}

// goStage runs the stage run beside the others; the wait it returns gives its error. A
// failed build waits for it before undoing anything.
func (s *steps) goStage(step string, run func() error) (wait func() error) {
	var g errgroup.Group
	g.Go(func() error { return s.done(step, run()) })
	s.onFailure(func() { g.Wait() })
	return g.Wait
}

// openTree opens the tree for staging, and the index chunk cache (the one hydrate seeded,
// if it did). From here on a failed build removes what was staged (tree.Writer.Abort).
func openTree(s *steps, d dirs, par *parent) (*tree.Writer, *index.Cache, error) {
	icache, err := par.made.indexCache(filepath.Join(d.cache, "chunks"))
	if err != nil {
		return nil, nil, fmt.Errorf("open index cache: %w", err)
	}
	tw, err := tree.Open(d.tree)
	if err != nil {
		return nil, nil, err
	}
	tw.Fault = s.fault
	s.onFailure(tw.Abort)
	return tw, icache, s.done("open tree", nil)
}

// writeAllIndexes writes the Contents files beside the Packages and Sources indexes: they
// need nothing of one another, and an index's compression leaves a core idle for much of
// its time. It returns what both made.
func writeAllIndexes(ctx context.Context, s *steps, sp indexSpec, par *parent, pkgs []manifest.Package, ins *inputSet, icache *index.Cache, tw *tree.Writer) (indexesMade, error) {
	var cont indexesMade
	var g errgroup.Group
	g.Go(func() (err error) {
		cont, err = writeContents(ctx, sp, par, pkgs, ins, tw)
		return s.done("write contents", err)
	})
	idx, err := writeIndexes(ctx, sp, par, pkgs, ins, icache, tw)
	if err := cmp.Or(s.done("write indexes", err), g.Wait()); err != nil {
		return idx, err
	}
	idx.merge(cont)
	idx.contentsWritten = cont.written
	return idx, nil
}

// startManifest returns the manifest of the release of pl on parent, dated date (asked
// for as requested, when that differs: settleDates), its files still to come. When the packages changed, so does the manifest: its packages, known now, are
// encoded and hashed while the indexes are made (sealer), on a core the stanza assembly
// leaves free. Otherwise the build is most likely up to date, and sealing waits until it
// is known not to be (sealer is nil).
func startManifest(repo string, date time.Time, requested, cacheDir string, parent *manifest.Manifest, pl plan) (*manifest.Manifest, *manifest.Sealer) {
	m := &manifest.Manifest{
		Schema:        manifest.SchemaVersion,
		Repository:    repo,
		Date:          date.UTC().Format(time.RFC3339),
		RequestedDate: requested,
		Packages:      pl.pkgs.list,
	}
	if parent != nil {
		m.Parent = lineage.Parent(cacheDir, parent.ID, parent.Parent)
	}
	if parent == nil || len(pl.diff.changed) > 0 || pl.diff.removed > 0 {
		return m, manifest.StartSeal(m)
	}
	return m, nil
}

// sealManifest lists files in m, which sealer (nil if not started) encodes, and returns
// the encoded manifest once it is checked.
func sealManifest(m *manifest.Manifest, sealer *manifest.Sealer, files []manifest.File) ([]byte, error) {
	if sealer == nil {
		sealer = manifest.StartSeal(m)
	}
	encoded, err := sealer.Finish(files)
	if err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("built manifest is invalid: %w", err)
	}
	return encoded, nil
}
