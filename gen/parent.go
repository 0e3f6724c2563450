package gen

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"sync"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/gen/inputs"
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
	o      *Options

	stanzas map[string][]byte // every stanza of m's indexes in the tree, by SHA256; made when first needed

	mu    sync.Mutex
	bases map[string]index.Base // the indexes new ones were spliced from, by path
	// fetchErr says why the tree lacks m's files: they could not be fetched.
	fetchErr error
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
func (p *parent) markTree(o *Options) {
	if p.m != nil {
		writeTreeMarker(o, p.m.ID)
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
// between suites or components need it.
func (p *parent) stanzaElsewhere(pkg *manifest.Package) []byte {
	if p.m == nil {
		return nil
	}
	if p.stanzas == nil {
		p.stanzas = map[string][]byte{}
		for _, ip := range slices.Sorted(maps.Keys(p.plains)) {
			if path.Base(ip) != "Packages" {
				continue
			}
			x := p.loadIndex(ip)
			for i, st := range x.stanzas {
				p.stanzas[string(x.sums[i])] = st
			}
		}
	}
	st := p.stanzas[pkg.SHA256]
	if st == nil || string(stanzaField(st, "\nFilename: ")) != pkg.Path {
		return nil
	}
	return st
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
	return p.made.load(p.o, indexPath, p.plains[indexPath])
}

// packages returns the parent's packages, none for a first build.
func (p *parent) packages() []manifest.Package {
	if p.m == nil {
		return nil
	}
	return p.m.Packages
}

// loader loads in the background, one after the other: the stat cache, needed as soon
// as the inputs are listed; the previous manifest, needed once they are read; and then
// it starts the reading ahead of the old indexes, for the stanzas. One goroutine for the
// two loads leaves the other core to the listing of the inputs (mostly kernel time),
// which is what the build waits for. The loader owns what it loads until parent hands
// it over; close stops it and waits for it.
type loader struct {
	statCache chan *inputs.StatCache // receives the stat cache, once
	stop      chan struct{}          // closed by close: load nothing more
	done      chan struct{}          // closed once prev, err and old are set
	prev      *manifest.Manifest
	err       error
	fetchErr  error // why the parent's files could not be fetched into the tree
	old       *prefetch
	made      madeIndexes // the plain indexes hydrate made
	plains    map[string]release.Digests
	o         *Options
}

func startLoading(ctx context.Context, o *Options) *loader {
	l := &loader{
		statCache: make(chan *inputs.StatCache, 1),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		o:         o,
	}
	go func() {
		defer close(l.done)
		c := inputs.LoadStatCache(statCachePath(o))
		// Without a cache every input is read again, and no stanza comes from the old
		// indexes: nothing to read ahead.
		readAhead := len(c.Entries) > 0
		l.statCache <- c
		l.loadPrevious(ctx, o, readAhead)
	}()
	return l
}

// loadPrevious loads the previous manifest, when Options.LoadPrevious is set, fetches
// what the tree lacks of it (hydrate), and then, if readAhead, starts reading its indexes
// ahead. If Build has returned meanwhile, it
// loads nothing.
func (l *loader) loadPrevious(ctx context.Context, o *Options, readAhead bool) {
	select {
	case <-l.stop:
		l.err = errors.New("build: stopped")
		return
	default:
	}
	prev := o.Previous
	if prev == nil && o.LoadPrevious != nil {
		if prev, l.err = o.LoadPrevious(); l.err != nil {
			return
		}
	}
	// The tree should hold the parent's indexes before they are read. If they cannot be
	// fetched, the inputs may still hold every package the build needs (a runner with
	// every .deb but without the store); the build says why when they do not.
	l.fetchErr = hydrate(ctx, o, prev, &l.made)
	l.prev = prev
	l.plains = plainIndexes(o, prev)
	if readAhead {
		l.old = startPrefetch(o, prev, l.plains, &l.made)
	}
}

// parent waits for the previous manifest and returns the parent. Nothing may read
// Options.Previous instead: it is nil when LoadPrevious loads the manifest.
func (l *loader) parent() (*parent, error) {
	<-l.done
	if l.err != nil {
		return nil, l.err
	}
	p := &parent{m: l.prev, files: map[string]manifest.File{}, old: l.old, made: &l.made, plains: l.plains, fetchErr: l.fetchErr, o: l.o}
	if p.m != nil {
		for _, f := range p.m.Files {
			p.files[f.Path] = f
		}
	}
	return p, nil
}

// close stops the loading and the reading ahead, and waits for both.
func (l *loader) close() {
	close(l.stop)
	<-l.done
	l.old.stop()
	l.made.wait()
}

// parentDiff is how a release's packages differ from its parent's.
type parentDiff struct {
	changed        []int // indexes in the package list of those the parent does not list as they are
	added, removed int   // packages (by identity) new or with new contents, and gone
}

// diffParent compares the package list with the parent's (nil for a first build). It
// refuses a package that would give a published pool path other bytes: clients holding
// an index of an earlier release fetch it by that path and check its hash (dak and aptly
// refuse the same).
func diffParent(prev *manifest.Manifest, pkgs packageList) (parentDiff, error) {
	var d parentDiff
	var old []manifest.Package
	if prev != nil {
		old = prev.Packages
	}
	cur := pkgs.list
	// Both lists are in canonical order: walk them together.
	i, j := 0, 0
	for i < len(old) || j < len(cur) {
		switch {
		case j == len(cur):
			d.removed++
			i++
		case i == len(old):
			d.added++
			d.changed = append(d.changed, j)
			j++
		default:
			switch c := manifest.CompareKeys(&old[i], &cur[j]); {
			case c < 0:
				d.removed++
				i++
			case c > 0:
				d.added++
				d.changed = append(d.changed, j)
				j++
			default:
				if old[i].SHA256 != cur[j].SHA256 {
					d.added++
				}
				if !old[i].Equal(&cur[j]) {
					d.changed = append(d.changed, j)
				}
				i++
				j++
			}
		}
	}
	// Only packages the parent does not list as they are can break the pool path rule.
	if len(d.changed) == 0 || prev == nil {
		return d, nil
	}
	byNewPath := make(map[string]int, len(d.changed))
	for _, i := range d.changed {
		byNewPath[cur[i].Path] = i
	}
	for _, p := range prev.Packages {
		if i, ok := byNewPath[p.Path]; ok && cur[i].SHA256 != p.SHA256 {
			c := cur[i]
			from := c.Path
			if pkgs.from[i] != nil {
				from = pkgs.from[i].Path
			}
			return d, fmt.Errorf("%w: %s is %s %s (%s), already published as %s with different contents; apt clients holding the previous index would get a hash sum mismatch: give the new build a new version (for example a +b1 binNMU suffix)",
				ErrConflict, from, c.Name, c.Version, c.Architecture, p.Path)
		}
	}
	return d, nil
}
