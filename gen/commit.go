package gen

import (
	"os"
	"path/filepath"
	"slices"

	"github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/gen/inputs"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/manifest"
)

// nextStatCache returns the stat cache to save after a build of m from prev. It deletes
// the tree paths the release before prev kept, which no published release lists any more,
// and prunes the index chunk cache and the file lists.
func nextStatCache(o *Options, prev, m *manifest.Manifest, ins *inputSet, icache *index.Cache) []byte {
	kept := ins.kept
	if prev != nil {
		kept = pruneKept(o.TreeDir, prev, m, kept)
	}
	icache.Prune()
	pruneFileLists(o, prev, m)
	return inputs.EncodeStatCache(ins.all, kept)
}

// writeStatCache saves the stat cache. The cache is an accelerator: failing to save it
// costs the next build time, not correctness.
func writeStatCache(o *Options, data []byte) {
	_ = atomicfile.WriteFileUnsynced(statCachePath(o), data, 0o644)
}

// stageStatCache writes the stat cache beside its place, for a commit to put it there
// (CommitUnsynced); nil if it cannot, which only costs the next build time.
func stageStatCache(o *Options, data []byte) *atomicfile.Staged {
	s, err := atomicfile.Stage(statCachePath(o), data, 0o644)
	if err != nil {
		return nil
	}
	return s
}

func statCachePath(o *Options) string { return filepath.Join(o.CacheDir, "inputs.txt") }

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
