package gen

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/armor-apt/armor/debian/deb"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/manifest"
	"golang.org/x/sync/errgroup"
)

// A Contents file holds only the newest version of each name, so the file list of a
// package it lacks comes from elsewhere: for a package copied from another suite or
// component, from the parent's Contents file there; for an older version that becomes the
// newest, from the build cache when this machine read the package once, and otherwise
// from its .deb: an input, or the store. The cache keeps the lists of the
// packages read that no Contents file of the release lists, one small file per .deb under
// contents/ named by its SHA-256: the first line the package's name and section, then one
// path a line, then a line "end". (Those a Contents file lists are not kept: a first
// build of many packages would write as many files again.) A missing or damaged entry
// costs a read of the .deb, never a wrong Contents file.

const contentsCacheDir = "contents"

// fileLists finds the file lists of packages, and remembers those it read.
type fileLists struct {
	cache string    // the build cache directory
	fetch fetchFunc // reads a .deb from the store; may be nil
	ins   *inputSet

	// fromParent finds a package's list in another Contents file of the parent, one that
	// lists it (a package copied from another suite or component).
	fromParent func(p *manifest.Package) (fileList, bool)

	mu     sync.Mutex
	read   map[string]fileList // by SHA-256: lists read from a .deb in this build, to save
	inFile map[string]bool     // of read, those a Contents file of the release lists
}

func newFileLists(cacheDir string, fetch fetchFunc, ins *inputSet) *fileLists {
	return &fileLists{cache: cacheDir, fetch: fetch, ins: ins, read: map[string]fileList{}, inFile: map[string]bool{}}
}

// listed notes the packages a Contents file lists: their lists need no cache entry.
func (l *fileLists) listed(sel []*manifest.Package) {
	if len(l.read) == 0 {
		return
	}
	for _, p := range sel {
		if _, ok := l.read[p.SHA256]; ok {
			l.inFile[p.SHA256] = true
		}
	}
}

// get returns the file lists of pkgs, in their order, looking them up in parallel.
func (l *fileLists) get(ctx context.Context, pkgs []*manifest.Package) ([]fileList, error) {
	out := make([]fileList, len(pkgs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, p := range pkgs {
		g.Go(func() error {
			fl, err := l.one(gctx, p)
			out[i] = fl
			return err
		})
	}
	return out, g.Wait()
}

func (l *fileLists) one(ctx context.Context, p *manifest.Package) (fileList, error) {
	if in := l.ins.fresh[p.SHA256]; in != nil && in.Pkg != nil {
		fl := fileListOf(in.Pkg)
		l.remember(p.SHA256, fl)
		return fl, nil
	}
	if fl, ok := l.load(p); ok {
		return fl, nil
	}
	if l.fromParent != nil {
		if fl, ok := l.fromParent(p); ok {
			return fl, nil
		}
	}
	var pkg *deb.Package
	var err error
	if in := l.ins.forSum(p.SHA256); in != nil {
		pkg, err = deb.ReadFile(in.Path)
	} else if l.fetch != nil {
		var data []byte
		if data, err = l.fetch(ctx, p.SHA256, p.Size); err == nil {
			pkg, err = deb.Read(bytes.NewReader(data), p.Path, p.Size)
		}
	} else {
		return fileList{}, fmt.Errorf("no file list for %s %s (%s): the parent's Contents file does not list it, the build cache does not hold it, and its .deb is neither an input nor readable from a store", p.Name, p.Version, p.Architecture)
	}
	if err != nil {
		return fileList{}, fmt.Errorf("file list of %s %s (%s): %w", p.Name, p.Version, p.Architecture, err)
	}
	if pkg.SHA256 != p.SHA256 {
		return fileList{}, fmt.Errorf("file list of %s %s (%s): its .deb has SHA-256 %s, the release lists %s", p.Name, p.Version, p.Architecture, pkg.SHA256, p.SHA256)
	}
	fl := fileListOf(pkg)
	l.remember(p.SHA256, fl)
	return fl, nil
}

func (l *fileLists) remember(sum string, fl fileList) {
	l.mu.Lock()
	l.read[sum] = fl
	l.mu.Unlock()
}

func (l *fileLists) path(sum string) string {
	return filepath.Join(l.cache, contentsCacheDir, sum[:2], sum)
}

// load reads a package's entry of the cache.
func (l *fileLists) load(p *manifest.Package) (fileList, bool) {
	if len(p.SHA256) < 2 {
		return fileList{}, false
	}
	data, err := os.ReadFile(l.path(p.SHA256))
	if err != nil {
		return fileList{}, false
	}
	return parseFileList(string(data), p.Name)
}

func parseFileList(s, name string) (fileList, bool) {
	head, rest, _ := strings.Cut(s, "\n")
	got, sec, ok := strings.Cut(head, "\t")
	if !ok || got != name {
		return fileList{}, false
	}
	fl := fileList{name: name, section: sec}
	switch {
	case rest == "end\n":
		return fl, true
	case !strings.HasSuffix(rest, "\nend\n"): // cut short
		return fileList{}, false
	}
	fl.files = strings.Split(rest[:len(rest)-len("\nend\n")], "\n")
	if slices.Contains(fl.files, "") {
		return fileList{}, false
	}
	return fl, true
}

func encodeFileList(fl fileList) []byte {
	n := len(fl.name) + len(fl.section) + 6
	for _, f := range fl.files {
		n += len(f) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, fl.name...)
	b = append(b, '\t')
	b = append(b, fl.section...)
	b = append(b, '\n')
	for _, f := range fl.files {
		b = append(b, f...)
		b = append(b, '\n')
	}
	return append(b, "end\n"...)
}

// save writes the lists read in this build that no Contents file lists to the cache.
// The cache is an accelerator: failing to save costs a later build a read of the .deb.
func (l *fileLists) save() {
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0) * 2)
	for sum, fl := range l.read {
		if len(sum) < 2 || strings.ContainsAny(fl.section, "\t\n") || l.inFile[sum] {
			continue
		}
		g.Go(func() error {
			p := l.path(sum)
			if _, err := os.Stat(p); err == nil {
				return nil
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil
			}
			_ = atomicfile.WriteFileUnsynced(p, encodeFileList(fl), 0o644)
			return nil
		})
	}
	_ = g.Wait()
}

// pruneFileLists deletes the cache entries of prev's packages that m no longer lists.
func pruneFileLists(cacheDir string, prev, m *manifest.Manifest) {
	if prev == nil {
		return
	}
	// Both lists are in canonical order: the candidates are the packages of prev that m
	// does not list as they were, usually none.
	var cand []string
	for i, j := 0, 0; i < len(prev.Packages); i++ {
		for j < len(m.Packages) && manifest.ComparePackages(&m.Packages[j], &prev.Packages[i]) < 0 {
			j++
		}
		if j == len(m.Packages) || m.Packages[j].SHA256 != prev.Packages[i].SHA256 {
			cand = append(cand, prev.Packages[i].SHA256)
		}
	}
	if len(cand) == 0 {
		return
	}
	now := make(map[string]bool, len(m.Packages))
	for _, p := range m.Packages {
		now[p.SHA256] = true
	}
	for _, sum := range cand {
		if !now[sum] && len(sum) > 2 {
			os.Remove(filepath.Join(cacheDir, contentsCacheDir, sum[:2], sum))
		}
	}
}
