package gen

import (
	"context"
	"errors"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/gen/inputs"
	"github.com/armor-apt/armor/manifest"
)

// loader loads in the background, one after the other: the stat cache, needed as soon
// as the inputs are listed; the previous manifest, needed once they are read; and then
// it starts the reading ahead of the old indexes, for the stanzas. One goroutine for the
// two loads leaves the other core to the listing of the inputs (mostly kernel time),
// which is what the build waits for. The loader owns what it loads until parent hands
// it over; close stops it and waits for it.
type loader struct {
	statCache chan *inputs.StatCache // receives the stat cache, once
	stop      chan struct{}          // closed by close: load nothing more
	loaded    chan struct{}          // closed once prev (or err) is set, before hydrate
	done      chan struct{}          // closed once prev, err and old are set
	prev      *manifest.Manifest
	err       error
	fetchErr  error // why the parent's files could not be fetched into the tree
	old       *prefetch
	made      madeIndexes // the plain indexes hydrate made
	// fresh is true when the cache held no tree marker before hydrate: nothing was built
	// or fetched with this cache before (see parent.fresh).
	fresh  bool
	plains map[string]release.Digests
	dirs   dirs
}

// parentSource is where a build's parent release comes from.
type parentSource struct {
	prev  *manifest.Manifest                 // Options.Previous
	load  func() (*manifest.Manifest, error) // Options.LoadPrevious
	fetch fetchFunc                          // what hydrate fetches the parent's files with
}

func (o *Options) parentSource() parentSource {
	return parentSource{o.Previous, o.LoadPrevious, o.Fetch}
}

// startLoading starts loading, in d, the stat cache and the parent that src names, for a
// build of suites; verify (Options.Verify) reads nothing ahead.
func startLoading(ctx context.Context, d dirs, src parentSource, suites []Suite, verify bool) *loader {
	l := &loader{
		statCache: make(chan *inputs.StatCache, 1),
		stop:      make(chan struct{}),
		loaded:    make(chan struct{}),
		done:      make(chan struct{}),
		dirs:      d,
	}
	go func() {
		defer close(l.done)
		c := inputs.LoadStatCache(statCachePath(d.cache))
		// Without a cache every input is read again, and no stanza comes from the old
		// indexes: nothing to read ahead.
		readAhead := len(c.Entries) > 0 && !verify
		l.statCache <- c
		// The change is planned from the manifest alone (planRelease) while its files are
		// fetched and read.
		l.prev, l.err = l.loadManifest(src)
		close(l.loaded)
		if l.err == nil {
			l.loadFiles(ctx, src.fetch, suites, readAhead)
		}
	}()
	return l
}

// loadManifest returns the previous manifest: src's, or what src.load loads; nil for a
// first build. If Build has returned meanwhile, it loads nothing.
func (l *loader) loadManifest(src parentSource) (*manifest.Manifest, error) {
	select {
	case <-l.stop:
		return nil, errors.New("build: stopped")
	default:
	}
	if src.prev == nil && src.load != nil {
		return src.load()
	}
	return src.prev, nil
}

// loadFiles fetches what the tree lacks of the previous release (hydrate), and then, if
// readAhead, starts reading its indexes ahead.
func (l *loader) loadFiles(ctx context.Context, fetch fetchFunc, suites []Suite, readAhead bool) {
	// The tree should hold the parent's indexes before they are read. If they cannot be
	// fetched, the inputs may still hold every package the build needs (a runner with
	// every .deb but without the store); the build says why when they do not.
	aliases := aliasDirs(suites)
	l.fresh = !hasTreeMarker(l.dirs.cache)
	l.fetchErr = hydrate(ctx, l.dirs, fetch, aliases, l.prev, &l.made)
	l.plains = plainIndexes(l.dirs.tree, aliases, l.prev)
	if readAhead {
		l.old = startPrefetch(l.dirs, suites, l.prev, l.plains, &l.made)
	}
}

// manifest waits for the previous manifest alone, nil for a first build. Until parent
// returns, it is shared with the loader, and neither changes it.
func (l *loader) manifest() (*manifest.Manifest, error) {
	<-l.loaded
	return l.prev, l.err
}

// parent waits for the previous manifest and its files, and returns the parent. Nothing
// may read Options.Previous instead: it is nil when LoadPrevious loads the manifest.
func (l *loader) parent() (*parent, error) {
	<-l.done
	if l.err != nil {
		return nil, l.err
	}
	p := &parent{m: l.prev, files: map[string]manifest.File{}, old: l.old, made: &l.made, plains: l.plains, fetchErr: l.fetchErr, dirs: l.dirs, fresh: l.fresh && l.prev != nil}
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
