package controld

import (
	"sync"
	"sync/atomic"

	"github.com/armor-apt/armor/manifest"
)

// What a release that this controld verified showed, kept so that its child is checked
// at a cost that follows the change (bound.go, followsParent). Each entry holds facts
// controld established itself while verifying: the packages of that manifest and, for
// each index whose stanzas were its members in order, the stanza digests, which are
// therefore the digests of those packages. A child's package equal, field for field, to
// the parent's package at the same place of an index has the digest the parent's had,
// whatever the pusher claims the parent to be; nothing pushed is taken on trust.
//
// Entries live in memory only: after a restart, each repository's first release is
// checked in full.

// maxVerifiedPackages bounds the packages of the verified releases kept, over all
// repositories: a parent of 100,000 and its child fit.
const maxVerifiedPackages = 1 << 18

// verifiedPerRepo is how many verified releases a repository keeps: the release being
// built on, and its last child.
const verifiedPerRepo = 2

// verifiedRelease is what controld verified of one release.
type verifiedRelease struct {
	repo, id string
	packages []manifest.Package
	indexes  map[string]keptIndex // by indexKey
	used     uint64
}

// keptIndex is one index of a verified release whose stanzas were its members in order.
type keptIndex struct {
	members []int32       // positions in packages, in the order of the stanzas
	digests []entryDigest // the stanzas', so also the members'
}

// indexKey names an index within a release: "dists/stable\x00main/binary-amd64/Packages".
func (ix *index) key() string { return ix.suite.dir + "\x00" + ix.rel }

// verifiedReleases keeps the last verified releases, least recently used out first.
type verifiedReleases struct {
	mu    sync.Mutex
	total int // packages kept
	tick  uint64
	list  []*verifiedRelease
	// follows counts the indexes proven through a parent's packages.
	follows atomic.Int64
}

// get returns the verified release id of repo, if kept.
func (v *verifiedReleases) get(repo, id string) *verifiedRelease {
	if id == "" {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, r := range v.list {
		if r.repo == repo && r.id == id {
			v.tick++
			r.used = v.tick
			return r
		}
	}
	return nil
}

// add keeps r, dropping the least recently used releases of its repository beyond
// verifiedPerRepo and, over all, beyond maxVerifiedPackages (never r itself).
func (v *verifiedReleases) add(r *verifiedRelease) {
	if len(r.packages) > maxVerifiedPackages {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.tick++
	r.used = v.tick
	same := 0
	for i := 0; i < len(v.list); i++ {
		if q := v.list[i]; q.repo == r.repo && q.id == r.id {
			v.drop(i)
			i--
		} else if q.repo == r.repo {
			same++
		}
	}
	v.list = append(v.list, r)
	v.total += len(r.packages)
	for same >= verifiedPerRepo || v.total > maxVerifiedPackages {
		oldest := -1
		for i, q := range v.list {
			if q != r && (same < verifiedPerRepo || q.repo == r.repo) && (oldest < 0 || q.used < v.list[oldest].used) {
				oldest = i
			}
		}
		if oldest < 0 {
			break
		}
		if v.list[oldest].repo == r.repo {
			same--
		}
		v.drop(oldest)
	}
}

// drop forgets the i-th release.
func (v *verifiedReleases) drop(i int) {
	v.total -= len(v.list[i].packages)
	v.list = append(v.list[:i], v.list[i+1:]...)
}
