package edged

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/internal/atomicfile"
)

// Last-Modified of a path is when its content first appeared there, so that an
// unchanged file keeps its date across flips and `wget -N` or a caching proxy fetches
// only what changed. controld's feed names only the active release and those retained
// (with when they were deactivated, not when they were activated), and a manifest's
// parent is not reachable by digest, so the edge cannot read a path's history from the
// feed. It carries dates forward instead: a new routing map gives a path the date it
// had in the repository's previous map when its SHA-256 is the same, and the new
// activation time otherwise (a retained release's path not yet dated: that release's
// build date). The dates are kept on disk with the routes, so a restart keeps them.
//
// Carrying must never give a false 304: a client holding other content for the path
// must see a later date than its own. Hence, for a path that can change (outside
// by-hash/ and pool/, whose content is fixed by its name):
//   - A date is carried only when the edge cannot have missed a release that went in
//     between: the active release is the very one it saw (same id, same activation
//     time), or the edge last saw the feed within the repository's retention window, so
//     every release active since is still listed as retained.
//   - It is then raised to the deactivation time of every retained release whose
//     content at the path differs (or which lacks it): whatever a client got from that
//     release is dated before it.
//
// Two edges may date a path differently (one restarted without its state directory
// dates it from the activation it saw); that costs a needless download, never a false
// 304, since each edge's date is no earlier than the content's first appearance.

// pathDate is a path's content and its Last-Modified (unix seconds; 0: none).
type pathDate struct {
	Sum  string `json:"sha256"`
	Date int64  `json:"date"`
}

// dateSource is what a repository's new routing map carries dates from: its previous
// map (in memory) or what was kept on disk.
type dateSource struct {
	activeID    string
	activatedAt time.Time
	seenAt      time.Time // when these routes were last known to be current
	get         func(p string) (pathDate, bool)
}

// datesOf is the date source of a routing map in memory.
func datesOf(rm *routeMap) *dateSource {
	return &dateSource{activeID: rm.activeID, activatedAt: rm.activatedAt, seenAt: time.Unix(0, rm.confirmed.Load()),
		get: func(p string) (pathDate, bool) {
			if dir, ok := strings.CutPrefix(p, "/"); ok {
				d := rm.dirs[dir]
				if d == nil {
					return pathDate{}, false
				}
				return pathDate{Sum: d.sum, Date: d.modTime}, true
			}
			r := rm.paths[p]
			if r == nil {
				return pathDate{}, false
			}
			return pathDate{Sum: r.sum, Date: r.modTime}, true
		}}
}

// carriesChanging reports whether dates of paths that can change may be carried into
// the routes of s (see the comment at the top of this file).
func (d *dateSource) carriesChanging(s api.Site, now time.Time) bool {
	if d == nil {
		return false
	}
	if d.activeID == s.Active.ID && d.activatedAt.Equal(s.Active.ActivatedAt) {
		return true
	}
	for _, x := range s.Retained {
		if !x.DeactivatedAt.IsZero() && x.Until.After(x.DeactivatedAt) {
			return now.Sub(d.seenAt) < x.Until.Sub(x.DeactivatedAt)
		}
	}
	return false
}

// keptDates is a repository's dates as kept on disk: <state_dir>/dates/<sha256 of the
// repository name>.json.
type keptDates struct {
	Repository  string              `json:"repository"`
	Active      string              `json:"active"`
	ActivatedAt time.Time           `json:"activated_at"`
	SavedAt     time.Time           `json:"saved_at"`
	Paths       map[string]pathDate `json:"paths"`
}

const datesSubdir = "dates"

func datesFile(stateDir, repo string) string {
	h := sha256.Sum256([]byte(repo))
	return filepath.Join(stateDir, datesSubdir, hex.EncodeToString(h[:16])+".json")
}

// saveDates keeps a routing map's dates on disk.
func saveDates(stateDir, repo string, rm *routeMap, now time.Time) error {
	k := keptDates{Repository: repo, Active: rm.activeID, ActivatedAt: rm.activatedAt, SavedAt: now.UTC(),
		Paths: make(map[string]pathDate, len(rm.paths))}
	for p, r := range rm.paths {
		k.Paths[p] = pathDate{Sum: r.sum, Date: r.modTime}
	}
	for dir, d := range rm.dirs {
		k.Paths[listingKey(dir)] = pathDate{Sum: d.sum, Date: d.modTime}
	}
	raw, err := json.Marshal(k)
	if err != nil {
		return fmt.Errorf("encode dates of %s: %w", repo, err)
	}
	if err := os.MkdirAll(filepath.Join(stateDir, datesSubdir), 0o755); err != nil {
		return fmt.Errorf("keep dates of %s: %w", repo, err)
	}
	return atomicfile.WriteFile(datesFile(stateDir, repo), raw, 0o600)
}

// loadDates reads a repository's kept dates; nil when there are none or they are
// unreadable (the edge then dates paths from the activation it sees).
func loadDates(stateDir, repo string) (*dateSource, error) {
	raw, err := os.ReadFile(datesFile(stateDir, repo))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read kept dates of %s: %w", repo, err)
	}
	var k keptDates
	if err := json.Unmarshal(raw, &k); err != nil || k.Repository != repo {
		return nil, fmt.Errorf("kept dates of %s in %s are unreadable (%v)", repo, datesFile(stateDir, repo), err)
	}
	return &dateSource{activeID: k.Active, activatedAt: k.ActivatedAt, seenAt: k.SavedAt,
		get: func(p string) (pathDate, bool) { d, ok := k.Paths[p]; return d, ok }}, nil
}

// pruneDates removes kept dates of repositories no longer routed.
func pruneDates(stateDir string, repos []string) error {
	keep := map[string]bool{}
	for _, r := range repos {
		keep[filepath.Base(datesFile(stateDir, r))] = true
	}
	entries, err := os.ReadDir(filepath.Join(stateDir, datesSubdir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list kept dates: %w", err)
	}
	for _, e := range entries {
		if !keep[e.Name()] {
			if err := os.Remove(filepath.Join(stateDir, datesSubdir, e.Name())); err != nil {
				return fmt.Errorf("remove kept dates: %w", err)
			}
		}
	}
	return nil
}
