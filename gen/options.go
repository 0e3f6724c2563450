package gen

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/manifest"
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
	// AllowEmpty lets a pattern of Inputs match no file. Without it such a pattern fails
	// the build with a *NoInputsError, rather than signing a release that lacks its packages.
	AllowEmpty bool
	// Sync makes the suite mirror its inputs: a package of the parent whose file is no
	// longer among them is removed (not by an explicit change, Options.Add, Remove, Copy,
	// Phase or Reference, which is the parent plus it). Otherwise the parent is the truth,
	// and inputs only add.
	Sync bool
	// MaxRemovals is the share (0 to 1) of a syncing suite's packages one build may remove
	// unless Options.AllowRemovals; 0 means DefaultMaxRemovals, 1 or more no limit.
	MaxRemovals float64
	// KeepVersions, when positive, keeps only the newest KeepVersions versions of each
	// package (per component and architecture); older ones are removed.
	KeepVersions int
	// NotAutomatic and ButAutomaticUpgrades go into Release (a backports-style suite).
	NotAutomatic, ButAutomaticUpgrades bool
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

	// The change beyond the inputs: files added to a suite's component, packages removed,
	// packages copied between suites (see change.go). A Removal or Copy that matches
	// nothing is an error wrapping ErrNotFound.
	Add    []Addition
	Remove []Removal
	Copy   []Copy
	// Phase sets or clears the Phased-Update-Percentage of package versions.
	Phase []Phase
	// Reference lists packages as they are, files already published: those a rebase
	// applies again without their files (copies, made on another runner).
	Reference []manifest.Package
	// AllowRemovals lets a syncing suite lose more than its MaxRemovals share.
	AllowRemovals bool
	// SuggestFlags are appended to the armor commands a refusal suggests, so that the
	// suggestion works where this build ran (" --from-active" for a build on the active
	// release, as on a CI runner with no manifest of its own).
	SuggestFlags string

	// Fetch, when set, reads an object of the store by its SHA-256. A build whose tree
	// lacks the parent's dists/ files (a fresh CI runner, a parent taken from controld)
	// fetches them through it. A pool file is fetched only for the file list of a
	// package that no Contents file of the parent lists and the build cache lacks. size
	// is the object's size as the manifest lists it, for the buffer to read it into.
	// Build checks the size and digest of what Fetch returns: Fetch need not.
	Fetch func(ctx context.Context, sum string, size int64) ([]byte, error)

	Key *sign.Key
	// Also are keys that sign beside Key, during a change of keys: InRelease and
	// Release.gpg carry a signature by each, and apt accepts them with any of the keys.
	Also []*sign.Key
	Hash crypto.Hash // signature digest: crypto.SHA256 or crypto.SHA512
	Date time.Time   // the date asked for: SOURCE_DATE_EPOCH, armor.toml's date, or now
	// DateSource says where Date came from, for the error that refuses a Date older
	// than the parent's (dates.go).
	DateSource DateSource
	// Rebase says the build applies a change again on a newer parent than the one it was
	// built on (armor push --rebase): a Date older than that parent's is then moved a
	// second after it, as an equal one is, instead of refused. The change lost a race to
	// another pipeline; it is not an older checkout.
	Rebase bool
	Verify bool // rehash every input instead of trusting size and mtime
	Resign bool // re-sign every Release even when nothing changed (refreshes Date and Valid-Until)
	// LinkPool stages a pool file as a hard link to its input where the file system
	// allows (tree.Writer.LinkFile), as aptly links its pool, instead of a copy: a first
	// build of many packages then writes no package again. The tree's file then is the
	// input, so an input rewritten in place changes the tree: whoever sets it replaces
	// inputs (writes them elsewhere and renames them), never rewrites them. By default a
	// pool file is a copy (tree.Writer.CopyFile), a clone on a copy-on-write file system.
	LinkPool bool
	// Now is the wall clock, against which Valid-Until is checked (nil: time.Now). A
	// build valid until a time Now has passed fails with ErrDate; a kept Release whose
	// Valid-Until has passed is signed afresh. A Date not after the parent's is moved a
	// second after it, and one older than the date the parent's build asked for fails
	// with ErrDate (dates.go).
	Now func() time.Time

	Progress func(Progress) // may be nil; called from several goroutines

	// Gate, when set, judges the release once its package list is known and before
	// anything of it is written (the installability check, gate/): an error it returns
	// refuses the build, which returns it and leaves the tree and manifest as they were.
	// It is not called for a release that lists the parent's packages unchanged.
	Gate func(ctx context.Context, in *GateInput) error

	// Manifest, when set, is the manifest file Build writes, once the tree is in place
	// (Result.Encoded holds its bytes either way). If it cannot be written, Build puts
	// the tree back as the parent had it and returns the error: the tree and the
	// manifest change together or not at all.
	Manifest string

	// fault, set by tests only (export_test.go), makes the named step of a build fail
	// after the step did its work (see steps).
	fault func(step string) error
}

// Progress reports how far a build is.
type Progress struct {
	Phase       string // "read", "index", "write"
	Done, Total int
}

// Stats summarise what a build did.
type Stats struct {
	Inputs          int   // .deb files named by the configuration
	Read            int   // of those, opened and parsed in this build
	Packages        int   // packages in the release
	Added           int   // packages not in the previous release
	Removed         int   // packages of the previous release no longer listed
	Copied          int   // packages listed in another suite or component by Options.Copy
	Pruned          int   // packages removed by retention (Suite.KeepVersions)
	IndexesWritten  int   // Packages indexes regenerated (each in three forms)
	ContentsWritten int   // Contents files regenerated (each plain and gzipped)
	SuitesSigned    int   // Release files written and signed
	FilesWritten    int   // files written to the tree
	FilesLinked     int   // of those, pool files linked to their input rather than copied
	BytesWritten    int64 // bytes written to the tree
}

// Result is the outcome of Build.
type Result struct {
	Manifest *manifest.Manifest
	// Encoded is the manifest file's content (manifest.Marshal of Manifest), nil when
	// UpToDate: the caller writes it, once the tree is in place.
	Encoded  []byte
	UpToDate bool // nothing changed: no file was written and Manifest is Previous
	// Parent is the release the build started from (nil for a first build), for the
	// caller to say what changed.
	Parent *manifest.Manifest
	Stats  Stats
}

// ErrConflict wraps errors about two different files claiming one package identity.
var ErrConflict = errors.New("conflicting packages")

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
		if s.MaxRemovals < 0 || s.KeepVersions < 0 {
			return fmt.Errorf("build: suite %s: max removals and kept versions may not be negative", s.Codename)
		}
		for comp := range s.Inputs {
			if !slices.Contains(s.Components, comp) {
				return fmt.Errorf("build: suite %s: inputs name component %q, which the suite does not list", s.Codename, comp)
			}
		}
	}
	for _, a := range o.Add {
		if !o.hasComponent(a.Suite, a.Component) {
			return fmt.Errorf("add %s: no component %q in suite %q of the configuration", a.Path, a.Component, a.Suite)
		}
	}
	return nil
}

// hasComponent reports whether the suite with the codename lists the component.
func (o *Options) hasComponent(suite, comp string) bool {
	for _, s := range o.Suites {
		if s.Codename == suite {
			return slices.Contains(s.Components, comp)
		}
	}
	return false
}

// progressOf returns the function that reports the progress of phase, or nil.
func (o *Options) progressOf(phase string) func(done, total int) {
	if o.Progress == nil {
		return nil
	}
	return func(done, total int) { o.Progress(Progress{Phase: phase, Done: done, Total: total}) }
}

// dirs are where a build reads and writes: the tree, and the build cache beside it.
type dirs struct {
	tree, cache string
}

func (o *Options) dirs() dirs { return dirs{o.TreeDir, o.CacheDir} }

// fetchFunc reads an object of the store by its SHA-256 (Options.Fetch); nil when the
// build has no store.
type fetchFunc func(ctx context.Context, sum string, size int64) ([]byte, error)
