package publish

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/internal/lockfile"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// Previous returns the status of a repository that has a release to roll back to, and an
// error naming the repository when it has none.
func Previous(ctx context.Context, c *client.Client, repo string) (*api.Status, error) {
	st, err := c.Status(ctx, repo)
	if err != nil {
		return nil, err
	}
	if st.Active == nil || st.Previous == "" {
		return nil, fmt.Errorf("repository %s has no previous release to roll back to", repo)
	}
	return st, nil
}

// RollbackPointer flips the active pointer back to the previous release, provided the
// release active in st still is. apt clients that already fetched the newer InRelease
// ignore the older one, so this is for a release no client has seen; Republish is the
// rollback for the others. controld marks the release it deactivates rolled back; when
// the previous release is itself rolled back (a second rollback in a row), the error is
// a *RolledBackError.
func RollbackPointer(ctx context.Context, c *client.Client, repo string, st *api.Status) (*api.Activation, error) {
	a, err := c.Rollback(ctx, repo, st.Active.Release)
	return a, rolledBackError(err, "", repo, st.Previous, OpRollback)
}

// RepublishOptions say what Republish rolls back and with which key.
type RepublishOptions struct {
	Client *client.Client
	URL    string // controld's URL, named in errors
	Repo   string
	Status *api.Status // as Previous returned it
	Store  store.Store // holds both releases' objects; receives the new ones
	// Key returns the signing key. Republish calls it once it has both releases'
	// manifests, so a bad key is reported after a missing release.
	Key  func() (*sign.Key, error)
	Hash crypto.Hash // signature digest
	// Cache is a directory where Republish stages the new files while it uploads them;
	// it removes them afterwards.
	Cache string
	// Date dates the new Release files (default now; armor rollback passes
	// SOURCE_DATE_EPOCH when it is set, as armor build does), or a second after the
	// current release's latest Date if that is later.
	Date time.Time
}

// Republish serves the previously active release again as a new release: the previous
// release's packages and indexes with freshly dated and signed Release files, whose
// parent is the current release, activated in its place (compare-and-swap on it). A bare
// pointer flip would leave updated apt clients on the bad release, because apt ignores an
// InRelease older than the one it already has; the new Date is later than the current
// release's. The activation it returns is marked as a rollback, and controld marks the
// current release rolled back. A previous release that is itself rolled back (a second
// rollback in a row) is a *RolledBackError, and nothing is re-published.
func Republish(ctx context.Context, o RepublishOptions) (*api.Activation, error) {
	prev, cur, err := fetchReleases(ctx, o)
	if err != nil {
		return nil, err
	}
	key, err := o.Key()
	if err != nil {
		return nil, err
	}
	asked := o.Date
	if asked.IsZero() {
		asked = time.Now()
	}
	asked = asked.UTC().Truncate(time.Second)
	date, err := republishDate(ctx, o.Store, cur, asked)
	if err != nil {
		return nil, err
	}
	st, err := newStaging(o.Cache)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(st.dir)
	next, err := resign(ctx, o, st, prev, key, date)
	if err != nil {
		return nil, err
	}
	next.Parent = cur.ID
	next.Date, next.RequestedDate = date.Format(time.RFC3339), ""
	if !date.Equal(asked) {
		// As armor build records it: the next build asked for the same date (a pipeline
		// at one SOURCE_DATE_EPOCH) is then not refused as older than this release.
		next.RequestedDate = asked.Format(time.RFC3339)
	}
	if err := manifest.Seal(next); err != nil {
		return nil, err
	}
	mdata, err := manifest.Marshal(next)
	if err != nil {
		return nil, err
	}
	mf, err := st.stage(mdata)
	if err != nil {
		return nil, err
	}
	if _, err := UploadMissing(ctx, o.Store, st.uploads, UploadOptions{}); err != nil {
		return nil, fmt.Errorf("push re-signed release to %s: %w", o.Store, err)
	}
	return activateRollback(ctx, o, mf.SHA256, next.ID, cur.ID)
}

// fetchReleases reads the manifests of the previous and the current release.
func fetchReleases(ctx context.Context, o RepublishOptions) (prev, cur *manifest.Manifest, err error) {
	prevRel, err := o.Client.Release(ctx, o.Repo, o.Status.Previous)
	if err != nil {
		return nil, nil, err
	}
	if prevRel.RolledBack != nil {
		return nil, nil, &RolledBackError{URL: o.URL, Repo: o.Repo, Release: prevRel.ID, Op: OpRollback, RolledBack: *prevRel.RolledBack}
	}
	curRel, err := o.Client.Release(ctx, o.Repo, o.Status.Active.Release)
	if err != nil {
		return nil, nil, err
	}
	if prev, err = FetchManifest(ctx, o.Store, prevRel.Manifest); err != nil {
		return nil, nil, err
	}
	if cur, err = FetchManifest(ctx, o.Store, curRel.Manifest); err != nil {
		return nil, nil, err
	}
	return prev, cur, nil
}

// isRelease reports whether path is a suite's Release file.
func isRelease(path string) bool {
	return strings.HasPrefix(path, "dists/") && strings.HasSuffix(path, "/Release")
}

// republishDate is want (now if zero), or a second after the latest Date among cur's
// Release files if that is later: the new Date must be later than every Date apt may hold.
func republishDate(ctx context.Context, s store.Store, cur *manifest.Manifest, want time.Time) (time.Time, error) {
	if want.IsZero() {
		want = time.Now()
	}
	date := want.UTC().Truncate(time.Second)
	for p, o := range cur.Paths() {
		if !isRelease(p) {
			continue
		}
		data, err := FetchObject(ctx, s, o.SHA256)
		if err != nil {
			return time.Time{}, err
		}
		if d, err := release.Date(data); err == nil && !date.After(d) {
			date = d.Add(time.Second)
		}
	}
	return date, nil
}

// resign returns a copy of prev whose Release files are redated to date and signed
// afresh, staging the new files.
func resign(ctx context.Context, o RepublishOptions, st *staging, prev *manifest.Manifest, key *sign.Key, date time.Time) (*manifest.Manifest, error) {
	next := *prev
	next.Files = append([]manifest.File(nil), prev.Files...)
	byPath := map[string]int{}
	for i, f := range next.Files {
		byPath[f.Path] = i
	}
	for _, f := range prev.Files {
		if !isRelease(f.Path) {
			continue
		}
		old, err := FetchObject(ctx, o.Store, f.SHA256)
		if err != nil {
			return nil, err
		}
		redated, err := release.Redate(old, date)
		if err != nil {
			return nil, fmt.Errorf("%s of release %s: %w", f.Path, short(prev.ID), err)
		}
		// Signed at its Date, unless that is still ahead (a republish dates itself a
		// second after the release it replaces): verifiers refuse a signature from the future.
		inRelease, detached, err := key.SignRelease(ctx, redated, o.Hash, minTime(date, time.Now()))
		if err != nil {
			return nil, err
		}
		dist := strings.TrimSuffix(f.Path, "Release")
		for _, nf := range []struct {
			name string
			data []byte
		}{{"Release", redated}, {"InRelease", inRelease}, {"Release.gpg", detached}} {
			mf, err := st.stage(nf.data)
			if err != nil {
				return nil, err
			}
			mf.Path = dist + nf.name
			if i, ok := byPath[mf.Path]; ok {
				next.Files[i] = mf
			} else {
				next.Files = append(next.Files, mf)
			}
		}
	}
	return &next, nil
}

// activateRollback records the new release and activates it in place of the current one.
func activateRollback(ctx context.Context, o RepublishOptions, mobj, id, cur string) (*api.Activation, error) {
	rr, err := o.Client.Record(ctx, o.Repo, api.RecordRequest{Manifest: mobj, Activate: true, ExpectActive: cur, Rollback: true})
	if err != nil {
		return nil, controldError(o.URL, o.Repo, err)
	}
	if rr.Activation == nil {
		return nil, fmt.Errorf("controld recorded the rollback release %s but did not activate it", short(id))
	}
	a := *rr.Activation
	a.Rollback = true
	return &a, nil
}

// staging holds the files a Republish writes, named by digest, until they are uploaded.
type staging struct {
	dir     string
	uploads []Upload
}

// newStaging makes a fresh staging directory under cache; the caller removes it.
func newStaging(cache string) (*staging, error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cache, "rollback-")
	if err != nil {
		return nil, err
	}
	return &staging{dir: dir}, nil
}

// stage writes data for upload and returns its manifest entry, without a path.
func (s *staging) stage(data []byte) (manifest.File, error) {
	sum := sha256.Sum256(data)
	hexsum := hex.EncodeToString(sum[:])
	path := filepath.Join(s.dir, hexsum)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return manifest.File{}, err
	}
	s.uploads = append(s.uploads, Upload{SHA256: hexsum, Size: int64(len(data)), Path: path})
	return manifest.File{Size: int64(len(data)), SHA256: hexsum}, nil
}

// short is the abbreviated release id that messages show.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// WriteManifest writes the manifest of repo's recorded release id to path, atomically,
// so that the next armor build starts from that release: armor rollback leaves the
// local manifest on the release it made active. The bytes are the manifest object
// itself, read from s and checked against its digest and its id. It holds the build
// lock of cache meanwhile, so no build or push reads the manifest half-written.
func WriteManifest(ctx context.Context, c *client.Client, s store.Store, repo, id, path, cache string) (*manifest.Manifest, error) {
	rel, err := c.Release(ctx, repo, id)
	if err != nil {
		return nil, err
	}
	data, err := FetchObject(ctx, s, rel.Manifest)
	if err != nil {
		return nil, err
	}
	m, err := manifest.Parse(data, "store object "+rel.Manifest)
	if err != nil {
		return nil, err
	}
	if m.ID != id {
		return nil, fmt.Errorf("store object %s is the manifest of release %s, not of %s as controld recorded", rel.Manifest, short(m.ID), short(id))
	}
	unlock, err := lockfile.Lock(cache, true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return nil, fmt.Errorf("write manifest: %w", err)
	}
	return m, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
