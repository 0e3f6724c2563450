package gen

import (
	"cmp"
	"context"
	"crypto"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/gen/sign"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/manifest"
	"golang.org/x/sync/errgroup"
)

// Suite is one distribution of the repository: dists/<Codename>/.
type Suite struct {
	Suite         string // the Suite field ("stable"); defaults to Codename
	Codename      string // the directory under dists/ and the Codename field
	Components    []string
	Architectures []string
	Description   string
	ValidFor      time.Duration // 0: no Valid-Until
	// Inputs maps a component to glob patterns of .deb files (** matches any depth),
	// relative to Options.BaseDir.
	Inputs map[string][]string
}

// Options is everything one build needs. Build reads no configuration file and no
// environment: the caller resolves those.
type Options struct {
	Repository  string // the manifest's repository name
	Origin      string
	Label       string
	Description string
	Suites      []Suite

	BaseDir  string // inputs are relative to it
	TreeDir  string // the dists/ + pool/ tree
	CacheDir string // the build cache (stat cache, compressed index chunks)

	Previous *manifest.Manifest // the last built manifest; nil for a first build
	// LoadPrevious, when set and Previous is nil, returns the last built manifest (nil for
	// a first build). Build calls it on its own goroutine while it lists the inputs, and
	// fails with its error; an error in the inputs found first takes precedence.
	LoadPrevious func() (*manifest.Manifest, error)

	Key    *sign.Key
	Hash   crypto.Hash // signature digest: crypto.SHA256 or crypto.SHA512
	Date   time.Time   // SOURCE_DATE_EPOCH, or now
	Verify bool        // rehash every input instead of trusting size and mtime
	Resign bool        // re-sign every Release even when nothing changed (refreshes Date and Valid-Until)

	Progress func(Progress) // may be nil; called from several goroutines
}

// Progress reports how far a build is.
type Progress struct {
	Phase       string // "read", "index", "write"
	Done, Total int
}

// Stats summarise what a build did.
type Stats struct {
	Inputs         int   // .deb files named by the configuration
	Read           int   // of those, opened and parsed in this build
	Packages       int   // packages in the release
	Added          int   // packages not in the previous release
	Removed        int   // packages of the previous release no longer listed
	IndexesWritten int   // Packages indexes regenerated (each in three forms)
	SuitesSigned   int   // Release files written and signed
	FilesWritten   int   // files written to the tree
	BytesWritten   int64 // bytes written to the tree
}

// Result is the outcome of Build.
type Result struct {
	Manifest *manifest.Manifest
	// Encoded is the manifest file's content (manifest.Marshal of Manifest), nil when
	// UpToDate: the caller writes it, once the tree is in place.
	Encoded  []byte
	UpToDate bool // nothing changed: no file was written and Manifest is Previous
	Stats    Stats
}

// ErrConflict wraps errors about two different files claiming one package identity.
var ErrConflict = errors.New("conflicting packages")

// Build computes the release for opts and writes the tree. All inputs are read and
// checked before anything is written, so a bad input leaves the previous tree untouched.
// It does not write the manifest file: the caller does that after Build returns, so the
// manifest only ever names a complete tree. The caller holds the exclusive Lock of
// o.CacheDir from before Build until the manifest is written.
func Build(ctx context.Context, o Options) (*Result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	b := &builder{o: o}
	b.startLoading()
	// Nothing started here outlives Build.
	defer func() {
		close(b.stop)
		b.bg.Wait()
	}()
	if err := b.collect(ctx); err != nil {
		return nil, err
	}
	icache, err := index.OpenCache(filepath.Join(o.CacheDir, "chunks"))
	if err != nil {
		return nil, fmt.Errorf("open index cache: %w", err)
	}
	b.icache = icache
	tw, err := newTreeWriter(o.TreeDir)
	if err != nil {
		return nil, err
	}
	b.tw = tw
	// Pool files are copied while the indexes are compressed: a first build is as much
	// file creation (kernel time) as compression (user time), and the two overlap well.
	// Both only stage files; nothing is visible before Commit.
	pool := make(chan error, 1)
	go func() { pool <- b.stagePool() }()
	abort := func(err error) (*Result, error) {
		<-pool
		tw.Abort()
		return nil, err
	}
	m := &manifest.Manifest{
		Schema:     manifest.SchemaVersion,
		Repository: o.Repository,
		Date:       o.Date.UTC().Format(time.RFC3339),
		Packages:   b.packages,
	}
	if b.o.Previous != nil {
		m.Parent = b.o.Previous.ID
	}
	// When the packages changed, so does the manifest: its packages, known now, are
	// encoded and hashed while the indexes are made, on a core the stanza assembly leaves
	// free. Otherwise the build is most likely up to date, and sealing waits until it is
	// known not to be.
	var sealer *manifest.Sealer
	if b.o.Previous == nil || len(b.added) > 0 || b.stats.Removed > 0 {
		sealer = manifest.StartSeal(m)
	}
	if err := b.generate(ctx); err != nil {
		return abort(err)
	}
	res := &Result{Stats: b.stats}
	if !b.changed() {
		abort(nil)
		res.UpToDate = true
		res.Manifest = b.o.Previous
		res.Stats.Packages = len(b.o.Previous.Packages)
		b.writeCache(b.nextCache(nil))
		return res, nil
	}
	if sealer == nil {
		sealer = manifest.StartSeal(m)
	}
	encoded, err := sealer.Finish(b.files)
	if err != nil {
		return abort(err)
	}
	if err := m.Validate(); err != nil {
		return abort(fmt.Errorf("built manifest is invalid: %w", err))
	}
	if err := <-pool; err != nil {
		tw.Abort()
		return nil, err
	}
	if err := tw.Wait(); err != nil {
		tw.Abort()
		return nil, err
	}
	res.Stats.FilesWritten = len(tw.staged)
	res.Stats.BytesWritten = tw.written
	// The next stat cache is made while Commit waits for the disk, and written only once
	// the commit succeeded: it names what the new release no longer lists.
	cacheData := make(chan []byte, 1)
	go func() { cacheData <- b.nextCache(m) }()
	if err := tw.Commit(); err != nil {
		<-cacheData
		tw.Abort()
		return nil, err
	}
	res.Manifest, res.Encoded = m, encoded
	res.Stats.Packages = len(m.Packages)
	b.writeCache(<-cacheData)
	return res, nil
}

func (o *Options) check() error {
	switch {
	case o.Repository == "":
		return errors.New("build: repository name is empty")
	case len(o.Suites) == 0:
		return errors.New("build: no suites configured")
	case o.TreeDir == "" || o.CacheDir == "":
		return errors.New("build: tree and cache directories are required")
	case o.Key == nil:
		return errors.New("build: no signing key")
	case o.Date.IsZero():
		return errors.New("build: no build date")
	}
	if o.Hash == 0 {
		o.Hash = crypto.SHA512
	}
	for i := range o.Suites {
		s := &o.Suites[i]
		if s.Codename == "" {
			return fmt.Errorf("build: suite %d has no codename", i+1)
		}
		if s.Suite == "" {
			s.Suite = s.Codename
		}
		if len(s.Components) == 0 || len(s.Architectures) == 0 {
			return fmt.Errorf("build: suite %s needs components and architectures", s.Codename)
		}
		// Names become tree paths: refuse anything that could leave dists/ or pool/.
		names := append([]string{s.Codename}, s.Components...)
		for _, n := range append(names, s.Architectures...) {
			if !manifest.ValidPath(n) || strings.HasPrefix(n, ".") {
				return fmt.Errorf("build: suite %s: %q is not a safe name for a tree path", s.Codename, n)
			}
		}
		for comp := range s.Inputs {
			if !slices.Contains(s.Components, comp) {
				return fmt.Errorf("build: suite %s: inputs name component %q, which the suite does not list", s.Codename, comp)
			}
		}
	}
	return nil
}

type builder struct {
	o           Options
	cache       *statCache
	cacheLoaded chan *statCache // the cache, once loaded
	icache      *index.Cache
	tw          *treeWriter

	prevReady  chan struct{}      // closed once what follows is set
	prevLoaded *manifest.Manifest // Options.Previous, or what LoadPrevious returned
	prevErr    error              // LoadPrevious's error
	old        *prefetch          // the previous release's indexes, read ahead; may be nil

	stop chan struct{}  // closed when Build returns: background work stops early
	bg   sync.WaitGroup // background work; Build waits for it before it returns

	ins      []*input          // every input, sorted by path
	fresh    map[string]*input // by digest: the inputs read in this build
	bySumMu  sync.Mutex        // inputFor runs from the pool stager and the index writer
	bySum    map[string]*input // by digest: every input, made when first needed
	added    []int             // indexes in packages of those the previous release lacks
	packages []manifest.Package
	files    []manifest.File
	wrote    bool
	stats    Stats
}

func (b *builder) progress(phase string, done, total int) {
	if b.o.Progress != nil {
		b.o.Progress(Progress{Phase: phase, Done: done, Total: total})
	}
}

// collect reads the inputs, validates them and computes the package list.
//
// It holds every input of a large repository at once, so it checks for conflicts on
// sorted slices rather than in maps keyed by path or identity: at 100,000 packages the
// maps cost more than the rest of an incremental build's bookkeeping.
func (b *builder) collect(ctx context.Context) error {
	type group struct {
		suite Suite
		comp  string
		files []inputFile
	}
	var groups []group
	var all []inputFile
	for _, s := range b.o.Suites {
		for _, comp := range s.Components {
			files, err := expandInputs(b.o.BaseDir, s.Inputs[comp])
			if err != nil {
				return fmt.Errorf("suite %s component %s: %w", s.Codename, comp, err)
			}
			groups = append(groups, group{s, comp, files})
		}
	}
	if len(groups) == 1 {
		all = groups[0].files // sorted and distinct already
	} else {
		for _, g := range groups {
			all = append(all, g.files...)
		}
		all = sortedInputs(all)
	}
	b.cache = <-b.cacheLoaded
	ins, read, err := readInputs(ctx, all, b.cache, b.o.Verify, func(d, t int) { b.progress("read", d, t) })
	if err != nil {
		return err
	}
	b.cache.Entries = nil // ins holds what the build needs of them; Kept stays

	b.stats.Inputs, b.stats.Read = len(all), read
	b.ins = ins
	b.fresh = map[string]*input{}
	for _, in := range ins {
		if in.pkg != nil {
			b.fresh[in.SHA256] = in
		}
	}
	// A claim is one input in one suite's component, in the order of the configuration.
	type claim struct {
		pkg   manifest.Package
		in    *input
		order int
	}
	n := 0
	for _, g := range groups {
		n += len(g.files)
	}
	claims := make([]claim, 0, n)
	for _, g := range groups {
		j := 0 // g.files and all are both sorted by path
		for _, f := range g.files {
			for all[j].path != f.path {
				j++
			}
			in := ins[j]
			if in.Architecture != "all" && !slices.Contains(g.suite.Architectures, in.Architecture) {
				return fmt.Errorf("%s: field Architecture: %q is not one of suite %s's architectures (%s); add it to the suite or remove the file",
					in.Path, in.Architecture, g.suite.Codename, strings.Join(g.suite.Architectures, ", "))
			}
			claims = append(claims, claim{
				pkg: manifest.Package{
					Suite: g.suite.Codename, Component: g.comp,
					Name: in.Name, Version: in.Version, Architecture: in.Architecture,
					Path: poolPath(g.comp, in), Size: in.Size, SHA256: in.SHA256,
				},
				in: in, order: len(claims),
			})
		}
	}
	// Canonical order, ties in configuration order: one identity claimed twice sits side
	// by side, the first claim first.
	slices.SortFunc(claims, func(x, y claim) int {
		return cmp.Or(comparePackages(x.pkg, y.pkg), cmp.Compare(x.order, y.order))
	})
	b.packages = make([]manifest.Package, 0, len(claims))
	kept := claims[:0]
	for i, c := range claims {
		if i > 0 && c.pkg.Key() == claims[i-1].pkg.Key() {
			first := claims[i-1]
			if first.in.SHA256 == c.in.SHA256 {
				continue // the same file twice: de-duplicated
			}
			p := c.pkg
			return fmt.Errorf("%w: %s and %s are both %s %s (%s) in %s/%s but differ; remove one",
				ErrConflict, first.in.Path, c.in.Path, p.Name, p.Version, p.Architecture, p.Suite, p.Component)
		}
		kept = append(kept, c)
		b.packages = append(b.packages, c.pkg)
	}
	// One pool path, one file: a path is shared by suites, and versions differing only in
	// their epoch share a file name.
	// Sorting 64-bit hashes of the paths finds the candidates without sorting the paths.
	// Each word is a hash in its high bits and an index into kept in its low bits, so the
	// sort is of plain integers; paths whose hashes agree in the high bits are compared.
	shift := bits.Len(uint(len(kept)))
	mask := uint64(1)<<shift - 1
	seed := maphash.MakeSeed()
	hashes := make([]uint64, len(kept))
	for i, c := range kept {
		hashes[i] = maphash.String(seed, c.pkg.Path)<<shift | uint64(i)
	}
	slices.Sort(hashes)
	for lo := 0; lo < len(hashes); {
		hi := lo + 1
		for hi < len(hashes) && hashes[hi]>>shift == hashes[lo]>>shift {
			hi++
		}
		for a := lo; a < hi; a++ { // a run is one path, or a rare collision
			for b := a + 1; b < hi; b++ {
				x, y := kept[hashes[a]&mask], kept[hashes[b]&mask]
				if x.pkg.Path != y.pkg.Path || x.pkg.SHA256 == y.pkg.SHA256 {
					continue
				}
				if y.order < x.order {
					x, y = y, x
				}
				return fmt.Errorf("%w: %s and %s would both be published as %s but differ; remove one",
					ErrConflict, x.in.Path, y.in.Path, x.pkg.Path)
			}
		}
		lo = hi
	}
	if err := b.waitPrevious(); err != nil {
		return err
	}
	added := b.diffStats()
	b.added = added
	// A pool path, once published, keeps its bytes: clients holding an index of an earlier
	// release fetch it by that path and check its hash (dak and aptly refuse the same).
	// Only packages the previous release does not list as they are can break that rule.
	if len(added) > 0 && b.o.Previous != nil {
		byNewPath := make(map[string]claim, len(added))
		for _, i := range added {
			byNewPath[kept[i].pkg.Path] = kept[i]
		}
		for _, p := range b.o.Previous.Packages {
			if c, ok := byNewPath[p.Path]; ok && c.pkg.SHA256 != p.SHA256 {
				return fmt.Errorf("%w: %s is %s %s (%s), already published as %s with different contents; apt clients holding the previous index would get a hash sum mismatch: give the new build a new version (for example a +b1 binNMU suffix)",
					ErrConflict, c.in.Path, c.pkg.Name, c.pkg.Version, c.pkg.Architecture, p.Path)
			}
		}
	}
	return nil
}

// startLoading starts, in the background and one after the other: loading the stat
// cache, needed as soon as the inputs are listed; the previous manifest, needed once they
// are read; and then the reading ahead of the old indexes, for the stanzas. One goroutine
// for the two loads leaves the other core to the listing of the inputs (mostly kernel
// time), which is what the build waits for.
func (b *builder) startLoading() {
	b.cacheLoaded = make(chan *statCache, 1)
	b.prevReady = make(chan struct{})
	b.stop = make(chan struct{})
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		c := loadStatCache(b.cachePath())
		// Without a cache every input is read again, and no stanza comes from the old
		// indexes: nothing to read ahead.
		readAhead := len(c.Entries) > 0
		b.cacheLoaded <- c
		b.loadPrevious(readAhead)
	}()
}

// loadPrevious makes the previous manifest available, loading it when
// Options.LoadPrevious is set, and then, if readAhead, starts reading its indexes ahead. It
// closes b.prevReady when done. If Build has returned meanwhile, it loads nothing.
func (b *builder) loadPrevious(readAhead bool) {
	defer close(b.prevReady)
	select {
	case <-b.stop:
		b.prevErr = errors.New("build: stopped")
		return
	default:
	}
	prev := b.o.Previous
	if prev == nil && b.o.LoadPrevious != nil {
		if prev, b.prevErr = b.o.LoadPrevious(); b.prevErr != nil {
			return
		}
	}
	b.prevLoaded = prev
	if readAhead {
		b.old = b.startPrefetch(prev)
	}
}

// waitPrevious waits for loadPrevious and sets Options.Previous. Nothing may read it
// before.
func (b *builder) waitPrevious() error {
	<-b.prevReady
	if b.prevErr != nil {
		return b.prevErr
	}
	b.o.Previous = b.prevLoaded
	return nil
}

// sortedInputs sorts files by path and drops repeated paths.
func sortedInputs(files []inputFile) []inputFile {
	slices.SortFunc(files, func(a, b inputFile) int { return strings.Compare(a.path, b.path) })
	return slices.CompactFunc(files, func(a, b inputFile) bool { return a.path == b.path })
}

// inputFor returns an input file whose digest is sum, preferring one read in this build
// (its stanza is at hand). It is nil when no input has that digest.
func (b *builder) inputFor(sum string) *input {
	if in, ok := b.fresh[sum]; ok {
		return in
	}
	b.bySumMu.Lock()
	defer b.bySumMu.Unlock()
	if b.bySum == nil {
		b.bySum = make(map[string]*input, len(b.ins))
		for _, in := range b.ins {
			b.bySum[in.SHA256] = in
		}
	}
	return b.bySum[sum]
}

// diffStats counts the packages added and removed since the previous release and
// returns the indexes in b.packages of those it does not list as they are.
func (b *builder) diffStats() (added []int) {
	var prev []manifest.Package
	if b.o.Previous != nil {
		prev = b.o.Previous.Packages
	}
	// Both lists are in canonical order: walk them together.
	i, j := 0, 0
	for i < len(prev) || j < len(b.packages) {
		switch {
		case j == len(b.packages):
			b.stats.Removed++
			i++
		case i == len(prev):
			b.stats.Added++
			added = append(added, j)
			j++
		default:
			switch c := comparePackageKeys(prev[i], b.packages[j]); {
			case c < 0:
				b.stats.Removed++
				i++
			case c > 0:
				b.stats.Added++
				added = append(added, j)
				j++
			default:
				if prev[i].SHA256 != b.packages[j].SHA256 {
					b.stats.Added++
				}
				if prev[i] != b.packages[j] {
					added = append(added, j)
				}
				i++
				j++
			}
		}
	}
	return added
}

// comparePackages is the manifest's canonical order of packages.
func comparePackages(a, b manifest.Package) int {
	return cmp.Or(comparePackageKeys(a, b), strings.Compare(a.Path, b.Path))
}

func comparePackageKeys(a, b manifest.Package) int {
	return cmp.Or(
		strings.Compare(a.Suite, b.Suite),
		strings.Compare(a.Component, b.Component),
		strings.Compare(a.Name, b.Name),
		strings.Compare(a.Version, b.Version),
		strings.Compare(a.Architecture, b.Architecture),
	)
}

// changed reports whether the build produced anything different from the previous
// release.
func (b *builder) changed() bool {
	if b.o.Previous == nil || b.wrote || b.o.Previous.Repository != b.o.Repository {
		return true
	}
	if !slices.Equal(b.o.Previous.Packages, b.packages) || !slices.Equal(b.o.Previous.Files, b.files) {
		return true
	}
	return false
}

// stagePool copies into the tree every pool file it does not hold yet. A file the
// previous release published under the same path with the same digest is trusted to be
// in place (--verify rehashes it); anything else is copied, so a replaced input of the
// same size is never mistaken for the old one.
func (b *builder) stagePool() error {
	todo := b.packages
	if _, err := os.Stat(filepath.Join(b.o.TreeDir, "pool")); b.o.Previous != nil && err == nil && !b.o.Verify {
		// As indexes are: the previous build wrote and renamed the others in place. A tree
		// removed whole is rebuilt whole; --verify repairs parts.
		todo = make([]manifest.Package, len(b.added))
		for i, j := range b.added {
			todo[i] = b.packages[j]
		}
	}
	// Copies run in parallel: a first build of a large repository is mostly file-system
	// round trips, which overlap well.
	g := new(errgroup.Group)
	g.SetLimit(8)
	staged := make(map[string]bool, len(todo))
	for _, p := range todo {
		if staged[p.Path] {
			continue // the same file in two suites
		}
		staged[p.Path] = true
		src := b.inputFor(p.SHA256)
		if src == nil {
			return fmt.Errorf("no input file for %s %s (%s)", p.Name, p.Version, p.Architecture)
		}
		g.Go(func() error {
			if b.o.Verify {
				dst := filepath.Join(b.o.TreeDir, filepath.FromSlash(p.Path))
				if sum, err := fileSHA256(dst); err == nil && sum == p.SHA256 {
					return nil
				}
			}
			return b.tw.CopyFile(p.Path, src.Path)
		})
	}
	return g.Wait()
}

// nextCache returns the stat cache to save after a build of m (nil when the build found
// everything up to date). It deletes the tree paths the release before the previous one
// kept, which no published release lists any more.
func (b *builder) nextCache(m *manifest.Manifest) []byte {
	if m != nil && b.o.Previous != nil {
		b.cache.Kept = b.pruneKept(m)
	}
	if m != nil {
		b.icache.Prune()
	}
	return encodeStatCache(b.ins, b.cache.Kept)
}

// writeCache saves the stat cache. The cache is an accelerator: failing to save it costs
// the next build time, not correctness.
func (b *builder) writeCache(data []byte) {
	_ = atomicfile.WriteFileUnsynced(b.cachePath(), data, 0o644)
}

func (b *builder) cachePath() string { return filepath.Join(b.o.CacheDir, "inputs.txt") }

// pruneKept deletes the tree paths kept from the release before the previous one and
// returns the previous release's paths that m no longer lists, to delete next time.
func (b *builder) pruneKept(m *manifest.Manifest) []string {
	// The candidates are few: the old kept paths, and the previous release's files and
	// packages that m does not list as they were. One pass over m rules out those it still
	// serves (a pool file may move between suites, or stay for another suite).
	const oldKept, newKept = 1, 2
	cand := map[string]int{}
	for _, p := range b.cache.Kept {
		cand[p] |= oldKept
	}
	prev := b.o.Previous
	for i, j := 0, 0; i < len(prev.Files); i++ { // both sorted by path
		for j < len(m.Files) && m.Files[j].Path < prev.Files[i].Path {
			j++
		}
		if j == len(m.Files) || m.Files[j].Path != prev.Files[i].Path {
			cand[prev.Files[i].Path] |= newKept
		}
	}
	for i, j := 0, 0; i < len(prev.Packages); i++ { // both in canonical order
		for j < len(m.Packages) && comparePackages(m.Packages[j], prev.Packages[i]) < 0 {
			j++
		}
		if j == len(m.Packages) || m.Packages[j].Path != prev.Packages[i].Path {
			cand[prev.Packages[i].Path] |= newKept
		}
	}
	for _, p := range m.Packages {
		delete(cand, p.Path)
	}
	for _, f := range m.Files {
		delete(cand, f.Path)
	}
	var kept []string
	for p, how := range cand {
		if how&oldKept != 0 && how&newKept == 0 {
			os.Remove(filepath.Join(b.o.TreeDir, filepath.FromSlash(p)))
		}
		if how&newKept != 0 {
			kept = append(kept, p)
		}
	}
	slices.Sort(kept)
	return kept
}
