package gen

import (
	"cmp"
	"context"
	"crypto"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/gen/sign"
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
	Key      *sign.Key
	Hash     crypto.Hash // signature digest: crypto.SHA256 or crypto.SHA512
	Date     time.Time   // SOURCE_DATE_EPOCH, or now
	Verify   bool        // rehash every input instead of trusting size and mtime
	Resign   bool        // re-sign every Release even when nothing changed (refreshes Date and Valid-Until)

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
	UpToDate bool // nothing changed: no file was written and Manifest is Previous
	Stats    Stats
}

// ErrConflict wraps errors about two different files claiming one package identity.
var ErrConflict = errors.New("conflicting packages")

// Build computes the release for opts and writes the tree. All inputs are read and
// checked before anything is written, so a bad input leaves the previous tree untouched.
// It does not write the manifest file: the caller does that after Build returns, so the
// manifest only ever names a complete tree.
func Build(ctx context.Context, o Options) (*Result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	cachePath := filepath.Join(o.CacheDir, "inputs.txt")
	cache := loadStatCache(cachePath)
	b := &builder{o: o, cache: cache}
	if err := b.collect(ctx); err != nil {
		return nil, err
	}
	icache, err := index.OpenCache(filepath.Join(o.CacheDir, "chunks"))
	if err != nil {
		return nil, fmt.Errorf("open index cache: %w", err)
	}
	b.icache = icache
	tw := newTreeWriter(o.TreeDir)
	b.tw = tw
	if err := b.generate(ctx); err != nil {
		tw.Abort()
		return nil, err
	}
	res := &Result{Stats: b.stats}
	if !b.changed() {
		tw.Abort()
		res.UpToDate = true
		res.Manifest = o.Previous
		res.Stats.Packages = len(o.Previous.Packages)
		b.saveCache(nil)
		return res, nil
	}
	m := &manifest.Manifest{
		Schema:     manifest.SchemaVersion,
		Repository: o.Repository,
		Date:       o.Date.UTC().Format(time.RFC3339),
		Packages:   b.packages,
		Files:      b.files,
	}
	if o.Previous != nil {
		m.Parent = o.Previous.ID
	}
	if err := manifest.Seal(m); err != nil {
		tw.Abort()
		return nil, err
	}
	if err := m.Validate(); err != nil {
		tw.Abort()
		return nil, fmt.Errorf("built manifest is invalid: %w", err)
	}
	if err := b.stagePool(); err != nil {
		tw.Abort()
		return nil, err
	}
	res.Stats.FilesWritten = len(tw.staged)
	res.Stats.BytesWritten = tw.written
	if err := tw.Commit(); err != nil {
		tw.Abort()
		return nil, err
	}
	res.Manifest = m
	res.Stats.Packages = len(m.Packages)
	b.saveCache(m)
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
	o      Options
	cache  *statCache
	icache *index.Cache
	tw     *treeWriter

	inputs   map[string]*input // by path
	bySum    map[string]*input // a path per distinct .deb
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
func (b *builder) collect(ctx context.Context) error {
	type claim struct {
		suite, component string
		path             string
	}
	var claims []claim
	var all []string
	stats := map[string]fileStat{}
	for _, s := range b.o.Suites {
		for _, comp := range s.Components {
			paths, err := expandInputs(b.o.BaseDir, s.Inputs[comp], stats)
			if err != nil {
				return fmt.Errorf("suite %s component %s: %w", s.Codename, comp, err)
			}
			for _, p := range paths {
				claims = append(claims, claim{s.Codename, comp, p})
				all = append(all, p)
			}
		}
	}
	sort.Strings(all)
	all = slices.Compact(all)
	ins, read, err := readInputs(ctx, all, stats, b.cache, b.o.Verify, func(d, t int) { b.progress("read", d, t) })
	if err != nil {
		return err
	}
	b.stats.Inputs, b.stats.Read = len(all), read
	b.inputs = make(map[string]*input, len(ins))
	b.bySum = make(map[string]*input, len(ins))
	for _, in := range ins {
		b.inputs[in.Path] = in
		if prev, ok := b.bySum[in.SHA256]; !ok || prev.pkg == nil && in.pkg != nil {
			b.bySum[in.SHA256] = in
		}
	}
	suites := map[string]Suite{}
	for _, s := range b.o.Suites {
		suites[s.Codename] = s
	}
	// A pool path, once published, keeps its bytes: clients holding an index of an earlier
	// release fetch it by that path and check its hash (dak and aptly refuse the same).
	published := map[string]string{}
	if b.o.Previous != nil {
		for _, p := range b.o.Previous.Packages {
			published[p.Path] = p.SHA256
		}
	}
	byKey := map[manifest.Key]string{} // key -> input path
	byPool := map[string]string{}      // pool path -> input path
	for _, c := range claims {
		in := b.inputs[c.path]
		s := suites[c.suite]
		if in.Architecture != "all" && !slices.Contains(s.Architectures, in.Architecture) {
			return fmt.Errorf("%s: field Architecture: %q is not one of suite %s's architectures (%s); add it to the suite or remove the file",
				in.Path, in.Architecture, s.Codename, strings.Join(s.Architectures, ", "))
		}
		p := manifest.Package{
			Suite: c.suite, Component: c.component,
			Name: in.Name, Version: in.Version, Architecture: in.Architecture,
			Path: poolPath(c.component, in), Size: in.Size, SHA256: in.SHA256,
		}
		if other, ok := byKey[p.Key()]; ok {
			if b.inputs[other].SHA256 == in.SHA256 {
				continue // the same file twice: de-duplicated
			}
			return fmt.Errorf("%w: %s and %s are both %s %s (%s) in %s/%s but differ; remove one",
				ErrConflict, other, in.Path, p.Name, p.Version, p.Architecture, p.Suite, p.Component)
		}
		if other, ok := byPool[p.Path]; ok && b.inputs[other].SHA256 != in.SHA256 {
			return fmt.Errorf("%w: %s and %s would both be published as %s but differ; remove one",
				ErrConflict, other, in.Path, p.Path)
		}
		byKey[p.Key()] = in.Path
		byPool[p.Path] = in.Path
		b.packages = append(b.packages, p)
	}
	for _, p := range b.packages {
		if sum, ok := published[p.Path]; ok && sum != p.SHA256 {
			return fmt.Errorf("%w: %s is %s %s (%s), already published as %s with different contents; apt clients holding the previous index would get a hash sum mismatch: give the new build a new version (for example a +b1 binNMU suffix)",
				ErrConflict, byPool[p.Path], p.Name, p.Version, p.Architecture, p.Path)
		}
	}
	m := manifest.Manifest{Packages: b.packages}
	m.Sort()
	b.packages = m.Packages
	b.diffStats()
	return nil
}

func (b *builder) diffStats() {
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
			j++
		default:
			switch c := comparePackageKeys(prev[i], b.packages[j]); {
			case c < 0:
				b.stats.Removed++
				i++
			case c > 0:
				b.stats.Added++
				j++
			default:
				if prev[i].SHA256 != b.packages[j].SHA256 {
					b.stats.Added++
				}
				i++
				j++
			}
		}
	}
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
	var prev map[string]manifest.Object
	if _, err := os.Stat(filepath.Join(b.o.TreeDir, "pool")); b.o.Previous != nil && err == nil {
		prev = b.o.Previous.Paths() // a tree removed whole is rebuilt whole; --verify repairs parts
	}
	// Copies run in parallel: a first build of a large repository is mostly file-system
	// round trips, which overlap well.
	g := new(errgroup.Group)
	g.SetLimit(8)
	staged := make(map[string]bool)
	for _, p := range b.packages {
		if staged[p.Path] {
			continue // the same file in two suites
		}
		staged[p.Path] = true
		dst := filepath.Join(b.o.TreeDir, filepath.FromSlash(p.Path))
		if old, ok := prev[p.Path]; ok && old.SHA256 == p.SHA256 && !b.o.Verify {
			continue // as indexes are: the previous build wrote and renamed it in place
		}
		g.Go(func() error {
			if b.o.Verify {
				if sum, err := fileSHA256(dst); err == nil && sum == p.SHA256 {
					return nil
				}
			}
			return b.tw.CopyFile(p.Path, b.bySum[p.SHA256].Path)
		})
	}
	return g.Wait()
}

func (b *builder) saveCache(m *manifest.Manifest) {
	entries := make(map[string]input, len(b.inputs))
	for p, in := range b.inputs {
		c := *in
		c.pkg = nil
		entries[p] = c
	}
	b.cache.Entries = entries
	if m != nil && b.o.Previous != nil {
		b.cache.Kept = b.pruneKept(m)
	}
	if m != nil {
		b.icache.Prune()
	}
	// The cache is an accelerator: failing to save it costs the next build time, not
	// correctness.
	_ = b.cache.save(filepath.Join(b.o.CacheDir, "inputs.txt"))
}

// pruneKept deletes the tree paths kept from the release before the previous one and
// returns the previous release's paths that m no longer lists, to delete next time.
func (b *builder) pruneKept(m *manifest.Manifest) []string {
	now := m.Paths()
	for _, p := range b.cache.Kept {
		if _, ok := now[p]; !ok {
			os.Remove(filepath.Join(b.o.TreeDir, filepath.FromSlash(p)))
		}
	}
	var kept []string
	for p := range b.o.Previous.Paths() {
		if _, ok := now[p]; !ok {
			kept = append(kept, p)
		}
	}
	sort.Strings(kept)
	return kept
}
