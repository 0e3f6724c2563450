package gen

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/armor-apt/armor/gen/inputs"
	"github.com/armor-apt/armor/gen/tree"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/internal/lineage"
	"github.com/armor-apt/armor/manifest"
)

// Build computes the release for opts and writes the tree. All inputs are read and
// checked before anything is written, so a bad input leaves the previous tree untouched.
// It does not write the manifest file: the caller does that after Build returns, so the
// manifest only ever names a complete tree. The caller holds the exclusive Lock of
// o.CacheDir from before Build until the manifest is written.
//
// The phases follow one another below. Four kinds of work run beside them: the parent
// loads while the inputs are listed, and the pool is staged, the Contents files are made
// and the manifest's packages are encoded while the indexes are made.
func Build(ctx context.Context, o Options) (*Result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	// Load the parent in the background: the stat cache first, then the previous manifest,
	// then the reading ahead of its indexes. Nothing started here outlives Build.
	ld := startLoading(ctx, &o)
	defer ld.close()

	// Collect the inputs: list, stat, and read those the stat cache cannot vouch for.
	groups, ins, err := collectInputs(ctx, &o, ld.statCache)
	if err == nil {
		err = fault("collect inputs")
	}
	if err != nil {
		return nil, err
	}
	// The inputs' packages, in canonical order; two files claiming one package or one
	// pool path are refused.
	inPkgs, err := resolvePackages(groups, ins)
	if err != nil {
		return nil, err
	}
	// The parent, and the release: the parent plus the change.
	par, err := ld.parent()
	if err != nil {
		return nil, err
	}
	if err := completeSources(&inPkgs, par.m, ins); err != nil {
		return nil, err
	}
	if err := checkUnmatched(&o, groups, par.m == nil); err != nil {
		return nil, err
	}
	pkgs, chg, err := applyChange(&o, par.m, inPkgs)
	if err != nil {
		return nil, err
	}
	if err := checkRemovals(&o, par.m, pkgs.list); err != nil {
		return nil, err
	}
	diff, err := diffParent(par.m, pkgs)
	if err == nil {
		err = fault("apply change")
	}
	if err != nil {
		return nil, err
	}
	if par.m == nil || len(diff.changed) > 0 || diff.removed > 0 {
		if err := runGate(ctx, &o, par, pkgs.list, ins); err != nil {
			return nil, err
		}
	}
	stats := Stats{Inputs: len(ins.all), Read: ins.read, Added: diff.added, Removed: diff.removed, Copied: chg.copied, Pruned: chg.pruned}

	// From here on files are staged in the tree; nothing is visible before the commit.
	icache, err := par.made.indexCache(filepath.Join(o.CacheDir, "chunks"))
	if err != nil {
		return nil, fmt.Errorf("open index cache: %w", err)
	}
	tw, err := tree.Open(o.TreeDir)
	if err != nil {
		return nil, err
	}
	tw.Fault = faultAt
	if err := fault("open tree"); err != nil {
		tw.Abort()
		return nil, err
	}
	// Pool files are copied while the indexes are compressed: a first build is as much
	// file creation (kernel time) as compression (user time), and the two overlap well.
	pool := make(chan error, 1)
	go func() {
		err := stagePool(tw, &o, par.m, pkgs.list, diff.changed, ins)
		if err == nil {
			err = fault("stage pool")
		}
		pool <- err
	}()
	abort := func(err error) (*Result, error) {
		<-pool
		tw.Abort()
		return nil, err
	}
	// When the packages changed, so does the manifest: its packages, known now, are
	// encoded and hashed while the indexes are made, on a core the stanza assembly leaves
	// free. Otherwise the build is most likely up to date, and sealing waits until it is
	// known not to be.
	m := newManifest(&o, par.m, pkgs.list)
	var sealer *manifest.Sealer
	if par.m == nil || len(diff.changed) > 0 || diff.removed > 0 {
		sealer = manifest.StartSeal(m)
	}

	// Write the Contents files whose packages changed, and reuse the others, while the
	// indexes are written: they need nothing of one another, and an index's compression
	// leaves a core idle for much of its time.
	contc := make(chan contentsResult, 1)
	go func() {
		cidx := newIndexesMade(len(o.Suites))
		cont, err := writeContents(ctx, &o, par, pkgs.list, ins, tw, &cidx)
		if err == nil {
			err = fault("write contents")
		}
		contc <- contentsResult{cont, cidx, err}
	}()
	// Write the indexes whose package lists changed; reuse the others.
	idx, err := writeIndexes(ctx, &o, par, pkgs.list, ins, icache, tw)
	if err == nil {
		err = fault("write indexes")
	}
	cr := <-contc
	err = cmp.Or(err, cr.err)
	if err != nil {
		return abort(par.explain(err))
	}
	cont := cr.made
	idx.merge(cr.idx)
	// Sign the Release of each suite whose indexes or header changed.
	rel, err := signReleases(ctx, &o, par, idx.suites, tw)
	if err == nil {
		err = fault("sign")
	}
	if err != nil {
		return abort(err)
	}
	files := append(idx.files, rel.files...)
	files = append(files, suiteAliases(&o, files)...)
	slices.SortFunc(files, func(x, y manifest.File) int { return strings.Compare(x.Path, y.Path) })
	stats.IndexesWritten, stats.ContentsWritten, stats.SuitesSigned = idx.written, cont.written, rel.signed

	if upToDate(&o, par.m, pkgs.list, files, idx.written+cont.written+rel.signed > 0) {
		abort(nil)
		stats.Packages = len(par.m.Packages)
		writeStatCache(&o, inputs.EncodeStatCache(ins.all, ins.kept))
		return &Result{UpToDate: true, Manifest: par.m, Parent: par.m, Stats: stats}, nil
	}

	// Seal the manifest, write it beside its place, wait for the staging, and commit.
	if sealer == nil {
		sealer = manifest.StartSeal(m)
	}
	encoded, err := sealer.Finish(files)
	if err == nil {
		err = fault("seal manifest")
	}
	if err != nil {
		return abort(err)
	}
	if err := m.Validate(); err != nil {
		return abort(fmt.Errorf("built manifest is invalid: %w", err))
	}
	// The manifest file is written beside its place while the staged files reach the
	// disk, flushed with them by the commit, and renamed into place once the tree is: a
	// flush of its own took as long again as the tree's.
	var staged *atomicfile.Staged
	flushed := false
	if o.Manifest != "" {
		if staged, err = atomicfile.Stage(o.Manifest, encoded, 0o644); err != nil {
			return abort(fmt.Errorf("write the manifest: %w", err))
		}
		flushed = tw.FlushAlso(filepath.Dir(o.Manifest))
	}
	// The next stat cache is made while the staged files reach the disk and Commit waits
	// for it, and written only once the commit succeeded: it names what the new release
	// no longer lists.
	cacheData := make(chan []byte, 1)
	go func() { cacheData <- nextStatCache(&o, par.m, m, ins, icache) }()
	var statCache chan *atomicfile.Staged // the stat cache written beside its place
	fail := func(err error) (*Result, error) {
		if statCache == nil {
			<-cacheData
		} else if sc := <-statCache; sc != nil {
			sc.Abort()
		}
		if staged != nil {
			staged.Abort()
		}
		tw.Abort()
		return nil, err
	}
	if err := <-pool; err != nil {
		return fail(par.explain(err))
	}
	if err := tw.Wait(); err != nil {
		return fail(err)
	}
	stats.FilesWritten, stats.BytesWritten = tw.Staged()
	if err := cmp.Or(linkAliases(o.Suites, tw), fault("link aliases")); err != nil {
		return fail(err)
	}
	// While the files move into place the tree holds neither release.
	writeTreeMarker(&o, "")
	if err := tw.Commit(); err != nil {
		par.markTree(&o)
		return fail(err)
	}
	// The build cache keeps the new uncompressed indexes while the manifest moves into
	// place. (Should that fail, the next build makes the parent's from the tree's .gz:
	// the parent's kept copies may be gone already.)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		keepPlains(&o, par, idx.plains, idx.suites)
	}()
	// So is the stat cache, beside its place; it follows the manifest. (Written before the
	// commit, its 17 MB at 100,000 inputs would be flushed with the tree; after, they took
	// as long as the manifest's move into place.)
	statCache = make(chan *atomicfile.Staged, 1)
	go func() { statCache <- stageStatCache(&o, <-cacheData) }()
	// The manifest names the tree now in place; if it cannot be written, the tree goes
	// back to the parent's.
	if staged != nil {
		err := fault("manifest write")
		if err == nil {
			err = staged.Commit(flushed && tw.Flushed())
		}
		if err != nil {
			<-kept
			tw.Rollback()
			par.markTree(&o)
			return fail(fmt.Errorf("write the manifest (the tree was put back as it was): %w", err))
		}
	}
	tw.Done()
	writeTreeMarker(&o, m.ID)
	lineage.Built(o.CacheDir, m.ID, m.Parent)
	if sc := <-statCache; sc != nil {
		_ = sc.CommitUnsynced() // the cache is an accelerator (see writeStatCache)
	}
	<-kept
	stats.Packages = len(m.Packages)
	return &Result{Manifest: m, Parent: par.m, Encoded: encoded, Stats: stats}, nil
}

// newManifest returns the manifest of the release, its files still to come.
func newManifest(o *Options, parent *manifest.Manifest, pkgs []manifest.Package) *manifest.Manifest {
	m := &manifest.Manifest{
		Schema:     manifest.SchemaVersion,
		Repository: o.Repository,
		Date:       o.Date.UTC().Format(time.RFC3339),
		Packages:   pkgs,
	}
	if parent != nil {
		m.Parent = lineage.Parent(o.CacheDir, parent.ID, parent.Parent)
	}
	return m
}

// upToDate reports whether the build made nothing the parent does not have: no file
// written, and the same repository, packages and files.
func upToDate(o *Options, parent *manifest.Manifest, pkgs []manifest.Package, files []manifest.File, wrote bool) bool {
	return parent != nil && !wrote && parent.Repository == o.Repository &&
		manifest.EqualPackages(parent.Packages, pkgs) && slices.Equal(parent.Files, files)
}
