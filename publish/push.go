package publish

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/internal/lineage"
	"github.com/armor-apt/armor/internal/lockfile"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// ErrWrongRepository: the manifest is a release of another repository than the one the
// push records in (controld would refuse it once every object was uploaded).
var ErrWrongRepository = errors.New("release of another repository")

// PushOptions say what Push publishes, where, and how.
type PushOptions struct {
	Manifest string // the release manifest armor build wrote
	Tree     string // the tree holding the release's files
	// Cache is the repository's build cache: Push holds its lock (shared with other
	// pushes, never with a build), keeps there the record of what it pushed, and reads
	// there the build's record of what the release adds to its parent (WriteBuildRecord).
	Cache string

	// Store receives the objects. When nil, Push opens Remote with OpenStore once it has
	// read the manifest.
	Store  store.Store
	Remote string

	Jobs     int  // objects checked and uploaded at once; default 8
	DryRun   bool // only find what would be uploaded; upload and record nothing
	Progress func(UploadProgress)

	// Controld, if set, is where the release is recorded once all its objects are in the
	// store; Push checks it (Preflight) before it asks the store anything. Without it the
	// release is pushed to the store only.
	Controld *Controld
}

// Controld says where and how Push records a release.
type Controld struct {
	URL  string // named in errors
	Repo string
	// Activate also activates the release, on its parent only: if the active release is
	// no longer the one it was built on, nothing is activated (see Record).
	Activate bool
	// Force activates the release even if it, or one it is built on, was rolled back.
	Force bool
	// Client returns controld's client. Push calls it first, before it opens the store, so
	// an error it returns (such as a missing token) stops the push with nothing uploaded.
	Client func() (*client.Client, error)
	// TokenSource says where the client's token came from ("$ARMOR_TOKEN"), for errors.
	TokenSource string
}

// PushResult says what a Push did.
type PushResult struct {
	Release  string // the release's id
	Parent   string // the release it was built on ("" for a first release)
	Manifest string // the digest of its manifest, stored as an object too
	Store    string
	// Uploads counts the release's objects and its manifest together; in a dry run,
	// WouldUpload lists the release's missing objects, then the manifest if missing.
	Uploads UploadStats
	DryRun  bool
	// Controld is the URL of the controld the release was handed to, if it got that far.
	Controld            string
	Recorded, Activated bool
	Elapsed             time.Duration
}

// Push makes a built release present in the store, uploading only what is missing, and
// hands it to controld, which activates it only on its parent (a *StaleParentError
// otherwise). It asks the store only about objects it cannot tell are there: those not
// recorded as pushed by the last successful Push to the same store and, when controld
// recorded the release's parent (which it does only once all the parent's objects are in
// the store), not the parent's. It uploads the manifest last (a store holding it holds
// the whole release), then records that manifest as pushed. Killed at any point and run
// again, it finishes the job.
//
// Where the build left its record of what the release adds to its parent (see
// WriteBuildRecord) and that record is of these very manifest bytes, Push takes the
// release's id, parent and objects from it, and asks controld whether the parent is
// recorded, instead of parsing the manifest and fetching the parent's from the store.
// Otherwise, or if the parent is not recorded, it reads both manifests.
//
// With Controld, Push first checks that controld would take the release (Preflight: it
// answers, knows the token, the token may push and, to activate, activate, and the
// repository exists); if not, it returns that error having asked the store nothing. A
// dry run checks too, so it previews the push it stands for.
//
// It returns a nil result with an error that stops it before everything is in the
// store, and the result so far with an error after that.
func Push(ctx context.Context, o PushOptions) (*PushResult, error) {
	start := time.Now()
	// A build must not rewrite the manifest and the tree while they are read and uploaded.
	unlock, err := lockfile.Lock(o.Cache, false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rel, err := readRelease(o)
	if err != nil {
		return nil, err
	}
	var c *client.Client
	if o.Controld != nil {
		if c, err = o.Controld.Client(); err != nil {
			return nil, err
		}
		if _, err := Preflight(ctx, c, o.Controld); err != nil {
			return nil, err
		}
		if rel.Repository != o.Controld.Repo {
			return nil, fmt.Errorf("%w: %s is a release of repository %s, not of %s, where this push would record it: build it again for %s, or push to %s; nothing was uploaded",
				ErrWrongRepository, o.Manifest, rel.Repository, o.Controld.Repo, o.Controld.Repo, rel.Repository)
		}
	}
	s := o.Store
	if s == nil {
		if s, err = OpenStore(ctx, o.Remote); err != nil {
			return nil, err
		}
	}
	state := pushedStatePath(o.Cache, s)
	plan, err := planUploads(ctx, c, s, o, rel, state)
	if err != nil {
		return nil, err
	}
	res, err := uploadRelease(ctx, s, o, rel, plan)
	if err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(start)
	if o.DryRun {
		return res, nil
	}
	// Remember what the store now holds, so the next push does not even ask about it. The
	// pushed state is checked when read (its id is the digest of its content), so it is
	// written without fsync, while controld takes the release: a lost or torn one, or one
	// that could not be written, costs the next push time only.
	saved := make(chan struct{})
	go func() {
		defer close(saved)
		if !plan.statePushed {
			_ = atomicfile.WriteFileUnsynced(state, rel.data, 0o644)
		}
	}()
	if o.Controld == nil {
		<-saved
		// Published to a store no controld checks: the next build names it as its parent.
		return res, lineage.Recorded(o.Cache, rel.ID)
	}
	err = record(ctx, c, o.Controld, rel, res)
	<-saved
	if res.Recorded {
		// The next build names this release as its parent.
		if rerr := lineage.Recorded(o.Cache, rel.ID); rerr != nil && err == nil {
			err = rerr
		}
	}
	if err != nil {
		if errors.Is(err, client.ErrInvalid) {
			// controld refused the release, perhaps because objects this cache remembers
			// pushing were collected since (armor gc): the next push asks about each again.
			_ = os.Remove(state)
		}
		return res, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// pushRelease is the release Push pushes: its manifest file's bytes and digest, and
// either the manifest or the build's record of it.
type pushRelease struct {
	ID, Parent, Repository string
	data                   []byte // the manifest file
	sum                    string // its hex SHA-256
	m                      *manifest.Manifest
	built                  *buildRecord
}

// readRelease reads the manifest of the release to push. With controld to tell whether
// the parent is recorded, a build record of these bytes stands for the manifest, which
// is then not parsed.
func readRelease(o PushOptions) (*pushRelease, error) {
	data, err := readManifestFile(o.Manifest)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	rel := &pushRelease{data: data, sum: hex.EncodeToString(sum[:])}
	if o.Controld != nil {
		if b := readBuildRecord(o.Cache, rel.sum); b != nil {
			rel.ID, rel.Parent, rel.Repository, rel.built = b.Release, b.Parent, b.Repository, b
			return rel, nil
		}
	}
	return rel, rel.parse(o.Manifest)
}

// readManifest reads and parses the manifest of a release.
func readManifest(path string) ([]byte, *manifest.Manifest, error) {
	data, err := readManifestFile(path)
	if err != nil {
		return nil, nil, err
	}
	m, err := manifest.Parse(data, path)
	if err != nil {
		return nil, nil, err
	}
	return data, m, nil
}

// readManifestFile reads the manifest file at path.
func readManifestFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no manifest at %s: run `armor build` first", path)
		}
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	return data, nil
}

// parse parses the release's manifest, read from path.
func (r *pushRelease) parse(path string) error {
	m, err := manifest.Parse(r.data, path)
	if err != nil {
		return err
	}
	r.m, r.ID, r.Parent, r.Repository = m, m.ID, m.Parent, m.Repository
	return nil
}

// uploadPlan is what a push asks the store about.
type uploadPlan struct {
	uploads        []Upload // the release's objects not known present, each once
	objects, known int      // the release's distinct objects, and how many are known present
	manifestKnown  bool     // the manifest object is known present
	statePushed    bool     // the pushed state holds this very manifest already
}

// planUploads finds which of the release's objects the store is known to hold, from the
// build record and controld, or else from the pushed state and the parent's manifest.
func planUploads(ctx context.Context, c *client.Client, s store.Store, o PushOptions, rel *pushRelease, state string) (*uploadPlan, error) {
	if b := rel.built; b != nil {
		if holdsManifest(state, rel.data) {
			// Pushed from here already: every object is in the store.
			return &uploadPlan{objects: b.Objects, known: b.Objects, manifestKnown: true, statePushed: true}, nil
		}
		if parentRecorded(ctx, c, o.Controld.Repo, b.Parent) {
			p := &uploadPlan{objects: b.Objects, known: b.Objects - len(b.New)}
			for _, n := range b.New {
				p.uploads = append(p.uploads, Upload{SHA256: n.SHA256, Size: n.Size, Path: filepath.Join(o.Tree, filepath.FromSlash(n.Path))})
			}
			return p, nil
		}
		if err := rel.parse(o.Manifest); err != nil {
			return nil, err
		}
	}
	known, last := knownObjects(state)
	// A pushed state of this release knows every object; of its parent, the parent's.
	if c != nil && rel.Parent != last && rel.ID != last {
		known = withParentObjects(ctx, c, s, o.Controld.Repo, rel.Parent, known)
	}
	p := &uploadPlan{manifestKnown: known[rel.sum]}
	p.uploads, p.objects, p.known = treeUploads(rel.m, o.Tree, known)
	return p, nil
}

// parentRecorded reports whether controld recorded the release parent of repo: one
// request, whatever the release's size.
func parentRecorded(ctx context.Context, c *client.Client, repo, parent string) bool {
	r, err := c.Release(ctx, repo, parent)
	return err == nil && r.ID == parent
}

// holdsManifest reports whether the file at path holds exactly data; a file of another
// size is not read.
func holdsManifest(path string, data []byte) bool {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() != int64(len(data)) {
		return false
	}
	got, err := os.ReadFile(path)
	return err == nil && bytes.Equal(got, data)
}

// uploadRelease uploads the release's missing objects from the tree, then its manifest.
func uploadRelease(ctx context.Context, s store.Store, o PushOptions, rel *pushRelease, p *uploadPlan) (*PushResult, error) {
	res := &PushResult{Release: rel.ID, Parent: rel.Parent, Manifest: rel.sum, Store: s.String(), DryRun: o.DryRun}
	stats, err := UploadMissing(ctx, s, p.uploads, UploadOptions{
		Concurrency: o.Jobs, DryRun: o.DryRun, Progress: o.Progress,
	})
	// The known objects were left out of the uploads, not counted out of them.
	stats.Objects = p.objects
	stats.Known += p.known
	if err != nil {
		return nil, fmt.Errorf("push to %s: %d of %d objects uploaded before the error; run armor push again to finish: %w", s, stats.Uploaded, stats.Objects, err)
	}
	res.Uploads = stats
	// The manifest goes last: a store holding it holds the whole release.
	mstats, err := UploadMissing(ctx, s, []Upload{{SHA256: rel.sum, Size: int64(len(rel.data)), Path: o.Manifest}},
		UploadOptions{Known: map[string]bool{rel.sum: p.manifestKnown}, DryRun: o.DryRun})
	if err != nil {
		return nil, fmt.Errorf("push manifest to %s: %w; run armor push again to finish", s, err)
	}
	res.Uploads.add(mstats)
	return res, nil
}

// add counts the objects of another UploadMissing in s.
func (s *UploadStats) add(o UploadStats) {
	s.Objects += o.Objects
	s.Known += o.Known
	s.Present += o.Present
	s.Uploaded += o.Uploaded
	s.BytesUploaded += o.BytesUploaded
	s.BytesPresent += o.BytesPresent
	s.WouldUpload = append(s.WouldUpload, o.WouldUpload...)
}

// record hands the pushed release to controld.
func record(ctx context.Context, c *client.Client, o *Controld, rel *pushRelease, res *PushResult) error {
	res.Controld = o.URL
	activated, err := Record(ctx, c, RecordOptions{
		URL: o.URL, Repo: o.Repo, Release: rel.ID, Parent: rel.Parent, Manifest: res.Manifest, Activate: o.Activate,
		Force: o.Force,
	})
	if err != nil {
		return err
	}
	res.Recorded, res.Activated = true, activated
	return nil
}

// treeUploads maps every object of the release that known lacks to a file of the local
// tree holding it (the first of its paths in path order), and counts the release's
// distinct objects and those of them known. A release differs from the one pushed
// before it in a few objects: only those are sorted and listed.
func treeUploads(m *manifest.Manifest, treeDir string, known map[string]bool) (out []Upload, objects, knownObjects int) {
	paths := m.Paths()
	seen := make(map[string]bool, len(paths))
	var names []string
	for p, o := range paths {
		if !seen[o.SHA256] {
			seen[o.SHA256] = true
			objects++
			if known[o.SHA256] {
				knownObjects++
			}
		}
		if !known[o.SHA256] {
			names = append(names, p)
		}
	}
	sort.Strings(names)
	clear(seen)
	for _, p := range names {
		o := paths[p]
		if seen[o.SHA256] {
			continue
		}
		seen[o.SHA256] = true
		out = append(out, Upload{SHA256: o.SHA256, Size: o.Size, Path: filepath.Join(treeDir, filepath.FromSlash(p))})
	}
	return out, objects, knownObjects
}

// withParentObjects adds to known the objects of the release m was built on, when
// controld recorded it: controld records only a release whose objects are all in the
// store. A fresh CI runner has no record of what it pushed, and would otherwise ask the
// store about every object of the repository; this costs two requests, whatever its
// size. Without such a parent, known is returned as it is.
func withParentObjects(ctx context.Context, c *client.Client, s store.Store, repo, parent string, known map[string]bool) map[string]bool {
	if parent == "" {
		return known
	}
	pm, err := RecordedManifest(ctx, c, s, repo, parent)
	if err != nil {
		return known // not recorded, or unreadable: every object is checked
	}
	if known == nil {
		known = make(map[string]bool, len(pm.Packages)+len(pm.Files))
	}
	pm.EachObject(func(o manifest.Object) { known[o.SHA256] = true })
	return known
}

// pushedStatePath is where Push keeps the last manifest it pushed to a store: its
// objects are known to be there, so the next push asks only about new ones.
func pushedStatePath(cache string, s store.Store) string {
	h := sha256.Sum256([]byte(s.String()))
	return filepath.Join(cache, "pushed-"+hex.EncodeToString(h[:8])+".toml")
}

// knownObjects reads the objects recorded as pushed at path, and the id of the release
// they make up; without a readable record, every object is checked.
func knownObjects(path string) (map[string]bool, string) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, ""
	}
	m, err := manifest.Parse(data, path)
	if err != nil {
		return nil, ""
	}
	known := make(map[string]bool, len(m.Packages)+len(m.Files)+1)
	m.EachObject(func(o manifest.Object) { known[o.SHA256] = true })
	// The pushed manifest itself is an object too.
	s := sha256.Sum256(data)
	known[hex.EncodeToString(s[:])] = true
	return known, m.ID
}
