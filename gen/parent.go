package gen

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"sync"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/manifest"
)

// parent is the release a build starts from, as the tree holds it.
type parent struct {
	m     *manifest.Manifest       // nil for a first build
	files map[string]manifest.File // m's files by path
	old   *prefetch                // m's indexes read ahead; nil when none are
	made  *madeIndexes             // m's plain indexes hydrate made, not read ahead
	// plains are the uncompressed Packages and Sources indexes m's Release files list,
	// by path in the tree (see plainIndexes).
	plains map[string]release.Digests
	dirs   dirs

	stanzas map[string][]byte // every stanza of m's indexes in the tree, by SHA256; made when first needed
	// loaded are m's Packages indexes that loadIndexes read, by path, until the index
	// writer takes them (takeLoaded): read once for the check and the writer both.
	loaded map[string]*oldIndex

	mu    sync.Mutex
	bases map[string]index.Base // the indexes new ones were spliced from, by path
	// fetchErr says why the tree lacks m's files: they could not be fetched.
	fetchErr error
	// fresh is true when the build has a parent but its cache held nothing built or
	// fetched here before: a fresh CI runner, most likely, whose cache goes with it.
	fresh bool
}

// noteBase records that the new index at indexPath was spliced in place from the
// parent's index b names.
func (p *parent) noteBase(indexPath string, b index.Base) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bases == nil {
		p.bases = map[string]index.Base{}
	}
	p.bases[indexPath] = b
}

// base returns what noteBase recorded of indexPath.
func (p *parent) base(indexPath string) (index.Base, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.bases[indexPath]
	return b, ok
}

// markTree records that the tree holds the parent again, after a commit was undone.
func (p *parent) markTree() {
	if p.m != nil {
		writeTreeMarker(p.dirs.cache, p.m.ID)
	}
}

// explain adds to an error of a build that lacked something of the parent why the
// parent's files could not be fetched, if they could not.
func (p *parent) explain(err error) error {
	if err == nil || p.fetchErr == nil {
		return err
	}
	return fmt.Errorf("%w (the tree lacks the parent's files, and they could not be fetched: %v)", err, p.fetchErr)
}

// stanzaElsewhere returns the stanza of p from any of the parent's Packages indexes in
// the tree, or nil. It reads them all the first time it is called: only packages copied
// between suites or components need it. Its map points into the indexes, which the
// writer then must not splice in place.
func (p *parent) stanzaElsewhere(pkg *manifest.Package) []byte {
	if p.m == nil {
		return nil
	}
	if p.stanzas == nil {
		p.stanzas = p.loadIndexes()
		for _, x := range p.loaded {
			x.own = false
		}
	}
	return stanzaOf(p.stanzas, pkg)
}

// stanzaOf returns pkg's stanza from stanzas (by SHA256), or nil if it has none that
// names pkg's path.
func stanzaOf(stanzas map[string][]byte, pkg *manifest.Package) []byte {
	st := stanzas[pkg.SHA256]
	if st == nil || string(stanzaField(st, "\nFilename: ")) != pkg.Path {
		return nil
	}
	return st
}

// loadIndexes returns every stanza of the parent's Packages indexes, by SHA256. It reads
// each index once, as readOldIndex would (read ahead, made by hydrate, or from the
// tree), and keeps it in p.loaded, where readOldIndex takes it from: on a fresh runner
// the check and the writer then share one decompression of each index, not two. The
// map points into the indexes' arrays: it must not outlive their splice in place, unless
// they are marked as not owned.
func (p *parent) loadIndexes() map[string][]byte {
	if p.loaded == nil {
		p.loaded = map[string]*oldIndex{}
	}
	stanzas := map[string][]byte{}
	for _, ip := range slices.Sorted(maps.Keys(p.plains)) {
		if path.Base(ip) != "Packages" {
			continue
		}
		x := p.loaded[ip]
		if x == nil {
			if x = p.old.take(ip); x == nil {
				x = p.loadIndex(ip)
			}
			p.loaded[ip] = x
		}
		for i, st := range x.stanzas {
			stanzas[string(x.sums[i])] = st
		}
	}
	return stanzas
}

// takeLoaded returns the index at indexPath that loadIndexes read, and forgets it; nil
// if it read none.
func (p *parent) takeLoaded(indexPath string) *oldIndex {
	x := p.loaded[indexPath]
	delete(p.loaded, indexPath)
	return x
}

// hadIndex reports whether the parent published the Packages or Sources index at
// indexPath.
func (p *parent) hadIndex(indexPath string) bool {
	_, gz := p.files[indexPath+".gz"]
	_, plain := p.files[indexPath] // published by armor before plain.go
	return gz || plain
}

// loadIndex returns the parent's uncompressed index at indexPath, split: as hydrate made
// it, if it did, else as parentPlain finds it; no stanzas if it finds none.
func (p *parent) loadIndex(indexPath string) *oldIndex {
	return p.made.load(p.dirs, indexPath, p.plains[indexPath])
}

// packages returns the parent's packages, none for a first build.
func (p *parent) packages() []manifest.Package {
	if p.m == nil {
		return nil
	}
	return p.m.Packages
}
