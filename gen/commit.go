package gen

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/gen/inputs"
	"github.com/armor-apt/armor/gen/tree"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/internal/lineage"
	"github.com/armor-apt/armor/manifest"
)

// commitSpec is what the commit needs of the options.
type commitSpec struct {
	dirs     dirs
	suites   []Suite
	manifest string // Options.Manifest: the manifest file to write, or ""
}

func (o *Options) commitSpec() commitSpec { return commitSpec{o.dirs(), o.Suites, o.Manifest} }

// staged is what the staging stages leave for the commit.
type staged struct {
	tw     *tree.Writer
	icache *index.Cache
	ins    *inputSet
	idx    indexesMade
	pool   func() error // waits for the pool's staging
	// files and bytes, set by commit, count the files staged and their bytes; linked, the
	// pool files staged as links to their inputs.
	files, linked int
	bytes         int64
}

// commit puts the release m in place: the staged tree, the manifest file (encoded) once
// the tree is in place, and the build cache's view of the release (the tree marker, the
// kept uncompressed indexes, the stat cache, the lineage). If the manifest cannot be
// written, the tree goes back to the parent's (s unwinds it).
func commit(s *steps, sp commitSpec, par *parent, m *manifest.Manifest, encoded []byte, st *staged) error {
	mf, flushed, err := stageManifest(sp.manifest, encoded, st.tw)
	if err != nil {
		return err
	}
	if mf != nil {
		s.onFailure(mf.Abort)
	}
	next := startNextCache(sp.dirs, par.m, m, st.ins, st.icache)
	s.onFailure(next.abort)
	if err := cmp.Or(st.pool(), st.tw.Wait()); err != nil {
		return err
	}
	st.files, st.bytes, st.linked = st.tw.Staged()
	if err := s.done("link aliases", linkAliases(sp.suites, st.tw)); err != nil {
		return err
	}
	// While the files move into place the tree holds neither release.
	writeTreeMarker(sp.dirs.cache, "")
	s.onFailure(par.markTree)
	if err := st.tw.Commit(); err != nil {
		return err
	}
	s.onFailure(st.tw.Rollback)
	// The build cache keeps the new uncompressed indexes while the manifest moves into
	// place. (Should that fail, the next build makes the parent's from the tree's .gz:
	// the parent's kept copies may be gone already.) So is the stat cache staged.
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		keepPlains(sp.dirs, sp.suites, par, st.idx.plains, st.idx.suites)
	}()
	s.onFailure(func() { <-kept })
	next.stage(statCachePath(sp.dirs.cache))
	// The manifest names the tree now in place; if it cannot be written, the tree goes
	// back to the parent's.
	if mf != nil {
		err := s.done("manifest write", nil)
		if err == nil {
			err = mf.Commit(flushed && st.tw.Flushed())
		}
		if err != nil {
			return fmt.Errorf("write the manifest (the tree was put back as it was): %w", err)
		}
	}
	st.tw.Done()
	writeTreeMarker(sp.dirs.cache, m.ID)
	lineage.Built(sp.dirs.cache, m.ID, m.Parent)
	next.commit()
	<-kept
	return nil
}

// stageManifest writes the manifest file beside its place (nil if there is none to
// write), for the commit to rename into place once the tree is. The tree's commit flushes
// it with the staged files (flushed says it will): a flush of its own took as long again
// as the tree's.
func stageManifest(path string, encoded []byte, tw *tree.Writer) (mf *atomicfile.Staged, flushed bool, err error) {
	if path == "" {
		return nil, false, nil
	}
	if mf, err = atomicfile.Stage(path, encoded, 0o644); err != nil {
		return nil, false, fmt.Errorf("write the manifest: %w", err)
	}
	return mf, tw.FlushAlso(filepath.Dir(path)), nil
}

// nextCache is the stat cache of the next build, made while the staged files reach the
// disk, and written beside its place once the commit succeeded (it names what the new
// release no longer lists), to be renamed into place last. Written before the commit, its
// bytes would be flushed with the tree's, which only the release's own files need.
type nextCache struct {
	data   chan []byte
	staged chan *atomicfile.Staged // nil until stage
}

func startNextCache(d dirs, prev, m *manifest.Manifest, ins *inputSet, icache *index.Cache) *nextCache {
	c := &nextCache{data: make(chan []byte, 1)}
	go func() { c.data <- nextStatCache(d, prev, m, ins, icache) }()
	return c
}

// stage writes the cache beside path in the background.
func (c *nextCache) stage(path string) {
	c.staged = make(chan *atomicfile.Staged, 1)
	go func() { c.staged <- stageStatCache(path, <-c.data) }()
}

// commit renames the staged cache into place, without a flush: the cache is an
// accelerator (see writeStatCache).
func (c *nextCache) commit() {
	if sc := <-c.staged; sc != nil {
		_ = sc.CommitUnsynced()
	}
}

// abort waits for the cache and removes it if it was staged.
func (c *nextCache) abort() {
	if c.staged == nil {
		<-c.data
	} else if sc := <-c.staged; sc != nil {
		sc.Abort()
	}
}

// nextStatCache returns the stat cache to save after a build of m from prev. It deletes
// the tree paths the release before prev kept, which no published release lists any more,
// and prunes the index chunk cache and the file lists.
func nextStatCache(d dirs, prev, m *manifest.Manifest, ins *inputSet, icache *index.Cache) []byte {
	kept := ins.kept
	if prev != nil {
		kept = pruneKept(d.tree, prev, m, kept)
	}
	icache.Prune()
	pruneFileLists(d.cache, prev, m)
	return inputs.EncodeStatCache(ins.all, kept)
}

// writeStatCache saves the stat cache. The cache is an accelerator: failing to save it
// costs the next build time, not correctness.
func writeStatCache(cacheDir string, data []byte) {
	_ = atomicfile.WriteFileUnsynced(statCachePath(cacheDir), data, 0o644)
}

// stageStatCache writes the stat cache beside its place, for a commit to put it there
// (CommitUnsynced); nil if it cannot, which only costs the next build time.
func stageStatCache(path string, data []byte) *atomicfile.Staged {
	s, err := atomicfile.Stage(path, data, 0o644)
	if err != nil {
		return nil
	}
	return s
}

func statCachePath(cacheDir string) string { return filepath.Join(cacheDir, "inputs.txt") }

// pruneKept deletes from tree the paths in oldKept, kept from the release before prev,
// that m does not list, and returns prev's paths that m no longer lists, to delete next
// time.
func pruneKept(tree string, prev, m *manifest.Manifest, oldKept []string) []string {
	// The candidates are few: the old kept paths, and the previous release's files and
	// packages that m does not list as they were. One pass over m rules out those it still
	// serves (a pool file may move between suites, or stay for another suite).
	const wasKept, nowKept = 1, 2
	cand := map[string]int{}
	for _, p := range oldKept {
		cand[p] |= wasKept
	}
	for i, j := 0, 0; i < len(prev.Files); i++ { // both sorted by path
		for j < len(m.Files) && m.Files[j].Path < prev.Files[i].Path {
			j++
		}
		if j == len(m.Files) || m.Files[j].Path != prev.Files[i].Path {
			cand[prev.Files[i].Path] |= nowKept
		}
	}
	for i, j := 0, 0; i < len(prev.Packages); i++ { // both in canonical order
		for j < len(m.Packages) && manifest.ComparePackages(&m.Packages[j], &prev.Packages[i]) < 0 {
			j++
		}
		if j == len(m.Packages) || !m.Packages[j].Equal(&prev.Packages[i]) {
			cand[prev.Packages[i].Path] |= nowKept
			for _, f := range prev.Packages[i].Files {
				cand[f.Path] |= nowKept
			}
		}
	}
	for _, p := range m.Packages {
		delete(cand, p.Path)
		for _, f := range p.Files {
			delete(cand, f.Path)
		}
	}
	for _, f := range m.Files {
		delete(cand, f.Path)
	}
	var kept []string
	for p, how := range cand {
		if how&wasKept != 0 && how&nowKept == 0 {
			os.Remove(filepath.Join(tree, filepath.FromSlash(p)))
		}
		if how&nowKept != 0 {
			kept = append(kept, p)
		}
	}
	slices.Sort(kept)
	return kept
}
