package controld

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/armor-apt/armor/controld/state"
	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// maxSignedFile bounds the InRelease and Release.gpg files controld reads.
const maxSignedFile = 64 << 20

// readObject reads a whole object of at most limit bytes and checks its digest.
// A missing object or one over the limit is a 422 describing what; a store failure 502.
func (s *Server) readObject(ctx context.Context, what, sum string, limit int64) ([]byte, error) {
	return s.read(ctx, what, sum, limit, false)
}

// readExact reads a whole object whose size is known, as readObject: any other size is
// damage in the store.
func (s *Server) readExact(ctx context.Context, what, sum string, size int64) ([]byte, error) {
	return s.read(ctx, what, sum, size, true)
}

func (s *Server) read(ctx context.Context, what, sum string, limit int64, exact bool) ([]byte, error) {
	rc, err := s.store.Open(ctx, sum, 0, -1)
	if errors.Is(err, store.ErrNotFound) {
		return nil, invalidRelease("%s (object %s) is not in the store %s: upload it first (armor push)", what, sum, s.store)
	}
	if err != nil {
		return nil, storeFailed("read %s from the store %s: %w", what, s.store, err)
	}
	defer rc.Close()
	size := int64(-1)
	if exact {
		size = limit
	}
	data, err := store.ReadSized(io.LimitReader(rc, limit+1), size)
	if err != nil {
		return nil, storeFailed("read %s from the store %s: %w", what, s.store, err)
	}
	sum256 := sha256.Sum256(data)
	got := hex.EncodeToString(sum256[:])
	switch {
	case exact && (int64(len(data)) != limit || got != sum):
		return nil, invalidRelease("%s: store object %s has %d bytes of content with sha256 %s, not %d bytes: the store is damaged, upload it again",
			what, sum, len(data), got, limit)
	case int64(len(data)) > limit:
		return nil, invalidRelease("%s (object %s) is over %d bytes", what, sum, limit)
	case got != sum:
		return nil, invalidRelease("%s: store object %s has content with sha256 %s: the store is damaged, upload it again", what, sum, got)
	}
	return data, nil
}

// loadManifest reads and strictly decodes the manifest object sum.
func (s *Server) loadManifest(ctx context.Context, sum string) (*manifest.Manifest, error) {
	// Of 100,000 packages a manifest is 25 MB: read into one buffer of the size the store
	// gives (one request more), not grown by io.ReadAll, which touches about three times
	// the memory, whose page faults cost more than the read.
	var data []byte
	var err error
	if info, serr := s.store.Stat(ctx, sum); serr == nil && info.Size <= s.cfg.MaxManifest {
		data, err = s.readExact(ctx, "manifest", sum, info.Size)
	} else {
		data, err = s.readObject(ctx, "manifest", sum, s.cfg.MaxManifest)
	}
	if err != nil {
		return nil, err
	}
	m, err := manifest.Parse(data, "store object "+sum)
	if err != nil {
		return nil, invalidRelease("%w", err)
	}
	return m, nil
}

// verifyRelease checks everything a release must satisfy before it is recorded and
// returns its record (without pusher and time): every InRelease verifies against a key
// of the repository, its Release lists the same sizes and digests as the manifest, the
// manifest serves nothing the signed files do not list (bound.go), and every object of
// the manifest is in the store.
func (s *Server) verifyRelease(ctx context.Context, repo state.Repository, m *manifest.Manifest, sum string) (state.Release, error) {
	if m.Parent == "" && repo.Active != nil {
		return state.Release{}, invalidRelease("manifest %s: release %s has no parent, but repository %s has releases already: build from the manifest of a recorded release", sum, m.ID, repo.Name)
	}
	if m.Parent != "" {
		if _, err := s.st.Release(ctx, repo.Name, m.Parent); errors.Is(err, state.ErrNotFound) {
			return state.Release{}, invalidRelease("manifest %s: parent release %s is not recorded in repository %s: build from the manifest of a recorded release", sum, m.Parent, repo.Name)
		} else if err != nil {
			return state.Release{}, err
		}
	}
	// Only the generated files can be dists/ files (packages are under pool/, which
	// manifest validation enforces): a map of them, not of every path (100,000 packages).
	paths := filePaths(m)
	if err := checkByHash(paths); err != nil {
		return state.Release{}, err
	}
	suites, signer, err := s.verifySuites(ctx, repo, paths)
	if err != nil {
		return state.Release{}, err
	}
	if err := checkDistsFiles(m, suites); err != nil {
		return state.Release{}, err
	}
	if err := s.boundPackages(ctx, repo.Name, m, suites, paths); err != nil {
		return state.Release{}, err
	}
	if err := s.checkObjects(ctx, repo, m); err != nil {
		return state.Release{}, err
	}
	objects := s.known.add(repo.Name, sum, m) // likely the next active release
	rel := state.Release{
		Repository: repo.Name, ID: m.ID, Manifest: sum, Parent: m.Parent, Date: m.Date,
		Packages: len(m.Packages), Files: len(m.Files), Signer: signer,
		Suites: map[string]state.Suite{},
	}
	for _, su := range suites {
		rel.Suites[su.dir] = state.Suite{Date: su.date.UTC().Format(time.RFC3339), InRelease: paths[su.dir+"/InRelease"].SHA256}
	}
	for o := range objects {
		rel.Size += o.Size
	}
	return rel, nil
}

// filePaths maps each generated file of m (its dists/ files) to its object.
func filePaths(m *manifest.Manifest) map[string]manifest.Object {
	out := make(map[string]manifest.Object, len(m.Files))
	for _, f := range m.Files {
		out[f.Path] = manifest.Object{SHA256: f.SHA256, Size: f.Size}
	}
	return out
}

// checkByHash makes sure each by-hash path is served as the object its name promises.
func checkByHash(paths map[string]manifest.Object) error {
	for p, o := range paths {
		dir, name := path.Split(p)
		if strings.HasSuffix(dir, "/by-hash/SHA256/") && name != o.SHA256 {
			return invalidRelease("%s is listed with sha256 %s: a by-hash path must hold the object it is named after", p, o.SHA256)
		}
	}
	return nil
}

// checkDistsFiles makes sure every generated file of m is a file of a verified suite:
// its InRelease, Release or Release.gpg, a file its signed Release lists, or a by-hash
// copy of one (named after a SHA-256 that Release lists for a file of that directory).
func checkDistsFiles(m *manifest.Manifest, suites []*suite) error {
	byDir := make(map[string]*suite, len(suites))
	hashed := map[string]bool{} // "dists/<suite>/<dir>/by-hash/SHA256/<sum>"
	for _, su := range suites {
		byDir[su.dir] = su
		for p, d := range su.rel.Sums {
			if d.SHA256 != "" {
				hashed[su.dir+"/"+path.Dir(p)+"/by-hash/SHA256/"+d.SHA256] = true
			}
		}
	}
	for _, f := range m.Files {
		var su *suite
		for dir := path.Dir(f.Path); dir != "." && dir != "/"; dir = path.Dir(dir) {
			if su = byDir[dir]; su != nil {
				break
			}
		}
		if su == nil {
			return invalidRelease("%s is not in the directory of a signed suite (dists/<suite>/ with an InRelease): only what a signed Release lists may be served besides the packages", f.Path)
		}
		rest := strings.TrimPrefix(f.Path, su.dir+"/")
		switch {
		case rest == "InRelease" || rest == "Release" || rest == "Release.gpg":
		case su.rel.Sums[rest].SHA256 != "":
		case hashed[f.Path]:
		default:
			return invalidRelease("%s is not listed in the signed Release of suite %s: only what a signed Release lists may be served besides the packages", f.Path, su.label())
		}
	}
	return nil
}

// verifySuites verifies each dists/<suite>/InRelease of the manifest and returns the
// suites and the fingerprint of the signing key (of the first suite, in path order).
func (s *Server) verifySuites(ctx context.Context, repo state.Repository, paths map[string]manifest.Object) ([]*suite, string, error) {
	var inreleases []string
	for p := range paths {
		if strings.HasPrefix(p, "dists/") && path.Base(p) == "InRelease" {
			inreleases = append(inreleases, p)
		}
	}
	if len(inreleases) == 0 {
		return nil, "", invalidRelease("the manifest lists no dists/<suite>/InRelease: there is nothing to verify")
	}
	if len(repo.Keys) == 0 {
		return nil, "", invalidRelease("repository %s has no signing key: register the public key first", repo.Name)
	}
	keyrings := make([][]byte, len(repo.Keys))
	for i, k := range repo.Keys {
		keyrings[i] = []byte(k.Armored)
	}
	slices.Sort(inreleases)
	signer := ""
	var suites []*suite
	for _, p := range inreleases {
		su, fp, err := s.verifySuite(ctx, repo.Name, path.Dir(p), paths, keyrings)
		if err != nil {
			return nil, "", err
		}
		if signer == "" {
			signer = fp
		}
		suites = append(suites, su)
	}
	return suites, signer, nil
}

// verifySuite verifies one suite directory (dists/<suite>).
func (s *Server) verifySuite(ctx context.Context, repo, dir string, paths map[string]manifest.Object, keyrings [][]byte) (*suite, string, error) {
	inPath := dir + "/InRelease"
	data, err := s.readObject(ctx, inPath, paths[inPath].SHA256, maxSignedFile)
	if err != nil {
		return nil, "", err
	}
	plain, fp, err := sign.VerifyClearsigned(data, keyrings...)
	switch {
	case errors.Is(err, sign.ErrUnknownKey):
		return nil, "", invalidRelease("%s is signed by a key not registered for repository %s: sign with a registered key, or register its public key", inPath, repo)
	case err != nil:
		return nil, "", invalidRelease("%s: %w", inPath, err)
	}
	relPath := dir + "/Release"
	if o, ok := paths[relPath]; ok {
		sum := sha256.Sum256(plain)
		if o.SHA256 != hex.EncodeToString(sum[:]) || o.Size != int64(len(plain)) {
			return nil, "", invalidRelease("%s is not the text signed in %s: sign the Release file that is published", relPath, inPath)
		}
	}
	if o, ok := paths[dir+"/Release.gpg"]; ok {
		sig, err := s.readObject(ctx, dir+"/Release.gpg", o.SHA256, maxSignedFile)
		if err != nil {
			return nil, "", err
		}
		if _, err := sign.VerifyDetached(plain, sig, keyrings...); err != nil {
			return nil, "", invalidRelease("%s does not verify the signed Release: %w", dir+"/Release.gpg", err)
		}
	}
	rel, err := release.Parse(plain)
	if err != nil {
		return nil, "", invalidRelease("%s: %w", inPath, err)
	}
	su := &suite{dir: dir, rel: rel, name: rel.Field("Codename")}
	if su.name == "" {
		su.name = strings.TrimPrefix(dir, "dists/")
	}
	if su.date, err = rel.Date(); err != nil {
		return nil, "", invalidRelease("%s: %w: apt could not tell it from an older release", inPath, err)
	}
	if err := s.checkValidUntil(dir, inPath, rel); err != nil {
		return nil, "", err
	}
	for _, p := range rel.Paths() {
		e := rel.Sums[p]
		full := dir + "/" + p
		o, ok := paths[full]
		if !ok {
			continue
		}
		if e.SHA256 == "" {
			return nil, "", invalidRelease("%s: Release lists it without a SHA256 sum: serve only files Release lists with one", full)
		}
		if o.SHA256 != e.SHA256 || o.Size != e.Size {
			return nil, "", invalidRelease("%s: Release lists sha256 %s and size %d, the manifest has sha256 %s and size %d",
				full, e.SHA256, e.Size, o.SHA256, o.Size)
		}
	}
	return su, fp, nil
}

// checkValidUntil refuses a suite whose Release has expired by controld's clock: apt
// would refuse it too ("Release file is expired"), so activating it would break every
// client of the repository.
func (s *Server) checkValidUntil(dir, inPath string, rel *release.File) error {
	until, err := rel.ValidUntil()
	if err != nil {
		return invalidRelease("%s: %w", inPath, err)
	}
	if now := s.now(); !until.IsZero() && now.After(until) {
		return invalidRelease("suite %s: Release is valid until %s, which has passed (controld's clock says %s): rebuild with armor build --resign to refresh Valid-Until, then push again",
			strings.TrimPrefix(dir, "dists/"), release.FormatDate(until), release.FormatDate(now))
	}
	return nil
}

// maxMissingListed bounds how many missing objects an error names.
const maxMissingListed = 10

// checkObjects makes sure every object of m is in the store with its size. Objects of
// the repository's active release are known present (a garbage collector never removes
// them), so an incremental release costs store requests only for what changed; but not
// those a store check reported gone (the known-missing set): they are read again, and
// the release is refused while any of them is still gone.
func (s *Server) checkObjects(ctx context.Context, repo state.Repository, m *manifest.Manifest) error {
	known := s.known.get(ctx, s, repo)
	set, err := s.st.Missing(ctx, repo.Name)
	if err != nil {
		return err
	}
	rechecked, err := s.checkKnownMissing(ctx, repo.Name, set, m)
	if err != nil {
		return err
	}
	// Only the objects no recent release holds are asked about: a release differs from the
	// active one in a few, and the others need neither a set nor a sort.
	var todo []manifest.Object
	asked := map[string]bool{}
	m.EachObject(func(o manifest.Object) {
		if !known[o] && !rechecked[o.SHA256] && !asked[o.SHA256] {
			asked[o.SHA256] = true
			todo = append(todo, o)
		}
	})
	type wrongSize struct {
		o    manifest.Object
		size int64
	}
	var mu sync.Mutex
	var missing []manifest.Object
	var wrong []wrongSize
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.StoreConcurrency)
	for _, o := range todo {
		g.Go(func() error {
			info, err := s.store.Stat(gctx, o.SHA256)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, store.ErrNotFound):
				missing = append(missing, o)
			case err != nil:
				return storeFailed("check object %s in the store %s: %w", o.SHA256, s.store, err)
			case info.Size != o.Size:
				wrong = append(wrong, wrongSize{o, info.Size})
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if len(missing) == 0 && len(wrong) == 0 {
		return nil
	}
	// The messages name each object by its first path.
	where := firstPaths(m)
	if len(missing) > 0 {
		list := make([]string, len(missing))
		for i, o := range missing {
			list[i] = fmt.Sprintf("%s (%s)", o.SHA256, where[o.SHA256])
		}
		return invalidRelease("%d objects are missing from the store %s: %s: upload them first (armor push)",
			len(missing), s.store, listSome(list))
	}
	list := make([]string, len(wrong))
	for i, w := range wrong {
		list[i] = fmt.Sprintf("%s (%s: %d bytes in the store, %d in the manifest)", w.o.SHA256, where[w.o.SHA256], w.size, w.o.Size)
	}
	return invalidRelease("%d objects have another size in the store %s: %s", len(wrong), s.store, listSome(list))
}

// firstPaths maps each object of m to the first path (in byte order) that serves it.
func firstPaths(m *manifest.Manifest) map[string]string {
	where := make(map[string]string, len(m.Files)+len(m.Packages))
	for p, o := range m.Paths() {
		if q, ok := where[o.SHA256]; !ok || p < q {
			where[o.SHA256] = p
		}
	}
	return where
}

func listSome(items []string) string {
	slices.Sort(items)
	if len(items) > maxMissingListed {
		return strings.Join(items[:maxMissingListed], ", ") + fmt.Sprintf(" and %d more", len(items)-maxMissingListed)
	}
	return strings.Join(items, ", ")
}

// knownObjects caches the object sets of the last few manifests each repository
// recorded or activated, so that checking a release against its active predecessor
// rarely has to read and parse the predecessor's manifest again.
type knownObjects struct {
	mu     sync.Mutex
	byRepo map[string][]knownSet // most recent first, at most knownPerRepo
}

const knownPerRepo = 2

type knownSet struct {
	manifest string
	objects  map[manifest.Object]bool
}

// get returns the objects of repo's active release, or nil when there is none or its
// manifest cannot be read (then every object is checked).
func (k *knownObjects) get(ctx context.Context, s *Server, repo state.Repository) map[manifest.Object]bool {
	if repo.Active == nil {
		return nil
	}
	k.mu.Lock()
	for _, ks := range k.byRepo[repo.Name] {
		if ks.manifest == repo.Active.Manifest {
			k.mu.Unlock()
			return ks.objects
		}
	}
	k.mu.Unlock()
	m, err := s.loadManifest(ctx, repo.Active.Manifest)
	if err != nil {
		s.log.Warn("read the active manifest: checking every object", "repository", repo.Name, "err", err)
		return nil
	}
	return k.add(repo.Name, repo.Active.Manifest, m)
}

// add remembers the objects of a manifest known to be complete in the store.
func (k *knownObjects) add(repo, sum string, m *manifest.Manifest) map[manifest.Object]bool {
	set := make(map[manifest.Object]bool, len(m.Files)+len(m.Packages))
	m.EachObject(func(o manifest.Object) { set[o] = true })
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byRepo == nil {
		k.byRepo = map[string][]knownSet{}
	}
	list := slices.DeleteFunc(k.byRepo[repo], func(ks knownSet) bool { return ks.manifest == sum })
	list = slices.Insert(list, 0, knownSet{manifest: sum, objects: set})
	k.byRepo[repo] = list[:min(len(list), knownPerRepo)]
	return set
}
