package gen

import (
	"context"
	"slices"
	"strings"

	"github.com/armor-apt/armor/gen/inputs"
	"github.com/armor-apt/armor/manifest"
)

// Build computes the release for opts and writes the tree. All inputs are read and
// checked before anything is written, so a bad input leaves the previous tree untouched.
// When Options.Manifest names the manifest file, Build writes it once the tree is in
// place, and puts the tree back if it cannot: the tree and the manifest change together
// or not at all. The caller holds the exclusive Lock of o.CacheDir from before Build until
// the manifest is written.
//
// Build is a list of stages, each a function of what it needs that returns what it made;
// steps (stages.go) is their one cleanup path. Work runs beside the stages where it can:
// the parent loads while the inputs are listed, and the pool is staged, the Contents
// files are made and the manifest's packages are encoded while the indexes are made.
func Build(ctx context.Context, o Options) (_ *Result, err error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	s := &steps{fault: o.fault}
	defer s.end(&err)

	// Read and check everything before writing anything: the parent (in the background),
	// the inputs, and the release they make with the change.
	ld := startLoading(ctx, o.dirs(), o.parentSource(), o.Suites, o.Verify)
	s.atEnd(ld.close)
	groups, ins, err := collectInputs(ctx, o.inputSpec(), ld.statCache)
	if err := s.done("collect inputs", err); err != nil {
		return nil, err
	}
	pl, par, err := planRelease(s, o.change(), groups, ins, ld)
	if err != nil {
		return nil, err
	}
	requested, err := settleDates(&o, par.m)
	if err == nil {
		err = runGate(ctx, o.Gate, par, pl, ins)
	}
	if err != nil {
		return nil, err
	}

	// Stage the release in the tree, where nothing is visible before the commit.
	tw, icache, err := openTree(s, o.dirs(), par)
	if err != nil {
		return nil, err
	}
	pool := s.goStage("stage pool", func() error { return stagePool(tw, o.poolSpec(), par.m, pl, ins) })
	m, sealer := startManifest(o.Repository, o.Date, requested, o.CacheDir, par.m, pl)
	idx, err := writeAllIndexes(ctx, s, o.indexSpec(), par, pl.pkgs.list, ins, icache, tw)
	if err != nil {
		return nil, par.explain(err)
	}
	rel, err := signReleases(ctx, o.releaseSpec(), par, idx.suites, tw)
	if err := s.done("sign", err); err != nil {
		return nil, err
	}
	files := releaseFiles(o.Suites, idx.files, rel.files)
	stats := pl.stats.withStaged(idx, rel)
	if upToDate(o.Repository, par.m, pl.pkgs.list, files, stats) {
		return nothingToCommit(s, o.CacheDir, ins, par.m, stats), nil
	}

	// Seal the manifest, and commit the tree, the manifest file and the build cache.
	encoded, err := sealManifest(m, sealer, files)
	if err := s.done("seal manifest", err); err != nil {
		return nil, err
	}
	st := &staged{tw: tw, icache: icache, ins: ins, idx: idx, pool: func() error { return par.explain(pool()) }}
	if err := commit(s, o.commitSpec(), par, m, encoded, st); err != nil {
		return nil, err
	}
	stats.FilesWritten, stats.FilesLinked, stats.BytesWritten, stats.Packages = st.files, st.linked, st.bytes, len(m.Packages)
	return &Result{Manifest: m, Parent: par.m, Encoded: encoded, Stats: stats}, nil
}

// nothingToCommit ends a build that is up to date with its parent: what was staged goes,
// and the stat cache is kept for the next build.
func nothingToCommit(s *steps, cacheDir string, ins *inputSet, parent *manifest.Manifest, stats Stats) *Result {
	s.unwind()
	writeStatCache(cacheDir, inputs.EncodeStatCache(ins.all, ins.kept))
	stats.Packages = len(parent.Packages)
	return &Result{UpToDate: true, Manifest: parent, Parent: parent, Stats: stats}
}

// withStaged adds to the plan's stats what the staging stages wrote.
func (st Stats) withStaged(idx indexesMade, rel releasesMade) Stats {
	st.IndexesWritten, st.ContentsWritten, st.SuitesSigned = idx.written, idx.contentsWritten, rel.signed
	return st
}

// releaseFiles returns the files of the release, sorted by path: those of parts, and
// again under every suite name that is an alias of its codename (aliases.go).
func releaseFiles(suites []Suite, parts ...[]manifest.File) []manifest.File {
	files := slices.Concat(parts...)
	files = append(files, suiteAliases(suites, files)...)
	slices.SortFunc(files, func(x, y manifest.File) int { return strings.Compare(x.Path, y.Path) })
	return files
}

// upToDate reports whether the build made nothing the parent does not have: no file
// written, and the same repository, packages and files.
func upToDate(repo string, parent *manifest.Manifest, pkgs []manifest.Package, files []manifest.File, st Stats) bool {
	wrote := st.IndexesWritten+st.ContentsWritten+st.SuitesSigned > 0
	return parent != nil && !wrote && parent.Repository == repo &&
		manifest.EqualPackages(parent.Packages, pkgs) && slices.Equal(parent.Files, files)
}
