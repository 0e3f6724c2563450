package edged

import (
	"net/http"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/manifest"
)

// table is one immutable routing table: every served hostname's path map. The edge
// holds it in an atomic.Pointer and replaces it whole, so a request sees one version.
type table struct {
	version uint64
	hosts   map[string]*site
	sites   []*site
}

// site is one repository's served tree under one routes version.
type site struct {
	repository string
	name       string // first hostname, the site label in metrics
	active     api.RouteActive
	routes     *routeMap
	// extra holds the paths served from the edge's memory, outside the release: the
	// repository's keyrings (keyringRoutes). The release's own paths win.
	extra map[string]*route
	page  *pageSite // the repository page's state (page.go)
}

// routeMap maps tree paths to objects for one (active, retained) combination. It is
// shared by consecutive tables while that combination does not change.
type routeMap struct {
	key         string
	paths       map[string]*route
	dirs        map[string]*dirIndex // the active release's directories, "" the root
	activeID    string
	activatedAt time.Time
	release     *manifest.Manifest // the active release's manifest, for the page
	pageOnce    sync.Once
	page        *pageRelease // what the page shows of the release: pageData
	// confirmed is when the feed last showed these routes current (unix nanoseconds):
	// how far back a flip could have been missed (see dates.go).
	confirmed atomic.Int64
}

// route is everything the handler needs to answer for one path, precomputed so the hot
// path allocates nothing.
type route struct {
	sum     string // hex SHA-256: the store key
	key     string // cacheKey(sum): the cache key
	size    int64
	body    []byte // the bytes themselves, for a route not served from the store
	until   int64  // unix nanoseconds after which a retained-only route is gone; 0: never
	modTime int64  // unix seconds of Last-Modified; 0: none
	// settled is the unix second from which Last-Modified may be sent and
	// If-Modified-Since honoured: 0 for immutable paths, else two seconds after the
	// activation (see lastModifiedAt).
	settled      int64
	etag         []byte
	lastModified []byte
	contentType  []byte
	cacheControl []byte
}

// release is a loaded manifest.
type release struct {
	sum  string // digest of the manifest object
	m    *manifest.Manifest
	date time.Time // the manifest's build date; zero if unparsable
}

var (
	ccImmutable = []byte("public, max-age=31536000, immutable")
	ccShort     = []byte("public, max-age=60")
)

// immutablePath reports whether p is content-addressed in practice (by-hash/ or pool/):
// served with a long max-age, and through retained releases too.
func immutablePath(p string) bool {
	return strings.HasPrefix(p, "pool/") || strings.Contains(p, "/by-hash/")
}

// settleSeconds: HTTP dates have one-second resolution, so two activations within
// the same second would give a path two contents under one Last-Modified, and a client
// holding the first would get a false 304. A path that can change (anything but
// by-hash/ and pool/) therefore carries no Last-Modified, and If-Modified-Since is not
// honoured for it, until its release's activation second is over (plus a second for
// clock skew between controld and the edge). Clients fetch it whole meanwhile; ETag
// validation is unaffected.
const settleSeconds = 2

// lastModifiedAt reports whether the route's Last-Modified may be used at unix second
// now.
func (r *route) lastModifiedAt(now int64) bool {
	return r.modTime != 0 && now >= r.settled
}

// routesKey identifies a routeMap's inputs.
func routesKey(s api.Site, now time.Time) string {
	var b strings.Builder
	b.WriteString(s.Active.ID)
	b.WriteString(s.Active.ActivatedAt.UTC().Format(time.RFC3339))
	for _, r := range s.Retained {
		if r.Until.After(now) {
			b.WriteString(r.ID)
			b.WriteString(r.Until.UTC().Format(time.RFC3339Nano))
		}
	}
	return b.String()
}

// buildRoutes makes the path map of a site: every path of the active release, then the
// by-hash/ and pool/ paths of unexpired retained releases not already served (feed
// order: the first listed wins). releases must hold every manifest named. Dates are
// carried from prev (nil: none) as dates.go explains.
func buildRoutes(s api.Site, releases map[string]*release, now time.Time, prev *dateSource) *routeMap {
	act := releases[s.Active.Manifest]
	type shared struct {
		etag []byte
		key  string
	}
	bySum := map[string]shared{} // one ETag and cache key per object, shared by its paths
	rm := &routeMap{key: routesKey(s, now), paths: make(map[string]*route, len(act.m.Files)+len(act.m.Packages)),
		activeID: s.Active.ID, activatedAt: s.Active.ActivatedAt, release: act.m}
	dates := newDater(s, releases, now, prev)
	add := func(rel *release, def time.Time, until int64, onlyImmutable bool) {
		types := siblingTypes(rel.m)
		for p, o := range rel.m.Paths() {
			if _, ok := rm.paths[p]; ok || (onlyImmutable && !immutablePath(p)) {
				continue
			}
			sh, ok := bySum[o.SHA256]
			if !ok {
				sh = shared{etag: []byte(`"` + o.SHA256 + `"`), key: cacheKey(o.SHA256)}
				bySum[o.SHA256] = sh
			}
			r := &route{sum: o.SHA256, key: sh.key, size: o.Size, until: until, etag: sh.etag,
				contentType: types.of(p, o.SHA256), cacheControl: ccShort}
			if immutablePath(p) {
				r.cacheControl = ccImmutable
			}
			if r.modTime, r.lastModified = dates.of(p, o.SHA256, def); r.modTime != 0 && !immutablePath(p) {
				r.settled = r.modTime + settleSeconds
			}
			rm.paths[p] = r
		}
	}
	add(act, s.Active.ActivatedAt, 0, false)
	rm.dirs = buildDirs(rm.paths)
	for dir, d := range rm.dirs {
		d.modTime, d.lastModified = dates.ofListing(dir, d.sum, s.Active.ActivatedAt)
	}
	for _, r := range s.Retained {
		if rel := releases[r.Manifest]; rel != nil && r.Until.After(now) {
			add(rel, rel.date, r.Until.UnixNano(), true)
		}
	}
	return rm
}

// dater dates the paths of one new routing map (see dates.go).
type dater struct {
	prev     *dateSource
	carry    bool // dates of paths that can change may be carried
	retained []retainedPaths
	formats  map[int64][]byte // Last-Modified values, shared by the paths of one date
}

type retainedPaths struct {
	paths       map[string]manifest.Object
	deactivated int64 // unix seconds
}

func newDater(s api.Site, releases map[string]*release, now time.Time, prev *dateSource) *dater {
	d := &dater{prev: prev, carry: prev.carriesChanging(s, now), formats: map[int64][]byte{}}
	for _, x := range s.Retained {
		rel := releases[x.Manifest]
		if rel == nil || !x.Until.After(now) {
			continue
		}
		off := x.DeactivatedAt
		if off.IsZero() {
			off = s.Active.ActivatedAt // no later than the activation that deactivated it
		}
		d.retained = append(d.retained, retainedPaths{paths: rel.m.Paths(), deactivated: off.Unix()})
	}
	return d
}

// of returns the date of path p holding object sum, def (the activation, or a retained
// release's build date) when none is carried, and its Last-Modified value.
func (d *dater) of(p, sum string, def time.Time) (int64, []byte) {
	var t int64
	if !def.IsZero() {
		t = def.Unix()
	}
	immutable := immutablePath(p)
	if d.prev != nil && (immutable || d.carry) {
		if pd, ok := d.prev.get(p); ok && pd.Sum == sum {
			t = pd.Date
		}
	}
	if !immutable {
		for _, x := range d.retained {
			if o, ok := x.paths[p]; !ok || o.SHA256 != sum {
				t = max(t, x.deactivated)
			}
		}
	}
	if t == 0 {
		return 0, nil
	}
	lm, ok := d.formats[t]
	if !ok {
		lm = []byte(time.Unix(t, 0).UTC().Format(http.TimeFormat))
		d.formats[t] = lm
	}
	return t, lm
}

// ofListing dates the listing of directory dir, whose content is fingerprinted by sum:
// the date it had in the previous map when it showed the same, else def (the
// activation). Retained releases do not raise it: a listing shows the active release.
func (d *dater) ofListing(dir, sum string, def time.Time) (int64, []byte) {
	t := def.Unix()
	if d.prev != nil && d.carry {
		if pd, ok := d.prev.get(listingKey(dir)); ok && pd.Sum == sum {
			t = pd.Date
		}
	}
	lm, ok := d.formats[t]
	if !ok {
		lm = []byte(time.Unix(t, 0).UTC().Format(http.TimeFormat))
		d.formats[t] = lm
	}
	return t, lm
}

// listingKey is the key of directory dir's listing among the kept dates: a leading
// slash, which no path of a tree has.
func listingKey(dir string) string { return "/" + dir }

// typeIndex gives by-hash paths (which have no extension) the content type of the
// named file with the same digest in the same release.
type typeIndex map[string][]byte

func siblingTypes(m *manifest.Manifest) typeIndex {
	t := typeIndex{}
	for _, f := range m.Files {
		if !strings.Contains(f.Path, "/by-hash/") {
			t[f.SHA256] = contentType(f.Path)
		}
	}
	return t
}

func (t typeIndex) of(p, sum string) []byte {
	if strings.Contains(p, "/by-hash/") {
		if ct, ok := t[sum]; ok {
			return ct
		}
	}
	return contentType(p)
}

var (
	ctText      = []byte("text/plain; charset=utf-8")
	ctPGP       = []byte("application/pgp-signature")
	ctGzip      = []byte("application/gzip")
	ctXz        = []byte("application/x-xz")
	ctBzip2     = []byte("application/x-bzip2")
	ctZstd      = []byte("application/zstd")
	ctLz4       = []byte("application/x-lz4")
	ctLzma      = []byte("application/x-lzma")
	ctDeb       = []byte("application/vnd.debian.binary-package")
	ctTar       = []byte("application/x-tar")
	ctDiff      = []byte("text/x-diff; charset=utf-8")
	ctJSON      = []byte("application/json")
	ctOctet     = []byte("application/octet-stream")
	textIndexes = []string{"Packages", "Sources", "Translation-", "Contents-", "Commands-", "Components-", "Index", "Release", "InRelease"}
)

// contentType maps a tree path to its Content-Type by its name.
func contentType(p string) []byte {
	base := path.Base(p)
	switch path.Ext(base) {
	case ".gpg", ".asc", ".sig":
		return ctPGP
	case ".gz":
		return ctGzip
	case ".xz":
		return ctXz
	case ".bz2":
		return ctBzip2
	case ".zst":
		return ctZstd
	case ".lz4":
		return ctLz4
	case ".lzma":
		return ctLzma
	case ".deb", ".udeb", ".ddeb":
		return ctDeb
	case ".tar":
		return ctTar
	case ".diff", ".patch":
		return ctDiff
	case ".json":
		return ctJSON
	case ".dsc", ".changes", ".buildinfo", ".txt":
		return ctText
	}
	for _, prefix := range textIndexes {
		if strings.HasPrefix(base, prefix) {
			return ctText
		}
	}
	return ctOctet
}

// warmable reports whether p is an index file pre-warmed before a flip: Release,
// InRelease, Release.gpg and Packages* under dists/.
func warmable(p string) bool {
	if !strings.HasPrefix(p, "dists/") || strings.Contains(p, "/by-hash/") {
		return false
	}
	base := path.Base(p)
	return base == "Release" || base == "InRelease" || base == "Release.gpg" || strings.HasPrefix(base, "Packages")
}
