package publish

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
	"golang.org/x/sync/errgroup"
)

// CheckRelease names a release for Check: its id and the digest of its manifest object.
type CheckRelease struct {
	ID       string // may be empty when Local is set
	Manifest string // sha256 of the manifest object in the store
	// Local, when set, is the release's manifest as read from a local file, and
	// LocalSize the size of that file: Check does not fetch the manifest then, but checks
	// its object like any other.
	Local     *manifest.Manifest
	LocalSize int64
}

// CheckOptions say what Check checks, and how.
type CheckOptions struct {
	Store    store.Store
	Releases []CheckRelease
	// ReadData reads every object and re-hashes it; without it, Check only asks the
	// store for each object's size.
	ReadData bool
	Jobs     int // objects checked at once; default 8
	// Progress, if set, is called after every object, from any goroutine.
	Progress func(CheckProgress)
}

// CheckProgress counts the objects Check has checked and their bytes (as listed).
type CheckProgress struct {
	ObjectsDone, ObjectsTotal int
	BytesDone, BytesTotal     int64
}

// Kinds of Problem.
const (
	ProblemMissing  = "missing"          // the store lacks the object
	ProblemSize     = "size_mismatch"    // the store holds the object with another size
	ProblemHash     = "hash_mismatch"    // the store's bytes have another SHA-256
	ProblemManifest = "invalid_manifest" // a manifest object that matches its digest but is not the release's manifest
)

// ManifestPath is the Use.Path of a release's manifest object, which no served path names.
const ManifestPath = "(manifest)"

// Use is one place a release uses an object.
type Use struct {
	Release string `json:"release"`
	Path    string `json:"path"` // a served path, or ManifestPath
}

// Problem is one object that the store lacks or holds with other content.
type Problem struct {
	Kind   string `json:"kind"`
	SHA256 string `json:"sha256"`
	// Size is the size the releases list; -1 for a recorded release's manifest, whose
	// size controld does not record.
	Size      int64  `json:"size"`
	GotSize   int64  `json:"got_size,omitempty"`   // size_mismatch, hash_mismatch: what the store holds
	GotSHA256 string `json:"got_sha256,omitempty"` // hash_mismatch
	Detail    string `json:"detail,omitempty"`
	Uses      []Use  `json:"uses"` // sorted by path, then in the order of the releases
}

// CheckedRelease is one release Check went through.
type CheckedRelease struct {
	ID       string `json:"id"`
	Manifest string `json:"manifest"`
	Objects  int    `json:"objects"` // distinct objects it lists; 0 when its manifest is unreadable
	// Readable is false when its manifest object is missing or damaged, so that its other
	// objects could not be checked (the manifest is then among the problems).
	Readable bool `json:"readable"`
}

// CheckReport is what Check found.
type CheckReport struct {
	Store    string           `json:"store"`
	ReadData bool             `json:"read_data"`
	Releases []CheckedRelease `json:"releases"`
	Objects  int              `json:"objects"` // distinct objects checked, manifests included
	Bytes    int64            `json:"bytes"`   // their bytes, as listed
	Problems []Problem        `json:"problems"`
}

// Check checks that the store holds every object of the given releases, their manifests
// included: present, with the listed size, and with ReadData also with the listed
// SHA-256. An object used by several releases is checked once, and its problem names
// every release and path that uses it. A recorded release's manifest is fetched and
// re-hashed whatever ReadData says, as its objects are known only from it.
//
// Problems the store's content has are in the report, not errors; an error means the
// store could not answer (or ctx ended), and the check is not complete.
func Check(ctx context.Context, o CheckOptions) (*CheckReport, error) {
	if o.Store == nil {
		return nil, ErrNoStore
	}
	c := &checker{o: o, report: &CheckReport{Store: o.Store.String(), ReadData: o.ReadData}}
	if err := c.loadManifests(ctx); err != nil {
		return nil, err
	}
	if err := c.checkObjects(ctx); err != nil {
		return nil, err
	}
	c.attribute()
	return c.report, nil
}

// checker is the state of one Check.
type checker struct {
	o      CheckOptions
	report *CheckReport

	manifests []*manifest.Manifest // by release; nil when unreadable
	objects   []manifest.Object    // distinct, sorted by digest
	found     map[manifest.Object]*Problem

	mu       sync.Mutex
	progress CheckProgress
}

// loadManifests fetches the recorded releases' manifests, checking each manifest object
// on the way, and adds the local ones' manifest objects to those to check.
func (c *checker) loadManifests(ctx context.Context) error {
	rels := c.o.Releases
	c.manifests = make([]*manifest.Manifest, len(rels))
	c.report.Releases = make([]CheckedRelease, len(rels))
	c.found = map[manifest.Object]*Problem{}
	problems := make([]*Problem, len(rels))
	sizes := make([]int64, len(rels))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cmp.Or(c.o.Jobs, 8))
	for i, r := range rels {
		if r.Local != nil {
			c.manifests[i] = r.Local
			continue
		}
		g.Go(func() error {
			m, size, p, err := fetchCheckedManifest(gctx, c.o.Store, r)
			c.manifests[i], sizes[i], problems[i] = m, size, p
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i, r := range rels {
		c.addRelease(i, r, sizes[i], problems[i])
	}
	return nil
}

// addRelease records release i in the report: its objects to check, or the problem of
// its manifest; size is that of its manifest when fetched.
func (c *checker) addRelease(i int, r CheckRelease, size int64, p *Problem) {
	m := c.manifests[i]
	cr := CheckedRelease{ID: r.ID, Manifest: r.Manifest, Readable: m != nil}
	if cr.ID == "" && m != nil {
		cr.ID = m.ID
	}
	if p != nil {
		p.Uses = []Use{{Release: cr.ID, Path: ManifestPath}}
		c.addProblem(manifest.Object{SHA256: p.SHA256, Size: p.Size}, p)
	}
	if m != nil {
		cr.Objects = len(m.Objects())
		if r.Local == nil {
			// Fetched, so read and re-hashed already.
			c.report.Objects++
			c.report.Bytes += size
		}
	}
	c.report.Releases[i] = cr
}

// addProblem records p for o, or adds p's uses to the problem already found for o (a
// manifest shared by two recorded releases).
func (c *checker) addProblem(o manifest.Object, p *Problem) {
	if prev := c.found[o]; prev != nil {
		prev.Uses = append(prev.Uses, p.Uses...)
		return
	}
	c.found[o] = p
}

// fetchCheckedManifest reads and parses a recorded release's manifest. A manifest the
// store lacks or holds damaged is a problem, not an error.
func fetchCheckedManifest(ctx context.Context, s store.Store, r CheckRelease) (*manifest.Manifest, int64, *Problem, error) {
	p := &Problem{SHA256: r.Manifest, Size: -1}
	rc, err := s.Open(ctx, r.Manifest, 0, -1)
	if errors.Is(err, store.ErrNotFound) {
		p.Kind = ProblemMissing
		return nil, 0, p, nil
	}
	if err != nil {
		return nil, 0, nil, fmt.Errorf("check manifest %s of release %s: %w", r.Manifest, r.ID, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("check manifest %s of release %s: %w", r.Manifest, r.ID, err)
	}
	size := int64(len(data))
	if got := sha256Hex(data); got != r.Manifest {
		p.Kind, p.GotSize, p.GotSHA256 = ProblemHash, size, got
		return nil, 0, p, nil
	}
	m, err := manifest.Parse(data, "store object "+r.Manifest)
	if err == nil && r.ID != "" && m.ID != r.ID {
		err = fmt.Errorf("it holds release %s", m.ID)
	}
	if err != nil {
		p.Kind, p.Size, p.Detail = ProblemManifest, size, err.Error()
		return nil, 0, p, nil
	}
	return m, size, nil, nil
}

func sha256Hex(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// distinctObjects lists the objects to check: every readable release's objects and the
// local manifests, each (digest, size) once, sorted.
func (c *checker) distinctObjects() []manifest.Object {
	seen := map[manifest.Object]bool{}
	var out []manifest.Object
	add := func(o manifest.Object) {
		if !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	for i, m := range c.manifests {
		if m == nil {
			continue
		}
		for _, o := range m.Objects() {
			add(o)
		}
		if r := c.o.Releases[i]; r.Local != nil {
			add(manifest.Object{SHA256: r.Manifest, Size: r.LocalSize})
		}
	}
	slices.SortFunc(out, func(a, b manifest.Object) int {
		return cmp.Or(strings.Compare(a.SHA256, b.SHA256), cmp.Compare(a.Size, b.Size))
	})
	return out
}

// checkObjects checks every distinct object, Jobs at a time.
func (c *checker) checkObjects(ctx context.Context) error {
	c.objects = c.distinctObjects()
	c.progress.ObjectsTotal = len(c.objects)
	for _, o := range c.objects {
		c.progress.BytesTotal += o.Size
	}
	problems := make([]*Problem, len(c.objects))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cmp.Or(c.o.Jobs, 8))
	for i, o := range c.objects {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			p, err := c.checkObject(gctx, o)
			problems[i] = p
			c.done(o)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, o := range c.objects {
		c.report.Objects++
		c.report.Bytes += o.Size
		if problems[i] != nil {
			c.addProblem(o, problems[i])
		}
	}
	return nil
}

// checkObject checks one object: its size, or with ReadData its content.
func (c *checker) checkObject(ctx context.Context, o manifest.Object) (*Problem, error) {
	p := &Problem{SHA256: o.SHA256, Size: o.Size}
	var got store.Info
	var err error
	if c.o.ReadData {
		got, err = readInfo(ctx, c.o.Store, o.SHA256)
	} else {
		got, err = c.o.Store.Stat(ctx, o.SHA256)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		p.Kind = ProblemMissing
	case err != nil:
		return nil, fmt.Errorf("check object %s: %w", o.SHA256, err)
	case got.Size != o.Size:
		p.Kind, p.GotSize = ProblemSize, got.Size
	case got.SHA256 != o.SHA256:
		p.Kind, p.GotSize, p.GotSHA256 = ProblemHash, got.Size, got.SHA256
	default:
		return nil, nil
	}
	return p, nil
}

// readInfo reads a whole object and returns the size and SHA-256 of its bytes.
func readInfo(ctx context.Context, s store.Store, sum string) (store.Info, error) {
	rc, err := s.Open(ctx, sum, 0, -1)
	if err != nil {
		return store.Info{}, err
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	if err != nil {
		return store.Info{}, fmt.Errorf("read object %s from %s: %w", sum, s, err)
	}
	return store.Info{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// done counts one object checked and reports progress.
func (c *checker) done(o manifest.Object) {
	if c.o.Progress == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.progress.ObjectsDone++
	c.progress.BytesDone += o.Size
	c.o.Progress(c.progress)
}

// attribute names, for each problem, every release and path that uses its object, and
// sorts the problems by their first use.
func (c *checker) attribute() {
	for i, m := range c.manifests {
		if m == nil {
			continue
		}
		id := c.report.Releases[i].ID
		use := func(path, sum string, size int64) {
			if p := c.found[manifest.Object{SHA256: sum, Size: size}]; p != nil {
				p.Uses = append(p.Uses, Use{Release: id, Path: path})
			}
		}
		for _, pk := range m.Packages {
			use(pk.Path, pk.SHA256, pk.Size)
			for _, f := range pk.Files { // a source package's tarballs
				use(f.Path, f.SHA256, f.Size)
			}
		}
		for _, f := range m.Files {
			use(f.Path, f.SHA256, f.Size)
		}
		if r := c.o.Releases[i]; r.Local != nil {
			use(ManifestPath, r.Manifest, r.LocalSize)
		}
	}
	c.report.Problems = make([]Problem, 0, len(c.found))
	for _, p := range c.found {
		slices.SortStableFunc(p.Uses, func(a, b Use) int { return strings.Compare(a.Path, b.Path) })
		c.report.Problems = append(c.report.Problems, *p)
	}
	slices.SortFunc(c.report.Problems, func(a, b Problem) int {
		return cmp.Or(compareFirstUse(a.Uses, b.Uses), strings.Compare(a.SHA256, b.SHA256))
	})
}

func compareFirstUse(a, b []Use) int {
	if len(a) == 0 || len(b) == 0 {
		return cmp.Compare(len(a), len(b))
	}
	return cmp.Or(strings.Compare(a[0].Path, b[0].Path), strings.Compare(a[0].Release, b[0].Release))
}

// LocalRelease reads the manifest file at path as the one release to check.
func LocalRelease(path string) (CheckRelease, error) {
	data, m, err := readManifest(path)
	if err != nil {
		return CheckRelease{}, err
	}
	return CheckRelease{ID: m.ID, Manifest: sha256Hex(data), Local: m, LocalSize: int64(len(data))}, nil
}

// ReleasesToCheck returns the releases of repo recorded in controld that a check covers:
// the one release whose id starts with id when id is set; else, with servedOnly, the
// active release and those retained within the repository's window (what the edges
// serve); else every recorded release (every one is kept, since none is deleted).
func ReleasesToCheck(ctx context.Context, c *client.Client, repo, id string, servedOnly bool) ([]CheckRelease, error) {
	if servedOnly && id == "" {
		return servedReleases(ctx, c, repo)
	}
	rels, err := c.Releases(ctx, repo)
	if err != nil {
		return nil, fmt.Errorf("list releases of %s: %w", repo, err)
	}
	var out []CheckRelease
	for _, r := range rels {
		if strings.HasPrefix(r.ID, id) {
			out = append(out, CheckRelease{ID: r.ID, Manifest: r.Manifest})
		}
	}
	if id != "" && len(out) != 1 {
		return nil, fmt.Errorf("release %q matches %d recorded releases of %s; give more of its id (armor releases list)", id, len(out), repo)
	}
	return out, nil
}

// servedReleases returns repo's active release and its retained ones.
func servedReleases(ctx context.Context, c *client.Client, repo string) ([]CheckRelease, error) {
	st, err := c.Status(ctx, repo)
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", repo, err)
	}
	var out []CheckRelease
	if st.Active != nil {
		out = append(out, CheckRelease{ID: st.Active.Release, Manifest: st.Active.Manifest})
	}
	for _, r := range st.Retained {
		out = append(out, CheckRelease{ID: r.ID, Manifest: r.Manifest})
	}
	return out, nil
}
